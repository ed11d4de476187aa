//! Reading a run for a command that needs only some of its QPs.
//!
//! `summary` and `stalls` read devices and channels, and of the QPs only those the stall
//! report and the hang analysis look at (stalled, with a past stall, errored, or with a last
//! post or completion time), and the run's QP index to resolve their peers; they never read
//! a device's per-peer entries (the links'). `outliers` and `report` also read every QP the
//! link join can use (one with a QPN or a peer) and the per-peer entries. Each file is pruned
//! as soon as it is parsed, on its reading thread, so what a run holds grows with its devices
//! and channels (and, for the link commands, with its links), not with QPs that nothing
//! reads: for `summary` and `stalls` a few bytes per QP for the index (about 50), not the
//! whole QP model (about 500 bytes a QP and its histograms) and the per-peer histograms. On
//! the all-to-all run of 1,024 ranks (1.04 M QPs) `summary` peaks at 141 MiB instead of
//! 1,163, `stalls` at 136 MiB instead of 1,158, and `summary --json`, which prints no stall
//! line and so keeps no QP, at 35 MiB instead of 983.
//!
//! A channel counts what it dropped ([`Channel::dropped_qps`]), so whether a device was used
//! and how many QPs a communicator or a link join counts read the same. The index is built
//! after the files are read and one file per rank is kept, in the files' order, each file's
//! QPs in the order the file lists them: exactly the index [`super::addr::index_files`]
//! builds from the whole model.

use super::addr::{claims, AddrIndexBuilder, QpIndex, Who};
use crate::model::{Channel, QueuePair, TelemetryFile};
use std::sync::Arc;

/// Which QPs of a file a command keeps once the file is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Keep {
    /// Every QP: the model as the file has it.
    #[default]
    All,
    /// What the link join reads too ([`read_by_links`]): every QP with a QPN or a peer,
    /// whole, and the devices' per-peer entries (`outliers`, `report`). A file of version 1
    /// or 2, or of the in-tree engine, names no QP's QPN or peer: it keeps only what the hang
    /// analysis reads.
    Links,
    /// The QPs the stall and hang analysis read ([`read_by_hang`]), without their
    /// histograms; the addresses of every QP go into the run's QP index.
    Hang,
    /// None: device and channel figures only (`summary --json`).
    Nothing,
}

/// Whether the stall report or the hang analysis reads a QP: it is stalled, has stalled, has
/// error completions, or has a last post or completion time (the quiet rule).
pub fn read_by_hang(q: &QueuePair) -> bool {
    q.stalled == Some(true)
        || q.longest_stall_ms.is_some_and(|ms| ms > 0)
        || q.cq_error_total() > 0
        || q.first_cq_error.is_some()
        || q.last_post_time.is_some()
        || q.last_completion_time.is_some()
}

/// Whether the link join reads a QP (it has a QPN to be found by, or a peer to find), QP lint
/// does (it told its settings), or the stall report or the hang analysis does.
pub fn read_by_links(q: &QueuePair) -> bool {
    q.qp_num.is_some() || q.peer.is_some() || q.attrs().is_some() || read_by_hang(q)
}

/// The (address, QPN) claims of one file's QPs, kept when its QPs are dropped: what the run's
/// QP index is built from. Each claimant is the QP's device number in the file; the claims are
/// in the order [`AddrIndexBuilder::insert_qp`] adds them for the whole model.
#[derive(Debug, Clone, Default)]
pub struct FileClaims(AddrIndexBuilder<u32>);

impl FileClaims {
    /// The claims of every QP of the file.
    fn of(file: &TelemetryFile) -> FileClaims {
        let qps = || {
            file.devices.iter().enumerate().flat_map(|(di, d)| {
                d.channels
                    .iter()
                    .flat_map(move |c| c.queue_pairs.iter().map(move |q| (di, d, q)))
            })
        };
        let mut b = AddrIndexBuilder::with_capacity(qps().map(|(_, d, q)| claims(d, q)).sum());
        for (di, d, q) in qps() {
            b.insert_qp(d, q, di as u32);
        }
        FileClaims(b)
    }
}

