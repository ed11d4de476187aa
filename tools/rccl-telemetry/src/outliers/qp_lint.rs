//! QP lint: the path and retry settings each QP was given (format 5's `attrs`), compared
//! across a NIC's QPs and between the two ends of a link. No port counter shows a QP that rides
//! another traffic class than its neighbours (NVIDIA/nccl #2383: one connection on a lossy
//! priority, dead after 7 retries once in 10 to 50 runs, the PFC and ECN counters unchanged):
//! its settings beside theirs do.
//!
//! - `qp_config_mismatch`: a QP whose traffic class, SL, ACK timeout, retry count or RNR
//!   settings differ from the majority of its NIC's QPs (in its file: one job's process), or,
//!   with no majority to go by, from its peer's end of the same connection (the peer's end is
//!   said beside it);
//! - `mtu_mismatch`: the two ends of a connection disagree on the path MTU (named on the end
//!   whose MTU is the odd one on its NIC), or a QP's path MTU is below both ports' active MTU
//!   (format 5's device `active_mtu`, known at both ends): every message is cut into more
//!   packets than the ports need;
//! - `rnr_infinite_retry`: `rnr_retry` 7 (for ever) with `min_rnr_timer` 0 (655.36 ms per RNR
//!   NAK): a receiver that is late once stalls the QP for most of a second, and never fails it;
//! - `qp_config_unusual` (a note): every QP of the run agrees, on a setting that is rarely what
//!   a RoCE fabric wants (traffic class 0: the default, usually lossy, priority);
//! - `lossy_class_traffic` ([`super::lossy_class`]): a QP whose class maps to a priority without
//!   PFC beside QPs on a PFC priority, or RoCE traffic counted on a priority without PFC.
//!
//! A NIC whose QPs all agree with each other and with their peers names nothing. One finding
//! per NIC and kind, naming the QPs that differ and the settings compared. A QP that errored
//! or stalled carries its mismatch into that finding ([`mismatch_note`]), with the time the
//! transport takes to give up on it ([`give_up`]).

use super::{Dev, Finding, Input, Kind};
use crate::model::{QpAttrs, QueuePair};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// A setting's value in a QP's settings, if told.
type Get = fn(&QpAttrs) -> Option<u32>;

/// The settings compared across a NIC's QPs and with the peer's end: name and value.
const COMPARED: [(&str, Get); 6] = [
    ("traffic class", |a| a.traffic_class.map(u32::from)),
    ("SL", |a| a.sl.map(u32::from)),
    ("timeout", |a| a.timeout.map(u32::from)),
    ("retry_cnt", |a| a.retry_cnt.map(u32::from)),
    ("rnr_retry", |a| a.rnr_retry.map(u32::from)),
    ("min_rnr_timer", |a| a.min_rnr_timer.map(u32::from)),
];

/// A QP's address as its peer names it: (the NIC's GID, else "lid:<n>"; its QPN).
type Addr = (String, u64);

fn addr_of(d: &crate::model::Device, q: &QueuePair) -> Option<Addr> {
    let nic = q
        .local_gid
        .as_deref()
        .map(str::to_owned)
        .or_else(|| d.gid.clone())
        .or_else(|| d.lid.map(|l| format!("lid:{l}")))?;
    Some((nic, q.qp_num?))
}

fn peer_addr(q: &QueuePair) -> Option<Addr> {
    let p = q.peer.as_ref()?;
    let nic = p
        .gid
        .as_deref()
        .map(str::to_owned)
        .or_else(|| p.lid.map(|l| format!("lid:{l}")))?;
    Some((nic, p.qp_num))
}

/// A QP's end as its peer sees it: its settings and what its NIC's QPs share.
type End = (QpAttrs, NicMajority);

/// Every told QP of the run by its address: its settings with what its NIC's QPs share, and
/// its port's active MTU where the file has it; what each device's QPs share (in the order of
/// the input's devices); and what the run's QPs share.
struct Peers {
    attrs: HashMap<Addr, End>,
    port_mtu: HashMap<Addr, u32>,
    nic: Vec<NicMajority>,
    run: Shared,
}

