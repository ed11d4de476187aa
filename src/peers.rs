//! Who is on the other end of each QP: the QP's own identity (QPN, local GID/LID,
//! port, GID index, type) and its peer's (QPN, GID, LID), told once per QP off the data path
//! (rcclTelemetryQpSetPeer, or the preload's modify_qp wrapper), and the per-peer latency.
//!
//! Storage: nothing in the slot (its 256-byte layout is mirrored by the header). Each channel
//! keeps a side table (`ChannelPeers`, in `registry::Channel`; its type is the leaf-ward
//! `channel_peers`, below the registry, this module above it) behind one mutex: the told
//! identities by slot index, and the channel's per-peer log-scale histograms. A handle leads
//! back to its channel through the registry's slot index (`registry::slot_home`). Every access
//! is cold: a setup call per QP, a report per file.
//!
//! Per-peer latency: at SetPeer the slot's log-histogram word (`RcclQpStats::log_hist`, the
//! address the hot path records a sampled completion into) is re-pointed from the channel's
//! histogram at a `LogHist` for (this channel, the peer NIC), created on demand, at most
//! [`PEER_HISTS_PER_CHANNEL`] per channel ([`PEER_HISTS_PER_PRELOAD_CHANNEL`] in the verbs
//! interposer, whose one channel per device is the whole NIC); QPs towards further peers share one "other peers"
//! histogram of the channel. The hot path is unchanged: it still loads the word once and
//! records once. The channel's `wqe_completion_log_histogram` is the sum of all of its
//! histograms (the channel's own, the per-peer ones, the shared one), so it counts exactly
//! what it counted before.
//!
//! Re-pointing while the QP's thread records: the word is one aligned 8-byte store (release,
//! after the new histogram is fully built); the recording side loads it once per sampled
//! completion and records into the histogram it read. Histograms are never freed and stay
//! in the channel's sum, so a completion racing a re-point lands in the old or the new one,
//! both counted in the channel; only its attribution to a peer can be the previous one (a
//! completion of a WR posted before the QP had its peer). Ownership of a histogram's plain
//! counts follows `LogHist`'s rule (first recording thread owns, others add atomically), so
//! the new histogram loses nothing either. A slot whose word is 0 (the log-scale histogram
//! off) is never re-pointed.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering::*};

use parking_lot::Mutex;

use crate::channel_peers::Inner;
pub use crate::channel_peers::{nonzero, ChannelPeers, PeerKey, QpAttrs, QpInfo, Remote};
use crate::counters::RcclQpStats;
use crate::loghist::{LogHist, LOG_BUCKETS};
use crate::registry::{self, Channel};
/// The GID's text form is the file format's (the file and the textfile's labels show it).
pub use rccl_telemetry_format::write::{gid_text_into, GID_TEXT_LEN};

/// Per-peer histograms a channel creates before its QPs towards further peers share one
/// "other peers" histogram. Rings and trees give a channel 2-3 peers per device; 8 leaves room
/// for wider patterns while bounding the memory at (8 + 2) x 2112 bytes per channel.
pub const PEER_HISTS_PER_CHANNEL: usize = 8;

/// The same cap for the verbs interposer, whose QPs all sit in one channel per device: there
/// the channel is the whole NIC, so the cap is the number of remote NICs a device gets its own
/// latency for (256 x 2112 bytes = 528 KiB per device at most, for a process talking to that
/// many NICs).
pub const PEER_HISTS_PER_PRELOAD_CHANNEL: usize = 256;

/// The cap in force for this process's channels.
pub fn peer_hists_per_channel() -> usize {
    if registry::verbs_keys() {
        PEER_HISTS_PER_PRELOAD_CHANNEL
    } else {
        PEER_HISTS_PER_CHANNEL
    }
}

/// What the transport (or the preload's modify_qp wrapper) knows about one connected QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerInfo {
    pub qp_num: u32,
    pub local_gid: Option<[u8; 16]>,
    pub local_lid: u16,
    pub port: Option<u8>,
    pub gid_index: Option<u32>,
    pub remote_qp_num: u32,
    pub remote_gid: Option<[u8; 16]>,
    pub remote_lid: u16,
}

