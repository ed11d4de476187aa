//! `summary`'s communicators: where a rank's file has more than one communicator (the
//! process-wide calls' channels count as one), one row per rank and communicator, summed over
//! its devices: live or finalized, its channels and QPs, its WQEs and its latency. A file with
//! one communicator (every older file) adds nothing; its rows are the device table's.

use serde::Serialize;

use crate::layout::{col, table, Column, Layout};
use crate::load::Run;
use crate::model::{add_hist, add_log_hist, CommRef, Counters, LogBucket, TelemetryFile};
use crate::stats::fmt_count;
use crate::summary::{fmt_percentile, rank_label, Latency};

/// One communicator of one rank, over its devices.
#[derive(Debug, Clone, Serialize)]
pub struct CommRow {
    /// host:pid of the file.
    pub rank: String,
    /// None: the process-wide calls' channels, or (state "past the cap") the finalized
    /// communicators the writer summed into one record.
    pub comm: Option<CommRef>,
    /// "process-wide", "live", "finalized" or "past the cap".
    pub state: &'static str,
    /// How many communicators the row sums (more than 1 only past the cap).
    pub num_comms: u64,
    pub devices: usize,
    pub channels: u64,
    pub qps: u64,
    pub num_wqe_sent: u64,
    pub num_wqe_completed: u64,
    pub latency: Latency,
}

/// What a row gathers before its latency is computed.
struct Acc {
    row: CommRow,
    hist: Vec<u64>,
    log: Option<Vec<LogBucket>>,
    min: Option<i64>,
    max: Option<i64>,
}

impl Acc {
    fn add(&mut self, c: &Counters, log: Option<&Vec<LogBucket>>) {
        self.row.num_wqe_sent = self.row.num_wqe_sent.saturating_add(c.num_wqe_sent);
        self.row.num_wqe_completed = self
            .row
            .num_wqe_completed
            .saturating_add(c.num_wqe_completed);
        add_hist(&mut self.hist, &c.wqe_completion_histogram);
        match (self.log.as_mut(), log) {
            (Some(a), Some(b)) => add_log_hist(a, b),
            (Some(_), None) if c.num_wqe_completed > 0 => self.log = None,
            _ => {}
        }
        let pick = |a: Option<i64>, b: i64, f: fn(i64, i64) -> i64| match (a, b >= 0) {
            (Some(a), true) => Some(f(a, b)),
            (None, true) => Some(b),
            (a, false) => a,
        };
        self.min = pick(self.min, c.wqe_completion_ns_min, i64::min);
        self.max = pick(self.max, c.wqe_completion_ns_max, i64::max);
    }
}

