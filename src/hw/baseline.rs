//! Raw snapshots (what to read, reading it) and deltas (wrap and reset rules).
//!
//! A snapshot maps (source, raw name) to the raw value; it holds only the names the
//! device's driver table asks for (and the allow-list lets through), so a baseline is small
//! whatever the size of the driver's ethtool string set.
//!
//! Delta rules, per raw counter:
//! - final >= baseline: final - baseline;
//! - final < baseline and the counter is 32 bits wide (both values fit in 32 bits): it
//!   wrapped once, the delta is final + 2^32 - baseline;
//! - otherwise it went backwards (driver reload, counter reset): the key is -1 and the
//!   reason is printed under RCCL_TELEMETRY_DEBUG. It never falls back to another source.
//!
//! The raw delta is multiplied by the term's scale and summed over the alternative's terms,
//! saturating; the value is capped at i64::MAX, so no negative value but -1 is emitted.

use super::ethtool;
use super::vocab::{self, Key, Kind, Src, Term};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

/// Where one device's counters live.
#[derive(Debug, Clone)]
pub struct ReadCtx<'a> {
    pub root: &'a Path,
    pub ibdev: &'a str,
    pub port: u32,
    pub netdev: &'a str,
}

/// Raw values keyed by (source, expanded name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    vals: HashMap<(Src, String), u64>,
}

impl Snapshot {
    pub fn get(&self, src: Src, name: &str) -> Option<u64> {
        self.vals.get(&(src, name.to_owned())).copied()
    }

    #[cfg(test)]
    pub fn insert(&mut self, src: Src, name: &str, v: u64) {
        self.vals.insert((src, name.to_owned()), v);
    }

    /// Number of raw counters held.
    pub fn count(&self) -> usize {
        self.vals.len()
    }
}

/// The raw names to read for one device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    items: BTreeSet<(Src, String)>,
}

impl Plan {
    /// Every raw name the `table` column of the allowed keys can use. With `sampled_only`,
    /// only the sampler's keys and only their IB-sysfs alternatives.
    pub fn new(table: usize, allowed: &[bool], sampled_only: bool) -> Plan {
        let mut items = BTreeSet::new();
        for (i, key) in vocab::VOCAB.iter().enumerate() {
            if !allowed.get(i).copied().unwrap_or(false) || (sampled_only && !key.sampled) {
                continue;
            }
            for alt in key.map[table].iter() {
                if sampled_only && !alt.iter().all(|t| t.src.is_ib_sysfs()) {
                    continue;
                }
                for t in alt.iter() {
                    if vocab::is_template(t.name) {
                        for p in 0..8 {
                            items.insert((t.src, vocab::expand(t.name, p)));
                        }
                    } else {
                        items.insert((t.src, t.name.to_owned()));
                    }
                }
            }
        }
        Plan { items }
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn needs(&self, src: Src) -> bool {
        self.items.iter().any(|(s, _)| *s == src)
    }
}

/// Reads what `plan` asks for. A file that fails or does not hold a number, and an ethtool
/// call that fails, leave the names out (unavailable), never 0. Returns the snapshot and the
/// problems worth a debug line.
pub fn read(ctx: &ReadCtx<'_>, plan: &Plan) -> (Snapshot, Vec<String>) {
    let mut snap = Snapshot::default();
    let mut notes = Vec::new();
    let ib = crate::sysfs::ib_dir(ctx.root, ctx.ibdev);
    let port_dir = ib.join("ports").join(ctx.port.to_string());
    let net = if ctx.netdev.is_empty() {
        None
    } else {
        Some(crate::sysfs::net_dir(ctx.root, ctx.netdev))
    };

    let eth = if plan.needs(Src::Ethtool) {
        if ctx.netdev.is_empty() {
            notes.push("no netdev, ethtool counters unavailable".to_owned());
            None
        } else {
            match ethtool::read_stats(ctx.netdev) {
                Ok(m) => Some(m),
                Err(e) => {
                    notes.push(format!("ethtool on {}: {e}", ctx.netdev));
                    None
                }
            }
        }
    } else {
        None
    };

    for (src, name) in &plan.items {
        let v = match src {
            Src::Ethtool => eth.as_ref().and_then(|m| m.get(name).copied()),
            Src::HwCounters => crate::sysfs::read_counter(&port_dir.join("hw_counters").join(name))
                .or_else(|| crate::sysfs::read_counter(&ib.join("hw_counters").join(name))),
            Src::PmaCounters => crate::sysfs::read_counter(&port_dir.join("counters").join(name)),
            Src::NetStat => net
                .as_ref()
                .and_then(|n| crate::sysfs::read_counter(&n.join("statistics").join(name))),
            Src::NetAttr => net
                .as_ref()
                .and_then(|n| crate::sysfs::read_counter(&n.join(name))),
        };
        if let Some(v) = v {
            snap.vals.insert((*src, name.clone()), v);
        }
    }
    (snap, notes)
}

/// The outcome of one key (or one priority of a per-priority key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eval {
    /// No alternative was read both times.
    Absent,
    Value(i64),
    /// A counter went backwards; the reason says which.
    Reset(String),
}