/// A QP's peer as the stall detector and the Prometheus writer see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerView {
    pub qp_num: Option<u32>,
    pub remote_qp_num: u32,
    pub remote_gid: Option<[u8; 16]>,
    pub remote_lid: u16,
}

/// Bytes of per-peer and "other peers" histograms allocated so far (their memory cost).
static HIST_BYTES: AtomicU64 = AtomicU64::new(0);

pub fn hist_bytes() -> u64 {
    HIST_BYTES.load(Relaxed)
}

/// A histogram for the channel: a spare of its earlier owners' (cleared), else a new one;
/// None when a new one cannot be allocated (the QP then keeps recording into the histogram it
/// has: its channel's sum stays whole, only the split by peer lacks it).
fn new_hist(g: &mut Inner) -> Option<&'static LogHist> {
    if let Some(h) = g.spare.pop() {
        return Some(h);
    }
    let h = registry::try_leak(LogHist::new())?;
    HIST_BYTES.fetch_add(std::mem::size_of::<LogHist>() as u64, Relaxed);
    Some(h)
}

/// The device-level identity: the first port, GID index, GID and LID told for its QPs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DevLocal {
    pub port: Option<u8>,
    pub gid_index: Option<u32>,
    pub gid: Option<[u8; 16]>,
    pub lid: u16,
}

static DEV_LOCAL: Mutex<[DevLocal; registry::MAX_DEVS]> = Mutex::new(
    [DevLocal {
        port: None,
        gid_index: None,
        gid: None,
        lid: 0,
    }; registry::MAX_DEVS],
);

/// What the device's QPs were first told about their local end.
pub fn dev_local(dev: u32) -> DevLocal {
    DEV_LOCAL
        .lock()
        .get(dev as usize)
        .copied()
        .unwrap_or_default()
}

fn note_dev(dev: u32, port: Option<u8>, gid_index: Option<u32>, gid: Option<[u8; 16]>, lid: u16) {
    let mut g = DEV_LOCAL.lock();
    let Some(d) = g.get_mut(dev as usize) else {
        return;
    };
    d.port = d.port.or(port);
    d.gid_index = d.gid_index.or(gid_index);
    d.gid = d.gid.or(gid);
    if d.lid == 0 {
        d.lid = lid;
    }
}

/// Tells slot `qp` its identity and its peer (cold path). A second call replaces the first:
/// the QP's later completions count towards the new peer. A handle that is no reserved slot
/// of a registered channel is ignored. Returns the slot's channel and index when the call
/// handed the slot to another QP (another local QPN), so that the caller ends the old QP's
/// stall (`stall_detector::replaced`); None otherwise.
pub fn set_peer(qp: &'static RcclQpStats, p: PeerInfo) -> Option<(&'static Channel, u64)> {
    let Some((dev, c, i)) = registry::slot_home(qp) else {
        crate::diag::debug(|| "set_peer: handle is no telemetry QP slot; ignored".into());
        return None;
    };
    let local_gid = nonzero(p.local_gid);
    let remote_gid = nonzero(p.remote_gid);
    note_dev(dev, p.port, p.gid_index, local_gid, p.local_lid);
    let key = PeerKey::of(remote_gid, p.remote_lid);
    let mut g = c.peers.inner.lock();
    let e = g.entry(i)?;
    // Another local QPN in a slot already told: the transport replaced the QP.
    let replaced = e.qp_num.is_some_and(|n| n != p.qp_num);
    e.qp_num = Some(p.qp_num);
    e.local_gid = local_gid;
    e.local_lid = p.local_lid;
    e.port = p.port.or(e.port);
    e.gid_index = p.gid_index.or(e.gid_index);
    e.peer = Some(Remote {
        qp_num: p.remote_qp_num,
        gid: remote_gid,
        lid: p.remote_lid,
    });
    repoint(qp, c, &mut g, key);
    drop(g);
    replaced.then_some((c, i))
}

