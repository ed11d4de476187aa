//! `import`: reads NCCL and RCCL debug logs (`NCCL_DEBUG=INFO`, one file per rank as
//! `NCCL_DEBUG_FILE=nccl.%h.%p` writes them, or many ranks interleaved in one) and writes one
//! rank file per process they name, which every other command reads like the library's own.
//!
//! A process is the `host:pid` of each line's prefix, whatever file the line is in. What the
//! logs say and the file takes ([`line`] has the formats):
//!
//! - the host's NICs and its out-of-band address (`NET/IB : Using ... ; OOB ...`): the
//!   devices, and which host owns a peer the other lines name by its OOB address;
//! - the communicators and the process's rank in them (`ncclCommInitRank comm ...`);
//! - the error completions (`Got completion from peer ... status=...`, with the QP the
//!   `Got CQE with error (... qp_num=N)` before it names): each QP's errors by status, its
//!   first error, its state (ERR, an RC QP after an error);
//! - the WQE latency monitor's lines: each QP's identity and its peer's (`WQE slow`, `WQE
//!   stall`), its count, slow count, mean, stddev and quantiles (`WQE latency summary`, else
//!   the last `WQE slow`), and its stalls.
//!
//! What a log cannot give is absent: no hardware counters (every one reads -1, "not
//! available"), no bytes, no posted-WQE split by opcode, no CTS or slot counts, no channel
//! split (one channel per device with a null id, the device's `num_channels` null). The
//! completion-latency histograms are rebuilt from each QP's count and quantiles ([`hist`]),
//! which is what the latency analyses read. Every file says `"source": "nccl_log"`, and the
//! commands print [`CAVEAT`] when a run holds such files.
//!
//! A line matching no pattern is counted and skipped; a line of a known kind whose fields do
//! not read is counted apart, and the first few are named with their file and line number.
//! The files are built through the format crate's writer types, so `import` cannot write a
//! key the readers do not know (the monitor's figures, in [`monitor`], excepted until the
//! format has them).

pub mod build;
pub mod hist;
pub mod line;

use line::{Event, Parsed, Prefix};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};

/// What the commands print about a run with imported files.
pub const CAVEAT: &str =
    "imported from NCCL/RCCL debug logs (source nccl_log): error completions, \
stalls, QP latency quantiles and the links they join hold; hardware counters, bytes, posts and the \
per-channel split are not in a log and are absent (hardware-counter, skew and slot findings cannot \
fire); a QP the logs never name with its peer's QPN is counted on its device but in no link";

/// How many malformed lines are named one by one.
pub const NAMED_MALFORMED: usize = 10;

/// The literals a line `import` reads contains (the regex's prefilter finds them; every other
/// line is skipped without being split).
const CANDIDATES: &str = r"NET/IB|nranks ";

/// What an import read and wrote.
#[derive(Debug, Default, Serialize)]
pub struct ImportReport {
    pub files: usize,
    pub bytes: u64,
    /// Non-empty lines.
    pub lines: u64,
    /// Lines read, by kind ([`line::KINDS`]).
    pub known: BTreeMap<&'static str, u64>,
    /// Lines that match no pattern (skipped).
    pub skipped: u64,
    /// Lines of a known kind whose fields could not be read, by kind.
    pub malformed: BTreeMap<&'static str, u64>,
    /// The first [`NAMED_MALFORMED`] of them: `file:line: kind: why`.
    pub malformed_lines: Vec<String>,
    /// The rank files written.
    pub written: Vec<PathBuf>,
    /// Peers named by their OOB address, and the host whose `Using` line owns it.
    pub oob_hosts: BTreeMap<String, String>,
    /// Error completions: `host device QP n: STATUS from peer <addr> (host)`.
    pub errors: Vec<String>,
    /// QPs whose peer end the logs name (the links can join them) and those they do not.
    pub qps_with_peer: u64,
    pub qps_without_peer: u64,
}

