//! `check`: validates each file against the committed JSON Schema and the invariants the
//! schema cannot state (sums, counts, orders: [`invariants`]), one line per violation with
//! the file and the JSON path (a JSON Pointer).

pub mod dupkeys;
pub mod intree;
mod sums;
pub mod text;

use sums::sum_error;

use crate::completeness::{Completeness, Reach};
use crate::load::{expand_inputs, parse_raw, progress, raw_from_value, read_bytes, BadFile};
use crate::model::{
    add_hist, latency_range, parse_timestamp_ns, Channel, CommRef, Counters, Device, TelemetryFile,
};
use rayon::prelude::*;
use rccl_telemetry_format::counters::{FIELDS, N};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The committed schema, compiled into the binary so `check` always uses it.
pub const SCHEMA: &str = include_str!("../../../schema/rccl_telemetry.schema.json");

#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    pub file: String,
    /// JSON Pointer to the offending value ("" is the whole document).
    pub path: String,
    /// "schema", "invariant", "duplicate_key" (a key repeated in its object) or "unreadable".
    pub kind: &'static str,
    pub message: String,
}

impl Violation {
    pub fn line(&self) -> String {
        let p = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        format!("{}: {}: {}: {}", self.file, p, self.kind, self.message)
    }
}

#[derive(Debug, Default, Serialize)]
pub struct CheckReport {
    pub files: usize,
    pub files_valid: usize,
    pub files_unreadable: usize,
    pub violations: Vec<Violation>,
    /// In-tree files only: what a file's format cannot tell (kind "limitation"); never fails `check`.
    pub limitations: Vec<Violation>,
    /// Files written by RCCL's in-tree engine (version "1.0"), checked against that format.
    pub files_intree: usize,
    /// When any in-tree file was checked: what that format cannot express, said once per run.
    pub intree_format_limitations: Vec<&'static str>,
    /// The peer NICs and ranks the files name that none of them covers (`completeness`):
    /// absent when every one has a file. The files are valid, the set is short of ranks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<crate::completeness::Completeness>,
}

fn shorten(s: &str, max: usize) -> String {
    let one_line = s.replace('\n', " ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let cut: String = one_line.chars().take(max).collect();
        format!("{cut}...")
    }
}

/// Checks every file named by the inputs.
pub fn check_inputs(inputs: &[PathBuf]) -> Result<CheckReport, String> {
    let schema: serde_json::Value = serde_json::from_str(SCHEMA)
        .map_err(|e| format!("the embedded schema is not JSON: {e}"))?;
    let validator = jsonschema::validator_for(&schema)
        .map_err(|e| format!("the embedded schema does not compile: {e}"))?;
    let (paths, missing) = expand_inputs(inputs);
    let pb = progress(paths.len(), "checking");
    let per_file: Vec<(FileCheck, Option<Reach>)> = paths
        .par_iter()
        .map(|p| {
            let mut reach = None;
            let out = check_file(p, &validator, &mut reach);
            pb.inc(1);
            (out, reach)
        })
        .collect();
    let (per_file, reaches): (Vec<_>, Vec<Option<Reach>>) = per_file.into_iter().unzip();
    let complete = Completeness::of(reaches.iter().flatten());
    pb.finish_and_clear();
    let mut report = CheckReport {
        files: paths.len(),
        ..Default::default()
    };
    for m in missing {
        report.violations.push(Violation {
            file: m.path.display().to_string(),
            path: String::new(),
            kind: "unreadable",
            message: m.reason,
        });
    }
    for (v, unreadable, intree) in per_file {
        if intree {
            report.files_intree += 1;
        }
        // A limitation says what the file cannot tell; it is not a violation.
        let (lim, v): (Vec<Violation>, Vec<Violation>) =
            v.into_iter().partition(|x| x.kind == "limitation");
        if unreadable {
            report.files_unreadable += 1;
        } else if v.is_empty() {
            report.files_valid += 1;
        }
        report.violations.extend(v);
        report.limitations.extend(lim);
    }
    if report.files_intree > 0 {
        report.intree_format_limitations = crate::intree::LIMITATIONS.to_vec();
    }
    report.incomplete = (!complete.is_complete()).then_some(complete);
    Ok(report)
}

