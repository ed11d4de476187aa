//! The rig every driver's test builds on: a device's raw counters (each with its own base and
//! increment, so an expected delta names the raw counter it comes from), written into a
//! fixture sysfs tree and the fake ethtool, and the check that a report holds every
//! vocabulary key in order with the expected values and -1 elsewhere. Separate so that each
//! driver family's module holds only its names and expectations.

use super::hw_tree::{base_of, inc_of, Tree};
use rccl_telemetry::hw::{self, HwDevice, HwReport, HwValue};
use std::collections::{BTreeMap, HashMap};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum S {
    Hw,
    DevHw,
    Pma,
    Eth,
    NetStat,
    NetAttr,
}

pub fn v0(s: S, n: &str) -> u64 {
    base_of(&format!("{s:?}:{n}"))
}
pub fn inc(s: S, n: &str) -> i64 {
    inc_of(&format!("{s:?}:{n}")) as i64
}

/// The raw counters of one device and the files/ethtool answers that carry them.
pub struct Rig<'a> {
    pub t: &'a Tree,
    pub ibdev: String,
    pub netdev: String,
    pub vals: BTreeMap<(S, String), u64>,
    /// ethtool names in kernel order, spelled as the kernel prints them.
    pub eth_printed: Vec<String>,
    pub texts: Vec<(S, String, String)>,
}

impl<'a> Rig<'a> {
    pub fn new(t: &'a Tree, ibdev: &str, netdev: &str) -> Rig<'a> {
        Rig {
            t,
            ibdev: ibdev.into(),
            netdev: netdev.into(),
            vals: BTreeMap::new(),
            eth_printed: vec![],
            texts: vec![],
        }
    }
    pub fn add(&mut self, s: S, list: &[String]) {
        for n in list {
            if s == S::Eth {
                self.eth_printed.push(n.clone());
            }
            self.vals.insert((s, n.trim().to_owned()), v0(s, n.trim()));
        }
    }
    pub fn set(&mut self, s: S, n: &str, v: u64) {
        self.vals.insert((s, n.to_owned()), v);
    }
    pub fn text(&mut self, s: S, n: &str, text: &str) {
        self.vals.remove(&(s, n.to_owned()));
        self.texts.push((s, n.to_owned(), text.to_owned()));
    }
    pub fn bump_all(&mut self) {
        for ((s, n), v) in self.vals.iter_mut() {
            *v += inc(*s, n) as u64;
        }
    }
    pub fn write(&self) {
        let (ib, nd, t) = (&self.ibdev, &self.netdev, self.t);
        for ((s, n), v) in &self.vals {
            match s {
                S::Hw => t.hw(ib, n, *v),
                S::DevHw => t.dev_hw(ib, n, *v),
                S::Pma => t.pma(ib, n, *v),
                S::NetStat => t.netstat(nd, n, *v),
                S::NetAttr => t.netattr(nd, n, *v),
                S::Eth => {}
            }
        }
        for (s, n, text) in &self.texts {
            match s {
                S::Hw => t.hw_text(ib, n, text),
                S::Pma => t.pma_text(ib, n, text),
                _ => unreachable!(),
            }
        }
        if !self.eth_printed.is_empty() {
            let stats = self
                .eth_printed
                .iter()
                .filter_map(|p| {
                    self.vals
                        .get(&(S::Eth, p.trim().to_owned()))
                        .map(|v| (p.clone(), *v))
                })
                .collect();
            hw::testing::set_fake_ethtool(nd, Some(stats));
        }
    }
}

pub fn leak(d: HwDevice) -> &'static HwDevice {
    Box::leak(Box::new(d))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum E {
    S(i64),
    P([i64; 8]),
}

pub fn prio(f: impl Fn(usize) -> i64) -> E {
    E::P(std::array::from_fn(f))
}

/// Every vocabulary key is present, in order; listed keys have the listed value, every
/// other key is -1.
pub fn check(report: &HwReport, expected: &[(&str, E)]) {
    let keys: Vec<&str> = report.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, hw::vocabulary(), "keys or order differ");
    let exp: HashMap<&str, E> = expected.iter().cloned().collect();
    for k in exp.keys() {
        assert!(hw::vocabulary().contains(k), "test expects unknown key {k}");
    }
    let mut bad = Vec::new();
    for (k, v) in report {
        let want = exp.get(k).copied().unwrap_or(match v {
            HwValue::Scalar(_) => E::S(-1),
            HwValue::PerPrio(_) => E::P([-1; 8]),
        });
        let got = match v {
            HwValue::Scalar(x) => E::S(*x),
            HwValue::PerPrio(a) => E::P(*a),
        };
        if got != want {
            bad.push(format!("{k}: got {got:?}, want {want:?}"));
        }
        match v {
            HwValue::Scalar(x) => assert!(*x >= -1, "{k} negative"),
            HwValue::PerPrio(a) => assert!(a.iter().all(|x| *x >= -1), "{k} negative"),
        }
    }
    assert!(bad.is_empty(), "mismatches:\n{}", bad.join("\n"));
}