/// One QP of a process, from every line that names it.
#[derive(Debug, Clone, Default)]
pub struct Qp {
    /// Some(true) for a send QP, Some(false) for a receive QP (the summary's word).
    pub send: Option<bool>,
    pub peer_addr: Option<String>,
    pub port: Option<u8>,
    pub lid: Option<u16>,
    pub local_gid: Option<[u8; 16]>,
    pub remote_qpn: Option<u32>,
    pub remote_gid: Option<[u8; 16]>,
    pub remote_lid: Option<u16>,
    /// The summary: (n, slow, figures).
    pub summary: Option<(u64, u64, line::Figures)>,
    /// The last slow line's figures and count.
    pub last_slow: Option<(line::Figures, u64)>,
    pub slow_lines: u64,
    pub max_delta: u64,
    /// Stall episodes, the longest stall (ns, start), and the stall in progress at the last
    /// line (start ns, inflight).
    pub stalls: u64,
    pub longest_stall: Option<(u64, Option<i128>)>,
    pub stalled: Option<(Option<i128>, u64)>,
    last_stall_age: Option<u64>,
    /// Error completions by status code, and the first (status, vendor_err, opcode, time).
    pub errors: BTreeMap<i32, u64>,
    pub first_error: Option<(i32, u32, Option<&'static str>, Option<i128>)>,
}

/// A communicator of a process (`ncclCommInitRank comm ...`).
#[derive(Debug, Clone, Default)]
pub struct Comm {
    pub ptr: String,
    pub rank: u32,
    pub nranks: u32,
    /// commId (None on the forms that print none).
    pub id: Option<u64>,
    /// The first line's time.
    pub time: Option<i128>,
}

/// One process (`host:pid`) of the logs.
#[derive(Debug, Clone, Default)]
pub struct Rank {
    pub host: String,
    pub pid: u32,
    pub first_ns: Option<i128>,
    pub last_ns: Option<i128>,
    /// The log files' modification time, for a log with no timestamp.
    pub mtime_ns: Option<i128>,
    /// The `Using` line's NICs: (index, name, port, link), and the OOB address.
    pub nics: Vec<(u32, String, u8, String)>,
    pub oob: Option<(String, String)>,
    /// Communicators, once each (by their pointer).
    pub comms: Vec<Comm>,
    /// QPs by (device, QPN); errors whose QP no line names go under QPN None.
    pub qps: BTreeMap<(String, Option<u32>), Qp>,
    /// The device of each local GID the lines pair with a device name.
    pub gid_dev: HashMap<[u8; 16], String>,
    /// The QPN the thread's last `Got CQE with error` named, for the line after it.
    pending_cqe: HashMap<u32, u32>,
    pub slow_thr: Option<u64>,
    pub stall_thr: Option<u64>,
    /// RCCL's IB-CAST prefix was seen.
    pub ib_cast: bool,
}

impl Rank {
    fn qp(&mut self, dev: &str, qpn: Option<u32>) -> &mut Qp {
        self.qps.entry((dev.to_owned(), qpn)).or_default()
    }

    fn saw(&mut self, t: Option<i128>) {
        if let Some(t) = t {
            self.first_ns = Some(self.first_ns.map_or(t, |f| f.min(t)));
            self.last_ns = Some(self.last_ns.map_or(t, |l| l.max(t)));
        }
    }
}

/// The processes of every log read.
#[derive(Debug, Default)]
pub struct Scan {
    pub ranks: BTreeMap<(String, u32), Rank>,
    pub report: ImportReport,
}

impl Scan {
    /// Reads one log file, in blocks (a log of any size in bounded memory).
    pub fn read_file(&mut self, path: &Path) -> Result<(), String> {
        let mut f = std::fs::File::open(path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let mtime = f
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_nanos() as i128);
        let name = path.display().to_string();
        let re = candidates();
        let mut buf: Vec<u8> = Vec::with_capacity(BLOCK + 4096);
        let mut line_no = 0u64;
        let mut seen = BTreeSet::new();
        loop {
            let start = buf.len();
            buf.resize(start + BLOCK, 0);
            let n = read_full(&mut f, &mut buf[start..])
                .map_err(|e| format!("cannot read {name}: {e}"))?;
            buf.truncate(start + n);
            let eof = n == 0;
            // Whole lines only, unless the file ends without a newline.
            let end = if eof {
                buf.len()
            } else {
                match memchr::memrchr(b'\n', &buf) {
                    Some(i) => i + 1,
                    None => continue,
                }
            };
            self.scan_block(&re, &buf[..end], &name, &mut line_no, mtime, &mut seen);
            self.report.bytes += end as u64;
            buf.drain(..end);
            if eof {
                break;
            }
        }
        self.report.files += 1;
        Ok(())
    }

