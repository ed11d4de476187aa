//! A port's QoS settings: which priorities have PFC enabled and the DSCP-to-priority map, from
//! DCB netlink (the kernel's dcbnl, `include/uapi/linux/dcbnl.h`, `net/dcb/dcbnl.c`), and the
//! port's active MTU from the netdev's MTU.
//!
//! DCB: one `RTM_GETDCB` request with `DCB_CMD_IEEE_GET` and the netdev's name on a
//! `NETLINK_ROUTE` socket, answered by the kernel's `dcbnl_ieee_fill`: `DCB_ATTR_IFNAME`, then
//! the nest `DCB_ATTR_IEEE` holding `DCB_ATTR_IEEE_PFC` (`struct ieee_pfc`: `pfc_cap`, `pfc_en`
//! a bit per priority, ...) when the driver has `ieee_getpfc`, and the nest
//! `DCB_ATTR_IEEE_APP_TABLE` of `DCB_ATTR_IEEE_APP` entries (`struct dcb_app`: selector,
//! priority, protocol), those with selector `IEEE_8021QAZ_APP_SEL_DSCP` (5) mapping the DSCP in
//! `protocol` to a priority. A GET needs no privilege. A netdev without `dcbnl_ops` (veth,
//! Soft-RoCE's parent in a VM, virtio) answers `EOPNOTSUPP`: absent, never an empty setting.
//! The request is made once per device, at its first use (a cold path), on a non-blocking
//! socket with a bounded wait; nothing here runs on the data path.

use super::driver::HwType;
use crate::sysfs;
use std::path::Path;
use std::time::{Duration, Instant};

const RTM_GETDCB: u16 = 78;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const DCB_CMD_IEEE_GET: u8 = 21;
const DCB_ATTR_IFNAME: u16 = 1;
const DCB_ATTR_IEEE: u16 = 13;
const DCB_ATTR_IEEE_PFC: u16 = 2;
const DCB_ATTR_IEEE_APP_TABLE: u16 = 3;
const DCB_ATTR_IEEE_APP: u16 = 1;
const IEEE_8021QAZ_APP_SEL_DSCP: u8 = 5;
/// nlattr type bits (NLA_TYPE_MASK: without NLA_F_NESTED and NLA_F_NET_BYTEORDER).
const NLA_TYPE_MASK: u16 = 0x3fff;
const NLMSG_HDRLEN: usize = 16;
/// How long the kernel's answer is waited for, in all.
const WAIT: Duration = Duration::from_millis(500);
/// Datagrams read before giving up on one with our sequence number.
const MAX_READS: usize = 8;

/// A port's DCB settings as the kernel answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dcb {
    /// The priorities (0..7) with PFC enabled, ascending; None when the driver does not report
    /// PFC (no `ieee_getpfc`).
    pub pfc_enabled: Option<Vec<u8>>,
    /// (DSCP, priority) of the APP table's DSCP entries, by DSCP; empty when it has none (the
    /// port trusts PCP, not DSCP).
    pub dscp_prio: Vec<(u8, u8)>,
}

/// What the kernel said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Dcb(Dcb),
    /// The netdev has no DCB (EOPNOTSUPP), or no such netdev: absent.
    Unsupported(i32),
    /// The request failed otherwise (the reason, for RCCL_TELEMETRY_DEBUG).
    Failed(String),
}

/// The request for `ifname`'s IEEE DCB settings (sequence number `seq`).
pub fn request(ifname: &str, seq: u32) -> Vec<u8> {
    let name_len = ifname.len() + 1;
    let attr_len = 4 + name_len;
    let len = NLMSG_HDRLEN + 4 + align4(attr_len);
    let mut b = Vec::with_capacity(len);
    b.extend_from_slice(&(len as u32).to_ne_bytes());
    b.extend_from_slice(&RTM_GETDCB.to_ne_bytes());
    b.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    // struct dcbmsg { u8 dcb_family; u8 cmd; u16 dcb_pad; }
    b.extend_from_slice(&[libc::AF_UNSPEC as u8, DCB_CMD_IEEE_GET, 0, 0]);
    b.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    b.extend_from_slice(&DCB_ATTR_IFNAME.to_ne_bytes());
    b.extend_from_slice(ifname.as_bytes());
    b.resize(len, 0);
    b
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// The attributes of `b` as (type without flags, payload); stops at the first malformed one.
fn attrs(mut b: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let (Some(len), Some(ty)) = (u16_at(b, 0), u16_at(b, 2)) else {
            break;
        };
        let len = usize::from(len);
        if len < 4 || len > b.len() {
            break;
        }
        out.push((ty & NLA_TYPE_MASK, &b[4..len]));
        b = b.get(align4(len)..).unwrap_or(&[]);
    }
    out
}

