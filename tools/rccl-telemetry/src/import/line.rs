//! One line of an NCCL or RCCL debug log (`NCCL_DEBUG=INFO`): its prefix and, for the lines
//! `import` reads, what it says.
//!
//! The prefix is NCCL's `src/debug.cc`: an optional timestamp (`NCCL_DEBUG_TIMESTAMP_FORMAT`,
//! by default `[%F %T] `, on WARN lines by default), then `host:pid:tid `, then `[cudaDev] `,
//! then `NCCL INFO ` or, on a WARN, `file:line (func) NCCL WARN `. The messages are those of the
//! IB transport (`NET/IB:`, RCCL's `NET/IB-CAST:`) and of communicator creation:
//!
//! - `NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>`: the host's
//!   NICs and its out-of-band address;
//! - `ncclCommInitRank comm 0x... rank 3 nranks 8 cudaDev 3 nvmlDev 3 busId 4d000 commId
//!   0x... - Init COMPLETE`: a communicator and the process's rank in it;
//! - the error completion, in three forms: `Got completion from peer <ip><port> with
//!   status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129 [qp_num=N]
//!   localGid <gid> remoteGids<gid> hca mlx5_1` (NCCL 2.28 on), `... with status=12 opcode=1
//!   len=0 vendor err 129 (Send) localGid ...` (NCCL 2.20 to 2.27, RCCL), `... with error 12,
//!   opcode 1, len 0, vendor err 129 (Recv) localGid ...` (older);
//! - `Got CQE with error (devIndex=0, req=..., comm=... (send), wr_id=..., qp_num=N)`, which
//!   names the QP of the error completion line its thread prints next;
//! - the WQE latency monitor's three lines (`net_ib/wqe_lat_mon.cc`): `WQE slow:`, `WQE stall
//!   (no CQE):` and `WQE latency summary [...]`.

use std::net::Ipv6Addr;

/// A line's prefix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prefix<'a> {
    /// The leading `[date time]`, as ns since the epoch (the log's local time read as UTC:
    /// NCCL prints no zone); None when the line has none.
    pub time_ns: Option<i128>,
    pub host: &'a str,
    pub pid: u32,
    pub tid: u32,
    /// The text after `NCCL INFO ` / `NCCL WARN `.
    pub msg: &'a str,
    pub warn: bool,
}

/// Splits a line into its prefix and message; None when it has no NCCL prefix.
pub fn prefix(line: &str) -> Option<Prefix<'_>> {
    let mut rest = line;
    let mut time_ns = None;
    if let Some(r) = rest.strip_prefix('[') {
        let end = r.find("] ")?;
        time_ns = parse_time(&r[..end]);
        rest = &r[end + 2..];
    }
    let sp = rest.find(' ')?;
    let id = &rest[..sp];
    let mut it = id.rsplitn(3, ':');
    let tid = it.next()?.parse().ok()?;
    let pid = it.next()?.parse().ok()?;
    // NCCL writes the host name with every other character replaced by '-'.
    let host = it.next().filter(|h| {
        !h.is_empty()
            && h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    })?;
    rest = &rest[sp + 1..];
    // "[cudaDev] " then the level's words.
    let r = rest.strip_prefix('[')?;
    let close = r.find("] ")?;
    r[..close].parse::<i64>().ok()?;
    let r = &r[close + 2..];
    let (msg, warn) = if let Some(m) = r.strip_prefix("NCCL INFO ") {
        (m, false)
    } else {
        let at = r.find(" NCCL WARN ")?;
        (&r[at + " NCCL WARN ".len()..], true)
    };
    Some(Prefix {
        time_ns,
        host,
        pid,
        tid,
        msg,
        warn,
    })
}

/// `2026-12-07 17:00:01` or with a fraction (`.123456`), as ns since the epoch.
pub fn parse_time(s: &str) -> Option<i128> {
    let s = s.trim();
    if s.len() < 19 || s.as_bytes()[10] != b' ' {
        return None;
    }
    let (date, time) = (&s[..10], &s[11..]);
    let (hms, frac) = match time.split_once(['.', ',']) {
        Some((a, b)) => (a, b),
        None => (time, ""),
    };
    if hms.len() != 8 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut ns = format!("{frac:0<9}");
    ns.truncate(9);
    rccl_telemetry_format::read::parse_timestamp_ns(&format!("{date}T{hms}.{ns}Z"))
}

