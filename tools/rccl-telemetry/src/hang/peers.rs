//! Who a stalled or quiet QP waits on: its peer resolved to a rank and NIC.

use crate::load::addr::{lookup, norm_gid, QpIndex};
use crate::load::Run;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A peer resolved to its rank and NIC, or to its address when no file has it.
pub(crate) enum Peer {
    Rank(String, i64, String),
    Absent(String),
    Unresolved,
}

/// Resolves a QP's peer to its rank and NIC: by the QPs of the run, else by the device
/// addresses of the latest files.
pub(crate) struct PeerResolver<'a> {
    idx: &'a QpIndex,
    /// Who owns each device GID and LID ("lid N") of the latest files.
    by_addr: HashMap<String, BTreeSet<(String, i64, String)>>,
}

impl<'a> PeerResolver<'a> {
    /// Resolves through the QPs of the run (`idx`) and indexes the device GIDs and LIDs of the
    /// latest files: a peer whose QPN no file claims (a QP created after its owner's last
    /// file) still names its NIC.
    pub(crate) fn new(
        run: &Run,
        idx: &'a QpIndex,
        latest: &BTreeMap<crate::load::ranks::RankKey, usize>,
    ) -> Self {
        let mut by_addr: HashMap<String, BTreeSet<(String, i64, String)>> = HashMap::new();
        for &fi in latest.values() {
            let f = &run.files[fi].file;
            for d in &f.devices {
                let who = (f.host_name.clone(), f.process_id, d.roce_device.clone());
                if let Some(g) = norm_gid(d.gid.as_deref()) {
                    by_addr.entry(g).or_default().insert(who.clone());
                }
                if let Some(l) = d.lid.filter(|l| *l > 0) {
                    by_addr.entry(format!("lid {l}")).or_default().insert(who);
                }
            }
        }
        PeerResolver { idx, by_addr }
    }

    /// The peer's rank and NIC, its address when no file has it, or Unresolved.
    pub(crate) fn resolve(&self, p: &crate::model::QpPeer) -> Peer {
        let claims = lookup(self.idx, p.gid.as_deref(), p.lid, p.qp_num);
        let ranks: BTreeSet<(&String, i64)> = claims.iter().map(|c| (&c.0, c.1)).collect();
        if ranks.len() == 1 {
            let c = &claims[0];
            return Peer::Rank(c.0.clone(), c.1, format!("{}:{}", c.0, c.2));
        }
        if ranks.len() > 1 {
            return Peer::Unresolved;
        }
        let g = norm_gid(p.gid.as_deref());
        let key = g
            .clone()
            .or(p.lid.filter(|l| *l > 0).map(|l| format!("lid {l}")));
        let Some(key) = key else {
            return Peer::Unresolved;
        };
        match self.by_addr.get(&key) {
            Some(s) if s.len() == 1 => {
                let (h, pid, d) = s.iter().next().cloned().unwrap_or_default();
                Peer::Rank(h.clone(), pid, format!("{h}:{d}"))
            }
            Some(_) => Peer::Unresolved,
            None => {
                let what = match (&g, p.gid_ip.as_deref().filter(|s| !s.is_empty())) {
                    (Some(_), Some(ip)) => format!("gid {} ({ip})", g.clone().unwrap_or_default()),
                    (Some(g), None) => format!("gid {g}"),
                    _ => key,
                };
                Peer::Absent(format!("{what} (not in the files)"))
            }
        }
    }
}