impl Peers {
    fn is_empty(&self) -> bool {
        self.attrs.is_empty()
    }
}

fn settings_by_addr(x: &Input) -> Peers {
    let mut p = Peers {
        attrs: HashMap::new(),
        port_mtu: HashMap::new(),
        nic: Vec::with_capacity(x.devs.len()),
        run: NO_MAJORITY,
    };
    let mut all: Vec<&QpAttrs> = Vec::new();
    for d in &x.devs {
        let maj = NicMajority::of(d.dev);
        p.nic.push(maj);
        for q in d.dev.channels.iter().flat_map(|c| &c.queue_pairs) {
            if let (Some(a), Some(s)) = (addr_of(d.dev, q), q.attrs()) {
                all.push(s);
                if let Some(m) = d.dev.active_mtu {
                    p.port_mtu.insert(a.clone(), m);
                }
                p.attrs.insert(a, (*s, maj));
            }
        }
    }
    p.run = NicMajority::of_attrs(&all).value;
    p
}

/// How a QP's path MTU `m` is wrong, if it is: "path MTU 1024, its peer 4096" (the odd end of a
/// connection whose ends disagree), "path MTU 1024, below both ports' active MTU (this port
/// 4096, its peer's 4096)", or both.
fn mtu_problems(
    m: u32,
    (nic, peer, run): (&NicMajority, Option<&End>, &Shared),
    port: Option<u32>,
    peer_port: Option<u32>,
) -> Option<String> {
    let mut said = Vec::new();
    let pm = peer.and_then(|(p, _)| p.path_mtu);
    if let Some(pm) = pm.filter(|pm| *pm != m && odd(MTU, m, nic, peer, run)) {
        said.push(format!("its peer {pm}"));
    }
    if let (Some(a), Some(b)) = (port, peer_port) {
        if m < a && m < b {
            said.push(format!(
                "below both ports' active MTU (this port {a}, its peer's {b})"
            ));
        }
    }
    (!said.is_empty()).then(|| format!("path MTU {m}, {}", said.join("; ")))
}

/// The path MTU, compared after [`COMPARED`]: its index in a [`NicMajority`].
const MTU: usize = COMPARED.len();

fn setting(k: usize) -> Get {
    match COMPARED.get(k) {
        Some((_, get)) => *get,
        None => |a| a.path_mtu,
    }
}

/// What a NIC's told QPs share, per compared setting and the path MTU (last): the value more
/// than half of them have, with two QPs or more (two that agree are a majority, two that
/// differ are not; one QP is its own), and how many QPs told it.
#[derive(Debug, Clone, Copy, Default)]
struct NicMajority {
    value: Shared,
    told: [usize; MTU + 1],
}

/// Per compared setting and the path MTU (last), the value a set of QPs shares, if any.
type Shared = [Option<u32>; MTU + 1];
const NO_MAJORITY: Shared = [None; MTU + 1];

impl NicMajority {
    fn of(dev: &crate::model::Device) -> Self {
        let all: Vec<&QpAttrs> = dev
            .channels
            .iter()
            .flat_map(|c| &c.queue_pairs)
            .filter_map(|q| q.attrs())
            .collect();
        Self::of_attrs(&all)
    }

    fn of_attrs(all: &[&QpAttrs]) -> Self {
        let mut m = NicMajority::default();
        for k in 0..=MTU {
            let vals: Vec<u32> = all.iter().filter_map(|a| setting(k)(a)).collect();
            m.told[k] = vals.len();
            m.value[k] = if vals.len() >= 2 {
                majority(&vals)
            } else {
                None
            };
        }
        m
    }
}

/// The value most of `vals` share (more than half of them), if any.
fn majority(vals: &[u32]) -> Option<u32> {
    let mut n: BTreeMap<u32, usize> = BTreeMap::new();
    for v in vals {
        *n.entry(*v).or_default() += 1;
    }
    n.into_iter()
        .find(|(_, k)| 2 * k > vals.len())
        .map(|(v, _)| v)
}