/// What a known line says.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    Using(Using<'a>),
    CommInit(CommInit<'a>),
    CqeError(CqeError),
    Completion(Completion<'a>),
    Slow(QpLine<'a>),
    Stall(QpLine<'a>),
    Summary(Summary<'a>),
}

/// The kinds of line `import` reads (the names its counts and messages use).
pub const KINDS: [&str; 7] = [
    "using",
    "comm_init",
    "cqe_error",
    "completion_error",
    "wqe_slow",
    "wqe_stall",
    "wqe_summary",
];

/// A message of a known kind, or why it could not be read.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed<'a> {
    Known(Event<'a>),
    /// The line is of the kind (its words match) but a field is missing or unreadable.
    Malformed {
        kind: &'static str,
        why: String,
    },
    Unknown,
}

/// One NIC of a `Using` line.
#[derive(Debug, Clone, PartialEq)]
pub struct UsingDev<'a> {
    pub index: u32,
    pub name: &'a str,
    pub port: u8,
    /// "RoCE" or "IB".
    pub link: &'a str,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Using<'a> {
    pub devs: Vec<UsingDev<'a>>,
    pub oob_if: &'a str,
    pub oob_ip: &'a str,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CommInit<'a> {
    pub comm: &'a str,
    pub rank: u32,
    pub nranks: u32,
    /// commId (the commHash RCCL prints); None on the split form, which prints none.
    pub comm_id: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CqeError {
    pub qp_num: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Completion<'a> {
    /// The peer's address as printed (`10.0.0.2<43211>`).
    pub peer: &'a str,
    pub status: i32,
    pub opcode: Option<&'static str>,
    pub vendor_err: u32,
    pub qp_num: Option<u32>,
    pub local_gid: Option<[u8; 16]>,
    pub remote_gid: Option<[u8; 16]>,
    pub hca: Option<&'a str>,
}

/// The local and remote ends of a QP as the monitor's slow and stall lines print them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QpEnds<'a> {
    pub peer: &'a str,
    pub qpn: u32,
    pub dev: &'a str,
    pub port: Option<u8>,
    pub lid: Option<u16>,
    pub local_gid: Option<[u8; 16]>,
    pub remote_qpn: Option<u32>,
    pub remote_port: Option<u8>,
    pub remote_lid: Option<u16>,
    pub remote_gid: Option<[u8; 16]>,
}

/// The monitor's running figures, as the slow line and the summary print them (ns).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Figures {
    pub mean: f64,
    pub stddev: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// A `WQE slow` or `WQE stall (no CQE)` line.
#[derive(Debug, Clone, PartialEq)]
pub struct QpLine<'a> {
    pub ends: QpEnds<'a>,
    /// The threshold (`thr=`, `stall_thr=`) in ns.
    pub thr_ns: u64,
    /// Slow: the completion's latency (`delta=`); stall: the tracked WR's age (`age=`).
    pub ns: u64,
    /// Slow: the QP's figures so far and `count=`.
    pub figures: Option<(Figures, u64)>,
    /// Stall: `inflight=`.
    pub inflight: Option<u64>,
}

/// A `WQE latency summary` line.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary<'a> {
    pub send: bool,
    pub peer: &'a str,
    pub dev: &'a str,
    pub qpn: u32,
    pub port: Option<u8>,
    pub n: u64,
    pub slow: u64,
    pub thr_ns: u64,
    pub figures: Figures,
}

/// Reads a message (the text after `NCCL INFO `/`NCCL WARN `).
pub fn parse(msg: &str) -> Parsed<'_> {
    let Some(body) = net_ib_body(msg) else {
        return comm_init(msg);
    };
    let res = if let Some(r) = body.strip_prefix("Using") {
        using(r).map(Event::Using).map_err(|w| ("using", w))
    } else if let Some(r) = body.strip_prefix("WQE slow:") {
        qp_line(r, false)
            .map(Event::Slow)
            .map_err(|w| ("wqe_slow", w))
    } else if let Some(r) = body.strip_prefix("WQE stall (no CQE):") {
        qp_line(r, true)
            .map(Event::Stall)
            .map_err(|w| ("wqe_stall", w))
    } else if let Some(r) = body.strip_prefix("WQE latency summary") {
        summary(r)
            .map(Event::Summary)
            .map_err(|w| ("wqe_summary", w))
    } else if let Some(r) = body.strip_prefix("Got completion from peer ") {
        completion(r)
            .map(Event::Completion)
            .map_err(|w| ("completion_error", w))
    } else if let Some(i) = body.find("Got CQE with error") {
        cqe(&body[i..])
            .map(Event::CqeError)
            .map_err(|w| ("cqe_error", w))
    } else {
        return Parsed::Unknown;
    };
    match res {
        Ok(e) => Parsed::Known(e),
        Err((kind, why)) => Parsed::Malformed { kind, why },
    }
}

/// The text after `NET/IB:`, `NET/IB :`, `NET/IB-CAST:` or `NET/IB-CAST :` (and after a
/// `func: ` RCCL puts before some messages); None for other messages.
fn net_ib_body(msg: &str) -> Option<&str> {
    let r = msg.strip_prefix("NET/IB")?;
    let r = r.strip_prefix("-CAST").unwrap_or(r);
    let r = r.strip_prefix(" :").or_else(|| r.strip_prefix(':'))?;
    let r = r.trim_start();
    // "ncclIbTest: Got CQE ..." and similar: a function name before the words.
    Some(r)
}

type R<T> = Result<T, String>;

fn num<T: std::str::FromStr>(v: &str, what: &str) -> R<T> {
    v.parse()
        .map_err(|_| format!("{what}={v:?} is not a number"))
}

/// The value of ` key=` in `s` (up to a space, ',', ')' or ']'); None when absent.
fn kv<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(i) = s[from..].find(key) {
        let at = from + i;
        let before_ok = at == 0 || matches!(s.as_bytes()[at - 1], b' ' | b'(' | b'[' | b',');
        let after = at + key.len();
        if before_ok && s.as_bytes().get(after) == Some(&b'=') {
            let v = &s[after + 1..];
            let end = v.find([' ', ',', ')', ']']).unwrap_or(v.len());
            return Some(&v[..end]);
        }
        from = after;
    }
    None
}

fn need<'a>(s: &'a str, key: &str) -> R<&'a str> {
    kv(s, key).ok_or_else(|| format!("no {key}="))
}

