//! The JSON file: its model (keys in the seed's order), the snapshot of every slot, the
//! layout, and the file's write (through `atomic_file::write_atomic_with`).

use std::ffi::CString;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::counters::{
    size_bucket_max, ExtSnapshot, QpSnapshot, ROLE_CTS, ROLE_DATA, ROLE_UNKNOWN,
};
use crate::hw::{HwReport, HwSamples, HwValue};
use crate::loghist::{self, LOG_BUCKETS};
use crate::peers;
use crate::registry::{self, Device};

/// 2: adds `wqe_completion_log_histogram` to every channel and device (version 1 files lack it).
/// 3: adds each QP's identity and peer, and each device's local identity and per-peer latency
/// ("qp_num", "local_gid", "peer", "qp_type"; "port", "gid_index", "gid", "gid_ip", "lid",
/// "peers"), after every older key of their object; and, with stall detection on, each QP's and
/// device's stall keys after those, and "stall_ms" (always) at the top.
pub const FORMAT_VERSION: u32 = 3;

/// Process facts captured at Init.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The process that initialised telemetry (a forked child has another pid).
    pub pid: u32,
    pub host_name: String,
    pub process_name: String,
    pub start_wall_ns: u64,
    pub histogram_buckets: u32,
    pub histogram_interval_ns: u64,
    pub latency_sample: u64,
    /// Whether channels record the log-scale histogram (RCCL_TELEMETRY_LOG_HISTOGRAM).
    pub log_histogram: bool,
}

#[derive(Serialize)]
pub struct FileReport {
    pub version: u32,
    pub host_name: String,
    pub process_name: String,
    pub process_id: u32,
    pub start_time: String,
    pub end_time: String,
    /// true in the file written at exit or by rcclTelemetryFlush; false in a snapshot.
    #[serde(rename = "final")]
    pub is_final: bool,
    /// What wrote this file: exit, rcclTelemetryFlush, interval, or a signal name.
    pub trigger: String,
    pub transport: Option<String>,
    pub histogram_interval_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_sample_interval: Option<u64>,
    pub devices: Vec<DeviceReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hw_samples: Option<Vec<SampleReport>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hw_samples_dropped: Option<u64>,
    /// RCCL_TELEMETRY_STALL_MS in effect (0: stall detection off).
    pub stall_ms: u64,
}

#[derive(Serialize)]
pub struct DeviceReport {
    pub device_id: u32,
    pub roce_device: String,
    pub eth_device: String,
    pub hw_type: &'static str,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub num_cq_errors: u64,
    pub cq_poll_count: u64,
    pub num_channels: Option<u64>,
    pub active_channels: u64,
    pub num_qp_untracked: u64,
    pub wqe_size_stats: Vec<SizeStat>,
    pub channels: Vec<ChannelReport>,
    pub hw_counters: HwCounters,
    /// The sum of the channels' log-scale histograms (after the seed's keys; absent with
    /// RCCL_TELEMETRY_LOG_HISTOGRAM=0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqe_completion_log_histogram: Option<LogBuckets>,
    /// Only in files written by the verbs interposer (librccl_telemetry_preload.so).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub verbs: Option<DeviceVerbsReport>,
    /// Version 3: the local port, GID index, GID and LID its QPs use (the first told).
    pub port: Option<u8>,
    pub gid_index: Option<u32>,
    pub gid: Option<GidText>,
    pub gid_ip: Option<GidIp>,
    pub lid: Option<u16>,
    /// Version 3: one entry per remote NIC its QPs were told of, with their latency.
    pub peers: Vec<PeerReport>,
    /// Stall detection's keys (absent with RCCL_TELEMETRY_STALL_MS=0).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stall: Option<DeviceStallReport>,
}

/// A device's stall keys, as of the detector's last tick.
#[derive(Serialize)]
pub struct DeviceStallReport {
    pub num_wqe_outstanding: u64,
    pub num_qps_stalled: u64,
}

/// A QP's stall keys, as of the detector's last tick.
#[derive(Serialize)]
pub struct QpStallReport {
    pub num_wqe_outstanding: u64,
    /// Only in the interposer's files (the key is absent in the hooks').
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_outstanding_ms: Option<Option<u64>>,
    pub stalled: bool,
    pub stalled_since: Option<String>,
    pub longest_stall_ms: u64,
    pub longest_stall_start: Option<String>,
}