/// The DCB settings in a `RTM_GETDCB` reply's attributes (after the dcbmsg).
fn parse_ieee(payload: &[u8]) -> Dcb {
    let mut d = Dcb::default();
    let Some((_, ieee)) = attrs(payload)
        .into_iter()
        .find(|(t, _)| *t == DCB_ATTR_IEEE)
    else {
        return d;
    };
    for (t, v) in attrs(ieee) {
        match t {
            // struct ieee_pfc { u8 pfc_cap; u8 pfc_en; ... }
            DCB_ATTR_IEEE_PFC if v.len() >= 2 => {
                d.pfc_enabled = Some((0..8u8).filter(|p| v[1] & (1 << p) != 0).collect());
            }
            DCB_ATTR_IEEE_APP_TABLE => {
                for (at, app) in attrs(v) {
                    // struct dcb_app { u8 selector; u8 priority; u16 protocol; }
                    if at != DCB_ATTR_IEEE_APP || app.len() < 4 {
                        continue;
                    }
                    let (sel, prio) = (app[0], app[1]);
                    let dscp = u16_at(app, 2).unwrap_or(u16::MAX);
                    if sel == IEEE_8021QAZ_APP_SEL_DSCP && dscp < 64 && prio < 8 {
                        d.dscp_prio.push((dscp as u8, prio));
                    }
                }
            }
            _ => {}
        }
    }
    d.dscp_prio.sort_unstable();
    d.dscp_prio.dedup_by_key(|e| e.0);
    d
}

/// The answer to request `seq` in one datagram of replies, if it holds one.
pub fn parse_reply(buf: &[u8], seq: u32) -> Option<Answer> {
    let mut b = buf;
    while b.len() >= NLMSG_HDRLEN {
        let len = u32_at(b, 0)? as usize;
        let ty = u16_at(b, 4)?;
        let s = u32_at(b, 8)?;
        if len < NLMSG_HDRLEN || len > b.len() {
            return None;
        }
        let body = &b[NLMSG_HDRLEN..len];
        if s == seq {
            match ty {
                NLMSG_ERROR => {
                    let err = u32_at(body, 0)? as i32;
                    if err != 0 {
                        let e = err.wrapping_neg();
                        return Some(match e {
                            libc::EOPNOTSUPP | libc::ENODEV | libc::EINVAL => {
                                Answer::Unsupported(e)
                            }
                            e => Answer::Failed(format!(
                                "RTM_GETDCB: {}",
                                std::io::Error::from_raw_os_error(e)
                            )),
                        });
                    }
                }
                RTM_GETDCB if body.len() >= 4 && body[1] == DCB_CMD_IEEE_GET => {
                    return Some(Answer::Dcb(parse_ieee(&body[4..])));
                }
                NLMSG_DONE => return Some(Answer::Failed("RTM_GETDCB: no answer".into())),
                _ => {}
            }
        }
        b = b.get(align4(len)..).unwrap_or(&[]);
    }
    None
}

struct Fd(libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: the descriptor is owned by this guard and closed once.
        unsafe {
            libc::close(self.0);
        }
    }
}

fn os_err(what: &str) -> Answer {
    Answer::Failed(format!("{what}: {}", std::io::Error::last_os_error()))
}

