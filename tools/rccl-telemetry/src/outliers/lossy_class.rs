//! `lossy_class_traffic`: RoCE on a priority without PFC, on a NIC configured for lossless
//! RoCE (some priority has PFC enabled: format 5's device `pfc_enabled`). Two ways to see it:
//!
//! - **a QP's class**: its traffic class's DSCP (`traffic_class >> 2`) maps, by its port's
//!   DSCP-to-priority map (`dscp_priority`), to a priority without PFC, while its NIC's other
//!   QPs ride a PFC priority: the NVIDIA/nccl #2383 case, one connection on a lossy priority
//!   that dies after its retries while the port's PFC counters show nothing;
//! - **the port's counters**: the priorities without PFC carried more than all of the port's
//!   non-RDMA traffic (`prio_tx_bytes`/`prio_rx_bytes` of those priorities against
//!   `port_*_bytes` less the RDMA `delta_*_bytes`; packets where a driver counts no bytes per
//!   priority), so some of its RoCE rode them. Other traffic (TCP, storage) on the default
//!   priority is normal and is never enough on its own.
//!
//! Nothing is said of a NIC whose PFC settings, map or counters are absent (Soft-RoCE, veth,
//! VMs, older files), nor of one with no priority on PFC (a lossy fabric by design).

use super::qp_lint::qp_name;
use super::{Dev, Finding, Input, Kind};
use crate::model::{Device, HwValue, QueuePair};

/// A QP whose class maps to a priority without PFC.
pub struct LossyQp<'a> {
    pub channel: Option<u64>,
    pub qp: &'a QueuePair,
    traffic_class: u8,
    prio: u8,
    /// The PFC priority most of its NIC's other QPs ride, and how many ride PFC priorities.
    others: (u8, usize),
    pfc: String,
}

impl LossyQp<'_> {
    /// "traffic class 0 (DSCP 0) maps to priority 0, which has no PFC; this NIC's other 3 QPs
    /// ride priority 3 (PFC enabled: 3)".
    pub fn says(&self) -> String {
        format!(
            "traffic class {} (DSCP {}) maps to priority {}, which has no PFC; this NIC's other {} QP{} ride priority {} (PFC enabled: {})",
            self.traffic_class,
            self.traffic_class >> 2,
            self.prio,
            self.others.1,
            if self.others.1 == 1 { "" } else { "s" },
            self.others.0,
            self.pfc
        )
    }
}

/// The NIC's PFC priorities, when it is configured for lossless RoCE (at least one).
fn lossless(d: &Device) -> Option<&[u8]> {
    d.pfc_enabled.as_deref().filter(|p| !p.is_empty())
}

fn join(p: &[u8]) -> String {
    p.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
}

/// The device's QPs whose class maps to a priority without PFC while others of its QPs ride a
/// PFC priority; empty where its PFC settings or DSCP map are absent.
pub fn lossy_qps(d: &Device) -> Vec<LossyQp<'_>> {
    let (Some(pfc), Some(map)) = (lossless(d), d.dscp_priority.as_ref()) else {
        return Vec::new();
    };
    let mapped: Vec<(Option<u64>, &QueuePair, u8, u8)> = d
        .channels
        .iter()
        .flat_map(|c| c.queue_pairs.iter().map(move |q| (c.id, q)))
        .filter_map(|(c, q)| {
            let tc = q.attrs()?.traffic_class?;
            Some((c, q, tc, *map.get(&(tc >> 2))?))
        })
        .collect();
    let on_pfc: Vec<u8> = mapped
        .iter()
        .map(|m| m.3)
        .filter(|p| pfc.contains(p))
        .collect();
    if on_pfc.is_empty() {
        return Vec::new();
    }
    let mut count = [0usize; 8];
    for p in &on_pfc {
        count[usize::from(*p) & 7] += 1;
    }
    let most = (0..8u8)
        .max_by_key(|p| (count[usize::from(*p)], std::cmp::Reverse(*p)))
        .unwrap_or(0);
    mapped
        .into_iter()
        .filter(|m| !pfc.contains(&m.3))
        .map(|(channel, qp, traffic_class, prio)| LossyQp {
            channel,
            qp,
            traffic_class,
            prio,
            others: (most, on_pfc.len()),
            pfc: join(pfc),
        })
        .collect()
}

/// The per-priority counter `key`'s 8 values, where the driver has them.
fn prio_counter(d: &Device, key: &str) -> Option<[i64; 8]> {
    match d.hw_counters.get(key)? {
        HwValue::PerPrio(a) if a.len() == 8 && a.iter().any(|v| *v >= 0) => {
            let mut out = [-1i64; 8];
            out.copy_from_slice(a);
            Some(out)
        }
        _ => None,
    }
}