impl QpStallReport {
    pub fn of(
        st: &crate::stall::QpState,
        view: &crate::stall::DevView,
        preload: bool,
    ) -> QpStallReport {
        QpStallReport {
            num_wqe_outstanding: st.outstanding,
            oldest_outstanding_ms: preload.then(|| crate::stall::token_age_ms(st.oldest_token)),
            stalled: st.stalled(),
            stalled_since: st.stall_start.map(|s| rfc3339(view.wall(s))),
            longest_stall_ms: st.longest_ns / 1_000_000,
            longest_stall_start: (st.longest_ns > 0).then(|| rfc3339(view.wall(st.longest_start))),
        }
    }
}

/// A GID in the file: its text form, written straight from the 16 bytes (no allocation).
pub struct GidText(pub [u8; 16]);

impl Serialize for GidText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; peers::GID_TEXT_LEN];
        s.serialize_str(peers::gid_text_into(&self.0, &mut buf))
    }
}

/// The address a GID encodes, in the file (see `peers::gid_ip`).
pub struct GidIp(pub std::net::IpAddr);

impl Serialize for GidIp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 64];
        let mut w = &mut buf[..];
        write!(w, "{}", self.0).map_err(serde::ser::Error::custom)?;
        let n = 64 - w.len();
        s.serialize_str(std::str::from_utf8(&buf[..n]).map_err(serde::ser::Error::custom)?)
    }
}

/// A remote NIC of a device (device "peers").
#[derive(Serialize)]
pub struct PeerReport {
    pub gid: Option<GidText>,
    pub gid_ip: Option<GidIp>,
    pub lid: Option<u16>,
    pub num_qps: u64,
    /// Those of num_qps whose channel had reached its per-peer histogram cap: their
    /// completions are in the channel's sum but not in this entry's histogram.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_qps_shared: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqe_completion_log_histogram: Option<LogBuckets>,
}

/// A QP's peer (queue pair "peer").
#[derive(Serialize)]
pub struct QpPeerReport {
    pub qp_num: u32,
    pub gid: Option<GidText>,
    pub gid_ip: Option<GidIp>,
    pub lid: Option<u16>,
}

/// Version 3 queue-pair keys, after every older one.
#[derive(Serialize)]
pub struct QpIdentity {
    pub qp_num: Option<u32>,
    /// Only when it differs from the device's "gid".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_gid: Option<GidText>,
    pub peer: Option<QpPeerReport>,
    /// Only in the verbs interposer's files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qp_type: Option<&'static str>,
}

fn gid_keys(g: Option<[u8; 16]>) -> (Option<GidText>, Option<GidIp>) {
    let g = peers::nonzero(g);
    (
        g.map(GidText),
        g.as_ref().and_then(peers::gid_addr).map(GidIp),
    )
}

fn lid_key(l: u16) -> Option<u16> {
    (l != 0).then_some(l)
}

fn qp_identity(q: Option<peers::QpInfo>, dev_gid: Option<[u8; 16]>, verbs: bool) -> QpIdentity {
    let q = q.unwrap_or_default();
    let ud = q.qp_type == Some("ud");
    QpIdentity {
        qp_num: q.qp_num,
        local_gid: q.local_gid.filter(|g| Some(*g) != dev_gid).map(GidText),
        peer: q.peer.filter(|_| !ud).map(|r| {
            let (gid, gid_ip) = gid_keys(r.gid);
            QpPeerReport {
                qp_num: r.qp_num,
                gid,
                gid_ip,
                lid: lid_key(r.lid),
            }
        }),
        qp_type: if verbs { q.qp_type } else { None },
    }
}

/// The verbs interposer's device keys, after the seed's.
#[derive(Serialize)]
pub struct DeviceVerbsReport {
    pub num_srq_recv_wqe: u64,
    pub num_wc_unknown_qp: u64,
}

/// The verbs interposer's channel and QP keys, after the seed's.
#[derive(Serialize)]
pub struct VerbsCounters {
    pub num_send_wqe: u64,
    pub num_read_wqe: u64,
    pub num_atomic_wqe: u64,
    pub num_other_wqe: u64,
    pub num_wqe_retired_unsignalled: u64,
    pub num_wqe_track_full: u64,
}

impl From<&ExtSnapshot> for VerbsCounters {
    fn from(e: &ExtSnapshot) -> Self {
        VerbsCounters {
            num_send_wqe: e.send_wqe,
            num_read_wqe: e.read_wqe,
            num_atomic_wqe: e.atomic_wqe,
            num_other_wqe: e.other_wqe,
            num_wqe_retired_unsignalled: e.retired_unsignalled,
            num_wqe_track_full: e.track_full,
        }
    }
}

