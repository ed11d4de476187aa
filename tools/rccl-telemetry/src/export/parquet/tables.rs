//! What fills each Parquet table from a group of rank files (and the job's links): one builder
//! per table, listed in TABLES. Separate from the writer (table.rs) and the schema (schema.rs)
//! so a new table is one function and one entry here, plus its columns.

use super::*;

/// One rank file and the identifiers its rows carry.
pub struct Rank<'a> {
    pub job: &'a str,
    pub rank_file: String,
    pub loaded: &'a Loaded,
}

impl Rank<'_> {
    fn f(&self) -> &TelemetryFile {
        &self.loaded.file
    }

    fn ids(&self, t: &mut Table) {
        t.i32(SCHEMA_VERSION as i64)
            .s(self.job)
            .s(&self.f().host_name)
            .i64(self.f().process_id)
            .s(&self.rank_file);
    }

    fn wall_ns(&self, s: &str) -> Option<i128> {
        if self.f().format.has_wall_clock() {
            parse_timestamp_ns(s)
        } else {
            None
        }
    }
}

/// The rank files of one output file (a partition, or the whole run) and the links whose
/// sending NIC is on them, each with its job.
#[derive(Default)]
pub struct Group<'a> {
    pub ranks: Vec<Rank<'a>>,
    pub links: Vec<(&'a str, &'a Link)>,
}

