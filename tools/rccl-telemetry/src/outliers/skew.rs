//! Byte skew: a device that sent (received) far more or far less than the others, both
//! directions (`tx_byte_skew`, `rx_byte_skew`).

use super::{vs_median, with_stats, Finding, Input, Kind};
use crate::model::Device;
use crate::stats::{fmt_bytes, Robust};

pub(super) fn find(x: &Input) -> Vec<Finding> {
    let mut out = Vec::new();
    if !x.statistical() {
        return out;
    }
    for (metric, kind, get) in [
        (
            "tx_bytes",
            Kind::TxByteSkew,
            (|d: &Device| d.tx_bytes) as fn(&Device) -> u64,
        ),
        ("rx_bytes", Kind::RxByteSkew, |d: &Device| d.rx_bytes),
    ] {
        let vals: Vec<f64> = x.devs.iter().map(|d| get(d.dev) as f64).collect();
        let Some(r) = Robust::of(&vals, 1.0) else {
            continue;
        };
        for (d, &v) in x.devs.iter().zip(&vals) {
            let z = r.z(v);
            let rel = if r.median > 0.0 {
                (v / r.median - 1.0).abs()
            } else {
                f64::INFINITY
            };
            if z.abs() >= x.opt.threshold && rel >= x.opt.min_skew {
                let mut f = with_stats(d.finding(kind, metric, v), &r, z);
                f.evidence = format!(
                    "{metric} {} {} (MAD {}, robust z {:+.1}) over {} devices",
                    fmt_bytes(v),
                    vs_median(v, r.median, fmt_bytes),
                    fmt_bytes(r.mad),
                    z,
                    r.n
                );
                out.push(f);
            }
        }
    }
    out
}