/// One file's violations, whether it was unreadable, whether it is an in-tree file.
type FileCheck = (Vec<Violation>, bool, bool);

/// What `check`'s last line adds for a set of files short of ranks: "; the files name 51 peer
/// NICs that have no file" (and the communicators short of ranks).
pub fn short_of_ranks(c: &Completeness) -> String {
    let mut s = String::new();
    if c.peer_nics_missing > 0 {
        s.push_str(&format!(
            "; the files name {} peer NICs that have no file",
            c.peer_nics_missing
        ));
    }
    if !c.communicators.is_empty() {
        s.push_str(&format!(
            "; {} communicators have ranks without a file",
            c.communicators.len()
        ));
    }
    s
}

/// One file's violations, whether it was unreadable, whether it is an in-tree file; `reach`
/// gets what the file names and is reached by when it reads as a telemetry file.
fn check_file(p: &Path, validator: &jsonschema::Validator, reach: &mut Option<Reach>) -> FileCheck {
    let file = p.display().to_string();
    let unreadable = |b: BadFile| {
        (
            vec![Violation {
                file: file.clone(),
                path: String::new(),
                kind: "unreadable",
                message: b.reason,
            }],
            true,
            false,
        )
    };
    let (bytes, _permit) = match read_bytes(p) {
        Ok(b) => b,
        Err(b) => return unreadable(b),
    };
    let parsed = dupkeys::parse(&bytes)
        .map_err(|_| ())
        .and_then(|(v, dups)| raw_from_value(p, v).map(|r| (r, dups)).map_err(drop));
    let (raw, dups) = match parsed {
        Ok(x) => x,
        // The reader's own words for why (empty, truncated, not JSON, version, shape).
        Err(()) => match parse_raw(p, &bytes) {
            Err(b) => return unreadable(b),
            Ok(_) => {
                return unreadable(BadFile::new(
                    p,
                    crate::load::BadKind::NotJson,
                    "not JSON".into(),
                ))
            }
        },
    };
    drop(bytes);
    let mut v: Vec<Violation> = dups
        .into_iter()
        .map(|path| Violation {
            file: file.clone(),
            path,
            kind: "duplicate_key",
            message: "a key repeated in its object: readers keep the last value".into(),
        })
        .collect();
    if raw.format == crate::model::SourceFormat::InTree {
        // The in-tree engine's file is checked against its own format, not our schema.
        v.extend(
            intree::check(&raw.value)
                .into_iter()
                .map(|(path, kind, message)| Violation {
                    file: file.clone(),
                    path,
                    kind,
                    message,
                }),
        );
        return (v, false, true);
    }
    let schema_errors = validator.iter_errors(&raw.value).map(|e| Violation {
        file: file.clone(),
        path: e.instance_path().to_string(),
        kind: "schema",
        message: shorten(&e.to_string(), 200),
    });
    v.extend(schema_errors);
    let schema_clean = v.iter().all(|x| x.kind != "schema");
    match crate::load::typed_from_value(raw.value) {
        Ok(tf) => {
            *reach = Some(Reach::of(&tf));
            v.extend(
                invariants(&tf)
                    .into_iter()
                    .map(|(path, message)| Violation {
                        file: file.clone(),
                        path,
                        kind: "invariant",
                        message,
                    }),
            )
        }
        Err(e) if schema_clean => v.push(Violation {
            file: file.clone(),
            path: String::new(),
            kind: "schema",
            message: format!("cannot be read as a telemetry file: {e}"),
        }),
        Err(_) => {}
    }
    (v, false, false)
}

/// Collects (JSON pointer, message) for every broken invariant of one parsed file.
pub fn invariants(f: &TelemetryFile) -> Vec<(String, String)> {
    let mut c = Invariants {
        width: f.histogram_interval_ns,
        sampled_expected: f.latency_sample_interval.is_some_and(|n| n > 1),
        hist_len: None,
        out: Vec::new(),
    };
    c.header(f);
    let mut device_ids = BTreeSet::new();
    for (di, d) in f.devices.iter().enumerate() {
        let dp = format!("/devices/{di}");
        if !device_ids.insert(d.device_id) {
            c.err(
                format!("{dp}/device_id"),
                format!("device_id {} appears twice", d.device_id),
            );
        }
        c.device(&dp, d);
    }
    let out = &mut c.out;
    comm_invariants(f, c.sampled_expected, &mut c.hist_len, &mut |p, m| {
        out.push((p, m));
    });
    c.hw_samples(f, &device_ids);
    c.out
}