/// Points the slot's histogram word at the channel's histogram for `key` (created on demand
/// under the channel's lock, which the caller holds); a word of 0 stays 0.
fn repoint(qp: &RcclQpStats, c: &Channel, g: &mut Inner, key: PeerKey) {
    if qp.log_hist.load(Relaxed) == 0 || c.log.is_none() {
        return;
    }
    let h = match g.hists.iter().find(|(k, _)| *k == key) {
        Some(&(_, h)) => h,
        None if g.hists.len() < peer_hists_per_channel() => {
            if g.hists.try_reserve(1).is_err() {
                return;
            }
            let Some(h) = new_hist(g) else {
                return;
            };
            g.hists.push((key, h));
            h
        }
        None => match g.other {
            Some(h) => h,
            None => {
                let Some(h) = new_hist(g) else { return };
                *g.other.insert(h)
            }
        },
    };
    // Release: the histogram's zeroed memory is visible before its address is.
    qp.log_hist.store(h as *const LogHist as u64, Release);
}

/// Preload only: the QP's type ("rc", "uc", "ud", "xrc_send", "xrc_recv", "raw_packet", ...).
pub fn set_qp_type(qp: &'static RcclQpStats, t: &'static str) {
    if let Some((_, c, i)) = registry::slot_home(qp) {
        if let Some(e) = c.peers.inner.lock().entry(i) {
            e.qp_type = Some(t);
        }
    }
}

/// The QP's number (and port, if known) as soon as it exists, before any peer.
pub fn set_local(qp: &'static RcclQpStats, qp_num: u32, port: Option<u8>) {
    if let Some((dev, c, i)) = registry::slot_home(qp) {
        note_dev(dev, port, None, None, 0);
        let mut g = c.peers.inner.lock();
        let Some(e) = g.entry(i) else {
            return;
        };
        e.qp_num = Some(qp_num);
        e.port = port.or(e.port);
    }
}

/// Tells slot `qp` its path and retry settings (cold path): the fields `a` tells replace the
/// slot's, the others stay as told before (a QP's RTR and RTS transitions tell different
/// ones). A handle that is no reserved slot of a registered channel is ignored.
pub fn set_attrs(qp: &'static RcclQpStats, a: QpAttrs) {
    let Some((_, c, i)) = registry::slot_home(qp) else {
        crate::diag::debug(|| "set_attrs: handle is no telemetry QP slot; ignored".into());
        return;
    };
    if !a.any() {
        return;
    }
    if let Some(e) = c.peers.inner.lock().entry(i) {
        e.attrs = e.attrs.merged(a);
    }
}

/// The slot's peer, if one was told.
pub fn peer_of(qp: &RcclQpStats) -> Option<PeerView> {
    let (_, c, i) = registry::slot_home(qp)?;
    let q = c.peers.qp(i)?;
    let r = q.peer?;
    Some(PeerView {
        qp_num: q.qp_num,
        remote_qp_num: r.qp_num,
        remote_gid: r.gid,
        remote_lid: r.lid,
    })
}

/// The channel's log-scale histogram as the file shows it: the sum of every histogram its
/// slots recorded into (None when the channel records none).
pub fn channel_log(c: &Channel) -> Option<[u64; LOG_BUCKETS]> {
    let mut total = c.log?.snapshot();
    let (hists, other) = c.peers.hists();
    for h in hists.iter().map(|(_, h)| *h).chain(other) {
        for (a, b) in total.iter_mut().zip(h.snapshot()) {
            *a = a.wrapping_add(b);
        }
    }
    Some(total)
}

/// One remote NIC of a device, summed over its channels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevPeer {
    pub key: PeerKey,
    /// The NIC's LID: the key's, or the first non-zero one its QPs were told (0: unknown).
    pub lid: u16,
    /// QPs of the device whose current peer is this NIC.
    pub num_qps: u64,
    /// Those of them whose completions went to a channel's shared "other peers" histogram
    /// (the channel had reached its cap): not in `hist`.
    pub num_qps_shared: u64,
    /// Completions recorded into this NIC's per-peer histograms (None: no histograms).
    pub hist: Option<[u64; LOG_BUCKETS]>,
}

