//! `ethtool -S` without ethtool: ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS and ETHTOOL_GSTATS
//! through ioctl(SIOCETHTOOL) on a datagram socket. No shell, no subprocess, unprivileged.
//!
//! The kernel sizes its GSTRINGS/GSTATS answers from the driver's count *at the time of
//! that call*, not from the length user space passed in, so the buffers get generous slack
//! over the GSSET_INFO count, and an answer whose string count and value count disagree
//! (the set changed between calls, e.g. mlx5 PFC being toggled) is retried. Counters are
//! matched by name, never by position; names are trimmed (some kernels print a trailing
//! space) and the first occurrence of a duplicated name wins.

use std::collections::HashMap;
use std::fmt;

const SIOCETHTOOL: u64 = 0x8946;
const ETHTOOL_GSTRINGS: u32 = 0x0000_001b;
const ETHTOOL_GSTATS: u32 = 0x0000_001d;
const ETHTOOL_GSSET_INFO: u32 = 0x0000_0037;
const ETH_SS_STATS: u32 = 1;
pub const ETH_GSTRING_LEN: usize = 32;
/// Upper bound on a string set we accept (mlx5 with hundreds of channels stays far below).
const MAX_STATS: usize = 1 << 20;
const ATTEMPTS: usize = 3;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EthtoolError {
    BadName(String),
    Socket(i32),
    Ioctl { cmd: &'static str, errno: i32 },
    NoStats,
    TooMany(usize),
    Unstable,
}

impl fmt::Display for EthtoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EthtoolError::BadName(n) => write!(f, "'{n}' is not a valid interface name"),
            EthtoolError::Socket(e) => write!(
                f,
                "socket() failed: {}",
                std::io::Error::from_raw_os_error(*e)
            ),
            EthtoolError::Ioctl { cmd, errno } => {
                write!(
                    f,
                    "{cmd} failed: {}",
                    std::io::Error::from_raw_os_error(*errno)
                )
            }
            EthtoolError::NoStats => write!(f, "the driver reports no statistics"),
            EthtoolError::TooMany(n) => {
                write!(f, "the driver reports {n} statistics, more than accepted")
            }
            EthtoolError::Unstable => write!(f, "the statistics set kept changing between calls"),
        }
    }
}

/// struct ifreq as the kernel reads it for SIOCETHTOOL: the name, then `ifr_data`.
#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 24 - std::mem::size_of::<usize>()],
}

struct Sock(libc::c_int);

impl Drop for Sock {
    fn drop(&mut self) {
        // SAFETY: the descriptor is owned by this guard and closed once.
        unsafe {
            libc::close(self.0);
        }
    }
}

fn open_socket() -> Result<Sock, EthtoolError> {
    let mut last = 0;
    for family in [libc::AF_INET, libc::AF_UNIX, libc::AF_INET6] {
        // SAFETY: plain socket(2) call with constant arguments.
        let fd = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd >= 0 {
            return Ok(Sock(fd));
        }
        last = errno();
    }
    Err(EthtoolError::Socket(last))
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Issues one SIOCETHTOOL with `buf` as the command block.
fn ioctl(
    sock: &Sock,
    ifname: &str,
    buf: &mut [u64],
    cmd: &'static str,
) -> Result<(), EthtoolError> {
    let mut ifr = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: buf.as_mut_ptr().cast(),
        _pad: [0; 24 - std::mem::size_of::<usize>()],
    };
    for (dst, src) in ifr.name.iter_mut().zip(ifname.bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: `ifr` is a valid ifreq whose data points to `buf`, which is large enough for
    // the command block the kernel writes (callers size it with slack, see module docs).
    let rc = unsafe { libc::ioctl(sock.0, SIOCETHTOOL as _, &mut ifr as *mut IfReq) };
    if rc < 0 {
        Err(EthtoolError::Ioctl {
            cmd,
            errno: errno(),
        })
    } else {
        Ok(())
    }
}

/// One SIOCETHTOOL call on a command block (the real ioctl, or a simulated kernel in tests).
type Call<'a> = dyn FnMut(&mut [u64], &'static str) -> Result<(), EthtoolError> + 'a;

