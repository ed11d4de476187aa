//! Plants made outside the generator: a healthy run's rank files, read as JSON, with the
//! per-peer completion histograms of one NIC's row (its own completions towards its peers),
//! its column (its peers' towards it), one link or one host scaled, and written back. The
//! device's own log histogram is then the sum of its peers' again, as the library writes it.
//!
//! A run's QPs can also be told their path and retry settings, one QP's differing
//! ([`set_attrs`]).
//!
//! So the verdicts are scored on problems the generator's own model did not make: a factor
//! that is no power of two, the whole histogram or only its slowest quarter (a NIC slow in part
//! of its work, its p50 unchanged).

use crate::generate::{log_bucket, NCCL_ROCE_ATTRS};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// A NIC as the rows name it: (host, device).
pub type NicName = (String, String);

/// Which cells of the matrix an edit slows (a cell: the completions of a sender's QPs towards
/// one peer, in the sender's file).
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A NIC's row (what a process polling late makes), column (its receive side) or both (the
    /// NIC itself).
    Nic { nic: NicName, row: bool, col: bool },
    /// One direction of a link (`from -> to`), or both.
    Link {
        from: NicName,
        to: NicName,
        both: bool,
    },
    /// Every cell of every NIC of a host.
    Host(String),
}

/// One edit: its cells, the factor, and whether only the slowest quarter of each histogram is
/// scaled.
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    pub target: Target,
    pub factor: f64,
    pub tail_only: bool,
}

impl Edit {
    fn slows(&self, me: &NicName, peer: &NicName) -> bool {
        match &self.target {
            Target::Nic { nic, row, col } => (*row && me == nic) || (*col && peer == nic),
            Target::Link { from, to, both } => {
                (me == from && peer == to) || (*both && me == to && peer == from)
            }
            Target::Host(h) => &me.0 == h || &peer.0 == h,
        }
    }
}

/// The rank files of a generated run (every .json but planted.json).
pub fn rank_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name().is_some_and(|n| n != "planted.json")
        })
        .collect();
    v.sort();
    Ok(v)
}

/// Every NIC of the run with its peers: (host, device) -> the peers' names, by GID.
pub fn peers_of(dir: &Path) -> Result<BTreeMap<NicName, Vec<NicName>>, String> {
    let files = read_all(dir)?;
    let by_gid = gids(&files);
    let mut out = BTreeMap::new();
    for (_, v) in &files {
        let host = v["host_name"].as_str().unwrap_or_default().to_string();
        for d in v["devices"].as_array().into_iter().flatten() {
            let me = (
                host.clone(),
                d["roce_device"].as_str().unwrap_or_default().to_string(),
            );
            let peers: Vec<NicName> = d["peers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| by_gid.get(&addr(p)).cloned())
                .collect();
            if !peers.is_empty() {
                out.insert(me, peers);
            }
        }
    }
    Ok(out)
}

fn read_all(dir: &Path) -> Result<Vec<(PathBuf, Value)>, String> {
    rank_files(dir)?
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let v: Value =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
            Ok((p, v))
        })
        .collect()
}

/// A NIC's address as its peers' entries name it: its GID and LID (the generator's GIDs repeat
/// every 256 hosts; its LIDs do not).
type Addr = (Option<String>, Option<u64>);

fn addr(v: &Value) -> Addr {
    (v["gid"].as_str().map(str::to_string), v["lid"].as_u64())
}

fn gids(files: &[(PathBuf, Value)]) -> HashMap<Addr, NicName> {
    let mut m = HashMap::new();
    for (_, v) in files {
        let host = v["host_name"].as_str().unwrap_or_default();
        for d in v["devices"].as_array().into_iter().flatten() {
            let dev = d["roce_device"].as_str().unwrap_or_default();
            m.insert(addr(d), (host.to_string(), dev.to_string()));
        }
    }
    m
}

