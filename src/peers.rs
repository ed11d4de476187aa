//! Who is on the other end of each QP (issue 22): the QP's own identity (QPN, local GID/LID,
//! port, GID index, type) and its peer's (QPN, GID, LID), told once per QP off the data path
//! (rcclTelemetryQpSetPeer, or the preload's modify_qp wrapper), and the per-peer latency.
//!
//! Storage: nothing in the slot (its 256-byte layout is mirrored by the header). Each channel
//! keeps a side table (`ChannelPeers`, in `registry::Channel`) behind one mutex: the told
//! identities by slot index, and the channel's per-peer log-scale histograms. A handle leads
//! back to its channel through the registry's slot index (`registry::slot_home`). Every access
//! is cold: a setup call per QP, a report per file.
//!
//! Per-peer latency: at SetPeer the slot's log-histogram word (`RcclQpStats::log_hist`, the
//! address the hot path records a sampled completion into) is re-pointed from the channel's
//! histogram at a `LogHist` for (this channel, the peer NIC), created on demand, at most
//! [`PEER_HISTS_PER_CHANNEL`] per channel; QPs towards further peers share one "other peers"
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

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering::*};

use parking_lot::Mutex;

use crate::counters::RcclQpStats;
use crate::loghist::{LogHist, LOG_BUCKETS};
use crate::registry::{self, Channel};

/// Per-peer histograms a channel creates before its QPs towards further peers share one
/// "other peers" histogram. Rings and trees give a channel 2-3 peers per device; 8 leaves room
/// for wider patterns while bounding the memory at (8 + 2) x 2112 bytes per channel.
pub const PEER_HISTS_PER_CHANNEL: usize = 8;

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

/// The remote NIC a peer histogram is for: its GID, else its LID, else unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PeerKey {
    Gid([u8; 16]),
    Lid(u16),
    Unknown,
}

impl PeerKey {
    pub fn of(gid: Option<[u8; 16]>, lid: u16) -> PeerKey {
        match (nonzero(gid), lid) {
            (Some(g), _) => PeerKey::Gid(g),
            (None, 0) => PeerKey::Unknown,
            (None, l) => PeerKey::Lid(l),
        }
    }
}

/// The remote end of one QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote {
    pub qp_num: u32,
    pub gid: Option<[u8; 16]>,
    pub lid: u16,
}

/// Everything told about one QP slot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QpInfo {
    pub qp_num: Option<u32>,
    pub local_gid: Option<[u8; 16]>,
    pub local_lid: u16,
    pub port: Option<u8>,
    pub gid_index: Option<u32>,
    pub qp_type: Option<&'static str>,
    pub peer: Option<Remote>,
}

/// One channel's side table.
pub struct ChannelPeers {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    qps: HashMap<u64, QpInfo>,
    /// Per-peer histograms in creation order (at most PEER_HISTS_PER_CHANNEL).
    hists: Vec<(PeerKey, &'static LogHist)>,
    /// The "other peers" histogram, once the cap was reached.
    other: Option<&'static LogHist>,
}

impl Default for ChannelPeers {
    fn default() -> Self {
        ChannelPeers::new()
    }
}

impl ChannelPeers {
    pub fn new() -> ChannelPeers {
        ChannelPeers { inner: Mutex::new(Inner::default()) }
    }

    /// What was told about slot `i` (None when nothing was).
    pub fn qp(&self, i: u64) -> Option<QpInfo> {
        self.inner.lock().qps.get(&i).copied()
    }

    /// Every told slot, by slot index.
    pub fn qps(&self) -> BTreeMap<u64, QpInfo> {
        self.inner.lock().qps.iter().map(|(&i, &q)| (i, q)).collect()
    }

    /// The per-peer histograms (key, histogram) and the shared "other peers" one.
    pub fn hists(&self) -> (Vec<(PeerKey, &'static LogHist)>, Option<&'static LogHist>) {
        let g = self.inner.lock();
        (g.hists.clone(), g.other)
    }
}

/// Bytes of per-peer and "other peers" histograms allocated so far (their memory cost).
static HIST_BYTES: AtomicU64 = AtomicU64::new(0);

pub fn hist_bytes() -> u64 {
    HIST_BYTES.load(Relaxed)
}

fn new_hist() -> &'static LogHist {
    HIST_BYTES.fetch_add(std::mem::size_of::<LogHist>() as u64, Relaxed);
    Box::leak(Box::new(LogHist::new()))
}

/// The device-level identity: the first port, GID index, GID and LID told for its QPs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DevLocal {
    pub port: Option<u8>,
    pub gid_index: Option<u32>,
    pub gid: Option<[u8; 16]>,
    pub lid: u16,
}