/// A device's peers, one per remote NIC, in key order (GIDs, then LIDs, then unknown).
/// A NIC whose QPs all moved to another peer before completing anything is left out.
pub fn device_peers<'a>(
    channels: impl IntoIterator<Item = &'a Channel>,
    log_histogram: bool,
) -> Vec<DevPeer> {
    let mut acc = DevPeers::new(log_histogram);
    for c in channels {
        acc.add_channel(c);
    }
    acc.finish()
}

/// Builds a device's peers channel by channel, reading each histogram once (the report also
/// needs each channel's sum of them).
pub struct DevPeers {
    m: BTreeMap<PeerKey, DevPeer>,
    log_histogram: bool,
}

impl DevPeers {
    pub fn new(log_histogram: bool) -> DevPeers {
        DevPeers {
            m: BTreeMap::new(),
            log_histogram,
        }
    }

    fn entry(&mut self, key: PeerKey) -> &mut DevPeer {
        let log_histogram = self.log_histogram;
        self.m.entry(key).or_insert_with(|| DevPeer {
            key,
            lid: if let PeerKey::Lid(l) = key { l } else { 0 },
            num_qps: 0,
            num_qps_shared: 0,
            hist: log_histogram.then_some([0; LOG_BUCKETS]),
        })
    }

    /// Adds channel `c`'s QPs and per-peer histograms; returns the channel's log-scale
    /// histogram as the file shows it (what [`channel_log`] returns), None when it has none.
    pub fn add_channel(&mut self, c: &Channel) -> Option<[u64; LOG_BUCKETS]> {
        let mut total = c.log.map(|h| h.snapshot());
        let g = c.peers.inner.lock();
        for (key, h) in &g.hists {
            let snap = h.snapshot();
            if let Some(t) = total.as_mut() {
                for (a, b) in t.iter_mut().zip(&snap) {
                    *a = a.wrapping_add(*b);
                }
            }
            if let Some(t) = self.entry(*key).hist.as_mut() {
                for (a, b) in t.iter_mut().zip(&snap) {
                    *a = a.wrapping_add(*b);
                }
            }
        }
        if let (Some(t), Some(o)) = (total.as_mut(), g.other) {
            for (a, b) in t.iter_mut().zip(o.snapshot()) {
                *a = a.wrapping_add(b);
            }
        }
        let has_hists = c.log.is_some();
        for q in g.qps.iter().flatten() {
            let Some(r) = q.peer else { continue };
            let key = PeerKey::of(r.gid, r.lid);
            let own = g.hists.iter().any(|(k, _)| *k == key);
            let e = self.entry(key);
            e.num_qps += 1;
            if e.lid == 0 {
                e.lid = r.lid;
            }
            e.num_qps_shared += u64::from(has_hists && !own);
        }
        total
    }

    /// The peers, in key order. A NIC no QP points at any more (its QPs re-told another
    /// peer) is listed only while its histograms hold completions.
    pub fn finish(self) -> Vec<DevPeer> {
        self.m
            .into_values()
            .filter(|p| p.num_qps > 0 || p.hist.is_some_and(|h| h.iter().any(|&n| n > 0)))
            .collect()
    }
}

/// A GID as ibv_devinfo prints it: 8 groups of 4 lower-case hex digits joined by ':'.
pub fn gid_text(g: &[u8; 16]) -> String {
    let mut buf = [0u8; GID_TEXT_LEN];
    gid_text_into(g, &mut buf).to_owned()
}

/// The address a GID encodes: dotted quad for an IPv4-mapped GID (::ffff:a.b.c.d), else the
/// IPv6 form; None for the all-zero GID.
pub fn gid_ip(g: &[u8; 16]) -> Option<String> {
    gid_addr(g).map(|a| a.to_string())
}