/// One file's invariants being checked: what its counters are held to, and the broken ones
/// found so far (JSON pointer, message).
struct Invariants {
    /// The file's histogram_interval_ns.
    width: u64,
    /// Whether latency sampling is on (the sampled keys are then expected).
    sampled_expected: bool,
    /// The length of the linear histograms, from the first one seen.
    hist_len: Option<usize>,
    out: Vec<(String, String)>,
}

impl Invariants {
    /// Records a broken invariant.
    fn err(&mut self, p: String, m: String) {
        self.out.push((p, m));
    }

    /// Checks a channel's or a QP's counters (`counters_ok`).
    fn counters(&mut self, p: &str, c: &Counters) {
        let out = &mut self.out;
        counters_ok(
            p,
            c,
            self.width,
            self.sampled_expected,
            &mut self.hist_len,
            &mut |p, m| out.push((p, m)),
        );
    }

    /// The file's own keys: its times, its sampling interval, hw_samples with its drops.
    fn header(&mut self, f: &TelemetryFile) {
        if let (Some(s), Some(e)) = (
            parse_timestamp_ns(&f.start_time),
            parse_timestamp_ns(&f.end_time),
        ) {
            if e < s {
                self.err(
                    "/end_time".into(),
                    format!(
                        "end_time {} is before start_time {}",
                        f.end_time, f.start_time
                    ),
                );
            }
        }
        if let Some(n) = f.latency_sample_interval {
            if !n.is_power_of_two() || n < 2 {
                self.err(
                    "/latency_sample_interval".into(),
                    format!("{n} is not a power of two >= 2"),
                );
            }
        }
        if f.hw_samples.is_some() != f.hw_samples_dropped.is_some() {
            self.err(
                if f.hw_samples.is_some() {
                    "/hw_samples_dropped"
                } else {
                    "/hw_samples"
                }
                .into(),
                "hw_samples and hw_samples_dropped must appear together".into(),
            );
        }
    }

    /// A device: its untracked QPs, its hardware counters, then each of its channels.
    fn device(&mut self, dp: &str, d: &Device) {
        let untracked_in_channels: u64 = d
            .channels
            .iter()
            .fold(0u64, |s, c| s.saturating_add(c.num_qp_untracked));
        if d.num_qp_untracked < untracked_in_channels {
            self.err(
                format!("{dp}/num_qp_untracked"),
                format!(
                    "device num_qp_untracked {} < {} summed over its channels",
                    d.num_qp_untracked, untracked_in_channels
                ),
            );
        }
        for (name, v) in &d.hw_counters {
            let vals: Vec<i64> = match v {
                crate::model::HwValue::Scalar(x) => vec![*x],
                crate::model::HwValue::PerPrio(a) => {
                    if a.len() != 8 {
                        self.err(
                            format!("{dp}/hw_counters/{}", escape_ptr(name)),
                            format!("per-priority array has {} entries, not 8", a.len()),
                        );
                    }
                    a.clone()
                }
            };
            if vals.iter().any(|x| *x < -1) {
                self.err(
                    format!("{dp}/hw_counters/{}", escape_ptr(name)),
                    format!("value below -1: {v:?}"),
                );
            }
        }
        // Channel ids are per communicator: two communicators may both have a channel 0.
        let mut channel_ids = BTreeSet::new();
        for (ci, c) in d.channels.iter().enumerate() {
            let cp = format!("{dp}/channels/{ci}");
            if let Some(id) = c.id {
                if !channel_ids.insert((c.comm.as_ref().map(|m| m.id), id)) {
                    let whose = c
                        .comm
                        .as_ref()
                        .map_or(String::new(), |m| format!(" in communicator {}", m.label()));
                    self.err(
                        format!("{cp}/id"),
                        format!("channel id {id} appears twice{whose} on this device"),
                    );
                }
                if d.num_channels.is_none() {
                    self.err(
                        format!("{cp}/id"),
                        format!(
                            "channel id {id} on a device whose num_channels is null (ids unknown)"
                        ),
                    );
                }
            }
            self.channel(&cp, c);
        }
    }