/// A number of ns, with or without a unit (`50000`, `50000ns`, `50us`, `1.5ms`, `2s`).
pub fn ns_value(v: &str) -> Option<f64> {
    let (n, mult) = if let Some(n) = v.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1e9)
    } else {
        (v, 1.0)
    };
    let x: f64 = n.parse().ok()?;
    (x.is_finite() && x >= 0.0).then_some(x * mult)
}

fn need_ns(s: &str, key: &str) -> R<f64> {
    let v = need(s, key)?;
    ns_value(v).ok_or_else(|| format!("{key}={v:?} is not a latency"))
}

/// A GID as inet_ntop prints it (`::ffff:10.0.0.1`, `fe80::...`).
pub fn gid(v: &str) -> Option<[u8; 16]> {
    v.parse::<Ipv6Addr>().ok().map(|a| a.octets())
}

fn using(r: &str) -> R<Using<'_>> {
    let (devs_part, oob) = r
        .split_once("; OOB ")
        .ok_or_else(|| "no \"; OOB \"".to_owned())?;
    let mut devs = Vec::new();
    for t in devs_part.split_whitespace() {
        if t == "[RO]" {
            continue;
        }
        let Some(t) = t.strip_prefix('[') else {
            return Err(format!("{t:?} is not [index]name:port/link"));
        };
        let (index, rest) = t
            .split_once(']')
            .ok_or_else(|| format!("{t:?} has no ']'"))?;
        let (nameport, link) = rest
            .split_once('/')
            .ok_or_else(|| format!("{rest:?} has no /link"))?;
        let mut parts = nameport.split(':');
        let name = parts.next().filter(|n| !n.is_empty()).ok_or("no name")?;
        let port = num(parts.next().ok_or("no port")?, "port")?;
        devs.push(UsingDev {
            index: num(index, "index")?,
            name,
            port,
            link,
        });
    }
    if devs.is_empty() {
        return Err("no device".into());
    }
    let (oob_if, oob_addr) = oob
        .trim()
        .split_once(':')
        .ok_or_else(|| format!("OOB {oob:?} is not if:address"))?;
    let oob_ip = oob_addr.split('<').next().unwrap_or(oob_addr);
    Ok(Using {
        devs,
        oob_if,
        oob_ip,
    })
}