#[derive(Serialize)]
pub struct SizeStat {
    pub max_wqe_size: u64,
    pub num_wqe: u64,
}

#[derive(Serialize)]
pub struct ChannelReport {
    pub id: Option<u32>,
    pub num_wqe_sent: u64,
    pub num_recv_wqe: u64,
    pub num_wqe_rcvd: u64,
    pub num_wqe_completed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_wqe_sampled: Option<u64>,
    pub num_cts_sent: u64,
    pub num_cts_sent_signalled: u64,
    pub num_cts_sent_unsignalled: u64,
    pub num_slot_miss: u64,
    pub num_write_wqe: u64,
    pub num_write_imm_wqe: u64,
    pub num_req_completed: u64,
    pub num_data_qp: u64,
    pub num_cts_qp: u64,
    pub num_qp_untracked: u64,
    pub wqe_completion_ns_min: i64,
    pub wqe_completion_ns_max: i64,
    pub wqe_completion_histogram: Vec<u64>,
    pub queue_pairs: Vec<QpReport>,
    /// Every sampled completion of the channel's QPs, log-scale (after the seed's keys;
    /// absent with RCCL_TELEMETRY_LOG_HISTOGRAM=0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqe_completion_log_histogram: Option<LogBuckets>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub verbs: Option<VerbsCounters>,
}

/// A log-scale histogram as the file shows it: only the non-empty buckets, each as
/// `[lo_ns, hi_ns, count]` with inclusive bounds (`hi_ns` null for the last, open bucket).
#[derive(Serialize)]
pub struct LogBuckets(pub Vec<(u64, Option<u64>, u64)>);

impl LogBuckets {
    pub fn of(counts: &[u64; LOG_BUCKETS]) -> LogBuckets {
        LogBuckets(loghist::sparse(counts))
    }
}

#[derive(Serialize)]
pub struct QpReport {
    pub id: u64,
    pub role: Option<&'static str>,
    pub num_wqe_sent: u64,
    pub num_recv_wqe: u64,
    pub num_wqe_rcvd: u64,
    pub num_wqe_completed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_wqe_sampled: Option<u64>,
    pub num_cts_sent: u64,
    pub num_cts_sent_signalled: u64,
    pub num_cts_sent_unsignalled: u64,
    pub num_slot_miss: u64,
    pub num_write_wqe: u64,
    pub num_write_imm_wqe: u64,
    pub wqe_completion_ns_min: i64,
    pub wqe_completion_ns_max: i64,
    pub wqe_completion_histogram: Vec<u64>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub verbs: Option<VerbsCounters>,
    /// Version 3 (per QP only; None in the channel totals built from a QpReport).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub identity: Option<QpIdentity>,
    /// Stall detection's keys (per QP only; absent with RCCL_TELEMETRY_STALL_MS=0).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stall: Option<QpStallReport>,
}

/// "hw_counters": the hw module's ordered keys.
pub struct HwCounters(pub HwReport);

impl Serialize for HwCounters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            match v {
                HwValue::Scalar(x) => m.serialize_entry(k, x)?,
                HwValue::PerPrio(a) => m.serialize_entry(k, a)?,
            }
        }
        m.end()
    }
}

#[derive(Serialize)]
pub struct SampleReport {
    pub device_id: u32,
    pub timestamp_ns: u64,
    pub counters: SampleCounters,
}