/// Keeps only what `keep` asks for of a parsed file; returns its QPs' claims when the index
/// will be built from them ([`Keep::Hang`]).
pub fn prune(file: &mut TelemetryFile, keep: Keep) -> Option<FileClaims> {
    let claims = match keep {
        Keep::All => return None,
        Keep::Hang => Some(FileClaims::of(file)),
        Keep::Links | Keep::Nothing => None,
    };
    for d in &mut file.devices {
        if keep != Keep::Links {
            // Per-peer entries are the link join's: nothing else reads them.
            d.peers = None;
        }
        for c in &mut d.channels {
            prune_channel(c, keep);
        }
    }
    claims
}

fn prune_channel(c: &mut Channel, keep: Keep) {
    let before = c.queue_pairs.len();
    match keep {
        Keep::All => return,
        Keep::Links => c.queue_pairs.retain(read_by_links),
        Keep::Hang => c.queue_pairs.retain(read_by_hang),
        Keep::Nothing => c.queue_pairs.clear(),
    }
    c.dropped_qps = c
        .dropped_qps
        .saturating_add((before - c.queue_pairs.len()) as u64);
    c.queue_pairs.shrink_to_fit();
    if keep == Keep::Hang {
        // The links sum the QPs' histograms; the hang analysis does not read them.
        for q in &mut c.queue_pairs {
            q.counters.wqe_completion_histogram = Vec::new();
        }
    }
}