    /// Scans whole lines: counts them, and reads those the prefilter finds.
    fn scan_block(
        &mut self,
        re: &regex::bytes::Regex,
        block: &[u8],
        file: &str,
        line_no: &mut u64,
        mtime: Option<i128>,
        seen: &mut BTreeSet<(String, u32)>,
    ) {
        let lines = memchr::memchr_iter(b'\n', block).count() as u64
            + u64::from(!block.is_empty() && block[block.len() - 1] != b'\n');
        let empty = memchr::memmem::find_iter(block, b"\n\n").count() as u64
            + u64::from(block.first() == Some(&b'\n'));
        let mut read = 0u64;
        let mut at = 0usize;
        let mut counted_to = 0usize;
        let base = *line_no;
        let mut upto = base;
        while let Some(m) = re.find_at(block, at) {
            let s = memchr::memrchr(b'\n', &block[..m.start()]).map_or(0, |i| i + 1);
            let e =
                memchr::memchr(b'\n', &block[m.start()..]).map_or(block.len(), |i| m.start() + i);
            upto += memchr::memchr_iter(b'\n', &block[counted_to..s]).count() as u64;
            counted_to = s;
            at = e + 1;
            read += 1;
            let text = String::from_utf8_lossy(&block[s..e]);
            let text = text.trim_end_matches('\r');
            self.line(text, file, upto + 1, mtime, seen);
            if at >= block.len() {
                break;
            }
        }
        *line_no = base + lines;
        let nonempty = lines.saturating_sub(empty);
        self.report.lines += nonempty;
        self.report.skipped += nonempty.saturating_sub(read);
    }

    fn malformed(&mut self, file: &str, line_no: u64, kind: &'static str, why: &str) {
        *self.report.malformed.entry(kind).or_default() += 1;
        if self.report.malformed_lines.len() < NAMED_MALFORMED {
            self.report
                .malformed_lines
                .push(format!("{file}:{line_no}: {kind}: {why}"));
        }
    }

    /// Reads one candidate line.
    fn line(
        &mut self,
        text: &str,
        file: &str,
        line_no: u64,
        mtime: Option<i128>,
        seen: &mut BTreeSet<(String, u32)>,
    ) {
        let Some(p) = line::prefix(text) else {
            // The words of a known kind without NCCL's prefix: a line cut or run into another.
            if let Parsed::Known(e) = line::parse(text.trim_start()) {
                self.malformed(file, line_no, kind_of(&e), "no host:pid:tid [dev] prefix");
            } else {
                self.report.skipped += 1;
            }
            return;
        };
        match line::parse(p.msg) {
            Parsed::Unknown => self.report.skipped += 1,
            Parsed::Malformed { kind, why } => self.malformed(file, line_no, kind, &why),
            Parsed::Known(e) => {
                *self.report.known.entry(kind_of(&e)).or_default() += 1;
                let key = (p.host.to_owned(), p.pid);
                let r = self.ranks.entry(key.clone()).or_insert_with(|| Rank {
                    host: p.host.to_owned(),
                    pid: p.pid,
                    ..Default::default()
                });
                if seen.insert(key) {
                    r.mtime_ns = r.mtime_ns.max(mtime);
                }
                r.saw(p.time_ns);
                if p.msg.starts_with("NET/IB-CAST") {
                    r.ib_cast = true;
                }
                apply(r, &p, e);
            }
        }
    }