/// Whether a QP's value `v` of setting `k` is the odd one: it differs from its NIC's majority,
/// or (no majority to go by) from its peer's end while the peer's end agrees with its own NIC
/// (a peer that is itself off its NIC's majority is the one to name). Where neither NIC has a
/// majority (a NIC of one QP at each end), the end that differs from what most of the run's
/// QPs have (`run`) is the odd one; with no majority in the run either, both ends are.
fn odd(k: usize, v: u32, nic: &NicMajority, peer: Option<&End>, run: &Shared) -> bool {
    match nic.value[k] {
        Some(m) => m != v,
        None => peer.is_some_and(|(p, pm)| {
            setting(k)(p).is_some_and(|pv| {
                pv != v
                    && match pm.value[k] {
                        Some(m) => m == pv,
                        None => run[k].is_none_or(|r| r != v),
                    }
            })
        }),
    }
}

/// How one QP's settings differ from its NIC's other QPs and from its peer's end: one phrase
/// per setting on which it is the odd one ("traffic class 0; this NIC's other 4 QPs use 106,
/// its peer 106").
fn differences(q: &QpAttrs, nic: &NicMajority, peer: Option<&End>, run: &Shared) -> Vec<String> {
    let mut out = Vec::new();
    for (k, (name, get)) in COMPARED.into_iter().enumerate() {
        let Some(v) = get(q) else { continue };
        if !odd(k, v, nic, peer, run) {
            continue;
        }
        let pv = peer.and_then(|(p, _)| get(p));
        let mut said = Vec::new();
        if let Some(m) = nic.value[k].filter(|m| *m != v) {
            let others = nic.told[k] - 1;
            said.push(format!(
                "this NIC's other {others} QP{} use {m}",
                if others == 1 { "" } else { "s" }
            ));
        }
        if let Some(p) = pv.filter(|p| *p != v) {
            said.push(format!("its peer {p}"));
        }
        out.push(format!("{name} {v}; {}", said.join(", ")));
    }
    out
}

/// "QP 3 (QPN 0x1f0) on channel 1": how the evidence names a QP.
pub(super) fn qp_name(ch: Option<u64>, q: &QueuePair) -> String {
    format!(
        "QP {}{}{}",
        q.id,
        q.qp_num.map_or(String::new(), |n| format!(" (QPN {n})")),
        ch.map_or(String::new(), |c| format!(" on channel {c}"))
    )
}

/// The time the transport keeps retrying an unanswered send before it fails the QP with
/// RETRY_EXC_ERR: the first try and `retry_cnt` retries, each waiting 4.096 us * 2^timeout
/// (timeout 0: no timer, it waits for ever). None when either is unknown.
pub fn give_up(a: &QpAttrs) -> Option<Option<f64>> {
    let (t, r) = (a.timeout?, a.retry_cnt?);
    Some((t > 0).then(|| 4.096e-6 * f64::from(1u32 << t.min(31)) * f64::from(u32::from(r) + 1)))
}

/// "; the transport gives up after 8 tries of 4.096 us x 2^14 = 67.1 ms: 537 ms".
fn give_up_text(a: &QpAttrs) -> String {
    match (give_up(a), a.timeout, a.retry_cnt) {
        (Some(Some(s)), Some(t), Some(r)) => format!(
            "; the transport gives up after {} tries of 4.096 us x 2^{t} = {}: {}",
            u32::from(r) + 1,
            secs(4.096e-6 * f64::from(1u32 << t.min(31))),
            secs(s)
        ),
        (Some(None), _, _) => "; timeout 0: the transport never gives up".into(),
        _ => String::new(),
    }
}

fn secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.1} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.1} us", s * 1e6)
    }
}