fn sset_count(call: &mut Call<'_>) -> Result<usize, EthtoolError> {
    // struct ethtool_sset_info { u32 cmd; u32 reserved; u64 sset_mask; u32 data[]; }
    let mut buf = [0u64; 4];
    set_u32_at(&mut buf, 0, ETHTOOL_GSSET_INFO);
    buf[1] = 1u64 << ETH_SS_STATS;
    call(&mut buf, "ETHTOOL_GSSET_INFO")?;
    if buf[1] & (1u64 << ETH_SS_STATS) == 0 {
        return Err(EthtoolError::NoStats);
    }
    let n = u32_at(&buf, 16) as usize;
    if n > MAX_STATS {
        return Err(EthtoolError::TooMany(n));
    }
    Ok(n)
}

/// Reads the native-endian u32 at byte offset `off` of a u64 buffer.
fn u32_at(buf: &[u64], off: usize) -> u32 {
    let bytes: &[u8] = bytes_of(buf);
    u32::from_ne_bytes([bytes[off], bytes[off + 1], bytes[off + 2], bytes[off + 3]])
}

fn set_u32_at(buf: &mut [u64], off: usize, v: u32) {
    // SAFETY: u64 storage viewed as bytes; length and alignment are preserved.
    let bytes =
        unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), buf.len() * 8) };
    bytes[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}

fn bytes_of(buf: &[u64]) -> &[u8] {
    // SAFETY: any u64 storage is valid as bytes.
    unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), buf.len() * 8) }
}

/// Capacity (in entries) allocated for a set the kernel reported as `n`.
fn capacity(n: usize) -> usize {
    n.saturating_mul(2).max(n + 256)
}

/// Splits a GSTRINGS data block into names: each 32-byte slot up to its first NUL, lossily
/// decoded, trimmed. Slots beyond the block yield nothing.
pub fn parse_strings(data: &[u8], n: usize) -> Vec<String> {
    data.chunks_exact(ETH_GSTRING_LEN)
        .take(n)
        .map(|slot| {
            let end = slot.iter().position(|&b| b == 0).unwrap_or(slot.len());
            String::from_utf8_lossy(&slot[..end]).trim().to_owned()
        })
        .collect()
}

/// Pairs names with values by position of the same answer, keyed by trimmed name; the
/// first occurrence of a duplicated name wins, and empty names are dropped.
pub fn pair(names: Vec<String>, values: &[u64]) -> HashMap<String, u64> {
    let mut m = HashMap::with_capacity(names.len());
    for (n, v) in names.into_iter().zip(values.iter()) {
        let n = n.trim();
        if !n.is_empty() {
            m.entry(n.to_owned()).or_insert(*v);
        }
    }
    m
}

fn read_once(call: &mut Call<'_>) -> Result<Option<HashMap<String, u64>>, EthtoolError> {
    let n = sset_count(call)?;
    if n == 0 {
        return Err(EthtoolError::NoStats);
    }
    let cap = capacity(n);

    // struct ethtool_gstrings { u32 cmd; u32 string_set; u32 len; u8 data[]; }
    let mut sbuf = vec![0u64; (12 + cap * ETH_GSTRING_LEN).div_ceil(8)];
    set_u32_at(&mut sbuf, 0, ETHTOOL_GSTRINGS);
    set_u32_at(&mut sbuf, 4, ETH_SS_STATS);
    set_u32_at(&mut sbuf, 8, n as u32);
    call(&mut sbuf, "ETHTOOL_GSTRINGS")?;
    let ns = u32_at(&sbuf, 8) as usize;

    // struct ethtool_stats { u32 cmd; u32 n_stats; u64 data[]; }
    let mut vbuf = vec![0u64; 1 + cap];
    set_u32_at(&mut vbuf, 0, ETHTOOL_GSTATS);
    set_u32_at(&mut vbuf, 4, n as u32);
    call(&mut vbuf, "ETHTOOL_GSTATS")?;
    let nv = u32_at(&vbuf, 4) as usize;

    if ns != nv || ns > cap {
        return Ok(None);
    }
    let names = parse_strings(&bytes_of(&sbuf)[12..], ns);
    Ok(Some(pair(names, &vbuf[1..1 + nv])))
}