static DEV_LOCAL: Mutex<[DevLocal; registry::MAX_DEVS]> =
    Mutex::new([DevLocal { port: None, gid_index: None, gid: None, lid: 0 }; registry::MAX_DEVS]);

/// What the device's QPs were first told about their local end.
pub fn dev_local(dev: u32) -> DevLocal {
    DEV_LOCAL.lock().get(dev as usize).copied().unwrap_or_default()
}

fn note_dev(dev: u32, port: Option<u8>, gid_index: Option<u32>, gid: Option<[u8; 16]>, lid: u16) {
    let mut g = DEV_LOCAL.lock();
    let Some(d) = g.get_mut(dev as usize) else { return };
    d.port = d.port.or(port);
    d.gid_index = d.gid_index.or(gid_index);
    d.gid = d.gid.or(gid);
    if d.lid == 0 {
        d.lid = lid;
    }
}

/// An all-zero GID counts as none.
pub fn nonzero(g: Option<[u8; 16]>) -> Option<[u8; 16]> {
    g.filter(|g| g.iter().any(|&b| b != 0))
}

/// Tells slot `qp` its identity and its peer (cold path). A second call replaces the first:
/// the QP's later completions count towards the new peer. A handle that is no reserved slot
/// of a registered channel is ignored.
pub fn set_peer(qp: &'static RcclQpStats, p: PeerInfo) {
    let Some((dev, c, i)) = registry::slot_home(qp) else {
        crate::diag::debug(|| "set_peer: handle is no telemetry QP slot; ignored".into());
        return;
    };
    let local_gid = nonzero(p.local_gid);
    let remote_gid = nonzero(p.remote_gid);
    note_dev(dev, p.port, p.gid_index, local_gid, p.local_lid);
    let key = PeerKey::of(remote_gid, p.remote_lid);
    let mut g = c.peers.inner.lock();
    let e = g.qps.entry(i).or_default();
    e.qp_num = Some(p.qp_num);
    e.local_gid = local_gid;
    e.local_lid = p.local_lid;
    e.port = p.port.or(e.port);
    e.gid_index = p.gid_index.or(e.gid_index);
    e.peer = Some(Remote { qp_num: p.remote_qp_num, gid: remote_gid, lid: p.remote_lid });
    repoint(qp, c, &mut g, key);
}

/// Points the slot's histogram word at the channel's histogram for `key` (created on demand
/// under the channel's lock, which the caller holds); a word of 0 stays 0.
fn repoint(qp: &RcclQpStats, c: &Channel, g: &mut Inner, key: PeerKey) {
    if qp.log_hist.load(Relaxed) == 0 || c.log.is_none() {
        return;
    }
    let h = match g.hists.iter().find(|(k, _)| *k == key) {
        Some(&(_, h)) => h,
        None if g.hists.len() < PEER_HISTS_PER_CHANNEL => {
            let h = new_hist();
            g.hists.push((key, h));
            h
        }
        None => *g.other.get_or_insert_with(new_hist),
    };
    // Release: the histogram's zeroed memory is visible before its address is.
    qp.log_hist.store(h as *const LogHist as u64, Release);
}

/// Preload only: the QP's type ("rc", "uc", "ud", "xrc_send", "xrc_recv", "raw_packet", ...).
pub fn set_qp_type(qp: &'static RcclQpStats, t: &'static str) {
    if let Some((_, c, i)) = registry::slot_home(qp) {
        c.peers.inner.lock().qps.entry(i).or_default().qp_type = Some(t);
    }
}

/// The QP's number (and port, if known) as soon as it exists, before any peer.
pub fn set_local(qp: &'static RcclQpStats, qp_num: u32, port: Option<u8>) {
    if let Some((dev, c, i)) = registry::slot_home(qp) {
        note_dev(dev, port, None, None, 0);
        let mut g = c.peers.inner.lock();
        let e = g.qps.entry(i).or_default();
        e.qp_num = Some(qp_num);
        e.port = port.or(e.port);
    }
}