    /// A channel: its counters, its totals against its QPs', its QP counts by role, then
    /// each of its QPs.
    fn channel(&mut self, cp: &str, c: &Channel) {
        self.counters(cp, &c.counters);
        self.channel_sums(cp, c);
        self.channel_latency(cp, c);
        let qps = &c.queue_pairs;
        let data = qps
            .iter()
            .filter(|q| q.role.as_deref() == Some("data"))
            .count() as u64;
        let cts = qps
            .iter()
            .filter(|q| q.role.as_deref() == Some("cts"))
            .count() as u64;
        if c.num_data_qp != data {
            self.err(
                format!("{cp}/num_data_qp"),
                format!(
                    "num_data_qp {} != {data} queue pairs with role \"data\"",
                    c.num_data_qp
                ),
            );
        }
        if c.num_cts_qp != cts {
            self.err(
                format!("{cp}/num_cts_qp"),
                format!(
                    "num_cts_qp {} != {cts} queue pairs with role \"cts\"",
                    c.num_cts_qp
                ),
            );
        }
        for (qi, q) in qps.iter().enumerate() {
            let qp = format!("{cp}/queue_pairs/{qi}");
            self.counters(&qp, &q.counters);
            if q.counters.num_wqe_completed > q.counters.num_wqe_rcvd {
                self.err(
                    format!("{qp}/num_wqe_completed"),
                    format!(
                        "num_wqe_completed {} > num_wqe_rcvd {}",
                        q.counters.num_wqe_completed, q.counters.num_wqe_rcvd
                    ),
                );
            }
            if let Some(r) = q.role.as_deref() {
                if r != "data" && r != "cts" {
                    self.err(
                        format!("{qp}/role"),
                        format!("role {r:?} is not \"data\", \"cts\" or null"),
                    );
                }
            }
        }
    }

    /// A channel's counter totals: the sums over its queue pairs, for every row of the counter
    /// table (an optional one where the channel has it).
    fn channel_sums(&mut self, cp: &str, c: &Channel) {
        let mut sums = [0u64; N];
        for q in &c.queue_pairs {
            for (s, v) in sums.iter_mut().zip(q.counters.values()) {
                *s = s.saturating_add(v.unwrap_or(0));
            }
        }
        let rows = FIELDS.iter().zip(c.counters.values()).zip(sums);
        let always = rows.clone().filter(|((r, _), _)| !r.optional);
        let optional = rows.filter(|((r, _), _)| r.optional);
        for ((r, total), s) in always.chain(optional) {
            let Some(total) = total else { continue };
            if let Some((p, m)) = sum_error(cp, c.queue_pairs.len(), r.key, total, s) {
                self.err(p, m);
            }
        }
    }

    /// A channel's latency: its histogram the sum of its QPs', its min and max theirs.
    fn channel_latency(&mut self, cp: &str, c: &Channel) {
        let qps = &c.queue_pairs;
        // At least the channel's length, so that each of its buckets is compared.
        let mut hsum: Vec<u64> = vec![0; c.counters.wqe_completion_histogram.len()];
        for q in qps {
            add_hist(&mut hsum, &q.counters.wqe_completion_histogram);
        }
        for (b, (total, s)) in c
            .counters
            .wqe_completion_histogram
            .iter()
            .zip(&hsum)
            .enumerate()
        {
            if total != s {
                self.err(
                    format!("{cp}/wqe_completion_histogram/{b}"),
                    format!("channel bucket {total} != {s} summed over its queue pairs"),
                );
            }
        }
        let (qmin, qmax) = latency_range(qps.iter().map(|q| &q.counters));
        if c.counters.wqe_completion_ns_min != qmin {
            self.err(
                format!("{cp}/wqe_completion_ns_min"),
                format!(
                    "channel min {} != {} (min over its queue pairs)",
                    c.counters.wqe_completion_ns_min, qmin
                ),
            );
        }
        if c.counters.wqe_completion_ns_max != qmax {
            self.err(
                format!("{cp}/wqe_completion_ns_max"),
                format!(
                    "channel max {} != {} (max over its queue pairs)",
                    c.counters.wqe_completion_ns_max, qmax
                ),
            );
        }
    }

