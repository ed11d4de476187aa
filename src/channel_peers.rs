//! The per-channel side table of told QP identities and per-peer histograms (`ChannelPeers`)
//! and the types it holds. Only data: it sits below the registry, whose channels embed it;
//! `peers` (above the registry) tells and reads it. See `peers` for the design.

use parking_lot::Mutex;

use crate::loghist::LogHist;

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
    /// The QP's path and retry settings (rcclTelemetryQpSetAttrs, the preload's modify_qp).
    pub attrs: QpAttrs,
}

/// A QP's path and retry settings as told: each field None until a call told it (a caller's
/// shorter struct, or a modify_qp whose mask lacks it, leaves it as it was).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QpAttrs {
    /// GRH traffic class (DSCP << 2 | ECN).
    pub traffic_class: Option<u8>,
    pub sl: Option<u8>,
    /// Bytes (256 .. 4096).
    pub path_mtu: Option<u32>,
    /// Local ACK timeout exponent: 4.096 us * 2^timeout.
    pub timeout: Option<u8>,
    pub retry_cnt: Option<u8>,
    /// 7 = infinite.
    pub rnr_retry: Option<u8>,
    /// IB encoding: 0 = 655.36 ms.
    pub min_rnr_timer: Option<u8>,
    pub sgid_index: Option<u8>,
    pub port: Option<u8>,
    pub hop_limit: Option<u8>,
    pub max_rd_atomic: Option<u8>,
    pub max_dest_rd_atomic: Option<u8>,
}

impl QpAttrs {
    /// Whether any setting was told.
    pub fn any(&self) -> bool {
        *self != QpAttrs::default()
    }

    /// These settings with every field `newer` tells replaced by its value.
    pub fn merged(self, newer: QpAttrs) -> QpAttrs {
        QpAttrs {
            traffic_class: newer.traffic_class.or(self.traffic_class),
            sl: newer.sl.or(self.sl),
            path_mtu: newer.path_mtu.or(self.path_mtu),
            timeout: newer.timeout.or(self.timeout),
            retry_cnt: newer.retry_cnt.or(self.retry_cnt),
            rnr_retry: newer.rnr_retry.or(self.rnr_retry),
            min_rnr_timer: newer.min_rnr_timer.or(self.min_rnr_timer),
            sgid_index: newer.sgid_index.or(self.sgid_index),
            port: newer.port.or(self.port),
            hop_limit: newer.hop_limit.or(self.hop_limit),
            max_rd_atomic: newer.max_rd_atomic.or(self.max_rd_atomic),
            max_dest_rd_atomic: newer.max_dest_rd_atomic.or(self.max_dest_rd_atomic),
        }
    }
}

/// One channel's side table.
pub struct ChannelPeers {
    pub(crate) inner: Mutex<Inner>,
}

#[derive(Default)]
pub(crate) struct Inner {
    /// By slot index (a channel's slots are dense: a vector, grown to the highest told slot).
    pub(crate) qps: Vec<Option<QpInfo>>,
    /// Per-peer histograms in creation order (at most PEER_HISTS_PER_CHANNEL).
    pub(crate) hists: Vec<(PeerKey, &'static LogHist)>,
    /// The "other peers" histogram, once the cap was reached.
    pub(crate) other: Option<&'static LogHist>,
    /// Histograms of the channel's earlier owners, cleared, for its next per-peer ones (a
    /// channel handed from communicator to communicator keeps reusing the same few).
    pub(crate) spare: Vec<&'static LogHist>,
}

impl Default for ChannelPeers {
    fn default() -> Self {
        ChannelPeers::new()
    }
}

impl ChannelPeers {
    pub fn new() -> ChannelPeers {
        ChannelPeers {
            inner: Mutex::new(Inner::default()),
        }
    }

    /// What was told about slot `i` (None when nothing was).
    pub fn qp(&self, i: u64) -> Option<QpInfo> {
        self.inner.lock().qps.get(i as usize).copied().flatten()
    }

    /// The per-peer histograms (key, histogram) and the shared "other peers" one.
    pub fn hists(&self) -> (Vec<(PeerKey, &'static LogHist)>, Option<&'static LogHist>) {
        let g = self.inner.lock();
        (g.hists.clone(), g.other)
    }

    /// Forgets every told QP and empties the per-peer histograms into the spares (the channel
    /// is handed to its next owner; no slot points at them any more).
    pub fn clear(&self) {
        let mut g = self.inner.lock();
        g.qps = Vec::new();
        let other = g.other.take();
        let hists: Vec<&'static LogHist> = g.hists.drain(..).map(|(_, h)| h).chain(other).collect();
        for h in hists {
            h.reset();
            g.spare.push(h);
        }
    }
}

impl Inner {
    /// Slot `i`'s record, created empty on first use; None when the table cannot grow to it
    /// (out of memory: what would have been told is dropped, and said once).
    pub(crate) fn entry(&mut self, i: u64) -> Option<&mut QpInfo> {
        let i = usize::try_from(i).ok()?;
        if self.qps.len() <= i {
            if self.qps.try_reserve(i + 1 - self.qps.len()).is_err() {
                crate::diag::warn_once(&NO_MEMORY_SAID, || {
                    format!("out of memory: the identity and peer of QP slot {i} (and of later ones that do not fit) are not recorded; their counts are")
                });
                return None;
            }
            self.qps.resize(i + 1, None);
        }
        Some(self.qps[i].get_or_insert_with(QpInfo::default))
    }
}

/// Whether a record that could not be allocated was said (once per process).
static NO_MEMORY_SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// An all-zero GID counts as none.
pub fn nonzero(g: Option<[u8; 16]>) -> Option<[u8; 16]> {
    g.filter(|g| g.iter().any(|&b| b != 0))
}