    /// Joins peers across processes: OOB addresses to hosts, and a QP without its peer's QPN
    /// to the one QP of the peer host that can be its other end.
    pub fn join(&mut self) {
        let mut oob: HashMap<String, String> = HashMap::new();
        for r in self.ranks.values() {
            if let Some((_, ip)) = &r.oob {
                oob.insert(ip.clone(), r.host.clone());
            }
        }
        for r in self.ranks.values() {
            for q in r.qps.values() {
                if let Some(a) = &q.peer_addr {
                    let ip = addr_ip(a);
                    if let Some(h) = oob.get(ip) {
                        self.report.oob_hosts.insert(a.clone(), h.clone());
                    }
                }
            }
        }
        pair_qps(&mut self.ranks, &oob);
        job_times(&mut self.ranks);
        for r in self.ranks.values() {
            for ((dev, qpn), q) in &r.qps {
                for (st, n) in &q.errors {
                    let peer = q.peer_addr.as_deref().unwrap_or("?");
                    let host = q
                        .peer_addr
                        .as_deref()
                        .and_then(|a| oob.get(addr_ip(a)))
                        .map_or(String::new(), |h| format!(" ({h})"));
                    self.report.errors.push(format!(
                        "{}:{} {dev} QPN {}: {} x{n} from peer {peer}{host}",
                        r.host,
                        r.pid,
                        qpn.map_or("?".into(), |q| q.to_string()),
                        rccl_telemetry_format::wc_status::status_name(*st)
                    ));
                }
                if qpn.is_some() {
                    if q.remote_qpn.is_some() {
                        self.report.qps_with_peer += 1;
                    } else {
                        self.report.qps_without_peer += 1;
                    }
                }
            }
        }
    }
}

const BLOCK: usize = 8 << 20;

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn candidates() -> regex::bytes::Regex {
    regex::bytes::Regex::new(CANDIDATES).expect("a literal alternation")
}

fn kind_of(e: &Event) -> &'static str {
    match e {
        Event::Using(_) => "using",
        Event::CommInit(_) => "comm_init",
        Event::CqeError(_) => "cqe_error",
        Event::Completion(_) => "completion_error",
        Event::Slow(_) => "wqe_slow",
        Event::Stall(_) => "wqe_stall",
        Event::Summary(_) => "wqe_summary",
    }
}

/// The address part of `10.0.0.2<43211>` (or `10.0.0.2:43211`).
fn addr_ip(a: &str) -> &str {
    let a = a.split('<').next().unwrap_or(a);
    match a.rsplit_once(':') {
        // An IPv4 address with a port; an IPv6 address keeps its colons.
        Some((ip, port)) if !ip.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => ip,
        _ => a,
    }
}

fn set<T>(slot: &mut Option<T>, v: Option<T>) {
    if v.is_some() {
        *slot = v;
    }
}

fn ends_into(r: &mut Rank, e: &line::QpEnds) -> (String, u32) {
    if let Some(g) = e.local_gid {
        r.gid_dev.entry(g).or_insert_with(|| e.dev.to_owned());
    }
    let q = r.qp(e.dev, Some(e.qpn));
    q.peer_addr.get_or_insert_with(|| e.peer.to_owned());
    set(&mut q.port, e.port);
    set(&mut q.lid, e.lid);
    set(&mut q.local_gid, e.local_gid);
    set(&mut q.remote_qpn, e.remote_qpn);
    set(&mut q.remote_gid, e.remote_gid);
    set(&mut q.remote_lid, e.remote_lid);
    (e.dev.to_owned(), e.qpn)
}