    /// The hw_samples: of a known device, each device's in time order, no value below -1.
    fn hw_samples(&mut self, f: &TelemetryFile, device_ids: &BTreeSet<u32>) {
        let Some(samples) = &f.hw_samples else {
            return;
        };
        let mut last: BTreeMap<u32, u64> = BTreeMap::new();
        for (si, s) in samples.iter().enumerate() {
            let sp = format!("/hw_samples/{si}");
            if !device_ids.contains(&s.device_id) {
                self.err(
                    format!("{sp}/device_id"),
                    format!("device_id {} is not in devices", s.device_id),
                );
            }
            if let Some(prev) = last.insert(s.device_id, s.timestamp_ns) {
                if s.timestamp_ns < prev {
                    self.err(
                        format!("{sp}/timestamp_ns"),
                        format!(
                            "timestamp_ns {} goes backwards (previous sample of device {}: {prev})",
                            s.timestamp_ns, s.device_id
                        ),
                    );
                }
            }
            for (name, v) in &s.counters {
                if *v < -1 {
                    self.err(
                        format!("{sp}/counters/{}", escape_ptr(name)),
                        format!("value {v} below -1"),
                    );
                }
            }
        }
    }
}

/// The communicators' invariants: a channel's communicator is a live one of the file's
/// "communicators" (same hash, rank and size), a finalized record's a finalized one, and a
/// finalized record's counters keep a channel's invariants.
fn comm_invariants(
    f: &TelemetryFile,
    sampled_expected: bool,
    hist_len: &mut Option<usize>,
    err: &mut impl FnMut(String, String),
) {
    let listed: BTreeMap<u64, &crate::model::Communicator> = f
        .communicators
        .iter()
        .flatten()
        .map(|c| (c.comm.id, c))
        .collect();
    let known = |m: &CommRef, finalized: bool| match listed.get(&m.id) {
        None if f.communicators.is_some() => Some(format!(
            "communicator {} (id {}) is not in communicators",
            m.label(),
            m.id
        )),
        Some(c) if c.comm != *m => Some(format!(
            "communicator id {} is {} here but {} in communicators",
            m.id,
            m.label(),
            c.comm.label()
        )),
        Some(c) if c.finalize_time.is_some() != finalized => Some(format!(
            "communicator {} is {} in communicators",
            m.label(),
            if finalized { "live" } else { "finalized" }
        )),
        _ => None,
    };
    for (di, d) in f.devices.iter().enumerate() {
        for (ci, c) in d.channels.iter().enumerate() {
            if let Some(why) = c.comm.as_ref().and_then(|m| known(m, false)) {
                err(format!("/devices/{di}/channels/{ci}/comm"), why);
            }
        }
        for (ri, r) in d.finalized_comms.iter().enumerate() {
            let rp = format!("/devices/{di}/finalized_comms/{ri}");
            if let Some(why) = r.comm.as_ref().and_then(|m| known(m, true)) {
                err(format!("{rp}/comm"), why);
            }
            if r.num_comms == 0 || (r.comm.is_some() && r.num_comms != 1) {
                err(
                    format!("{rp}/num_comms"),
                    format!(
                        "num_comms {} (1 for a communicator's record, at least 1 for the sum of those past the cap)",
                        r.num_comms
                    ),
                );
            }
            counters_ok(
                &rp,
                &r.counters,
                f.histogram_interval_ns,
                sampled_expected,
                hist_len,
                err,
            );
            if r.num_data_qp.saturating_add(r.num_cts_qp) > r.num_qps {
                err(
                    format!("{rp}/num_qps"),
                    format!(
                        "num_data_qp {} + num_cts_qp {} > num_qps {}",
                        r.num_data_qp, r.num_cts_qp, r.num_qps
                    ),
                );
            }
        }
    }
}