/// Reads every ETH_SS_STATS counter of `ifname`, keyed by (trimmed) name.
pub fn read_stats(ifname: &str) -> Result<HashMap<String, u64>, EthtoolError> {
    if let Some(fake) = fake_lookup(ifname) {
        return fake;
    }
    if !super::netdev::valid_ifname(ifname) {
        return Err(EthtoolError::BadName(ifname.to_owned()));
    }
    let sock = open_socket()?;
    read_with(&mut |buf, cmd| ioctl(&sock, ifname, buf, cmd))
}

/// GSSET_INFO, GSTRINGS, GSTATS through `call`, retried while the set keeps changing.
fn read_with(call: &mut Call<'_>) -> Result<HashMap<String, u64>, EthtoolError> {
    for _ in 0..ATTEMPTS {
        if let Some(m) = read_once(call)? {
            return Ok(m);
        }
    }
    Err(EthtoolError::Unstable)
}

type FakeTable = HashMap<String, Result<Vec<(String, u64)>, EthtoolError>>;

static FAKE: parking_lot::Mutex<Option<FakeTable>> = parking_lot::Mutex::new(None);

fn fake_lookup(ifname: &str) -> Option<Result<HashMap<String, u64>, EthtoolError>> {
    let g = FAKE.lock();
    let entry = g.as_ref()?.get(ifname)?;
    Some(entry.clone().map(|v| {
        let (names, values): (Vec<String>, Vec<u64>) = v.into_iter().unzip();
        pair(names, &values)
    }))
}