/// Asks the kernel for `ifname`'s IEEE DCB settings: one request, a bounded wait.
pub fn query(ifname: &str) -> Answer {
    if let Some(fake) = fake_lookup(ifname) {
        return parse_reply(&fake, FAKE_SEQ).unwrap_or(Answer::Failed("no answer".into()));
    }
    if !super::netdev::valid_ifname(ifname) {
        return Answer::Failed(format!("'{ifname}' is not a valid interface name"));
    }
    // SAFETY: plain socket(2) call with constant arguments.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return os_err("netlink socket");
    }
    let fd = Fd(fd);
    let seq = std::process::id() ^ 0x5dcb_0000;
    let req = request(ifname, seq);
    // SAFETY: a zeroed sockaddr_nl is valid; family set below, pid 0 is the kernel.
    let mut to: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: `req` and `to` are valid for the lengths passed.
    let sent = unsafe {
        libc::sendto(
            fd.0,
            req.as_ptr().cast(),
            req.len(),
            0,
            (&to as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return os_err("RTM_GETDCB send");
    }
    let deadline = Instant::now() + WAIT;
    let mut buf = vec![0u8; 32 * 1024];
    for _ in 0..MAX_READS {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let mut pfd = libc::pollfd {
            fd: fd.0,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return os_err("poll");
        }
        if rc == 0 {
            break;
        }
        // SAFETY: `buf` is valid for its length.
        let n = unsafe { libc::recv(fd.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if matches!(
                e.kind(),
                std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock
            ) {
                continue;
            }
            return Answer::Failed(format!("recv: {e}"));
        }
        if let Some(a) = parse_reply(&buf[..n as usize], seq) {
            return a;
        }
    }
    Answer::Failed("RTM_GETDCB: no answer in time".into())
}

/// The port's active MTU in bytes, as the RoCE driver computes it from its netdev's MTU
/// (`class/net/<netdev>/mtu`); None where the family's rule is not known or the MTU is
/// unreadable. The rules, from the drivers' query_port:
/// - mlx5, bnxt_re: `iboe_get_mtu()` (include/rdma/ib_addr.h): the netdev MTU less the RoCE
///   headers (GRH 40 + UDP 8 + BTH 12 + XRC ext 4 + AtomicETH 28 + ICRC 4 = 96 bytes), rounded
///   down to an IB MTU (256 .. 4096), 0 (unknown) below 256;
/// - ionic: `ib_mtu_int_to_enum(ndev->mtu)` (include/rdma/ib_verbs.h): the netdev MTU rounded
///   down to an IB MTU, 256 at least;
/// - rdma_rxe: `rxe_set_mtu()` (drivers/infiniband/sw/rxe): the netdev MTU less
///   RXE_MAX_HDR_LENGTH (80), rounded down to an IB MTU, 256 at least, 4096 at most.
pub fn active_mtu(root: &Path, netdev: &str, hw: HwType) -> Option<u32> {
    if netdev.is_empty() {
        return None;
    }
    let mtu = sysfs::read_counter(&sysfs::net_dir(root, netdev).join("mtu"))?;
    ib_mtu(hw, mtu)
}

fn round_down(mtu: u64) -> Option<u32> {
    [4096u32, 2048, 1024, 512, 256]
        .into_iter()
        .find(|m| mtu >= u64::from(*m))
}

/// The IB MTU a driver family derives from netdev MTU `mtu`.
pub fn ib_mtu(hw: HwType, mtu: u64) -> Option<u32> {
    match hw {
        HwType::Mlx5 | HwType::Thor2 => round_down(mtu.checked_sub(96)?),
        HwType::Ainic => Some(round_down(mtu).unwrap_or(256)),
        HwType::Rxe => Some(round_down(mtu.saturating_sub(80)).unwrap_or(256)),
        HwType::Unsupported => None,
    }
}

const FAKE_SEQ: u32 = 1;

static FAKE: parking_lot::Mutex<Option<std::collections::HashMap<String, Vec<u8>>>> =
    parking_lot::Mutex::new(None);

fn fake_lookup(ifname: &str) -> Option<Vec<u8>> {
    FAKE.lock().as_ref()?.get(ifname).cloned()
}

/// Test seam: makes `query(ifname)` parse `reply` (netlink messages with sequence number 1) as
/// the kernel's answer, for fixture trees whose netdevs do not exist. `None` removes it.
pub fn set_fake(ifname: &str, reply: Option<Vec<u8>>) {
    let mut g = FAKE.lock();
    let t = g.get_or_insert_with(std::collections::HashMap::new);
    match reply {
        Some(r) => {
            t.insert(ifname.to_owned(), r);
        }
        None => {
            t.remove(ifname);
        }
    }
}

/// Builders of kernel replies, for tests and fixtures.
pub mod fixture {
    use super::*;

    fn attr(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(payload);
        v.resize(align4(v.len()), 0);
        v
    }

    fn msg(ty: u16, seq: u32, body: &[u8]) -> Vec<u8> {
        let len = NLMSG_HDRLEN + body.len();
        let mut v = Vec::new();
        v.extend_from_slice(&(len as u32).to_ne_bytes());
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(&0u16.to_ne_bytes());
        v.extend_from_slice(&seq.to_ne_bytes());
        v.extend_from_slice(&0u32.to_ne_bytes());
        v.extend_from_slice(body);
        v
    }

    /// A `RTM_GETDCB` reply as `dcbnl_ieee_fill` builds it: the name, then the IEEE nest with
    /// an ETS block, the PFC block (when `pfc_en` is Some) and the APP table (`apps`:
    /// (selector, priority, protocol)), then DCB_ATTR_DCBX.
    pub fn ieee_reply(
        ifname: &str,
        seq: u32,
        pfc_en: Option<u8>,
        apps: &[(u8, u8, u16)],
    ) -> Vec<u8> {
        let mut ieee = attr(DCB_ATTR_IEEE_PFC - 1, &[0u8; 59]); // struct ieee_ets
        if let Some(en) = pfc_en {
            // struct ieee_pfc: pfc_cap, pfc_en, mbc, pad, delay (u16), pad, requests[8], indications[8]
            let mut pfc = vec![0u8; 136];
            pfc[0] = 8;
            pfc[1] = en;
            ieee.extend(attr(DCB_ATTR_IEEE_PFC, &pfc));
        }
        let mut table = Vec::new();
        for (sel, prio, proto) in apps {
            let mut a = vec![*sel, *prio];
            a.extend_from_slice(&proto.to_ne_bytes());
            table.extend(attr(DCB_ATTR_IEEE_APP, &a));
        }
        ieee.extend(attr(DCB_ATTR_IEEE_APP_TABLE | 0x8000, &table));
        let mut name = ifname.as_bytes().to_vec();
        name.push(0);
        let mut body = vec![libc::AF_UNSPEC as u8, DCB_CMD_IEEE_GET, 0, 0];
        body.extend(attr(DCB_ATTR_IFNAME, &name));
        body.extend(attr(DCB_ATTR_IEEE | 0x8000, &ieee));
        body.extend(attr(14, &[2])); // DCB_ATTR_DCBX: DCB_CAP_DCBX_HOST
        msg(RTM_GETDCB, seq, &body)
    }

    /// An NLMSG_ERROR reply with `errno` (positive) to request `seq`.
    #[cfg(test)]
    pub fn error_reply(seq: u32, errno: i32) -> Vec<u8> {
        let mut body = (-errno).to_ne_bytes().to_vec();
        body.extend_from_slice(&request("x", seq)[..NLMSG_HDRLEN]);
        msg(NLMSG_ERROR, seq, &body)
    }

    /// The reply of a port with PFC on priority 3 and mlx5's default DSCP map in DSCP trust
    /// (every DSCP d to priority d >> 3, as `mlx5e_dcbnl_dscp_app` installs it), sequence 1.
    pub fn lossless_prio3(ifname: &str) -> Vec<u8> {
        let apps: Vec<(u8, u8, u16)> = (0..64u16)
            .map(|d| (IEEE_8021QAZ_APP_SEL_DSCP, (d >> 3) as u8, d))
            .collect();
        ieee_reply(ifname, FAKE_SEQ, Some(1 << 3), &apps)
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::*;
    use super::*;

    #[test]
    fn the_request_is_an_ieee_get_naming_the_netdev() {
        let r = request("eth0", 7);
        assert_eq!(r.len(), 16 + 4 + 12);
        assert_eq!(u32_at(&r, 0), Some(r.len() as u32));
        assert_eq!(u16_at(&r, 4), Some(RTM_GETDCB));
        assert_eq!(u32_at(&r, 8), Some(7));
        assert_eq!(r[17], DCB_CMD_IEEE_GET);
        assert_eq!(u16_at(&r, 20), Some(9), "nla_len: header + \"eth0\\0\"");
        assert_eq!(u16_at(&r, 22), Some(DCB_ATTR_IFNAME));
        assert_eq!(&r[24..29], b"eth0\0");
    }

    #[test]
    fn a_reply_gives_pfc_priorities_and_the_dscp_map() {
        // PFC on 3 and 4; DSCP 26 -> 3, 46 -> 5; an ethertype entry (not DSCP) is ignored.
        let r = ieee_reply(
            "ens1f0np0",
            9,
            Some(0b0001_1000),
            &[(5, 3, 26), (1, 4, 0x8915), (5, 5, 46)],
        );
        let a = parse_reply(&r, 9).unwrap();
        assert_eq!(
            a,
            Answer::Dcb(Dcb {
                pfc_enabled: Some(vec![3, 4]),
                dscp_prio: vec![(26, 3), (46, 5)],
            })
        );
        // Another request's reply is not ours.
        assert_eq!(parse_reply(&r, 10), None);
    }

    #[test]
    fn no_pfc_block_is_unknown_and_no_app_entries_an_empty_map() {
        let r = ieee_reply("eth1", 1, None, &[]);
        assert_eq!(
            parse_reply(&r, 1),
            Some(Answer::Dcb(Dcb {
                pfc_enabled: None,
                dscp_prio: vec![]
            }))
        );
        let r = ieee_reply("eth1", 1, Some(0), &[]);
        assert_eq!(
            parse_reply(&r, 1),
            Some(Answer::Dcb(Dcb {
                pfc_enabled: Some(vec![]),
                dscp_prio: vec![]
            }))
        );
    }

    #[test]
    fn eopnotsupp_is_absent_and_other_errors_fail() {
        assert_eq!(
            parse_reply(&error_reply(4, libc::EOPNOTSUPP), 4),
            Some(Answer::Unsupported(libc::EOPNOTSUPP))
        );
        assert!(matches!(
            parse_reply(&error_reply(4, libc::ENOBUFS), 4),
            Some(Answer::Failed(_))
        ));
        // An ACK (error 0) is not the answer.
        assert_eq!(parse_reply(&error_reply(4, 0), 4), None);
    }

    #[test]
    fn truncated_and_garbage_replies_do_not_panic() {
        let r = lossless_prio3("eth0");
        for cut in 0..r.len() {
            let _ = parse_reply(&r[..cut], FAKE_SEQ);
        }
        let mut bad = r.clone();
        bad[16 + 4] = 0xff; // the first attribute's length past the end
        let _ = parse_reply(&bad, FAKE_SEQ);
        assert_eq!(parse_reply(&[0u8; 40], 0), None);
    }

    #[test]
    fn mlx5_default_map_has_every_dscp() {
        let Some(Answer::Dcb(d)) = parse_reply(&lossless_prio3("eth0"), FAKE_SEQ) else {
            panic!()
        };
        assert_eq!(d.pfc_enabled, Some(vec![3]));
        assert_eq!(d.dscp_prio.len(), 64);
        assert_eq!(d.dscp_prio[26], (26, 3));
    }

    #[test]
    fn active_mtu_follows_each_drivers_rule() {
        assert_eq!(ib_mtu(HwType::Mlx5, 1500), Some(1024));
        assert_eq!(ib_mtu(HwType::Mlx5, 9000), Some(4096));
        assert_eq!(ib_mtu(HwType::Thor2, 4200), Some(4096));
        assert_eq!(ib_mtu(HwType::Thor2, 4191), Some(2048));
        assert_eq!(ib_mtu(HwType::Mlx5, 300), None);
        assert_eq!(ib_mtu(HwType::Ainic, 1500), Some(1024));
        assert_eq!(ib_mtu(HwType::Ainic, 4096), Some(4096));
        assert_eq!(ib_mtu(HwType::Rxe, 1500), Some(1024));
        assert_eq!(ib_mtu(HwType::Rxe, 4176), Some(4096));
        assert_eq!(ib_mtu(HwType::Rxe, 4175), Some(2048));
        assert_eq!(ib_mtu(HwType::Rxe, 100), Some(256));
        assert_eq!(ib_mtu(HwType::Unsupported, 9000), None);
        let d = tempfile::tempdir().unwrap();
        let net = d.path().join("class/net/eth0");
        std::fs::create_dir_all(&net).unwrap();
        std::fs::write(net.join("mtu"), "9000\n").unwrap();
        assert_eq!(active_mtu(d.path(), "eth0", HwType::Mlx5), Some(4096));
        assert_eq!(active_mtu(d.path(), "eth9", HwType::Mlx5), None);
        assert_eq!(active_mtu(d.path(), "", HwType::Mlx5), None);
    }

    #[test]
    fn loopback_and_missing_netdevs_have_no_dcb() {
        // lo has no dcbnl_ops: EOPNOTSUPP; a missing netdev: ENODEV. Both absent, no panic.
        match query("lo") {
            Answer::Unsupported(_) => {}
            // A sandbox without NETLINK_ROUTE answers nothing usable: still no settings.
            Answer::Failed(_) => {}
            Answer::Dcb(d) => panic!("lo has DCB settings {d:?}"),
        }
        assert!(!matches!(query("nonexist0zz"), Answer::Dcb(_)));
        assert!(matches!(query("../x"), Answer::Failed(_)));
    }
}