/// The run's QP index from the kept files and the claims each carried: the same index, claim
/// for claim and in the same order, as [`super::addr::index_files`] of the unpruned files.
pub fn index<'a>(files: impl Iterator<Item = (&'a TelemetryFile, FileClaims)>) -> QpIndex {
    let files: Vec<(&TelemetryFile, FileClaims)> = files.collect();
    let n = files.iter().map(|(_, c)| c.0.len()).sum();
    let mut b = AddrIndexBuilder::with_capacity(n);
    for (f, fc) in files {
        let who: Vec<Who> = f
            .devices
            .iter()
            .map(|d| Arc::new((f.host_name.clone(), f.process_id, d.roce_device.clone())))
            .collect();
        fc.0.add_to(&mut b, |d| who[d as usize].clone());
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Device, QpPeer};

    fn qp(id: u64, qpn: u64) -> QueuePair {
        QueuePair {
            id,
            qp_num: Some(qpn),
            peer: Some(QpPeer {
                qp_num: qpn + 1,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A file of two devices: QPs that the hang analysis reads and QPs it does not.
    fn file() -> TelemetryFile {
        let stalled = QueuePair {
            stalled: Some(true),
            ..qp(1, 11)
        };
        let errored = QueuePair {
            first_cq_error: Some(Default::default()),
            ..qp(2, 12)
        };
        let posted = QueuePair {
            last_post_time: Some("2026-01-01T00:00:00.000Z".into()),
            ..qp(3, 13)
        };
        let past = QueuePair {
            longest_stall_ms: Some(5),
            ..qp(4, 14)
        };
        let mut quiet = qp(5, 15);
        quiet.counters.wqe_completion_histogram = vec![1, 2, 3];
        let mut kept = stalled.clone();
        kept.counters.wqe_completion_histogram = vec![4];
        let chan = |qps: Vec<QueuePair>| Channel {
            queue_pairs: qps,
            ..Default::default()
        };
        TelemetryFile {
            host_name: "h".into(),
            process_id: 7,
            devices: vec![
                Device {
                    roce_device: "a".into(),
                    gid: Some("fe80::1".into()),
                    lid: Some(3),
                    channels: vec![chan(vec![quiet.clone(), kept]), chan(vec![errored])],
                    ..Default::default()
                },
                Device {
                    roce_device: "b".into(),
                    gid: Some("fe80::2".into()),
                    channels: vec![chan(vec![posted, quiet.clone(), past]), chan(vec![quiet])],
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    fn ids(f: &TelemetryFile) -> Vec<Vec<u64>> {
        f.devices
            .iter()
            .flat_map(|d| &d.channels)
            .map(|c| c.queue_pairs.iter().map(|q| q.id).collect())
            .collect()
    }

    #[test]
    fn the_hang_view_keeps_what_the_hang_reads_and_counts_the_rest() {
        let full = file();
        let mut f = full.clone();
        let claims = prune(&mut f, Keep::Hang);
        assert!(claims.is_some());
        assert_eq!(ids(&f), [vec![1], vec![2], vec![3, 4], vec![]]);
        for (a, b) in full
            .devices
            .iter()
            .flat_map(|d| &d.channels)
            .zip(f.devices.iter().flat_map(|d| &d.channels))
        {
            assert_eq!(a.qp_count(), b.qp_count());
        }
        // The kept QPs lose their histograms; the channel keeps its own.
        assert!(f.devices[0].channels[0].queue_pairs[0]
            .counters
            .wqe_completion_histogram
            .is_empty());
        assert!(f.devices.iter().all(|d| d.is_used()));
        // The links' read keeps every QP with a QPN or a peer, whole, and the peer entries.
        let mut links = full.clone();
        links.devices[1].channels[1].queue_pairs[0].qp_num = None;
        links.devices[1].channels[1].queue_pairs[0].peer = None;
        links.devices[0].peers = Some(vec![Default::default()]);
        assert!(prune(&mut links, Keep::Links).is_none());
        assert_eq!(ids(&links), [vec![5, 1], vec![2], vec![3, 5, 4], vec![]]);
        assert_eq!(
            links.devices[0].channels[0].queue_pairs[0]
                .counters
                .wqe_completion_histogram,
            [1, 2, 3]
        );
        assert!(links.devices[0].peers.is_some());
        assert_eq!(links.devices[1].channels[1].qp_count(), 1);
        let mut none = full.clone();
        assert!(prune(&mut none, Keep::Nothing).is_none());
        assert_eq!(ids(&none), vec![Vec::<u64>::new(); 4]);
        assert!(none.devices.iter().all(|d| d.is_used()));
        let mut all = full.clone();
        assert!(prune(&mut all, Keep::All).is_none());
        assert_eq!(ids(&all), ids(&full));
    }

    /// The index built from the claims answers every lookup as the index of the whole model
    /// does, claimants in the same order.
    #[test]
    fn the_index_from_claims_is_the_index_of_the_whole_run() {
        let mut second = file();
        second.process_id = 8;
        second.devices[1].gid = Some("fe80::1".into());
        let whole = [file(), second];
        let expect = super::super::addr::index_files(whole.iter());
        let mut pruned = whole.clone();
        let claims: Vec<FileClaims> = pruned
            .iter_mut()
            .map(|f| prune(f, Keep::Hang).expect("the hang view keeps the claims"))
            .collect();
        let got = index(pruned.iter().zip(claims));
        let mut asked = 0;
        for gid in [None, Some("fe80::1"), Some("fe80::2"), Some("fe80::3")] {
            for lid in [None, Some(3), Some(4)] {
                for qpn in 10..17 {
                    let g = super::super::addr::gid_addr(gid);
                    let l = super::super::addr::lid_addr(lid);
                    let a = expect.get(g.as_ref(), l.as_ref(), qpn);
                    let b = got.get(g.as_ref(), l.as_ref(), qpn);
                    assert_eq!(a, b, "{gid:?} {lid:?} {qpn}");
                    asked += usize::from(!a.is_empty());
                }
            }
        }
        assert!(asked > 10, "{asked}");
        // A key two files claim: both claimants, the first file's first.
        let two = got.get(
            super::super::addr::gid_addr(Some("fe80::1")).as_ref(),
            None,
            11,
        );
        assert_eq!(two.len(), 2);
        assert_eq!((two[0].1, two[1].1), (7, 8));
    }
}