/// Applies the edits to the run in `dir`, file by file.
pub fn apply(dir: &Path, edits: &[Edit]) -> Result<(), String> {
    let files = read_all(dir)?;
    let by_gid = gids(&files);
    for (path, mut v) in files {
        let host = v["host_name"].as_str().unwrap_or_default().to_string();
        let mut changed = false;
        for d in v["devices"].as_array_mut().into_iter().flatten() {
            let me = (
                host.clone(),
                d["roce_device"].as_str().unwrap_or_default().to_string(),
            );
            let mut sum: BTreeMap<u64, (Value, u64)> = BTreeMap::new();
            let mut edited = false;
            for p in d["peers"].as_array_mut().into_iter().flatten() {
                let peer = by_gid.get(&addr(p)).cloned();
                if let Some(peer) = peer {
                    for e in edits.iter().filter(|e| e.slows(&me, &peer)) {
                        let h = &mut p["wqe_completion_log_histogram"];
                        *h = scale(h, e.factor, e.tail_only);
                        edited = true;
                    }
                }
                for b in p["wqe_completion_log_histogram"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    let lo = b[0].as_u64().unwrap_or(0);
                    let e = sum.entry(lo).or_insert((b[1].clone(), 0));
                    e.1 += b[2].as_u64().unwrap_or(0);
                }
            }
            changed |= edited;
            if edited && d.get("wqe_completion_log_histogram").is_some() {
                d["wqe_completion_log_histogram"] = Value::Array(
                    sum.into_iter()
                        .map(|(lo, (hi, n))| Value::from(vec![Value::from(lo), hi, Value::from(n)]))
                        .collect(),
                );
            }
        }
        if changed {
            let text = serde_json::to_string(&v).map_err(|e| e.to_string())?;
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// Tells every QP of the run in `dir` its settings, as a transport that calls
/// rcclTelemetryQpSetAttrs would: NCCL's on RoCE for all ([`NCCL_ROCE_ATTRS`]), but for `odd`'s NIC's first QP, whose
/// setting `key` is `value` (a mis-classed or mis-sized connection). Returns whether the odd
/// QP was found.
pub fn set_attrs(dir: &Path, odd: Option<(&NicName, &str, u64)>) -> Result<bool, String> {
    let mut found = false;
    for (path, mut v) in read_all(dir)? {
        let host = v["host_name"].as_str().unwrap_or_default().to_string();
        for d in v["devices"].as_array_mut().into_iter().flatten() {
            let me = (
                host.clone(),
                d["roce_device"].as_str().unwrap_or_default().to_string(),
            );
            let qps = d["channels"]
                .as_array_mut()
                .into_iter()
                .flatten()
                .flat_map(|c| c["queue_pairs"].as_array_mut().into_iter().flatten());
            for q in qps {
                let mut a = serde_json::to_value(NCCL_ROCE_ATTRS).map_err(|e| e.to_string())?;
                if let Some((nic, key, value)) = odd {
                    if !found && *nic == me {
                        a[key] = Value::from(value);
                        found = true;
                    }
                }
                q["attrs"] = a;
            }
        }
        let text = serde_json::to_string(&v).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(found)
}

/// A log histogram (`[[lo, hi, n], ...]`) with its completions `factor` times slower, each
/// bucket's at its middle, into the library's buckets again; `tail_only`: only the slowest
/// quarter of them (the bucket across the line in part).
pub fn scale(h: &Value, factor: f64, tail_only: bool) -> Value {
    let buckets: Vec<(u64, u64, u64)> = h
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| {
            let lo = b[0].as_u64().unwrap_or(0);
            (lo, b[1].as_u64().unwrap_or(lo), b[2].as_u64().unwrap_or(0))
        })
        .collect();
    let total: u64 = buckets.iter().map(|b| b.2).sum();
    let line = if tail_only { total - total / 4 } else { 0 };
    let mut out: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let mut seen = 0u64;
    for (lo, hi, n) in buckets {
        let slow = (seen + n).saturating_sub(line.max(seen)).min(n);
        seen += n;
        let mid = (lo + hi) as f64 / 2.0;
        for (x, k) in [(mid, n - slow), (mid * factor, slow)] {
            if k > 0 {
                let (l, h) = log_bucket(x.round() as u64);
                out.entry(l).or_insert((h, 0)).1 += k;
            }
        }
    }
    Value::Array(
        out.into_iter()
            .map(|(lo, (hi, n))| Value::from(vec![lo, hi, n]))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_keeps_the_count_and_moves_the_chosen_share() {
        let h = serde_json::json!([[8192, 9215, 50], [9216, 10239, 50]]);
        let all = scale(&h, 3.0, false);
        let n: u64 = all
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b[2].as_u64().unwrap())
            .sum();
        assert_eq!(n, 100);
        assert!(all[0][0].as_u64().unwrap() >= 24_576, "{all}");
        // The slowest quarter: 25 of the 100, from the upper bucket.
        let tail = scale(&h, 3.0, true);
        let fast: u64 = tail
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b[0].as_u64().unwrap() < 20_000)
            .map(|b| b[2].as_u64().unwrap())
            .sum();
        assert_eq!(fast, 75, "{tail}");
    }
}