pub struct SampleCounters(pub Vec<(&'static str, i64)>);

impl Serialize for SampleCounters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

fn role_name(r: u8) -> Option<&'static str> {
    match r {
        ROLE_DATA => Some("data"),
        ROLE_CTS => Some("cts"),
        _ => None,
    }
}

fn qp_report(id: u64, role: u8, s: &QpSnapshot, buckets: usize, sampled: bool) -> QpReport {
    QpReport {
        id,
        role: role_name(role),
        num_wqe_sent: s.wqe_sent,
        num_recv_wqe: s.recv_wqe,
        num_wqe_rcvd: s.wqe_rcvd,
        num_wqe_completed: s.wqe_completed,
        num_wqe_sampled: sampled.then(|| s.sampled()),
        num_cts_sent: s.cts_sent(),
        num_cts_sent_signalled: s.cts_signalled,
        num_cts_sent_unsignalled: s.cts_unsignalled,
        num_slot_miss: s.slot_miss,
        num_write_wqe: s.write_wqe,
        num_write_imm_wqe: s.write_imm_wqe,
        wqe_completion_ns_min: s.lat_min,
        wqe_completion_ns_max: s.lat_max,
        wqe_completion_histogram: s.hist[..buckets].to_vec(),
        verbs: None,
        identity: None,
        stall: None,
    }
}

/// Builds one device's report from its slots (channel totals are derived here).
pub fn device_report(d: &Device, id: &Identity, hw: HwReport) -> DeviceReport {
    let buckets = id.histogram_buckets.clamp(1, 16) as usize;
    let sampled = id.latency_sample > 1;
    let unknown = d.channels_unknown.load(Relaxed);
    let verbs = registry::verbs_keys();
    let mut channels = Vec::new();
    let mut active = 0;
    let mut untracked = d.untracked_no_channel.load(Relaxed);
    let mut dev_log = [0u64; LOG_BUCKETS];
    let stall_view = crate::stall::device_view(d.id);
    let local = peers::dev_local(d.id);
    let mut dev_peers = peers::DevPeers::new(id.log_histogram);
    for c in d.channels() {
        let told = c.peers.by_slot();
        let mut total = QpSnapshot::default();
        let mut ext_total = ExtSnapshot::default();
        let (mut data, mut cts) = (0, 0);
        let mut qps = Vec::with_capacity(c.slots.reserved() as usize);
        for (i, slot) in c.slots.iter() {
            let s = slot.snapshot();
            let role = c.slots.role(i);
            total.accumulate(&s);
            data += u64::from(role == ROLE_DATA);
            cts += u64::from(role == ROLE_CTS);
            let mut r = qp_report(i, role, &s, buckets, sampled);
            if verbs {
                let e = c.slots.ext(i).map(|e| e.snapshot()).unwrap_or_default();
                ext_total.accumulate(&e);
                r.verbs = Some((&e).into());
            }
            r.identity = Some(qp_identity(
                told.get(i as usize).copied().flatten(),
                local.gid,
                verbs,
            ));
            if let Some(v) = &stall_view {
                let st = v.state.qp(c.id, i).copied().unwrap_or_default();
                r.stall = Some(QpStallReport::of(&st, v, verbs));
            }
            qps.push(r);
        }
        let req = c.stats.req_completed.load(Relaxed);
        active += u64::from(total.active() || req > 0);
        let ch_untracked = c.untracked.load(Relaxed);
        untracked += ch_untracked;
        let t = qp_report(0, ROLE_UNKNOWN, &total, buckets, sampled);
        let log = dev_peers.add_channel(c);
        for (a, b) in dev_log.iter_mut().zip(log.iter().flatten()) {
            *a = a.wrapping_add(*b);
        }
        channels.push(ChannelReport {
            id: (!unknown).then_some(c.id),
            num_wqe_sent: t.num_wqe_sent,
            num_recv_wqe: t.num_recv_wqe,
            num_wqe_rcvd: t.num_wqe_rcvd,
            num_wqe_completed: t.num_wqe_completed,
            num_wqe_sampled: t.num_wqe_sampled,
            num_cts_sent: t.num_cts_sent,
            num_cts_sent_signalled: t.num_cts_sent_signalled,
            num_cts_sent_unsignalled: t.num_cts_sent_unsignalled,
            num_slot_miss: t.num_slot_miss,
            num_write_wqe: t.num_write_wqe,
            num_write_imm_wqe: t.num_write_imm_wqe,
            num_req_completed: req,
            num_data_qp: data,
            num_cts_qp: cts,
            num_qp_untracked: ch_untracked,
            wqe_completion_ns_min: t.wqe_completion_ns_min,
            wqe_completion_ns_max: t.wqe_completion_ns_max,
            wqe_completion_histogram: t.wqe_completion_histogram,
            queue_pairs: qps,
            wqe_completion_log_histogram: log.as_ref().map(LogBuckets::of),
            verbs: verbs.then(|| (&ext_total).into()),
        });
    }
    let totals = registry::dev_totals(d);
    let (gid, gid_ip) = gid_keys(local.gid);
    let peer_list = dev_peers
        .finish()
        .into_iter()
        .map(|p| {
            let g = if let peers::PeerKey::Gid(g) = p.key {
                Some(g)
            } else {
                None
            };
            let (gid, gid_ip) = gid_keys(g);
            PeerReport {
                gid,
                gid_ip,
                lid: lid_key(p.lid),
                num_qps: p.num_qps,
                num_qps_shared: (p.num_qps_shared > 0).then_some(p.num_qps_shared),
                wqe_completion_log_histogram: p.hist.as_ref().map(LogBuckets::of),
            }
        })
        .collect();
    DeviceReport {
        device_id: d.id,
        roce_device: d.roce_device.clone(),
        eth_device: d.hw.eth_device().to_owned(),
        hw_type: d.hw.hw_type(),
        tx_bytes: totals.tx_bytes,
        rx_bytes: totals.rx_bytes,
        num_cq_errors: totals.cq_errors,
        cq_poll_count: totals.cq_polls,
        num_channels: (!unknown).then_some(channels.len() as u64),
        active_channels: active,
        num_qp_untracked: untracked,
        wqe_size_stats: totals
            .sizes
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(b, &n)| SizeStat {
                max_wqe_size: size_bucket_max(b),
                num_wqe: n,
            })
            .collect(),
        channels,
        hw_counters: HwCounters(hw),
        wqe_completion_log_histogram: id.log_histogram.then(|| LogBuckets::of(&dev_log)),
        verbs: verbs.then(|| DeviceVerbsReport {
            num_srq_recv_wqe: d.verbs.srq_recv_wqe.load(Relaxed),
            num_wc_unknown_qp: d.verbs.wc_unknown_qp.load(Relaxed),
        }),
        port: local.port,
        gid_index: local.gid_index,
        gid,
        gid_ip,
        lid: lid_key(local.lid),
        peers: peer_list,
        stall: stall_view.map(|v| DeviceStallReport {
            num_wqe_outstanding: v.state.outstanding,
            num_qps_stalled: v.state.stalled,
        }),
    }
}