/// `<func> comm 0x... rank R nranks N ... commId 0x... - Init ...`.
fn comm_init(msg: &str) -> Parsed<'_> {
    let Some(at) = msg.find(" comm 0x") else {
        return Parsed::Unknown;
    };
    if !msg.contains(" nranks ") || !msg.contains(" - Init ") {
        return Parsed::Unknown;
    }
    let words: Vec<&str> = msg[at..].split_whitespace().collect();
    let after = |k: &str| {
        words
            .iter()
            .position(|w| *w == k)
            .and_then(|i| words.get(i + 1))
    };
    let r = (|| -> R<CommInit<'_>> {
        let comm = *after("comm").ok_or("no comm")?;
        let rank = num(after("rank").ok_or("no rank")?, "rank")?;
        let nranks = num(after("nranks").ok_or("no nranks")?, "nranks")?;
        let comm_id = match after("commId") {
            Some(v) => Some(
                u64::from_str_radix(v.trim_start_matches("0x"), 16)
                    .map_err(|_| format!("commId {v:?} is not hex"))?,
            ),
            None => None,
        };
        if rank >= nranks {
            return Err(format!("rank {rank} of {nranks}"));
        }
        Ok(CommInit {
            comm,
            rank,
            nranks,
            comm_id,
        })
    })();
    match r {
        Ok(c) => Parsed::Known(Event::CommInit(c)),
        Err(why) => Parsed::Malformed {
            kind: "comm_init",
            why,
        },
    }
}

fn cqe(r: &str) -> R<CqeError> {
    Ok(CqeError {
        qp_num: num(need(r, "qp_num")?, "qp_num")?,
    })
}

/// `IBV_WC_RDMA_WRITE(1)` or `1`: the opcode's name without `IBV_WC_`.
fn opcode_name(v: &str) -> Option<&'static str> {
    let code: i64 = match v.split_once('(') {
        Some((_, c)) => c.trim_end_matches(')').parse().ok()?,
        None => v.trim_end_matches(',').parse().ok()?,
    };
    // enum ibv_wc_opcode.
    Some(match code {
        0 => "SEND",
        1 => "RDMA_WRITE",
        2 => "RDMA_READ",
        3 => "COMP_SWAP",
        4 => "FETCH_ADD",
        5 => "BIND_MW",
        6 => "LOCAL_INV",
        7 => "TSO",
        128 => "RECV",
        129 => "RECV_RDMA_WITH_IMM",
        _ => return None,
    })
}

fn completion(r: &str) -> R<Completion<'_>> {
    let (peer, rest) = r
        .split_once(" with ")
        .ok_or_else(|| "no \" with \"".to_owned())?;
    let status_v = if let Some(v) = kv(rest, "status") {
        v.to_owned()
    } else if let Some(e) = rest.strip_prefix("error ") {
        e.split(',').next().unwrap_or("").trim().to_owned()
    } else {
        return Err("no status= or error".into());
    };
    let status: i32 = match status_v.split_once('(') {
        Some((_, c)) => num(c.trim_end_matches(')'), "status")?,
        None => num(&status_v, "status")?,
    };
    let opcode = match kv(rest, "opcode") {
        Some(v) => opcode_name(v),
        None => rest
            .split_once("opcode ")
            .and_then(|(_, v)| opcode_name(v.split(',').next().unwrap_or(""))),
    };
    let vendor_err = if let Some(v) = kv(rest, "vendor_err") {
        num(v, "vendor_err")?
    } else if let Some((_, v)) = rest.split_once("vendor err ") {
        num(v.split([' ', ',']).next().unwrap_or(""), "vendor err")?
    } else {
        return Err("no vendor_err".into());
    };
    let qp_num = kv(rest, "qp_num").map(|v| num(v, "qp_num")).transpose()?;
    let word_after = |key: &str| -> Option<&str> {
        let (_, v) = rest.split_once(key)?;
        v.split_whitespace().next()
    };
    let gid_at = |key: &str| -> R<Option<[u8; 16]>> {
        match word_after(key) {
            Some(v) => gid(v)
                .map(Some)
                .ok_or_else(|| format!("{} {v:?} is not a GID", key.trim())),
            None => Ok(None),
        }
    };
    Ok(Completion {
        peer,
        status,
        opcode,
        vendor_err,
        qp_num,
        local_gid: gid_at(" localGid ")?,
        remote_gid: gid_at(" remoteGids")?,
        hca: word_after(" hca "),
    })
}