/// What the priorities without PFC carried in one direction, when it is more than all of the
/// port's non-RDMA traffic: "sent: priority 0 (no PFC) carried 4.3 GB of the port's 4.4 GB,
/// more than all its non-RDMA traffic (10.5 MB): at least 4.3 GB of RoCE rode it".
fn counted(
    d: &Device,
    pfc: &[u8],
    dir: &str,
    prio: &str,
    port: &str,
    rdma: &str,
    unit: &str,
) -> Option<String> {
    let a = prio_counter(d, prio)?;
    let (t, r) = (d.hw(port)?, d.hw(rdma)?);
    let lossy: Vec<(u8, i64)> = (0..8u8)
        .filter(|p| !pfc.contains(p))
        .map(|p| (p, a[usize::from(p)]))
        .filter(|(_, v)| *v > 0)
        .collect();
    let sum: i64 = lossy.iter().map(|(_, v)| *v).sum();
    let other = (t - r).max(0);
    // Counter skew between the port's, the priorities' and the RDMA counts: a margin.
    let margin = if unit == "bytes" { 1 << 20 } else { 1000 };
    let excess = sum - other;
    if excess <= margin.max(r / 100) {
        return None;
    }
    let show = |v: i64| {
        if unit == "bytes" {
            crate::stats::fmt_bytes(v as f64)
        } else {
            format!("{v} packets")
        }
    };
    let which = lossy
        .iter()
        .map(|(p, _)| p.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    Some(format!(
        "{dir}: priorit{} {which} (no PFC) carried {} of the port's {}, more than all its non-RDMA traffic ({}): at least {} of RoCE rode {}",
        if lossy.len() == 1 { "y" } else { "ies" },
        show(sum),
        show(t),
        show(other),
        show(excess),
        if lossy.len() == 1 { "it" } else { "them" }
    ))
}

/// The counters' side, each direction by bytes, else by packets.
fn counted_traffic(d: &Device, pfc: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for (dir, x) in [("sent", "tx"), ("received", "rx")] {
        let by_bytes = prio_counter(d, &format!("prio_{x}_bytes")).is_some()
            && d.hw(&format!("port_{x}_bytes")).is_some()
            && d.hw(&format!("delta_{x}_bytes")).is_some();
        let said = if by_bytes {
            counted(
                d,
                pfc,
                dir,
                &format!("prio_{x}_bytes"),
                &format!("port_{x}_bytes"),
                &format!("delta_{x}_bytes"),
                "bytes",
            )
        } else {
            counted(
                d,
                pfc,
                dir,
                &format!("prio_{x}_packets"),
                &format!("port_{x}_packets"),
                &format!("delta_{x}_packets"),
                "packets",
            )
        };
        out.extend(said);
    }
    out
}

fn one(d: &Dev, x: &Input) -> Option<Finding> {
    let pfc = lossless(d.dev)?;
    let qps = lossy_qps(d.dev);
    let mut said = Vec::new();
    if !qps.is_empty() {
        const SHOWN: usize = 3;
        let mut s: Vec<String> = qps
            .iter()
            .take(SHOWN)
            .map(|l| format!("{}: {}", qp_name(l.channel, l.qp), l.says()))
            .collect();
        if qps.len() > SHOWN {
            s.push(format!("and {} more", qps.len() - SHOWN));
        }
        said.push(s.join("; "));
    }
    said.extend(counted_traffic(d.dev, pfc));
    if said.is_empty() {
        return None;
    }
    let mut f = d.finding(Kind::LossyClassTraffic, "pfc_enabled", qps.len() as f64);
    f.score = x.opt.threshold + 1.0;
    f.evidence = format!(
        "RoCE on a priority without PFC on a NIC configured for lossless RoCE (PFC enabled: {}): {}",
        join(pfc),
        said.join("; ")
    );
    Some(f)
}

pub(super) fn find(x: &Input) -> Vec<Finding> {
    x.devs.iter().filter_map(|d| one(d, x)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(pfc: Option<Vec<u8>>, hw: &str) -> Device {
        let v = serde_json::json!({
            "device_id": 0, "roce_device": "mlx5_0", "eth_device": "eth0", "hw_type": "mlx5",
            "tx_bytes": 1, "rx_bytes": 1, "num_cq_errors": 0, "cq_poll_count": 1,
            "num_channels": 0, "active_channels": 0, "num_qp_untracked": 0, "channels": [],
            "hw_counters": serde_json::from_str::<serde_json::Value>(hw).unwrap(),
            "pfc_enabled": pfc,
        });
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn roce_beyond_the_non_rdma_traffic_on_a_lossy_priority_is_counted() {
        let gb = 1i64 << 30;
        let hw = format!(
            r#"{{"port_tx_bytes": {}, "delta_tx_bytes": {}, "prio_tx_bytes": [{}, 0, 0, {}, 0, 0, 0, 0]}}"#,
            5 * gb,
            4 * gb,
            2 * gb,
            3 * gb
        );
        let s = counted_traffic(&dev(Some(vec![3]), &hw), &[3]);
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(
            s[0].starts_with("sent: priority 0 (no PFC) carried 2"),
            "{}",
            s[0]
        );
        // The same bytes on priority 0 are the port's non-RDMA traffic when RDMA rides 3.
        let hw = format!(
            r#"{{"port_tx_bytes": {}, "delta_tx_bytes": {}, "prio_tx_bytes": [{}, 0, 0, {}, 0, 0, 0, 0]}}"#,
            5 * gb,
            3 * gb,
            2 * gb,
            3 * gb
        );
        assert!(counted_traffic(&dev(Some(vec![3]), &hw), &[3]).is_empty());
        // Without the RDMA count there is nothing to compare with.
        let hw = r#"{"port_tx_bytes": 100, "prio_tx_bytes": [100, 0, 0, 0, 0, 0, 0, 0]}"#;
        assert!(counted_traffic(&dev(Some(vec![3]), hw), &[3]).is_empty());
    }
}