fn apply(r: &mut Rank, p: &Prefix, e: Event) {
    match e {
        Event::Using(u) => {
            r.nics = u
                .devs
                .iter()
                .map(|d| (d.index, d.name.to_owned(), d.port, d.link.to_owned()))
                .collect();
            r.oob = Some((u.oob_if.to_owned(), u.oob_ip.to_owned()));
        }
        Event::CommInit(c) => {
            if !r.comms.iter().any(|x| x.ptr == c.comm) {
                r.comms.push(Comm {
                    ptr: c.comm.to_owned(),
                    rank: c.rank,
                    nranks: c.nranks,
                    id: c.comm_id,
                    time: p.time_ns,
                });
            }
        }
        Event::CqeError(c) => {
            r.pending_cqe.insert(p.tid, c.qp_num);
        }
        Event::Completion(c) => {
            let qpn = c.qp_num.or_else(|| r.pending_cqe.remove(&p.tid));
            let dev = c
                .hca
                .map(str::to_owned)
                .or_else(|| c.local_gid.and_then(|g| r.gid_dev.get(&g).cloned()))
                .or_else(|| (r.nics.len() == 1).then(|| r.nics[0].1.clone()))
                .or_else(|| {
                    // The QPN alone: the device of the QP another line names with it.
                    let n = qpn?;
                    let devs: BTreeSet<&String> = r
                        .qps
                        .keys()
                        .filter(|k| k.1 == Some(n))
                        .map(|k| &k.0)
                        .collect();
                    (devs.len() == 1).then(|| (*devs.iter().next().unwrap()).clone())
                })
                .unwrap_or_else(|| UNKNOWN_DEV.to_owned());
            if let Some(g) = c.local_gid {
                r.gid_dev.entry(g).or_insert_with(|| dev.clone());
            }
            let q = r.qp(&dev, qpn);
            q.peer_addr.get_or_insert_with(|| c.peer.to_owned());
            set(&mut q.local_gid, c.local_gid);
            set(&mut q.remote_gid, c.remote_gid);
            *q.errors.entry(c.status).or_default() += 1;
            if q.first_error.is_none() {
                q.first_error = Some((c.status, c.vendor_err, c.opcode, p.time_ns));
            }
        }
        Event::Slow(l) => {
            r.slow_thr = Some(l.thr_ns);
            let (dev, qpn) = ends_into(r, &l.ends);
            let q = r.qp(&dev, Some(qpn));
            q.slow_lines += 1;
            q.max_delta = q.max_delta.max(l.ns);
            set(&mut q.last_slow, l.figures);
            // A completion: a stall in progress ended.
            q.stalled = None;
            q.last_stall_age = None;
        }
        Event::Stall(l) => {
            r.stall_thr = Some(l.thr_ns);
            let (dev, qpn) = ends_into(r, &l.ends);
            let q = r.qp(&dev, Some(qpn));
            let start = p.time_ns.map(|t| t - l.ns as i128);
            // A new episode unless the same WR is still stuck (its age only grows).
            let same = q.last_stall_age.is_some_and(|a| l.ns >= a) && q.stalled.is_some();
            if !same {
                q.stalls += 1;
                q.stalled = Some((start, l.inflight.unwrap_or(0)));
            } else if let Some(s) = &mut q.stalled {
                s.1 = l.inflight.unwrap_or(s.1);
            }
            q.last_stall_age = Some(l.ns);
            let episode_start = q.stalled.and_then(|s| s.0).or(start);
            if q.longest_stall.is_none_or(|(ns, _)| l.ns > ns) {
                q.longest_stall = Some((l.ns, episode_start));
            }
        }
        Event::Summary(s) => {
            r.slow_thr = Some(s.thr_ns);
            let q = r.qp(s.dev, Some(s.qpn));
            q.send = Some(s.send);
            q.peer_addr.get_or_insert_with(|| s.peer.to_owned());
            set(&mut q.port, s.port);
            q.summary = Some((s.n, s.slow, s.figures));
        }
    }
}