impl Eval {
    pub fn value(&self) -> i64 {
        match self {
            Eval::Value(v) => *v,
            _ => -1,
        }
    }
}

/// Delta of one raw counter under the wrap/reset rules (before scaling).
pub fn raw_delta(t: &Term, name: &str, base: u64, fin: u64) -> Result<u64, String> {
    if fin >= base {
        Ok(fin - base)
    } else if t.wrap32 && base <= u64::from(u32::MAX) && fin <= u64::from(u32::MAX) {
        Ok(fin + (1u64 << 32) - base)
    } else {
        Err(format!(
            "{} {name} went backwards ({base} -> {fin}): counter reset, reported -1",
            t.src.label()
        ))
    }
}

fn eval_alt(alt: &[Term], prio: Option<usize>, base: &Snapshot, fin: &Snapshot) -> Eval {
    let mut sum: u64 = 0;
    for t in alt {
        if vocab::is_template(t.name) {
            let prios: Vec<usize> = match prio {
                Some(p) => vec![p],
                None => (0..8).collect(),
            };
            let mut any = false;
            for p in prios {
                let name = vocab::expand(t.name, p);
                if let (Some(b), Some(f)) = (base.get(t.src, &name), fin.get(t.src, &name)) {
                    any = true;
                    match raw_delta(t, &name, b, f) {
                        Ok(d) => sum = sum.saturating_add(d.saturating_mul(t.scale)),
                        Err(e) => return Eval::Reset(e),
                    }
                }
            }
            if !any {
                return Eval::Absent;
            }
        } else {
            match (base.get(t.src, t.name), fin.get(t.src, t.name)) {
                (Some(b), Some(f)) => match raw_delta(t, t.name, b, f) {
                    Ok(d) => sum = sum.saturating_add(d.saturating_mul(t.scale)),
                    Err(e) => return Eval::Reset(e),
                },
                _ => return Eval::Absent,
            }
        }
    }
    Eval::Value(i64::try_from(sum).unwrap_or(i64::MAX))
}

/// Evaluates `key` for driver column `table`: the first alternative read both times wins.
/// `prio` selects one entry of a per-priority key. With `ib_sysfs_only`, alternatives that
/// need anything but IB sysfs are skipped (the sampler).
pub fn evaluate(
    key: &Key,
    table: usize,
    prio: Option<usize>,
    base: &Snapshot,
    fin: &Snapshot,
    ib_sysfs_only: bool,
) -> Eval {
    debug_assert!(prio.is_none() || key.kind == Kind::PerPrio);
    for alt in key.map[table].iter() {
        if ib_sysfs_only && !alt.iter().all(|t| t.src.is_ib_sysfs()) {
            continue;
        }
        match eval_alt(alt, prio, base, fin) {
            Eval::Absent => continue,
            other => return other,
        }
    }
    Eval::Absent
}