/// The ` | `-separated sections of a monitor line: (peer, local, remote, figures, ...).
fn ends(r: &str) -> R<(QpEnds<'_>, Vec<&str>)> {
    let secs: Vec<&str> = r.split(" | ").map(str::trim).collect();
    let peer = need(secs[0], "peer")?;
    let local = secs
        .iter()
        .find_map(|s| s.strip_prefix("local:"))
        .ok_or("no local:")?;
    let remote = secs
        .iter()
        .find_map(|s| s.strip_prefix("remote:"))
        .ok_or("no remote:")?;
    let opt =
        |s: &str, k: &str| -> R<Option<u64>> { kv(s, k).map(|v| num::<u64>(v, k)).transpose() };
    let gid_of = |s: &str, k: &str| -> R<Option<[u8; 16]>> {
        match kv(s, k) {
            Some(v) => gid(v)
                .map(Some)
                .ok_or_else(|| format!("{k}={v:?} is not a GID")),
            None => Ok(None),
        }
    };
    let small = |v: Option<u64>, k: &str| -> R<Option<u16>> {
        v.map(|x| u16::try_from(x).map_err(|_| format!("{k}={x} is out of range")))
            .transpose()
    };
    let e = QpEnds {
        peer,
        qpn: num(need(local, "qpn")?, "qpn")?,
        dev: need(local, "dev")?,
        port: small(opt(local, "port")?, "port")?.and_then(|p| u8::try_from(p).ok()),
        lid: small(opt(local, "lid")?, "lid")?,
        local_gid: gid_of(local, "localGid")?,
        remote_qpn: opt(remote, "qpn")?
            .map(|q| u32::try_from(q).map_err(|_| format!("qpn={q} is out of range")))
            .transpose()?,
        remote_port: small(opt(remote, "port")?, "port")?.and_then(|p| u8::try_from(p).ok()),
        remote_lid: small(opt(remote, "lid")?, "lid")?,
        remote_gid: gid_of(remote, "remoteGid")?,
    };
    Ok((e, secs))
}

fn figures(s: &str, std_key: &str) -> R<Figures> {
    Ok(Figures {
        mean: need_ns(s, "mean")?,
        stddev: need_ns(s, std_key)?,
        p50: need_ns(s, "p50")?,
        p90: need_ns(s, "p90")?,
        p99: need_ns(s, "p99")?,
        p999: need_ns(s, "p99.9")?,
        max: need_ns(s, "max")?,
    })
}

fn qp_line(r: &str, stall: bool) -> R<QpLine<'_>> {
    let (ends, secs) = ends(r)?;
    let all = secs.join(" ");
    if stall {
        Ok(QpLine {
            ends,
            thr_ns: need_ns(&all, "stall_thr")? as u64,
            ns: need_ns(&all, "age")? as u64,
            figures: None,
            inflight: Some(num(need(&all, "inflight")?, "inflight")?),
        })
    } else {
        Ok(QpLine {
            ends,
            thr_ns: need_ns(&all, "thr")? as u64,
            ns: need_ns(&all, "delta")? as u64,
            figures: Some((
                figures(&all, "stddev")?,
                num(need(&all, "count")?, "count")?,
            )),
            inflight: None,
        })
    }
}