/// Widens each process's time span to its job's: NCCL stamps only WARN lines by default, so
/// most processes' lines carry no time, and a rank's file spans the times of every line of the
/// processes it shares a communicator with (else of every line read).
fn job_times(ranks: &mut BTreeMap<(String, u32), Rank>) {
    let mut by_comm: HashMap<u64, (i128, i128)> = HashMap::new();
    let mut all: Option<(i128, i128)> = None;
    let widen = |s: &mut Option<(i128, i128)>, a: i128, b: i128| {
        *s = Some(s.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
    };
    for r in ranks.values() {
        let (Some(a), Some(b)) = (r.first_ns, r.last_ns) else {
            continue;
        };
        widen(&mut all, a, b);
        for c in &r.comms {
            if let Some(id) = c.id {
                let mut e = by_comm.get(&id).copied();
                widen(&mut e, a, b);
                by_comm.insert(id, e.unwrap_or((a, b)));
            }
        }
    }
    for r in ranks.values_mut() {
        let mut span = r.first_ns.zip(r.last_ns);
        let mut found = false;
        for c in &r.comms {
            if let Some(&(a, b)) = c.id.and_then(|id| by_comm.get(&id)) {
                widen(&mut span, a, b);
                found = true;
            }
        }
        if !found && span.is_none() {
            span = all;
        }
        if let Some((a, b)) = span {
            r.first_ns = Some(a);
            r.last_ns = Some(b);
        }
    }
}

/// The device name of errors whose device no line names.
pub const UNKNOWN_DEV: &str = "unknown";

/// Sets each QP's peer QPN (and GID or LID) that the logs do not print but imply: the one QP
/// of the host that owns the peer's OOB address whose own peer is this QP's host, on the
/// device the peer GID names when it is known, naming back this QP's GID when it knows one,
/// and of the other direction when both say theirs. Ambiguous QPs stay without a peer.
fn pair_qps(ranks: &mut BTreeMap<(String, u32), Rank>, oob: &HashMap<String, String>) {
    // Every QP: (rank key, qp key, host, peer host, device gid or lid).
    struct Q {
        rank: (String, u32),
        key: (String, Option<u32>),
        host: String,
        peer_host: Option<String>,
        gid: Option<[u8; 16]>,
        lid: Option<u16>,
        remote_gid: Option<[u8; 16]>,
        remote_qpn: Option<u32>,
        send: Option<bool>,
    }
    let mut all = Vec::new();
    for (rk, r) in ranks.iter() {
        let dev_gid: HashMap<&String, [u8; 16]> = r.gid_dev.iter().map(|(g, d)| (d, *g)).collect();
        for (k, q) in &r.qps {
            if k.1.is_none() {
                continue;
            }
            all.push(Q {
                rank: rk.clone(),
                key: k.clone(),
                host: r.host.clone(),
                peer_host: q
                    .peer_addr
                    .as_deref()
                    .and_then(|a| oob.get(addr_ip(a)).cloned()),
                gid: q.local_gid.or_else(|| dev_gid.get(&k.0).copied()),
                lid: q.lid.filter(|l| *l > 0),
                remote_gid: q.remote_gid,
                remote_qpn: q.remote_qpn,
                send: q.send,
            });
        }
    }
    // By (host, peer host).
    let mut by: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (i, q) in all.iter().enumerate() {
        if let Some(ph) = &q.peer_host {
            by.entry((q.host.as_str(), ph.as_str()))
                .or_default()
                .push(i);
        }
    }
    let mut found: Vec<(usize, usize)> = Vec::new();
    for (i, q) in all.iter().enumerate() {
        if q.remote_qpn.is_some() {
            continue;
        }
        let Some(ph) = &q.peer_host else { continue };
        let Some(cands) = by.get(&(ph.as_str(), q.host.as_str())) else {
            continue;
        };
        let fits: Vec<usize> = cands
            .iter()
            .copied()
            .filter(|&j| {
                let t = &all[j];
                let gid_ok = match (q.remote_gid, t.gid) {
                    (Some(a), Some(b)) => a == b,
                    _ => true,
                };
                let back_ok = match (t.remote_gid, q.gid) {
                    (Some(a), Some(b)) => a == b,
                    _ => true,
                };
                let qpn_ok = t.remote_qpn.is_none_or(|n| Some(n) == q.key.1);
                let dir_ok = match (q.send, t.send) {
                    (Some(a), Some(b)) => a != b,
                    _ => true,
                };
                gid_ok && back_ok && qpn_ok && dir_ok && (t.gid.is_some() || t.lid.is_some())
            })
            .collect();
        if let [j] = fits[..] {
            found.push((i, j));
        }
    }
    for (i, j) in found {
        let (t_qpn, t_gid, t_lid) = (all[j].key.1, all[j].gid, all[j].lid);
        let q = &all[i];
        if let Some(qp) = ranks.get_mut(&q.rank).and_then(|r| r.qps.get_mut(&q.key)) {
            qp.remote_qpn = t_qpn;
            set(&mut qp.remote_gid, t_gid);
            set(&mut qp.remote_lid, t_lid);
        }
    }
}

/// Expands the inputs: files as named, directories to the regular files in them (sorted).
pub fn expand(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut v: Vec<PathBuf> = walkdir::WalkDir::new(p)
                .into_iter()
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_file())
                .map(|e| e.into_path())
                .collect();
            v.sort();
            out.extend(v);
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(format!("{}: no such file or directory", p.display()));
        }
    }
    Ok(out)
}

/// Reads the logs and writes one rank file per process into `out`.
pub fn import(inputs: &[PathBuf], out: &Path) -> Result<ImportReport, String> {
    let files = expand(inputs)?;
    let mut scan = Scan::default();
    for f in &files {
        scan.read_file(f)?;
    }
    scan.join();
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let Scan { ranks, mut report } = scan;
    for r in ranks.values() {
        let path = build::write(r, out)?;
        report.written.push(path);
    }
    Ok(report)
}