/// Fills one table (made with the table's [`columns`]) from a group.
pub type Builder = fn(&Group<'_>, &mut Table);

/// Every table the export writes, in order; a new table is one more entry here.
pub const TABLES: &[(&str, Builder)] = &[
    ("ranks", |g, t| ranks(&g.ranks, t)),
    ("devices", |g, t| devices(&g.ranks, t)),
    ("channels", |g, t| channels(&g.ranks, t)),
    ("qps", |g, t| qps(&g.ranks, t)),
    ("hw_counters", |g, t| hw_counters(&g.ranks, t)),
    ("hw_samples", |g, t| hw_samples(&g.ranks, t)),
    ("histograms", |g, t| histograms(&g.ranks, t)),
    ("links", |g, t| links(&g.links, t)),
    ("stalls", |g, t| stalls(&g.ranks, t)),
];

fn ranks(group: &[Rank<'_>], t: &mut Table) {
    for r in group {
        let f = r.f();
        r.ids(t);
        let (start, end) = (r.wall_ns(&f.start_time), r.wall_ns(&f.end_time));
        t.s(&f.process_name)
            .s(f.format.label())
            .ob(f.is_final)
            .os(f.trigger.as_deref())
            .os(f.transport.as_deref());
        t.ts(start)
            .ts(end)
            .f64(start.zip(end).map(|(s, e)| (e - s) as f64 / 1e9));
        t.s(&f.start_time)
            .s(&f.end_time)
            .u64(f.histogram_interval_ns)
            .ou64(f.latency_sample_interval);
        t.i32(f.devices.len() as i64)
            .i32(f.devices.iter().filter(|d| d.is_used()).count() as i64);
        t.u64(f.hw_samples.as_ref().map_or(0, |s| s.len() as u64))
            .ou64(f.hw_samples_dropped);
        t.end_row();
    }
}

fn percentiles(t: &mut Table, l: Option<&Latency>) {
    for q in crate::summary::QUANTILES {
        t.f64(l.and_then(|l| l.get(q)).map(|p| p.estimate_ns));
    }
}

fn devices(group: &[Rank<'_>], t: &mut Table) {
    for r in group {
        let f = r.f();
        for d in &f.devices {
            r.ids(t);
            let (mn, mx) = d.latency_min_max();
            let lat = Latency::of(&d.histogram(), f.histogram_interval_ns, mn, mx);
            let log = d.log_histogram().map(|h| Latency::of_log(&h, mn, mx));
            t.i32(d.device_id as i64)
                .s(&d.roce_device)
                .s(&d.eth_device)
                .s(&d.hw_type)
                .b(d.is_used());
            t.u64(d.tx_bytes)
                .u64(d.rx_bytes)
                .u64(d.num_cq_errors)
                .u64(d.cq_poll_count)
                .ou64(d.num_channels);
            t.u64(d.active_channels).u64(d.num_qp_untracked);
            t.u64(d.sum_counters(|c| c.num_wqe_sent))
                .u64(d.sum_counters(|c| c.num_wqe_completed));
            t.u64(d.sum_counters(|c| c.num_slot_miss))
                .u64(f.histogram_interval_ns);
            t.u64(lat.samples).oi64(mn).oi64(mx);
            percentiles(t, Some(&lat));
            t.b(lat.percentiles.iter().any(|p| p.open_bucket));
            t.ou64(log.as_ref().map(|l| l.samples));
            percentiles(t, log.as_ref());
            let [_, pfc, dscp] = rccl_telemetry_format::promtext::PortQos::from(d).values();
            let known = |s: &str| (!s.is_empty()).then(|| s.to_owned());
            t.oi32(d.active_mtu.map(i64::from))
                .os(known(&pfc).as_deref())
                .os(known(&dscp).as_deref());
            t.end_row();
        }
    }
}

/// The counter table's rows in its order (schema.rs's `COUNTERS`), then the latency extremes.
fn counters(t: &mut Table, c: &Counters) {
    for v in c.values() {
        t.ou64(v);
    }
    t.avail(c.wqe_completion_ns_min)
        .avail(c.wqe_completion_ns_max);
}

fn channels(group: &[Rank<'_>], t: &mut Table) {
    for r in group {
        for d in &r.f().devices {
            for (i, c) in d.channels.iter().enumerate() {
                r.ids(t);
                t.i32(d.device_id as i64).ou64(c.id).i32(i as i64);
                counters(t, &c.counters);
                t.u64(c.num_req_completed)
                    .u64(c.num_data_qp)
                    .u64(c.num_cts_qp)
                    .u64(c.num_qp_untracked)
                    .i32(c.queue_pairs.len() as i64);
                t.end_row();
            }
        }
    }
}

fn qps(group: &[Rank<'_>], t: &mut Table) {
    for r in group {
        for d in &r.f().devices {
            for (i, c) in d.channels.iter().enumerate() {
                for q in &c.queue_pairs {
                    r.ids(t);
                    t.i32(d.device_id as i64)
                        .ou64(c.id)
                        .i32(i as i64)
                        .u64(q.id)
                        .os(q.role.as_deref());
                    counters(t, &q.counters);
                    let s = q.latency_stats();
                    t.ou64(q.port()).ou64(q.local_lid());
                    t.f64(s.map(|s| s.wqe_completion_ns_mean))
                        .f64(s.map(|s| s.wqe_completion_ns_stddev));
                    t.ou64(s.map(|s| s.wqe_completion_ns_p50))
                        .ou64(s.map(|s| s.wqe_completion_ns_p90))
                        .ou64(s.map(|s| s.wqe_completion_ns_p99))
                        .ou64(s.map(|s| s.wqe_completion_ns_p999));
                    t.end_row();
                }
            }
        }
    }
}

fn category(name: &str) -> &'static str {
    // The snake_case names of hwclass::Category (as summary --json writes them).
    match classify(name) {
        crate::hwclass::Category::Traffic => "traffic",
        crate::hwclass::Category::Cnp => "cnp",
        crate::hwclass::Category::Ecn => "ecn",
        crate::hwclass::Category::Pfc => "pfc",
        crate::hwclass::Category::Retransmit => "retransmit",
        crate::hwclass::Category::OutOfSequence => "out_of_sequence",
        crate::hwclass::Category::Drop => "drop",
        crate::hwclass::Category::Error => "error",
        crate::hwclass::Category::Other => "other",
    }
}

fn hw_counters(group: &[Rank<'_>], t: &mut Table) {
    use crate::model::HwValue;
    for r in group {
        for d in &r.f().devices {
            for (name, v) in &d.hw_counters {
                let vals: Vec<(Option<i64>, i64)> = match v {
                    HwValue::Scalar(x) => vec![(None, *x)],
                    HwValue::PerPrio(a) => a
                        .iter()
                        .enumerate()
                        .map(|(i, x)| (Some(i as i64), *x))
                        .collect(),
                };
                for (prio, x) in vals {
                    r.ids(t);
                    t.i32(d.device_id as i64)
                        .s(&d.roce_device)
                        .s(name)
                        .s(category(name))
                        .oi32(prio)
                        .avail(x);
                    t.end_row();
                }
            }
        }
    }
}

fn device_name(f: &TelemetryFile, id: u32) -> &str {
    f.devices
        .iter()
        .find(|d| d.device_id == id)
        .map_or("", |d| d.roce_device.as_str())
}

fn hw_samples(group: &[Rank<'_>], t: &mut Table) {
    for r in group {
        let f = r.f();
        for s in f.hw_samples.iter().flatten() {
            let wall = f.format.has_wall_clock().then_some(s.timestamp_ns as i128);
            for (name, v) in &s.counters {
                r.ids(t);
                t.i32(s.device_id as i64)
                    .s(device_name(f, s.device_id))
                    .ts(wall)
                    .u64(s.timestamp_ns)
                    .s(name)
                    .s(category(name))
                    .avail(*v);
                t.end_row();
            }
        }
    }
}

/// Where a histogram belongs: (channel id, channel index, qp) or none of them for the device.
type HistAt = (Option<u64>, Option<usize>, Option<u64>);

fn linear_rows(t: &mut Table, r: &Rank<'_>, d: &Device, at: HistAt, level: &str, h: &[u64]) {
    let w = r.f().histogram_interval_ns;
    for (b, n) in h.iter().enumerate().filter(|(_, n)| **n > 0) {
        let open = b + 1 == h.len();
        r.ids(t);
        t.i32(d.device_id as i64)
            .ou64(at.0)
            .oi32(at.1.map(|i| i as i64))
            .ou64(at.2)
            .s(level)
            .s("linear")
            .i32(b as i64);
        t.u64((b as u64).saturating_mul(w))
            .ou64((!open).then(|| (b as u64 + 1).saturating_mul(w)))
            .u64(*n);
        t.end_row();
    }
}

fn log_rows(
    t: &mut Table,
    r: &Rank<'_>,
    d: &Device,
    at: HistAt,
    level: &str,
    h: &[crate::model::LogBucket],
) {
    for (b, (lo, hi, n)) in h.iter().enumerate() {
        r.ids(t);
        t.i32(d.device_id as i64)
            .ou64(at.0)
            .oi32(at.1.map(|i| i as i64))
            .ou64(at.2)
            .s(level)
            .s("log")
            .i32(b as i64);
        t.u64(*lo)
            .ou64(hi.get().map(|h| h.saturating_add(1)))
            .u64(*n);
        t.end_row();
    }
}

fn histograms(group: &[Rank<'_>], t: &mut Table) {
    for r in group {
        for d in &r.f().devices {
            linear_rows(t, r, d, (None, None, None), "device", &d.histogram());
            if let Some(h) = d.log_histogram() {
                log_rows(t, r, d, (None, None, None), "device", &h);
            }
            for (i, c) in d.channels.iter().enumerate() {
                linear_rows(
                    t,
                    r,
                    d,
                    (c.id, Some(i), None),
                    "channel",
                    &c.counters.wqe_completion_histogram,
                );
                if let Some(h) = &c.wqe_completion_log_histogram {
                    log_rows(t, r, d, (c.id, Some(i), None), "channel", h);
                }
                for q in &c.queue_pairs {
                    linear_rows(
                        t,
                        r,
                        d,
                        (c.id, Some(i), Some(q.id)),
                        "qp",
                        &q.counters.wqe_completion_histogram,
                    );
                }
            }
        }
    }
}

fn links(group: &[(&str, &Link)], t: &mut Table) {
    let pids = |p: &[i64]| {
        p.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    for (job, l) in group {
        t.i32(SCHEMA_VERSION as i64).s(job).s(&l.src.host);
        t.i32(l.src.device_id as i64)
            .s(&l.src.device)
            .s(&pids(&l.src.pids))
            .os(l.src.gid.as_deref())
            .ou64(l.src.lid);
        t.s(&l.dst.host)
            .i32(l.dst.device_id as i64)
            .s(&l.dst.device)
            .s(&pids(&l.dst.pids))
            .os(l.dst.gid.as_deref())
            .ou64(l.dst.lid);
        t.u64(l.qps)
            .u64(l.wrs_sent)
            .u64(l.wrs_completed)
            .u64(l.wrs_received_by_dst)
            .u64(l.tx_bytes_est);
        let lat = l.latency.as_ref();
        t.os(lat.map(|x| x.source)).ou64(lat.map(|x| x.samples));
        t.f64(lat.and_then(|x| x.p50_ns))
            .f64(lat.and_then(|x| x.p90_ns))
            .f64(lat.and_then(|x| x.p99_ns));
        t.ob(lat.map(|x| x.p99_open))
            .oi64(lat.and_then(|x| x.max_ns));
        t.ou64(l.retired_unsignalled)
            .ou64(l.wrs_outstanding)
            .ou64(l.qps_stalled)
            .ou64(l.longest_stall_ms);
        t.end_row();
    }
}

/// The QPs stalled when the file was written, or that had a stall that ended (version 3 with
/// stall detection on).
fn stalls(group: &[Rank<'_>], t: &mut Table) {
    for r in group {
        for d in &r.f().devices {
            for (i, c) in d.channels.iter().enumerate() {
                for q in &c.queue_pairs {
                    if q.stalled != Some(true) && q.longest_stall_ms.unwrap_or(0) == 0 {
                        continue;
                    }
                    r.ids(t);
                    t.i32(d.device_id as i64)
                        .s(&d.roce_device)
                        .ou64(c.id)
                        .i32(i as i64)
                        .u64(q.id)
                        .ou64(q.qp_num);
                    let peer = q.peer.as_ref();
                    t.os(peer.and_then(|p| p.gid.as_deref()))
                        .ou64(peer.and_then(|p| p.lid))
                        .ou64(peer.map(|p| p.qp_num));
                    t.ob(q.stalled)
                        .ts(q.stalled_since.as_deref().and_then(|s| r.wall_ns(s)));
                    t.ou64(q.num_wqe_outstanding)
                        .ou64(q.oldest_outstanding_ms)
                        .ou64(q.longest_stall_ms);
                    t.ts(q.longest_stall_start.as_deref().and_then(|s| r.wall_ns(s)));
                    t.end_row();
                }
            }
        }
    }
}