/// The address a GID encodes (what [`gid_ip`] prints), None for the all-zero GID.
pub fn gid_addr(g: &[u8; 16]) -> Option<std::net::IpAddr> {
    if g.iter().all(|&b| b == 0) {
        return None;
    }
    if g[..10].iter().all(|&b| b == 0) && g[10] == 0xff && g[11] == 0xff {
        return Some(Ipv4Addr::new(g[12], g[13], g[14], g[15]).into());
    }
    Some(Ipv6Addr::from(*g).into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn gid(s: &str) -> [u8; 16] {
        s.parse::<Ipv6Addr>().unwrap().octets()
    }

    #[test]
    fn gid_text_and_ip_of_known_gids() {
        let ll = gid("fe80::5054:ff:fe12:3401");
        assert_eq!(gid_text(&ll), "fe80:0000:0000:0000:5054:00ff:fe12:3401");
        assert_eq!(gid_ip(&ll).as_deref(), Some("fe80::5054:ff:fe12:3401"));
        let v4 = gid("::ffff:192.168.7.21");
        assert_eq!(gid_text(&v4), "0000:0000:0000:0000:0000:ffff:c0a8:0715");
        assert_eq!(gid_ip(&v4).as_deref(), Some("192.168.7.21"));
        assert_eq!(
            gid_text(&[0; 16]),
            "0000:0000:0000:0000:0000:0000:0000:0000"
        );
        assert_eq!(gid_ip(&[0; 16]), None);
        // ::ffff:0:0/96 with a zero address is still an IPv4-mapped GID (0.0.0.0).
        assert_eq!(gid_ip(&gid("::ffff:0.0.0.0")).as_deref(), Some("0.0.0.0"));
        // A global IPv6 GID and one that only looks close to mapped (::fffe:...).
        assert_eq!(gid_ip(&gid("2001:db8::1")).as_deref(), Some("2001:db8::1"));
        assert_eq!(
            gid_ip(&gid("::fffe:c0a8:715")).as_deref(),
            Some("::fffe:c0a8:715")
        );
    }

    #[test]
    fn peer_keys_prefer_the_gid_then_the_lid() {
        let g = gid("fe80::1");
        assert_eq!(PeerKey::of(Some(g), 7), PeerKey::Gid(g));
        assert_eq!(PeerKey::of(Some([0; 16]), 7), PeerKey::Lid(7));
        assert_eq!(PeerKey::of(None, 7), PeerKey::Lid(7));
        assert_eq!(PeerKey::of(None, 0), PeerKey::Unknown);
        assert_eq!(nonzero(Some([0; 16])), None);
    }

    /// A registered device with one channel of `n` slots (device ids 20.. are this module's).
    fn channel(dev: i32, n: i32) -> (&'static Channel, Vec<&'static RcclQpStats>) {
        let hw = crate::hw::HwSettings {
            sysfs_root: "/nonexistent-sysfs".into(),
            ..Default::default()
        };
        registry::register(dev, &format!("peers_test_{dev}"), "IB-CAST", &hw).unwrap();
        let (first, granted) = registry::setup_channel(dev, 3, n).unwrap();
        assert_eq!((first, granted), (0, n as u64));
        let c = registry::channel(dev, 3).unwrap();
        let slots = (0..n as u64).map(|i| c.slots.get(i).unwrap()).collect();
        (c, slots)
    }

    fn info(qpn: u32, rgid: Option<[u8; 16]>, rlid: u16) -> PeerInfo {
        PeerInfo {
            qp_num: qpn,
            local_gid: Some(gid("fe80::1")),
            local_lid: 0,
            port: Some(1),
            gid_index: Some(3),
            remote_qp_num: qpn + 1000,
            remote_gid: rgid,
            remote_lid: rlid,
        }
    }

    fn word(q: &RcclQpStats) -> u64 {
        q.log_hist.load(Relaxed)
    }

    #[test]
    fn set_peer_repoints_per_peer_and_replaces() {
        let (c, q) = channel(20, 12);
        let base = c.log.unwrap() as *const LogHist as u64;
        assert!(
            q.iter().all(|s| word(s) == base),
            "before any peer: the channel's histogram"
        );
        let (a, b) = (gid("::ffff:10.0.1.1"), gid("::ffff:10.0.1.2"));
        set_peer(q[0], info(10, Some(a), 0));
        set_peer(q[1], info(11, Some(a), 0));
        set_peer(q[2], info(12, Some(b), 0));
        set_peer(q[3], info(13, None, 9));
        assert_ne!(word(q[0]), base);
        assert_eq!(
            word(q[0]),
            word(q[1]),
            "one histogram per (channel, peer NIC)"
        );
        assert_ne!(word(q[0]), word(q[2]));
        assert_ne!(word(q[3]), word(q[0]));
        assert_eq!(word(q[4]), base, "an unpeered QP keeps the channel's");
        assert_eq!(
            peer_of(q[1]),
            Some(PeerView {
                qp_num: Some(11),
                remote_qp_num: 1011,
                remote_gid: Some(a),
                remote_lid: 0
            })
        );
        assert_eq!(peer_of(q[4]), None);
        let i1 = c.peers.qp(1).unwrap();
        assert_eq!(
            (i1.port, i1.gid_index, i1.local_gid),
            (Some(1), Some(3), Some(gid("fe80::1")))
        );
        assert_eq!(
            dev_local(20),
            DevLocal {
                port: Some(1),
                gid_index: Some(3),
                gid: Some(gid("fe80::1")),
                lid: 0
            }
        );
        // Completions before and after a replacement: the channel's sum keeps all of them.
        for s in &q[..5] {
            s.log_hist().unwrap().record(1_000);
        }
        set_peer(q[1], info(11, Some(b), 0)); // re-connected elsewhere: the second call wins
        assert_eq!(word(q[1]), word(q[2]));
        q[1].log_hist().unwrap().record(2_000);
        assert_eq!(channel_log(c).unwrap().iter().sum::<u64>(), 6);
        let peers = device_peers([c], true);
        let keys: Vec<_> = peers
            .iter()
            .map(|p| (p.key, p.num_qps, p.hist.unwrap().iter().sum::<u64>()))
            .collect();
        assert_eq!(
            keys,
            vec![
                (PeerKey::Gid(a), 1, 2),
                (PeerKey::Gid(b), 2, 2),
                (PeerKey::Lid(9), 1, 1)
            ]
        );
        assert_eq!(peers[2].lid, 9);
        // set_local and set_qp_type fill in without a peer; a stray address is ignored.
        set_local(q[5], 77, Some(2));
        set_qp_type(q[5], "ud");
        assert_eq!(
            c.peers.qp(5).unwrap(),
            QpInfo {
                qp_num: Some(77),
                port: Some(2),
                qp_type: Some("ud"),
                ..QpInfo::default()
            }
        );
        let stray: &'static RcclQpStats =
            Box::leak(Box::new(unsafe { std::mem::zeroed::<RcclQpStats>() }));
        set_peer(stray, info(1, Some(a), 0));
        assert_eq!((word(stray), peer_of(stray)), (0, None));
    }

    #[test]
    fn set_attrs_merges_what_each_call_tells_and_ignores_strays() {
        let (c, q) = channel(23, 3);
        let rtr = QpAttrs {
            traffic_class: Some(106),
            sl: Some(3),
            path_mtu: Some(4096),
            ..QpAttrs::default()
        };
        set_attrs(q[1], rtr);
        set_attrs(
            q[1],
            QpAttrs {
                timeout: Some(20),
                retry_cnt: Some(7),
                sl: Some(0),
                ..QpAttrs::default()
            },
        );
        let told = c.peers.qp(1).unwrap().attrs;
        assert_eq!(
            told,
            QpAttrs {
                timeout: Some(20),
                retry_cnt: Some(7),
                sl: Some(0),
                ..rtr
            }
        );
        // Telling nothing makes no record; the peer call keeps the settings.
        set_attrs(q[2], QpAttrs::default());
        assert_eq!(c.peers.qp(2), None);
        set_peer(q[1], info(5, Some(gid("fe80::9")), 0));
        assert_eq!(c.peers.qp(1).unwrap().attrs, told);
        let stray: &'static RcclQpStats =
            Box::leak(Box::new(unsafe { std::mem::zeroed::<RcclQpStats>() }));
        set_attrs(stray, rtr);
    }

    #[test]
    fn beyond_the_cap_peers_share_one_histogram_and_a_zero_word_stays_zero() {
        let (c, q) = channel(21, 14);
        let g = |k: u8| {
            let mut x = gid("::ffff:10.9.0.0");
            x[15] = k;
            x
        };
        for (k, &s) in q.iter().enumerate().take(12) {
            set_peer(s, info(k as u32, Some(g(k as u8 + 1)), 0));
        }
        let words: std::collections::HashSet<u64> = q[..12].iter().map(|s| word(s)).collect();
        assert_eq!(
            words.len(),
            PEER_HISTS_PER_CHANNEL + 1,
            "8 own histograms and one shared"
        );
        assert_eq!(word(q[8]), word(q[11]));
        let (hists, other) = c.peers.hists();
        assert_eq!(
            (hists.len(), other.map(|h| h as *const LogHist as u64)),
            (PEER_HISTS_PER_CHANNEL, Some(word(q[9])))
        );
        let peers = device_peers([c], true);
        assert_eq!(peers.len(), 12);
        assert_eq!(peers.iter().map(|p| p.num_qps_shared).sum::<u64>(), 4);
        // RCCL_TELEMETRY_LOG_HISTOGRAM=0's word: never re-pointed.
        q[13].log_hist.store(0, Relaxed);
        set_peer(q[13], info(99, Some(g(1)), 0));
        assert_eq!(word(q[13]), 0);
        assert_eq!(
            peer_of(q[13]).map(|p| p.remote_qp_num),
            Some(1099),
            "the peer is still told"
        );
        let peers = device_peers([c], false);
        assert!(peers.iter().all(|p| p.hist.is_none()));
    }

    #[test]
    fn a_completion_racing_a_repoint_lands_in_some_histogram_of_the_channel() {
        crate::latency::configure(1, 5, 30_000, false, std::path::Path::new("/sys"));
        let (c, q) = channel(22, 2);
        let before = channel_log(c).unwrap().iter().sum::<u64>();
        // The QP's thread records sampled completions through the hot path (token > 1) until
        // the setup thread has re-pointed the slot thousands of times (past the cap, so the
        // shared histogram too), all while it records.
        let repoints = AtomicU64::new(0);
        let done = std::sync::atomic::AtomicBool::new(false);
        let mut recorded = 0u64;
        std::thread::scope(|sc| {
            sc.spawn(|| {
                let mut k = 0u8;
                while !done.load(Acquire) {
                    let mut g = gid("::ffff:10.8.0.0");
                    g[15] = 1 + k % 11;
                    set_peer(q[0], info(5, Some(g), 0));
                    k = k.wrapping_add(1);
                    repoints.fetch_add(1, Relaxed);
                }
            });
            while recorded < 50_000 || repoints.load(Relaxed) < 5_000 {
                q[0].wqe_complete_at(2, 2 + (recorded % 5_000) as i64);
                recorded += 1;
            }
            done.store(true, Release);
        });
        let after = channel_log(c).unwrap();
        assert_eq!(
            after.iter().sum::<u64>() - before,
            recorded,
            "no completion lost whatever the re-points"
        );
        assert_eq!(q[0].snapshot().sampled(), recorded);
        let lost: u64 = c
            .peers
            .hists()
            .0
            .iter()
            .map(|(_, h)| h.lost.load(Relaxed))
            .sum();
        assert_eq!(lost, 0);
    }

    proptest! {
        #[test]
        fn gid_text_round_trips_and_ip_matches_std(g in any::<[u8; 16]>(), mapped in any::<bool>(), zero in any::<bool>()) {
            let mut g = g;
            if mapped {
                g[..10].fill(0);
                g[10] = 0xff;
                g[11] = 0xff;
            }
            if zero {
                g = [0; 16];
            }
            let t = gid_text(&g);
            prop_assert_eq!(t.len(), 39);
            prop_assert!(t.chars().all(|c| c == ':' || c.is_ascii_digit() || ('a'..='f').contains(&c)));
            // The text form is a full IPv6 address: parsing it gives the bytes back.
            prop_assert_eq!(t.parse::<Ipv6Addr>().unwrap().octets(), g);
            match gid_ip(&g) {
                None => prop_assert_eq!(g, [0; 16]),
                Some(ip) => {
                    let a = Ipv6Addr::from(g);
                    if let Some(v4) = a.to_ipv4_mapped() {
                        prop_assert_eq!(ip.parse::<Ipv4Addr>().unwrap(), v4);
                    } else {
                        prop_assert_eq!(ip.parse::<Ipv6Addr>().unwrap(), a);
                    }
                }
            }
        }
    }
}