/// The report as text: what was read, skipped and malformed, the peers joined by their OOB
/// address, the error completions, and the files written.
pub fn render(r: &ImportReport) -> String {
    let mut s = String::new();
    let known: u64 = r.known.values().sum();
    let bad: u64 = r.malformed.values().sum();
    s.push_str(&format!(
        "read {} log file{} ({} bytes, {} lines): {known} lines read, {} skipped (no pattern), {bad} malformed\n",
        r.files,
        if r.files == 1 { "" } else { "s" },
        crate::stats::fmt_count(r.bytes),
        crate::stats::fmt_count(r.lines),
        r.skipped
    ));
    if known > 0 {
        let by: Vec<String> = r.known.iter().map(|(k, n)| format!("{k} {n}")).collect();
        s.push_str(&format!("  by kind: {}\n", by.join(", ")));
    }
    if bad > 0 {
        let by: Vec<String> = r
            .malformed
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        s.push_str(&format!("  malformed: {}\n", by.join(", ")));
        for l in &r.malformed_lines {
            s.push_str(&format!("    {l}\n"));
        }
        if (bad as usize) > r.malformed_lines.len() {
            s.push_str(&format!(
                "    ({} more not named)\n",
                bad as usize - r.malformed_lines.len()
            ));
        }
    }
    if !r.oob_hosts.is_empty() {
        let hosts: BTreeSet<&String> = r.oob_hosts.values().collect();
        s.push_str(&format!(
            "peers named by OOB address: {} addresses on {} hosts\n",
            r.oob_hosts.len(),
            hosts.len()
        ));
    }
    for e in &r.errors {
        s.push_str(&format!("error completion: {e}\n"));
    }
    s.push_str(&format!(
        "QPs: {} with their peer's QPN (joinable into links), {} without\n",
        r.qps_with_peer, r.qps_without_peer
    ));
    s.push_str(&format!(
        "wrote {} rank file{}{}\n",
        r.written.len(),
        if r.written.len() == 1 { "" } else { "s" },
        r.written
            .first()
            .and_then(|p| p.parent())
            .map_or(String::new(), |d| format!(" to {}", d.display()))
    ));
    s
}

/// True when a run holds a file `import` wrote.
pub fn is_imported(run: &crate::load::Run) -> bool {
    run.files
        .iter()
        .any(|l| l.file.source.as_deref() == Some("nccl_log"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oob_addresses() {
        assert_eq!(addr_ip("10.0.0.2<43211>"), "10.0.0.2");
        assert_eq!(addr_ip("10.0.0.2:43211"), "10.0.0.2");
        assert_eq!(addr_ip("fe80::1<43211>"), "fe80::1");
    }

    fn scan(text: &str) -> Scan {
        let mut s = Scan::default();
        let mut seen = BTreeSet::new();
        let mut n = 0;
        s.scan_block(
            &candidates(),
            text.as_bytes(),
            "t.log",
            &mut n,
            None,
            &mut seen,
        );
        s
    }

    #[test]
    fn counts_skipped_and_malformed_lines_with_their_numbers() {
        let s = scan(
            "h:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n\
             \n\
             h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>\n\
             h:1:1 [0] NCCL INFO NET/IB: WQE latency summary [send peer=10.0.0.2<1> dev=mlx5_0 qpn=7 port=1]: n=oops\n\
             h:1:1 [0] NCCL INFO NET/IB : No device found.\n",
        );
        assert_eq!(s.report.lines, 4);
        assert_eq!(s.report.known.get("using"), Some(&1));
        assert_eq!(s.report.skipped, 2);
        assert_eq!(s.report.malformed.get("wqe_summary"), Some(&1));
        assert!(
            s.report.malformed_lines[0].starts_with("t.log:4: wqe_summary: "),
            "{:?}",
            s.report.malformed_lines
        );
    }

    #[test]
    fn the_cqe_line_names_the_qp_of_the_completion_after_it() {
        let s = scan(
            "h:1:9 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>\n\
             h:1:9 [0] p2p.cc:854 (ncclIbTest) NCCL WARN NET/IB: Got CQE with error (devIndex=0, req=0x1, comm=0x2 (send), wr_id=3, qp_num=4711)\n\
             h:1:9 [0] p2p.cc:688 NCCL WARN NET/IB: Got completion from peer 10.0.0.2<5> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129  localGid ::ffff:10.1.0.1 remoteGids::ffff:10.1.0.2 hca mlx5_1\n",
        );
        let r = &s.ranks[&("h".to_owned(), 1)];
        let q = &r.qps[&("mlx5_1".to_owned(), Some(4711))];
        assert_eq!(q.errors.get(&12), Some(&1));
        assert_eq!(q.first_error.unwrap().1, 129);
    }
}