/// One NIC's QPs with settings, and what each one's differences are.
struct NicLint<'a> {
    /// (channel, QP, its differences from its NIC's majority and its peer).
    mismatched: Vec<(Option<u64>, &'a QueuePair, Vec<String>)>,
    /// (channel, QP, how its path MTU is wrong).
    mtu: Vec<(Option<u64>, &'a QueuePair, String)>,
    /// (channel, QP) with rnr_retry 7 and min_rnr_timer 0.
    rnr: Vec<(Option<u64>, &'a QueuePair)>,
    told: usize,
}

/// The QP lint of the input's device `i`.
fn lint_nic<'a>(i: usize, d: &Dev<'a>, peers: &Peers) -> NicLint<'a> {
    let qps: Vec<(Option<u64>, &QueuePair, &QpAttrs)> = d
        .dev
        .channels
        .iter()
        .flat_map(|c| c.queue_pairs.iter().map(move |q| (c.id, q)))
        .filter_map(|(c, q)| Some((c, q, q.attrs()?)))
        .collect();
    let mut out = NicLint {
        mismatched: Vec::new(),
        mtu: Vec::new(),
        rnr: Vec::new(),
        told: qps.len(),
    };
    let nic = peers.nic[i];
    for (ch, q, a) in &qps {
        let pa = peer_addr(q);
        let peer = pa.as_ref().and_then(|p| peers.attrs.get(p));
        let diff = differences(a, &nic, peer, &peers.run);
        if !diff.is_empty() {
            out.mismatched.push((*ch, q, diff));
        }
        if let Some(m) = a.path_mtu {
            let peer_port = pa.as_ref().and_then(|p| peers.port_mtu.get(p)).copied();
            let k = (&nic, peer, &peers.run);
            if let Some(s) = mtu_problems(m, k, d.dev.active_mtu, peer_port) {
                out.mtu.push((*ch, q, s));
            }
        }
        if a.rnr_retry == Some(7) && a.min_rnr_timer == Some(0) {
            out.rnr.push((*ch, q));
        }
    }
    out
}

/// "QP 3 (QPN 403) on channel 1: traffic class 0; ...; and 2 more".
fn list<T>(items: &[T], say: impl Fn(&T) -> String) -> String {
    const SHOWN: usize = 3;
    let mut s: Vec<String> = items.iter().take(SHOWN).map(say).collect();
    if items.len() > SHOWN {
        s.push(format!("and {} more", items.len() - SHOWN));
    }
    s.join("; ")
}

fn finding(d: &Dev, kind: Kind, metric: &str, n: usize, evidence: String, x: &Input) -> Finding {
    let mut f = d.finding(kind, metric, n as f64);
    f.score = x.opt.threshold + 1.0;
    f.evidence = evidence;
    f
}

pub(super) fn find(x: &Input) -> Vec<Finding> {
    let peers = settings_by_addr(x);
    if peers.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, d) in x.devs.iter().enumerate() {
        let l = lint_nic(i, d, &peers);
        if !l.mismatched.is_empty() {
            let ev = format!(
                "{} of the NIC's {} QPs with settings differ: {}",
                l.mismatched.len(),
                l.told,
                list(&l.mismatched, |(c, q, diff)| format!(
                    "{}: {}",
                    qp_name(*c, q),
                    diff.join("; ")
                ))
            );
            out.push(finding(
                d,
                Kind::QpConfigMismatch,
                "attrs",
                l.mismatched.len(),
                ev,
                x,
            ));
        }
        if !l.mtu.is_empty() {
            let ev = format!(
                "{} QP{} whose path MTU differs from its peer's end or is below both ports' active MTU: {}",
                l.mtu.len(),
                if l.mtu.len() == 1 { "" } else { "s" },
                list(&l.mtu, |(c, q, s)| format!("{}: {s}", qp_name(*c, q)))
            );
            out.push(finding(
                d,
                Kind::MtuMismatch,
                "path_mtu",
                l.mtu.len(),
                ev,
                x,
            ));
        }
        if !l.rnr.is_empty() {
            let ev = format!(
                "{} QP{} with rnr_retry 7 (retry for ever) and min_rnr_timer 0 (655.36 ms per RNR NAK): a receiver late once stalls the QP for 655 ms, and it never fails: {}",
                l.rnr.len(),
                if l.rnr.len() == 1 { "" } else { "s" },
                list(&l.rnr, |(c, q)| qp_name(*c, q))
            );
            out.push(finding(
                d,
                Kind::RnrInfiniteRetry,
                "min_rnr_timer",
                l.rnr.len(),
                ev,
                x,
            ));
        }
    }
    out.extend(unusual(x));
    out.extend(super::lossy_class::find(x));
    out
}