fn summary(r: &str) -> R<Summary<'_>> {
    let r = r.trim_start();
    let r = r.strip_prefix('[').ok_or("no [")?;
    let (head, tail) = r.split_once("]:").ok_or("no ]:")?;
    let send = if head.starts_with("send") {
        true
    } else if head.starts_with("recv") {
        false
    } else {
        return Err(format!(
            "{:?} is neither send nor recv",
            head.split(' ').next()
        ));
    };
    Ok(Summary {
        send,
        peer: need(head, "peer")?,
        dev: need(head, "dev")?,
        qpn: num(need(head, "qpn")?, "qpn")?,
        port: kv(head, "port").map(|v| num(v, "port")).transpose()?,
        n: num(need(tail, "n")?, "n")?,
        slow: num(need(tail, "slow")?, "slow")?,
        thr_ns: need_ns(tail, "thr")? as u64,
        figures: figures(tail, "std")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_with_and_without_time() {
        let p = prefix(
            "node-a:1234:1240 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>",
        )
        .unwrap();
        assert_eq!(
            (p.host, p.pid, p.tid, p.warn, p.time_ns),
            ("node-a", 1234, 1240, false, None)
        );
        assert!(p.msg.starts_with("NET/IB : Using"));
        let p = prefix("[2026-12-07 17:00:01] node-a:1234:1240 [0] p2p.cc:688 (ncclIbTest) NCCL WARN NET/IB: Got CQE with error (qp_num=7)").unwrap();
        assert!(p.warn);
        assert_eq!(p.time_ns, parse_time("2026-12-07 17:00:01"));
        assert!(p.time_ns.is_some());
        assert_eq!(p.msg, "NET/IB: Got CQE with error (qp_num=7)");
        assert_eq!(prefix("NCCL version 2.28.3+cuda12.8"), None);
        assert_eq!(prefix("node-a:x:1 [0] NCCL INFO hi"), None);
        assert_eq!(
            parse_time("2026-12-07 17:00:01.5").unwrap()
                - parse_time("2026-12-07 17:00:01").unwrap(),
            500_000_000
        );
    }

    #[test]
    fn using_line() {
        let Parsed::Known(Event::Using(u)) =
            parse("NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>")
        else {
            panic!()
        };
        assert_eq!(u.devs.len(), 2);
        assert_eq!(
            (u.devs[1].name, u.devs[1].port, u.devs[1].link),
            ("mlx5_1", 1, "IB")
        );
        assert_eq!((u.oob_if, u.oob_ip), ("eth0", "10.0.0.1"));
        assert!(matches!(
            parse("NET/IB : Using [0]mlx5_0:1/RoCE"),
            Parsed::Malformed { kind: "using", .. }
        ));
    }

    #[test]
    fn comm_init_line() {
        let Parsed::Known(Event::CommInit(c)) = parse("ncclCommInitRank comm 0x55d0c0a0 rank 3 nranks 8 cudaDev 3 nvmlDev 3 busId 4d000 commId 0xa1b2c3 - Init COMPLETE") else {
            panic!()
        };
        assert_eq!((c.rank, c.nranks, c.comm_id), (3, 8, Some(0xa1b2c3)));
        assert!(matches!(
            parse("ncclCommInitRank comm 0x55 rank 9 nranks 8 commId 0x1 - Init START"),
            Parsed::Malformed {
                kind: "comm_init",
                ..
            }
        ));
        assert_eq!(
            parse("comm 0x55 rank 3 nRanks 8 nNodes 1 localRanks 8"),
            Parsed::Unknown
        );
    }

    #[test]
    fn the_three_completion_forms() {
        let new = "NET/IB: Got completion from peer 10.0.0.2<43211> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129 qp_num=4711  localGid ::ffff:10.1.0.1 remoteGids::ffff:10.1.0.2 hca mlx5_1";
        let Parsed::Known(Event::Completion(c)) = parse(new) else {
            panic!()
        };
        assert_eq!(
            (c.peer, c.status, c.opcode, c.vendor_err, c.qp_num, c.hca),
            (
                "10.0.0.2<43211>",
                12,
                Some("RDMA_WRITE"),
                129,
                Some(4711),
                Some("mlx5_1")
            )
        );
        assert_eq!(c.remote_gid, gid("::ffff:10.1.0.2"));
        let mid = "NET/IB-CAST : Got completion from peer 10.0.0.2<43211> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.1.0.1 remoteGids ::ffff:10.1.0.2";
        let Parsed::Known(Event::Completion(c)) = parse(mid) else {
            panic!()
        };
        assert_eq!(
            (c.status, c.opcode, c.vendor_err, c.qp_num, c.hca),
            (12, Some("SEND"), 129, None, None)
        );
        assert_eq!(c.local_gid, gid("::ffff:10.1.0.1"));
        let old = "NET/IB : Got completion from peer 10.0.0.2<43211> with error 12, opcode 128, len 0, vendor err 129 (Recv) localGid ::ffff:10.1.0.1 remoteGids ::ffff:10.1.0.2";
        let Parsed::Known(Event::Completion(c)) = parse(old) else {
            panic!()
        };
        assert_eq!((c.status, c.opcode, c.vendor_err), (12, Some("RECV"), 129));
        assert!(matches!(
            parse("NET/IB: Got completion from peer 10.0.0.2<1> with status=oops"),
            Parsed::Malformed {
                kind: "completion_error",
                ..
            }
        ));
        let Parsed::Known(Event::CqeError(e)) = parse("NET/IB: Got CQE with error (devIndex=0, req=0x1, comm=0x2 (send), wr_id=5, qp_num=4711)") else { panic!() };
        assert_eq!(e.qp_num, 4711);
        let Parsed::Known(Event::CqeError(_)) =
            parse("NET/IB : ncclIbTest: Got CQE with error (devIndex=0, qp_num=1)")
        else {
            panic!()
        };
    }

    #[test]
    fn monitor_lines() {
        let slow = "NET/IB: WQE slow: peer=10.0.0.2<43211> | local: qpn=4711 dev=mlx5_0 port=1 lid=0 localGid=::ffff:10.1.0.1 | remote: qpn=815 port=1 lid=0 remoteGid=::ffff:10.1.0.2 | thr=50000 delta=1200000 mean=21000.5 stddev=300.2 p50=20000 p90=22000 p99=900000 p99.9=1100000 max=1200000 count=250 | t_post=100 t_poll=1200100";
        let Parsed::Known(Event::Slow(l)) = parse(slow) else {
            panic!()
        };
        assert_eq!(
            (l.ends.qpn, l.ends.dev, l.ends.remote_qpn, l.thr_ns, l.ns),
            (4711, "mlx5_0", Some(815), 50_000, 1_200_000)
        );
        assert_eq!(l.figures.unwrap().1, 250);
        assert_eq!(l.figures.unwrap().0.p999, 1_100_000.0);
        let stall = "NET/IB-CAST: WQE stall (no CQE): peer=10.0.0.2<43211> | local: qpn=4711 dev=mlx5_0 port=1 lid=0 localGid=::ffff:10.1.0.1 | remote: qpn=815 port=1 lid=0 remoteGid=::ffff:10.1.0.2 | stall_thr=50000 age=2000000000 inflight=3";
        let Parsed::Known(Event::Stall(l)) = parse(stall) else {
            panic!()
        };
        assert_eq!((l.ns, l.inflight), (2_000_000_000, Some(3)));
        let sum = "NET/IB: WQE latency summary [send peer=10.0.0.2<43211> dev=mlx5_0 qpn=4711 port=1]: n=250 slow=3 thr=50000ns | post-to-poll ns: mean=21000.5 std=300.2 p50=20000 p90=22000 p99=900000 p99.9=1100000 max=1200000";
        let Parsed::Known(Event::Summary(s)) = parse(sum) else {
            panic!()
        };
        assert_eq!(
            (s.send, s.dev, s.qpn, s.n, s.slow, s.thr_ns),
            (true, "mlx5_0", 4711, 250, 3, 50_000)
        );
        assert!(matches!(
            parse("NET/IB: WQE latency summary [send peer=x dev=mlx5_0 qpn=1]: n=5"),
            Parsed::Malformed {
                kind: "wqe_summary",
                ..
            }
        ));
        assert_eq!(parse("NET/IB : No device found."), Parsed::Unknown);
    }
}