/// The row of `key` (communicator, state) in `accs`, made on first use; counts `dev` once
/// among its devices (`seen` holds the (row, device) pairs counted).
fn row_of(
    accs: &mut Vec<Acc>,
    f: &TelemetryFile,
    key: (Option<&CommRef>, &'static str),
    dev: Option<u32>,
    seen: &mut Vec<(usize, u32)>,
) -> usize {
    let i = match accs
        .iter()
        .position(|a| a.row.comm.as_ref() == key.0 && a.row.state == key.1)
    {
        Some(i) => i,
        None => {
            accs.push(Acc {
                row: CommRow {
                    rank: rank_label(f),
                    comm: key.0.cloned(),
                    state: key.1,
                    num_comms: 1,
                    devices: 0,
                    channels: 0,
                    qps: 0,
                    num_wqe_sent: 0,
                    num_wqe_completed: 0,
                    latency: Latency::of(&[], 1, None, None),
                },
                hist: Vec::new(),
                log: Some(Vec::new()),
                min: None,
                max: None,
            });
            accs.len() - 1
        }
    };
    if let Some(dev) = dev.filter(|d| !seen.contains(&(i, *d))) {
        seen.push((i, dev));
        accs[i].row.devices += 1;
    }
    i
}

/// The rows of one file, in the file's order of communicators (empty when it has one).
fn file_rows(f: &TelemetryFile) -> Vec<CommRow> {
    let mut accs: Vec<Acc> = Vec::new();
    let mut seen: Vec<(usize, u32)> = Vec::new();
    for d in &f.devices {
        for c in &d.channels {
            let state = if c.comm.is_some() {
                "live"
            } else {
                "process-wide"
            };
            let i = row_of(
                &mut accs,
                f,
                (c.comm.as_ref(), state),
                Some(d.device_id),
                &mut seen,
            );
            accs[i].row.channels += 1;
            accs[i].row.qps += c.qp_count();
            accs[i].add(&c.counters, c.wqe_completion_log_histogram.as_ref());
        }
        for r in &d.finalized_comms {
            let state = if r.comm.is_some() {
                "finalized"
            } else {
                "past the cap"
            };
            let i = row_of(
                &mut accs,
                f,
                (r.comm.as_ref(), state),
                Some(d.device_id),
                &mut seen,
            );
            let a = &mut accs[i];
            a.row.num_comms = a.row.num_comms.max(r.num_comms);
            a.row.channels += r.num_channels;
            a.row.qps += r.num_qps;
            a.add(&r.counters, r.wqe_completion_log_histogram.as_ref());
        }
    }
    // Live communicators without a channel yet are still communicators of the rank.
    for c in f.communicators.iter().flatten() {
        let state = if c.finalize_time.is_some() {
            "finalized"
        } else {
            "live"
        };
        if !accs.iter().any(|a| a.row.comm.as_ref() == Some(&c.comm)) {
            row_of(&mut accs, f, (Some(&c.comm), state), None, &mut seen);
        }
    }
    if accs.len() < 2 {
        return Vec::new();
    }
    let width = f.histogram_interval_ns;
    accs.into_iter()
        .map(|a| {
            let latency = match a.log.filter(|l| !l.is_empty()) {
                Some(l) => Latency::of_log(&l, a.min, a.max),
                None => Latency::of(&a.hist, width, a.min, a.max),
            };
            CommRow { latency, ..a.row }
        })
        .collect()
}

/// Every file's communicators, where a file has more than one.
pub fn rows(run: &Run) -> Vec<CommRow> {
    run.files.iter().flat_map(|l| file_rows(&l.file)).collect()
}

const COLUMNS: [Column; 10] = [
    col("rank", false, 0).whole(),
    col("communicator", false, 0),
    col("state", false, 1),
    col("devs", true, 3),
    col("channels", true, 2),
    col("QPs", true, 2),
    col("WQEs sent", true, 0),
    col("completed", true, 4),
    col("p50", true, 0),
    col("p99", true, 0),
];

/// The communicators' table; at most `max_rows` rows (then a line says how many more).
pub fn render(rows: &[CommRow], layout: Layout, max_rows: usize) -> String {
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    out.push_str("Communicators (ranks with more than one; commHash rank/nRanks):\n");
    let cells: Vec<Vec<String>> = rows
        .iter()
        .take(max_rows)
        .map(|r| {
            vec![
                r.rank.clone(),
                match (&r.comm, r.num_comms) {
                    (Some(c), _) => c.label(),
                    (None, n) if r.state == "past the cap" => format!("{n} communicators"),
                    (None, _) => "process-wide calls".into(),
                },
                r.state.to_string(),
                r.devices.to_string(),
                fmt_count(r.channels),
                fmt_count(r.qps),
                fmt_count(r.num_wqe_sent),
                fmt_count(r.num_wqe_completed),
                fmt_percentile(r.latency.get(0.5)),
                fmt_percentile(r.latency.get(0.99)),
            ]
        })
        .collect();
    let (t, _) = table(&COLUMNS, &cells, layout);
    out.push_str(&t);
    out.push('\n');
    if rows.len() > max_rows {
        out.push_str(&format!(
            "({} more communicator rows; --all or --json shows them)\n",
            rows.len() - max_rows
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Channel, Device, FinalizedComm};

    fn counters(sent: u64, lat: i64) -> Counters {
        Counters {
            num_wqe_sent: sent,
            num_wqe_completed: sent,
            wqe_completion_ns_min: lat,
            wqe_completion_ns_max: lat,
            wqe_completion_histogram: vec![sent, 0],
            ..Counters::default()
        }
    }

    fn comm(id: u64, hash: &str) -> CommRef {
        CommRef {
            id,
            hash: hash.into(),
            rank: 0,
            nranks: 2,
        }
    }

    #[test]
    fn one_row_per_communicator_over_its_devices_and_none_for_a_single_one() {
        let ch = |c: Option<CommRef>, sent| Channel {
            id: Some(0),
            comm: c,
            counters: counters(sent, 500),
            ..Channel::default()
        };
        let dev = |id, chans: Vec<Channel>, fin: Vec<FinalizedComm>| Device {
            device_id: id,
            channels: chans,
            finalized_comms: fin,
            ..Device::default()
        };
        let fin = FinalizedComm {
            comm: Some(comm(1, "0xa")),
            num_comms: 1,
            num_channels: 2,
            num_qps: 8,
            counters: counters(30, 700),
            ..FinalizedComm::default()
        };
        let f = TelemetryFile {
            host_name: "h".into(),
            process_id: 5,
            histogram_interval_ns: 1000,
            devices: vec![
                dev(
                    0,
                    vec![ch(None, 4), ch(Some(comm(2, "0xb")), 6)],
                    vec![fin.clone()],
                ),
                dev(1, vec![ch(Some(comm(2, "0xb")), 1)], vec![fin]),
            ],
            ..TelemetryFile::default()
        };
        let rows = file_rows(&f);
        let got: Vec<(&str, &str, usize, u64, u64)> = rows
            .iter()
            .map(|r| {
                let name = r.comm.as_ref().map_or("", |c| c.hash.as_str());
                (name, r.state, r.devices, r.channels, r.num_wqe_sent)
            })
            .collect();
        assert_eq!(
            got,
            [
                ("", "process-wide", 1, 1, 4),
                ("0xb", "live", 2, 2, 7),
                ("0xa", "finalized", 2, 4, 60),
            ]
        );
        assert_eq!(rows[2].qps, 16);
        assert_eq!(rows[2].latency.samples, 60);
        let text = render(&rows, Layout::Wide, 2);
        assert!(
            text.contains("0xb rank 0/2") && text.contains("process-wide calls"),
            "{text}"
        );
        assert!(text.contains("(1 more communicator rows"), "{text}");
        // One communicator: no rows.
        let one = TelemetryFile {
            devices: vec![dev(0, vec![ch(None, 4)], vec![])],
            ..f
        };
        assert!(file_rows(&one).is_empty());
    }
}