/// One NIC's settings as the operator's view shows them (`outliers --json`'s `qp_settings`,
/// the report's "QP settings"): each distinct combination with its QP count, and the QPs the
/// findings name.
#[derive(Debug, Clone, Serialize)]
pub struct NicSettings {
    /// "host:NIC".
    pub nic: String,
    /// The rank ("host:pid") whose file it is in.
    pub rank: String,
    pub settings: Vec<SettingsCount>,
    /// The QPs that differ, each with what differs ("QP 0 (QPN 403) on channel 1: traffic
    /// class 0; this NIC's other 3 QPs use 106, its peer 106").
    pub differing: Vec<String>,
}

/// One distinct combination of settings and the QPs that have it.
#[derive(Debug, Clone, Serialize)]
pub struct SettingsCount {
    #[serde(flatten)]
    pub attrs: QpAttrs,
    pub qps: u64,
}

/// Every used NIC whose QPs told their settings, in the run's order.
pub fn view(x: &Input) -> Vec<NicSettings> {
    let peers = settings_by_addr(x);
    if peers.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, d) in x.devs.iter().enumerate() {
        let mut m: BTreeMap<QpAttrs, u64> = BTreeMap::new();
        for a in d
            .dev
            .channels
            .iter()
            .flat_map(|c| &c.queue_pairs)
            .filter_map(|q| q.attrs())
        {
            *m.entry(*a).or_default() += 1;
        }
        if m.is_empty() {
            continue;
        }
        let l = lint_nic(i, d, &peers);
        let mut differing: Vec<String> = l
            .mismatched
            .iter()
            .map(|(c, q, diff)| format!("{}: {}", qp_name(*c, q), diff.join("; ")))
            .collect();
        differing.extend(
            l.mtu
                .iter()
                .map(|(c, q, s)| format!("{}: {s}", qp_name(*c, q))),
        );
        differing.extend(
            super::lossy_class::lossy_qps(d.dev)
                .iter()
                .map(|l| format!("{}: {}", qp_name(l.channel, l.qp), l.says())),
        );
        differing.extend(
            l.rnr
                .iter()
                .map(|(c, q)| format!("{}: rnr_retry 7 with min_rnr_timer 0", qp_name(*c, q))),
        );
        out.push(NicSettings {
            nic: super::nic_label(&d.file.host_name, &d.dev.roce_device),
            rank: crate::summary::rank_label(d.file),
            settings: m
                .into_iter()
                .map(|(attrs, qps)| SettingsCount { attrs, qps })
                .collect(),
            differing,
        });
    }
    out
}

/// The note on a run whose QPs all agree on traffic class 0 over GRH (RoCE): the default
/// priority, which a fabric configured for lossless RoCE leaves without PFC.
fn unusual(x: &Input) -> Vec<Finding> {
    let told: Vec<(&Dev, &QpAttrs)> = x
        .devs
        .iter()
        .flat_map(|d| {
            d.dev
                .channels
                .iter()
                .flat_map(|c| &c.queue_pairs)
                .filter_map(move |q| Some((d, q.attrs()?)))
        })
        .collect();
    let classes: Vec<u8> = told.iter().filter_map(|(_, a)| a.traffic_class).collect();
    if classes.is_empty() || classes.iter().any(|c| *c != 0) {
        return Vec::new();
    }
    let d = told[0].0;
    let mut f = d.finding(Kind::QpConfigUnusual, "traffic_class", 0.0);
    f.culprit = "the run".into();
    f.score = 1.0;
    f.evidence = format!(
        "every one of the run's {} QPs with settings rides traffic class 0 (DSCP 0): on a fabric configured for lossless RoCE that is the default, usually lossy, priority; set NCCL_IB_TC to the class your switches give PFC",
        classes.len()
    );
    vec![f]
}