/// The slot's peer, if one was told.
pub fn peer_of(qp: &RcclQpStats) -> Option<PeerView> {
    let (_, c, i) = registry::slot_home(qp)?;
    let q = c.peers.qp(i)?;
    let r = q.peer?;
    Some(PeerView { qp_num: q.qp_num, remote_qp_num: r.qp_num, remote_gid: r.gid, remote_lid: r.lid })
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
    /// QPs of the device whose current peer is this NIC.
    pub num_qps: u64,
    /// Those of them whose completions went to a channel's shared "other peers" histogram
    /// (the channel had reached its cap): not in `hist`.
    pub num_qps_shared: u64,
    /// Completions recorded into this NIC's per-peer histograms (None: no histograms).
    pub hist: Option<[u64; LOG_BUCKETS]>,
}

/// A device's peers, one per remote NIC, in key order (GIDs, then LIDs, then unknown).
pub fn device_peers<'a>(channels: impl IntoIterator<Item = &'a Channel>, log_histogram: bool) -> Vec<DevPeer> {
    fn entry(m: &mut BTreeMap<PeerKey, DevPeer>, key: PeerKey, log_histogram: bool) -> &mut DevPeer {
        m.entry(key).or_insert_with(|| DevPeer { key, num_qps: 0, num_qps_shared: 0, hist: log_histogram.then_some([0; LOG_BUCKETS]) })
    }
    let mut m: BTreeMap<PeerKey, DevPeer> = BTreeMap::new();
    for c in channels {
        let g = c.peers.inner.lock();
        for (key, h) in &g.hists {
            if let Some(t) = entry(&mut m, *key, log_histogram).hist.as_mut() {
                for (a, b) in t.iter_mut().zip(h.snapshot()) {
                    *a = a.wrapping_add(b);
                }
            }
        }
        let has_hists = c.log.is_some();
        for q in g.qps.values() {
            let Some(r) = q.peer else { continue };
            let key = PeerKey::of(r.gid, r.lid);
            let own = g.hists.iter().any(|(k, _)| *k == key);
            let e = entry(&mut m, key, log_histogram);
            e.num_qps += 1;
            e.num_qps_shared += u64::from(has_hists && !own);
        }
    }
    m.into_values().collect()
}

/// A GID as ibv_devinfo prints it: 8 groups of 4 lower-case hex digits joined by ':'.
pub fn gid_text(g: &[u8; 16]) -> String {
    let mut s = String::with_capacity(39);
    for (i, pair) in g.chunks_exact(2).enumerate() {
        if i > 0 {
            s.push(':');
        }
        s.push_str(&format!("{:02x}{:02x}", pair[0], pair[1]));
    }
    s
}

/// The address a GID encodes: dotted quad for an IPv4-mapped GID (::ffff:a.b.c.d), else the
/// IPv6 form; None for the all-zero GID.
pub fn gid_ip(g: &[u8; 16]) -> Option<String> {
    if g.iter().all(|&b| b == 0) {
        return None;
    }
    if g[..10].iter().all(|&b| b == 0) && g[10] == 0xff && g[11] == 0xff {
        return Some(Ipv4Addr::new(g[12], g[13], g[14], g[15]).to_string());
    }
    Some(Ipv6Addr::from(*g).to_string())
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
        assert_eq!(gid_text(&[0; 16]), "0000:0000:0000:0000:0000:0000:0000:0000");
        assert_eq!(gid_ip(&[0; 16]), None);
        // ::ffff:0:0/96 with a zero address is still an IPv4-mapped GID (0.0.0.0).
        assert_eq!(gid_ip(&gid("::ffff:0.0.0.0")).as_deref(), Some("0.0.0.0"));
        // A global IPv6 GID and one that only looks close to mapped (::fffe:...).
        assert_eq!(gid_ip(&gid("2001:db8::1")).as_deref(), Some("2001:db8::1"));
        assert_eq!(gid_ip(&gid("::fffe:c0a8:715")).as_deref(), Some("::fffe:c0a8:715"));
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