/// True when `key` has at least one IB-sysfs-only alternative for `table`.
pub fn sampleable(key: &Key, table: usize) -> bool {
    key.sampled
        && key.map[table]
            .iter()
            .any(|alt| alt.iter().all(|t| t.src.is_ib_sysfs()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hw::vocab::{index_of, MLX5, THOR2, VOCAB};
    use proptest::prelude::*;

    fn key(name: &str) -> &'static Key {
        &VOCAB[index_of(name).unwrap()]
    }

    fn snap(items: &[(Src, &str, u64)]) -> Snapshot {
        let mut s = Snapshot::default();
        for (src, n, v) in items {
            s.insert(*src, n, *v);
        }
        s
    }

    #[test]
    fn wrap32_is_corrected_and_64bit_backwards_is_reset() {
        let t32 = Term {
            src: Src::HwCounters,
            name: "x",
            scale: 1,
            wrap32: true,
        };
        let t64 = Term {
            src: Src::HwCounters,
            name: "x",
            scale: 1,
            wrap32: false,
        };
        assert_eq!(raw_delta(&t32, "x", 4_294_967_000, 100), Ok(396));
        assert_eq!(raw_delta(&t32, "x", 5, 5), Ok(0));
        assert!(raw_delta(&t64, "x", 10, 9).is_err());
        // A 32-bit counter whose baseline does not fit 32 bits cannot have wrapped.
        assert!(raw_delta(&t32, "x", 1 << 33, 5).is_err());
    }

    #[test]
    fn primary_beats_alias_whatever_the_order() {
        let k = key("cnp_sent");
        let b = snap(&[
            (Src::HwCounters, "tx_cnp_pkts", 0),
            (Src::HwCounters, "np_cnp_pkts", 10),
        ]);
        let f = snap(&[
            (Src::HwCounters, "tx_cnp_pkts", 1000),
            (Src::HwCounters, "np_cnp_pkts", 15),
        ]);
        assert_eq!(evaluate(k, THOR2, None, &b, &f, false), Eval::Value(5));
        // Alias only: used.
        let b = snap(&[(Src::HwCounters, "tx_cnp_pkts", 1)]);
        let f = snap(&[(Src::HwCounters, "tx_cnp_pkts", 8)]);
        assert_eq!(evaluate(k, THOR2, None, &b, &f, false), Eval::Value(7));
    }

    #[test]
    fn name_present_in_one_snapshot_only_falls_back() {
        let k = key("delta_tx_bytes");
        let b = snap(&[(Src::PmaCounters, "port_xmit_data", 100)]);
        let f = snap(&[
            (Src::Ethtool, "tx_vport_rdma_unicast_bytes", 9999),
            (Src::PmaCounters, "port_xmit_data", 150),
        ]);
        assert_eq!(
            evaluate(k, MLX5, None, &b, &f, false),
            Eval::Value(200),
            "PMA words x4"
        );
    }

    #[test]
    fn reset_does_not_fall_back() {
        let k = key("delta_tx_bytes");
        let b = snap(&[
            (Src::Ethtool, "tx_vport_rdma_unicast_bytes", 500),
            (Src::PmaCounters, "port_xmit_data", 1),
        ]);
        let f = snap(&[
            (Src::Ethtool, "tx_vport_rdma_unicast_bytes", 10),
            (Src::PmaCounters, "port_xmit_data", 2),
        ]);
        assert!(matches!(
            evaluate(k, MLX5, None, &b, &f, false),
            Eval::Reset(_)
        ));
        assert_eq!(evaluate(k, MLX5, None, &b, &f, false).value(), -1);
    }

    #[test]
    fn per_priority_and_partial_sums() {
        let total = key("pfc_rx_frames_total");
        let arr = key("pfc_rx_frames");
        // mlx5 prints only priorities 3 and 4 (PFC enabled there).
        let b = snap(&[
            (Src::Ethtool, "rx_prio3_pause", 10),
            (Src::Ethtool, "rx_prio4_pause", 1),
        ]);
        let f = snap(&[
            (Src::Ethtool, "rx_prio3_pause", 25),
            (Src::Ethtool, "rx_prio4_pause", 2),
        ]);
        assert_eq!(evaluate(total, MLX5, None, &b, &f, false), Eval::Value(16));
        assert_eq!(evaluate(arr, MLX5, Some(3), &b, &f, false), Eval::Value(15));
        assert_eq!(evaluate(arr, MLX5, Some(0), &b, &f, false), Eval::Absent);
    }

    #[test]
    fn sums_of_old_bnxt_names() {
        let k = key("resp_cqe_error");
        let b = snap(&[
            (Src::HwCounters, "res_cmp_err", 1),
            (Src::HwCounters, "res_cq_load_err", 2),
        ]);
        let f = snap(&[
            (Src::HwCounters, "res_cmp_err", 4),
            (Src::HwCounters, "res_cq_load_err", 7),
        ]);
        assert_eq!(evaluate(k, THOR2, None, &b, &f, false), Eval::Value(8));
    }

    #[test]
    fn sampler_mode_skips_ethtool_alternatives() {
        let k = key("delta_tx_bytes");
        let b = snap(&[
            (Src::Ethtool, "tx_vport_rdma_unicast_bytes", 0),
            (Src::PmaCounters, "port_xmit_data", 0),
        ]);
        let f = snap(&[
            (Src::Ethtool, "tx_vport_rdma_unicast_bytes", 7),
            (Src::PmaCounters, "port_xmit_data", 1),
        ]);
        assert_eq!(evaluate(k, MLX5, None, &b, &f, true), Eval::Value(4));
    }

    #[test]
    fn plans_respect_the_allow_list() {
        let mut allowed = vec![false; VOCAB.len()];
        allowed[index_of("cnp_sent").unwrap()] = true;
        let p = Plan::new(MLX5, &allowed, false);
        assert!(!p.needs(Src::Ethtool));
        assert!(p
            .items
            .contains(&(Src::HwCounters, "np_cnp_sent".to_owned())));
        assert_eq!(p.items.len(), 1);
        let all = vec![true; VOCAB.len()];
        let p = Plan::new(MLX5, &all, false);
        assert!(p
            .items
            .contains(&(Src::Ethtool, "rx_prio7_pause_duration".to_owned())));
        let s = Plan::new(MLX5, &all, true);
        assert!(!s.needs(Src::Ethtool) && !s.needs(Src::NetStat) && !s.is_empty());
    }

    proptest! {
        #[test]
        fn evaluation_is_never_negative_except_minus_one(b in any::<u64>(), f in any::<u64>(), wrap in any::<bool>(), scale in 1u64..8) {
            let t = Term { src: Src::HwCounters, name: "c", scale, wrap32: wrap };
            let alt: &[Term] = &[t];
            let v = eval_alt(alt, None, &snap(&[(Src::HwCounters, "c", b)]), &snap(&[(Src::HwCounters, "c", f)]));
            match v {
                Eval::Value(x) => prop_assert!(x >= 0),
                Eval::Reset(_) => prop_assert!(f < b),
                Eval::Absent => prop_assert!(false),
            }
        }

        #[test]
        fn wrapped_32bit_counters_recover_the_true_increment(b in 0u64..=u64::from(u32::MAX), inc in 0u64..=u64::from(u32::MAX)) {
            let t = Term { src: Src::HwCounters, name: "c", scale: 1, wrap32: true };
            let f = (b + inc) & u64::from(u32::MAX);
            prop_assert_eq!(raw_delta(&t, "c", b, f), Ok(inc));
        }
    }
}