/// How the QP's settings `a` differ from its NIC's other QPs' (no peer: one file's view).
fn nic_differences(dev: &crate::model::Device, a: &QpAttrs) -> Vec<String> {
    differences(a, &NicMajority::of(dev), None, &NO_MAJORITY)
}

/// Whether a QP's settings differ from what most of its NIC's other QPs have (the
/// `qp_config_mismatch` of [`mismatch_note`]): the hang analysis lays such a QP's errors on its
/// settings rather than on its peer.
pub fn differs_from_its_nic(dev: &crate::model::Device, q: &QueuePair) -> bool {
    q.attrs()
        .is_some_and(|a| !nic_differences(dev, a).is_empty())
}

/// What an errored or stalled QP's finding adds about its settings: its differences from its
/// NIC's other QPs and its peer ("; its settings differ: traffic class 0; this NIC's other 4
/// QPs use 106, its peer 106"), and how long the transport retries before failing it. Empty
/// when the QP told no settings.
pub fn mismatch_note(dev: &crate::model::Device, q: &QueuePair) -> String {
    let Some(a) = q.attrs() else {
        return String::new();
    };
    let mut diff = nic_differences(dev, a);
    if let Some(l) = super::lossy_class::lossy_qps(dev)
        .iter()
        .find(|l| std::ptr::eq(l.qp, q))
    {
        diff.push(l.says());
    }
    let mut s = String::new();
    if !diff.is_empty() {
        s = format!("; its settings differ: {}", diff.join("; "));
    }
    s.push_str(&give_up_text(a));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(tc: u8) -> QpAttrs {
        QpAttrs {
            traffic_class: Some(tc),
            sl: Some(3),
            path_mtu: Some(4096),
            timeout: Some(14),
            retry_cnt: Some(7),
            rnr_retry: Some(7),
            min_rnr_timer: Some(12),
            ..QpAttrs::default()
        }
    }

    #[test]
    fn a_qp_off_the_majority_and_its_peer_is_named_with_both() {
        let (good, bad) = (attrs(106), attrs(0));
        let nic = |qps: &[&QpAttrs]| NicMajority::of_attrs(qps);
        let five = nic(&[&bad, &good, &good, &good, &good]);
        let peer = (good, nic(&[&good, &good, &good]));
        assert_eq!(
            differences(&bad, &five, Some(&peer), &NO_MAJORITY),
            ["traffic class 0; this NIC's other 4 QPs use 106, its peer 106"]
        );
        assert!(differences(&good, &five, Some(&peer), &NO_MAJORITY).is_empty());
        // No majority among the NIC's QPs, no peer: nothing to differ from.
        let split = nic(&[&attrs(26), &good, &bad]);
        assert!(differences(&attrs(26), &split, None, &NO_MAJORITY).is_empty());
        // A QP that agrees with its NIC is not named for its peer's difference.
        let bad_peer = (bad, nic(&[&bad, &good, &good]));
        assert!(differences(&good, &five, Some(&bad_peer), &NO_MAJORITY).is_empty());
        // Without others, its peer's end decides...
        assert_eq!(
            differences(&bad, &nic(&[&bad]), Some(&peer), &NO_MAJORITY),
            ["traffic class 0; its peer 106"]
        );
        // ... unless the peer's end is itself off its NIC's majority: that NIC is named, not
        // this one.
        assert!(differences(&good, &nic(&[&good]), Some(&bad_peer), &NO_MAJORITY).is_empty());
        // A NIC whose two QPs agree has a majority: the mis-classed connection's other end,
        // on a NIC of two QPs, is not named.
        let split_peer = (bad, nic(&[&bad, &good]));
        assert!(differences(
            &good,
            &nic(&[&good, &good]),
            Some(&split_peer),
            &NO_MAJORITY
        )
        .is_empty());
        // Where neither end's NIC has a majority, both ends are named.
        let lone_bad = (bad, nic(&[&bad]));
        assert!(!differences(&good, &nic(&[&good]), Some(&lone_bad), &NO_MAJORITY).is_empty());
        // Of a NIC's two QPs that differ neither is the majority: each one's peer decides.
        let two = nic(&[&bad, &good]);
        assert_eq!(
            differences(&bad, &two, Some(&peer), &NO_MAJORITY),
            ["traffic class 0; its peer 106"]
        );
        assert!(differences(&good, &two, Some(&peer), &NO_MAJORITY).is_empty());
        assert_eq!(majority(&[1, 1, 2]), Some(1));
        assert_eq!(majority(&[1, 2]), None);
    }

    #[test]
    fn a_path_mtu_below_both_ports_is_named_and_one_port_unknown_is_not() {
        let mtu = |m: u32| {
            let mut a = attrs(106);
            a.path_mtu = Some(m);
            a
        };
        let nic = |ms: &[u32]| {
            let v: Vec<QpAttrs> = ms.iter().map(|m| mtu(*m)).collect();
            NicMajority::of_attrs(&v.iter().collect::<Vec<_>>())
        };
        let low = nic(&[1024, 1024]);
        let low_peer = (mtu(1024), low);
        assert_eq!(
            mtu_problems(
                1024,
                (&low, Some(&low_peer), &NO_MAJORITY),
                Some(4096),
                Some(4096)
            )
            .as_deref(),
            Some("path MTU 1024, below both ports' active MTU (this port 4096, its peer's 4096)")
        );
        let alone = nic(&[1024]);
        let none = (&alone, None, &NO_MAJORITY);
        assert_eq!(mtu_problems(1024, none, Some(4096), None), None);
        assert_eq!(mtu_problems(1024, none, Some(4096), Some(1024)), None);
        assert_eq!(
            mtu_problems(
                4096,
                (&nic(&[4096]), None, &NO_MAJORITY),
                Some(4096),
                Some(4096)
            ),
            None
        );
        let high_peer = (mtu(4096), nic(&[4096, 4096]));
        assert_eq!(
            mtu_problems(1024, (&alone, Some(&high_peer), &NO_MAJORITY), Some(4096), Some(4096))
                .as_deref(),
            Some("path MTU 1024, its peer 4096; below both ports' active MTU (this port 4096, its peer's 4096)")
        );
        // One QP at each end: what most of the run's QPs have tells the odd end.
        let lone_high = (mtu(4096), nic(&[4096]));
        let mut run = NO_MAJORITY;
        run[MTU] = Some(4096);
        assert!(mtu_problems(1024, (&alone, Some(&lone_high), &run), None, None).is_some());
        let lone_low = (mtu(1024), alone);
        let high = nic(&[4096]);
        assert!(mtu_problems(4096, (&high, Some(&lone_low), &run), None, None).is_none());
    }

    #[test]
    fn the_give_up_time_is_every_try_of_the_ack_timeout() {
        let a = attrs(106);
        let t = give_up(&a).unwrap().unwrap();
        assert!((t - 8.0 * 4.096e-6 * 16384.0).abs() < 1e-9, "{t}");
        assert_eq!(
            give_up_text(&a),
            "; the transport gives up after 8 tries of 4.096 us x 2^14 = 67.1 ms: 536.9 ms"
        );
        let never = QpAttrs {
            timeout: Some(0),
            ..a
        };
        assert_eq!(give_up(&never), Some(None));
        assert_eq!(give_up(&QpAttrs::default()), None);
    }
}