/// Builds the whole file from the registry.
pub fn build(
    id: &Identity,
    end_wall_ns: u64,
    samples: Option<HwSamples>,
    is_final: bool,
    trigger: &str,
) -> FileReport {
    // The stall keys as of now, not of the last tick.
    crate::stall::tick();
    let devices: Vec<DeviceReport> = registry::devices()
        .map(|d| device_report(d, id, d.hw.final_report()))
        .collect();
    let transport = registry::devices()
        .map(|d| d.transport.clone())
        .find(|t| !t.is_empty());
    let (hw_samples, hw_samples_dropped) = match samples {
        Some(s) => (
            Some(
                s.samples
                    .into_iter()
                    .map(|x| SampleReport {
                        device_id: x.device_id,
                        timestamp_ns: x.timestamp_ns,
                        counters: SampleCounters(x.counters),
                    })
                    .collect(),
            ),
            Some(s.dropped),
        ),
        None => (None, None),
    };
    FileReport {
        version: FORMAT_VERSION,
        host_name: id.host_name.clone(),
        process_name: id.process_name.clone(),
        process_id: std::process::id(),
        start_time: rfc3339(id.start_wall_ns),
        end_time: rfc3339(end_wall_ns),
        is_final,
        trigger: trigger.to_owned(),
        transport,
        histogram_interval_ns: id.histogram_interval_ns,
        latency_sample_interval: (id.latency_sample > 1).then_some(id.latency_sample),
        devices,
        hw_samples,
        hw_samples_dropped,
        stall_ms: crate::stall::stall_ms(),
    }
}

/// UTC time as RFC 3339 with nanoseconds: 2026-12-02T11:15:31.123456789Z.
pub fn rfc3339(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let nanos = unix_ns % 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    // Civil date from days since 1970-01-01 (proleptic Gregorian), by 400-year eras.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// The file name of this rank: rccl_telemetry_<hostname>_<uid>_<pid>.json.
pub fn file_name(host: &str) -> String {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let host: String = host
        .chars()
        .map(|c| if c == '/' || c.is_control() { '_' } else { c })
        .collect();
    format!("rccl_telemetry_{host}_{uid}_{}.json", std::process::id())
}

/// Pretty JSON that keeps arrays on one line: objects get one key per line, so a file of
/// thousands of QPs stays readable and greppable, while histograms read as [3, 0, 1, 0, 0].
struct Layout {
    indent: usize,
    has_value: bool,
}

impl serde_json::ser::Formatter for Layout {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b"[")
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b"]")
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        Ok(())
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.indent += 1;
        self.has_value = false;
        w.write_all(b"{")
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.indent -= 1;
        if self.has_value {
            w.write_all(b"\n")?;
            indent(w, self.indent)?;
        }
        w.write_all(b"}")
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        w.write_all(if first { b"\n" } else { b",\n" })?;
        indent(w, self.indent)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