/// Test seam: makes `read_stats(ifname)` answer with `stats` (in kernel order, names as the
/// kernel would print them) instead of issuing the ioctl. Fixture sysfs trees name netdevs
/// that do not exist on the test machine; this lets integration tests drive every
/// ethtool-sourced key through the public API. `None` removes the entry.
pub fn set_fake(ifname: &str, stats: Option<Vec<(String, u64)>>) {
    let mut g = FAKE.lock();
    let t = g.get_or_insert_with(HashMap::new);
    match stats {
        Some(s) => {
            t.insert(ifname.to_owned(), Ok(s));
        }
        None => {
            t.remove(ifname);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn slots(names: &[&str]) -> Vec<u8> {
        let mut v = Vec::new();
        for n in names {
            let mut s = [0u8; ETH_GSTRING_LEN];
            s[..n.len()].copy_from_slice(n.as_bytes());
            v.extend_from_slice(&s);
        }
        v
    }

    #[test]
    fn ifreq_has_the_kernel_layout() {
        assert_eq!(std::mem::size_of::<IfReq>(), 40);
        assert_eq!(std::mem::offset_of!(IfReq, data), 16);
    }

    #[test]
    fn strings_are_trimmed_and_unterminated_slots_kept() {
        let full = "x".repeat(32);
        let data = slots(&["rx_bytes", "tx_pause_storm_warning_events ", &full]);
        assert_eq!(
            parse_strings(&data, 3),
            vec!["rx_bytes", "tx_pause_storm_warning_events", full.as_str()]
        );
        assert_eq!(parse_strings(&data, 10).len(), 3, "short block");
    }

    #[test]
    fn first_duplicate_wins_by_name_not_position() {
        let m = pair(
            vec!["a".into(), "b".into(), "a".into(), "".into()],
            &[1, 2, 3, 4],
        );
        assert_eq!(m.get("a"), Some(&1));
        assert_eq!(m.get("b"), Some(&2));
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn bad_interface_names_fail_without_ioctl() {
        assert!(matches!(
            read_stats("a_name_longer_than_15"),
            Err(EthtoolError::BadName(_))
        ));
        assert!(matches!(read_stats("../x"), Err(EthtoolError::BadName(_))));
    }

    #[test]
    fn loopback_or_missing_device_fails_cleanly() {
        // lo has no driver statistics; a missing device fails with ENODEV. Neither panics.
        assert!(read_stats("lo").is_err());
        let e = read_stats("nonexist0zz").unwrap_err();
        assert!(
            e.to_string().contains("failed") || e.to_string().contains("socket"),
            "{e}"
        );
    }

    #[test]
    fn fake_table_answers_by_name() {
        set_fake("fk0", Some(vec![("b".into(), 2), ("a ".into(), 1)]));
        let m = read_stats("fk0").unwrap();
        assert_eq!(m.get("a"), Some(&1));
        set_fake("fk0", None);
        assert!(read_stats("fk0").is_err());
    }

    /// A kernel whose driver's string set changes size as the calls go by: each call answers
    /// with the count `counts` gives for that call, writing as many entries as the kernel would
    /// (it ignores the length user space passed in).
    fn simulated(
        counts: Vec<usize>,
    ) -> impl FnMut(&mut [u64], &'static str) -> Result<(), EthtoolError> {
        let mut i = 0;
        move |buf: &mut [u64], cmd: &'static str| {
            let n = counts[i.min(counts.len() - 1)];
            i += 1;
            match cmd {
                "ETHTOOL_GSSET_INFO" => set_u32_at(buf, 16, n as u32),
                "ETHTOOL_GSTRINGS" => {
                    set_u32_at(buf, 8, n as u32);
                    // SAFETY: u64 storage viewed as bytes.
                    let bytes = unsafe {
                        std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), buf.len() * 8)
                    };
                    assert!(
                        12 + n * ETH_GSTRING_LEN <= bytes.len(),
                        "the kernel would overrun the strings buffer"
                    );
                    for k in 0..n {
                        let name = format!("stat_{k}");
                        bytes[12 + k * ETH_GSTRING_LEN..][..name.len()]
                            .copy_from_slice(name.as_bytes());
                    }
                }
                "ETHTOOL_GSTATS" => {
                    set_u32_at(buf, 4, n as u32);
                    assert!(n < buf.len(), "the kernel would overrun the stats buffer");
                    for k in 0..n {
                        buf[1 + k] = 1000 + k as u64;
                    }
                }
                _ => unreachable!(),
            }
            Ok(())
        }
    }

    #[test]
    fn a_set_that_grew_after_the_count_is_read_consistently() {
        // 10 at GSSET_INFO, 14 at both GSTRINGS and GSTATS: slack absorbs it, names and values agree.
        let m = read_with(&mut simulated(vec![10, 14, 14])).unwrap();
        assert_eq!(m.len(), 14);
        assert_eq!(m.get("stat_13"), Some(&1013));
    }

    #[test]
    fn a_set_that_changed_between_strings_and_stats_is_retried() {
        // First attempt: strings 12, stats 10 (PFC switched off in between): discarded.
        let m = read_with(&mut simulated(vec![12, 12, 10, 10, 10, 10])).unwrap();
        assert_eq!(m.len(), 10);
        assert_eq!(m.get("stat_9"), Some(&1009));
        assert_eq!(m.get("stat_11"), None);
    }

    #[test]
    fn a_set_that_never_settles_is_an_error() {
        let flapping: Vec<usize> = (0..30).map(|i| if i % 3 == 2 { 5 } else { 6 }).collect();
        assert_eq!(
            read_with(&mut simulated(flapping)),
            Err(EthtoolError::Unstable)
        );
        assert_eq!(
            read_with(&mut simulated(vec![0])),
            Err(EthtoolError::NoStats)
        );
    }

    proptest! {
        #[test]
        fn parse_strings_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400), n in 0usize..20) {
            let v = parse_strings(&data, n);
            prop_assert!(v.len() <= n);
            prop_assert!(v.len() <= data.len() / ETH_GSTRING_LEN);
            for s in &v {
                prop_assert!(!s.contains('\0'));
                prop_assert_eq!(s.trim(), s.as_str());
            }
        }

        #[test]
        fn pair_is_keyed_by_name(names in proptest::collection::vec("[a-z_]{0,6}", 0..30),
                                 values in proptest::collection::vec(any::<u64>(), 0..30)) {
            let m = pair(names.clone(), &values);
            for (i, (n, v)) in names.iter().zip(values.iter()).enumerate() {
                if n.trim().is_empty() { continue; }
                let first = names.iter().position(|x| x == n).unwrap();
                if first == i { prop_assert_eq!(m.get(n), Some(v)); }
            }
            prop_assert!(m.len() <= names.len().min(values.len()));
        }
    }
}