/// Escapes a key for use in a JSON Pointer (RFC 6901).
fn escape_ptr(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The invariants a channel and a queue pair share.
fn counters_ok(
    p: &str,
    c: &Counters,
    width: u64,
    sampled_expected: bool,
    hist_len: &mut Option<usize>,
    err: &mut impl FnMut(String, String),
) {
    if c.num_cts_sent_signalled
        .saturating_add(c.num_cts_sent_unsignalled)
        != c.num_cts_sent
    {
        err(
            format!("{p}/num_cts_sent"),
            format!(
                "num_cts_sent_signalled {} + num_cts_sent_unsignalled {} != num_cts_sent {}",
                c.num_cts_sent_signalled, c.num_cts_sent_unsignalled, c.num_cts_sent
            ),
        );
    }
    match (sampled_expected, c.num_wqe_sampled) {
        (true, None) => err(
            p.to_string(),
            "num_wqe_sampled is missing although latency_sample_interval > 1".into(),
        ),
        (false, Some(_)) => err(
            format!("{p}/num_wqe_sampled"),
            "num_wqe_sampled is present although latency_sample_interval is absent or 1".into(),
        ),
        _ => {}
    }
    if let Some(s) = c.num_wqe_sampled {
        if s > c.num_wqe_completed {
            err(
                format!("{p}/num_wqe_sampled"),
                format!(
                    "num_wqe_sampled {s} > num_wqe_completed {}",
                    c.num_wqe_completed
                ),
            );
        }
    }
    let h = &c.wqe_completion_histogram;
    match hist_len {
        None => *hist_len = Some(h.len()),
        Some(n) if *n != h.len() => err(
            format!("{p}/wqe_completion_histogram"),
            format!(
                "has {} buckets, other histograms in this file have {n}",
                h.len()
            ),
        ),
        _ => {}
    }
    let hsum = h.iter().fold(0u64, |s, v| s.saturating_add(*v));
    let (what, expected) = match c.num_wqe_sampled {
        Some(s) => ("num_wqe_sampled", s),
        None => ("num_wqe_completed", c.num_wqe_completed),
    };
    if hsum != expected {
        err(
            format!("{p}/wqe_completion_histogram"),
            format!("histogram sums to {hsum}, {what} is {expected}"),
        );
    }
    let (mn, mx) = (c.wqe_completion_ns_min, c.wqe_completion_ns_max);
    if (mn < 0) != (mx < 0) {
        err(
            format!("{p}/wqe_completion_ns_min"),
            format!("min {mn} and max {mx}: one is -1 and the other is not"),
        );
    } else if mn >= 0 && mn > mx {
        err(
            format!("{p}/wqe_completion_ns_min"),
            format!("min {mn} > max {mx}"),
        );
    }
    if hsum == 0 && (mn >= 0 || mx >= 0) {
        err(
            format!("{p}/wqe_completion_ns_min"),
            format!("min {mn} / max {mx} set although nothing was sampled (should be -1)"),
        );
    }
    if hsum > 0 && (mn < 0 || mx < 0) {
        err(
            format!("{p}/wqe_completion_ns_min"),
            format!("min/max are -1 although the histogram holds {hsum} samples"),
        );
    }
    if hsum > 0 && mn >= 0 && mx >= 0 && width > 0 && !h.is_empty() {
        let bucket_of = |v: i64| ((v as u64) / width).min(h.len() as u64 - 1) as usize;
        let first = h.iter().position(|v| *v > 0).unwrap_or(0);
        let last = h.iter().rposition(|v| *v > 0).unwrap_or(0);
        if bucket_of(mn) != first {
            err(
                format!("{p}/wqe_completion_ns_min"),
                format!(
                    "min {mn} ns falls in bucket {}, but the first non-empty bucket is {first}",
                    bucket_of(mn)
                ),
            );
        }
        if bucket_of(mx) != last {
            err(
                format!("{p}/wqe_completion_ns_max"),
                format!(
                    "max {mx} ns falls in bucket {}, but the last non-empty bucket is {last}",
                    bucket_of(mx)
                ),
            );
        }
    }
}