fn indent<W: ?Sized + Write>(w: &mut W, n: usize) -> io::Result<()> {
    const SPACES: &[u8] = b"                                                                ";
    let mut left = n * 2;
    while left > 0 {
        let k = left.min(SPACES.len());
        w.write_all(&SPACES[..k])?;
        left -= k;
    }
    Ok(())
}

/// Serialises a report in the file's layout.
pub fn to_writer<W: Write, T: Serialize>(w: W, v: &T) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(
        w,
        Layout {
            indent: 0,
            has_value: false,
        },
    );
    v.serialize(&mut ser).map_err(io::Error::other)
}

/// Writes `report` to `dir/name` with [`crate::atomic_file::write_atomic_with`]: a private
/// temporary file with an unpredictable name, renamed into place (or to the fallback name
/// when the final name cannot be taken), the directory fsync'ed. Returns where it went, or
/// one line with the path and the reason.
pub fn write_atomic<T: Serialize>(
    dir: &Path,
    name: &str,
    report: &T,
) -> Result<crate::atomic_file::Written, String> {
    crate::atomic_file::write_atomic_with(&dir.join(name), |w| {
        to_writer(&mut *w, report)?;
        w.write_all(b"\n")
    })
    .map_err(|e| e.replacen("cannot write ", "cannot write telemetry file ", 1))
}

/// The host name (gethostname), "unknown" if it cannot be read.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if rc != 0 || end == 0 {
        return "unknown".into();
    }
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The process name (/proc/self/comm), "unknown" if it cannot be read.
pub fn process_name() -> String {
    std::fs::read_to_string("/proc/self/comm")
        .map(|s| s.trim_end_matches('\n').to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// Checks early (at Init) that the output directory is usable, so a bad path is reported
/// when the run starts rather than only at exit.
pub fn probe_dir(dir: &Path) -> Result<(), String> {
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| format!("output directory {} contains a NUL byte", dir.display()))?;
    // SAFETY: c is a valid NUL-terminated path.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(format!(
            "output directory {} is not writable: {}; the telemetry file will not be written unless that changes",
            dir.display(),
            io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            rfc3339(951_782_400_000_000_001),
            "2000-02-29T00:00:00.000000001Z"
        );
        assert_eq!(
            rfc3339(1_796_210_131_123_456_789),
            "2026-12-02T11:15:31.123456789Z"
        );
        assert_eq!(
            rfc3339(4_107_542_399_999_999_999),
            "2100-02-28T23:59:59.999999999Z"
        );
    }

    #[test]
    fn layout_is_valid_json_with_one_line_arrays() {
        #[derive(Serialize)]
        struct T {
            a: Vec<u64>,
            b: Vec<serde_json::Value>,
            c: Option<u32>,
            e: serde_json::Value,
        }
        let v = T {
            a: vec![1, 2, 3],
            b: vec![serde_json::json!({"x": 1}), serde_json::json!({})],
            c: None,
            e: serde_json::json!({}),
        };
        let mut out = Vec::new();
        to_writer(&mut out, &v).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("\"a\": [1, 2, 3]"), "{s}");
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(
            back,
            serde_json::json!({"a": [1,2,3], "b": [{"x": 1}, {}], "c": null, "e": {}})
        );
    }

    #[test]
    fn atomic_write_replaces_a_planted_symlink_instead_of_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("out.json")).unwrap();
        let p = write_atomic(dir.path(), "out.json", &serde_json::json!({"k": 1}))
            .unwrap()
            .path;
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(&p)
            .unwrap()
            .file_type()
            .is_symlink());
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "no temporary file left: {names:?}");
    }

    #[test]
    fn atomic_write_reports_path_and_reason() {
        let e = write_atomic(Path::new("/nonexistent/dir"), "x.json", &1).unwrap_err();
        assert!(
            e.contains("/nonexistent/dir/x.json") && e.contains("No such file"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }

    #[test]
    fn file_name_has_host_uid_pid() {
        let n = file_name("node/1");
        assert!(
            n.starts_with("rccl_telemetry_node_1_")
                && n.ends_with(&format!("_{}.json", std::process::id())),
            "{n}"
        );
    }
}
