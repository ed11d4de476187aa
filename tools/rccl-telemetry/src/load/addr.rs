//! How a QP, its peer and a NIC are addressed, compared canonically: a GID as its 128 bits (the
//! writer prints 8 groups of 4 hex digits, a hand-written or another tool's file may say
//! `::ffff:10.1.0.1` or upper case: all one address), else a LID. And who in the run holds a
//! (GID or LID, QPN): the index every peer lookup goes through, joining on the GID first and
//! on the LID when the GID finds nobody (a side without GRH, a GID the peer's file lacks).

use crate::model::{Device, QueuePair, TelemetryFile};
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

/// How a QP or a NIC is addressed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Addr {
    /// A GID, as its 128 bits.
    Gid(u128),
    /// A GID whose text is no IPv6 address, compared as lower-case text.
    GidText(String),
    /// An InfiniBand LID (> 0).
    Lid(u64),
}

/// The 128 bits of a GID written as an IPv6 address (any form) or, as `gid_ip` has it, an
/// IPv4 address (the IPv4-mapped GID).
pub fn gid_bits(g: &str) -> Option<u128> {
    let t = g.trim();
    if let Ok(a) = t.parse::<Ipv6Addr>() {
        return Some(u128::from(a));
    }
    t.parse::<Ipv4Addr>()
        .ok()
        .map(|a| u128::from(a.to_ipv6_mapped()))
}

/// A GID's address; None for null, empty or all zeros.
pub fn gid_addr(g: Option<&str>) -> Option<Addr> {
    let t = g?.trim();
    match gid_bits(t) {
        Some(0) => None,
        Some(b) => Some(Addr::Gid(b)),
        None => {
            let l = t.to_ascii_lowercase();
            (!l.chars().all(|c| c == '0' || c == ':')).then_some(Addr::GidText(l))
        }
    }
}

/// A LID's address; None for null and 0.
pub fn lid_addr(l: Option<u64>) -> Option<Addr> {
    l.filter(|l| *l > 0).map(Addr::Lid)
}

/// The GID as the library writes it (8 groups of 4 lower-case hex digits).
pub fn format_gid(b: u128) -> String {
    let g: Vec<String> = (0..8)
        .rev()
        .map(|i| format!("{:04x}", (b >> (16 * i)) & 0xffff))
        .collect();
    g.join(":")
}

/// The canonical GID text (as the library writes it), None for null, empty or all zeros.
pub fn norm_gid(g: Option<&str>) -> Option<String> {
    match gid_addr(g)? {
        Addr::Gid(b) => Some(format_gid(b)),
        Addr::GidText(s) => Some(s),
        Addr::Lid(_) => None,
    }
}

/// The GID's address, else the LID's: how a peer entry of a device names its NIC.
pub fn addr(gid: Option<&str>, lid: Option<u64>) -> Option<Addr> {
    gid_addr(gid).or_else(|| lid_addr(lid))
}

/// The addresses a QP is reached by: its GID (its own, else its device's) and its LID. The
/// LID is its port's: the QP's own `local_lid` where the file records one, else the device's
/// unless the QP names another port than the device's (a dual-port HCA): then it has none.
pub fn qp_addrs(d: &Device, q: &QueuePair) -> (Option<Addr>, Option<Addr>) {
    let gid = gid_addr(q.local_gid.as_deref().or(d.gid.as_deref()));
    let other_port = matches!((q.port(), d.port), (Some(a), Some(b)) if a != b);
    let lid = match q.local_lid() {
        Some(l) => lid_addr(Some(l)),
        None if other_port => None,
        None => lid_addr(d.lid),
    };
    (gid, lid)
}

/// (address, QPN) -> the claimants, with the GID-then-LID lookup.
///
/// Built for a million QPs: an address is numbered once (a run has one per NIC and port), and
/// the (address number, QPN) keys are one sorted list searched by halves, the claimants in a
/// list beside it in the same order. A key's claimants are neighbours, in the order they were
/// added (two subnets repeating a LID and a QPN, a copied file). A QP under its GID and its
/// LID takes two keys of 16 bytes and two claimants (40 to 48 bytes), where a hash table took
/// about 100 (twice the QPs, rounded up to a power of two) and 150 while it grew.
#[derive(Debug, Clone)]
pub struct AddrIndex<T> {
    addrs: HashMap<Addr, u32>,
    keys: Vec<(u32, u64)>,
    vals: Vec<T>,
}

/// An [`AddrIndex`] being filled: (address number, QPN, claimant) in the order added.
#[derive(Debug, Clone)]
pub struct AddrIndexBuilder<T> {
    addrs: HashMap<Addr, u32>,
    entries: Vec<(u32, u64, T)>,
}

impl<T> Default for AddrIndexBuilder<T> {
    fn default() -> Self {
        AddrIndexBuilder {
            addrs: HashMap::new(),
            entries: Vec::new(),
        }
    }
}

impl<T: Clone> AddrIndexBuilder<T> {
    /// A builder sized for `entries` (address, QPN) claims, so that filling it does not hold
    /// a list and its doubled copy at once.
    pub fn with_capacity(entries: usize) -> Self {
        AddrIndexBuilder {
            addrs: HashMap::new(),
            entries: Vec::with_capacity(entries),
        }
    }

    pub fn insert(&mut self, a: Addr, qpn: u64, t: T) {
        let n = self.addrs.len() as u32;
        let n = *self.addrs.entry(a).or_insert(n);
        self.entries.push((n, qpn, t));
    }

    /// Indexes a QP under both its addresses.
    pub fn insert_qp(&mut self, d: &Device, q: &QueuePair, t: T) {
        let Some(qpn) = q.qp_num else { return };
        let (gid, lid) = qp_addrs(d, q);
        if let Some(g) = gid {
            self.insert(g, qpn, t.clone());
        }
        if let Some(l) = lid {
            self.insert(l, qpn, t);
        }
    }

    /// Claims added so far.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds every claim of this builder to `into`, in the order they were added here, each
    /// claimant through `f` (one file's QPs, by device number, into the run's index).
    pub fn add_to<U: Clone>(self, into: &mut AddrIndexBuilder<U>, f: impl Fn(T) -> U) {
        let mut addrs: Vec<Option<Addr>> = vec![None; self.addrs.len()];
        for (a, n) in self.addrs {
            addrs[n as usize] = Some(a);
        }
        for (n, qpn, t) in self.entries {
            if let Some(a) = &addrs[n as usize] {
                into.insert(a.clone(), qpn, f(t));
            }
        }
    }

    /// The index: the claims sorted by key, each key's claimants in the order they were added
    /// (a stable sort).
    pub fn build(mut self) -> AddrIndex<T> {
        self.entries.sort_by_key(|e| (e.0, e.1));
        let keys = self.entries.iter().map(|e| (e.0, e.1)).collect();
        let vals = self.entries.into_iter().map(|e| e.2).collect();
        AddrIndex {
            addrs: self.addrs,
            keys,
            vals,
        }
    }
}

impl<T> AddrIndex<T> {
    /// Who holds the peer (gid, lid, qpn): by GID, and by LID when the GID names nobody.
    pub fn get(&self, gid: Option<&Addr>, lid: Option<&Addr>, qpn: u64) -> &[T] {
        let find = |a: Option<&Addr>| -> &[T] {
            let Some(key) = a.and_then(|a| self.addrs.get(a)).map(|&n| (n, qpn)) else {
                return &[];
            };
            let lo = self.keys.partition_point(|k| *k < key);
            let hi = lo + self.keys[lo..].partition_point(|k| *k == key);
            &self.vals[lo..hi]
        };
        let by_gid = find(gid);
        if by_gid.is_empty() {
            find(lid)
        } else {
            by_gid
        }
    }
}

/// A claimant by name: (host, pid, device), shared by the QPs of one device.
pub type Who = std::sync::Arc<(String, i64, String)>;

/// Who holds a (GID or LID, QPN) in the run: "host:pid device" of every QP claiming it.
pub type QpIndex = AddrIndex<Who>;

/// Indexes every QP of the files under its GID and its LID, with its QPN (the index a pruned
/// read builds from the files' claims instead: `load::prune`).
pub fn index_files<'a>(files: impl Iterator<Item = &'a TelemetryFile> + Clone) -> QpIndex {
    let n = files
        .clone()
        .flat_map(|f| &f.devices)
        .map(|d| {
            d.channels
                .iter()
                .flat_map(|c| &c.queue_pairs)
                .map(|q| claims(d, q))
                .sum::<usize>()
        })
        .sum();
    let mut idx = AddrIndexBuilder::with_capacity(n);
    for f in files {
        for d in &f.devices {
            let who: Who =
                std::sync::Arc::new((f.host_name.clone(), f.process_id, d.roce_device.clone()));
            for c in &d.channels {
                for q in &c.queue_pairs {
                    idx.insert_qp(d, q, who.clone());
                }
            }
        }
    }
    idx.build()
}

/// Under how many addresses a QP is indexed (0 without a QPN).
pub fn claims(d: &Device, q: &QueuePair) -> usize {
    if q.qp_num.is_none() {
        return 0;
    }
    let (gid, lid) = qp_addrs(d, q);
    usize::from(gid.is_some()) + usize::from(lid.is_some())
}

/// The QPs claiming a peer identity (empty: in no file; more than one: ambiguous): by GID,
/// by LID when the GID names nobody.
pub fn lookup<'a>(idx: &'a QpIndex, gid: Option<&str>, lid: Option<u64>, qpn: u64) -> &'a [Who] {
    idx.get(gid_addr(gid).as_ref(), lid_addr(lid).as_ref(), qpn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::QpMonitor;

    #[test]
    fn a_gid_is_one_address_in_any_of_its_forms() {
        let full = gid_addr(Some("0000:0000:0000:0000:0000:ffff:0a01:0001"));
        assert!(full.is_some());
        for g in [
            "::ffff:10.1.0.1",
            "::FFFF:0A01:1",
            " 0:0:0:0:0:ffff:a01:1 ",
            "10.1.0.1",
        ] {
            assert_eq!(gid_addr(Some(g)), full, "{g}");
        }
        assert_eq!(
            norm_gid(Some("::ffff:10.1.0.1")).as_deref(),
            Some("0000:0000:0000:0000:0000:ffff:0a01:0001")
        );
        assert_eq!(
            norm_gid(Some("FE80::1")).as_deref(),
            Some("fe80:0000:0000:0000:0000:0000:0000:0001")
        );
        for none in ["", "::", "0000:0000:0000:0000:0000:0000:0000:0000", "  "] {
            assert_eq!(gid_addr(Some(none)), None, "{none:?}");
        }
        assert_eq!(gid_addr(Some("GID-X")), Some(Addr::GidText("gid-x".into())));
    }

    #[test]
    fn the_lid_is_tried_when_the_gid_names_nobody() {
        let g = gid_addr(Some("fe80::1"));
        let mut b: AddrIndexBuilder<u32> = AddrIndexBuilder::default();
        b.insert(Addr::Lid(7), 100, 1);
        let idx = b.build();
        assert_eq!(idx.get(g.as_ref(), Some(&Addr::Lid(7)), 100), &[1]);
        let mut b: AddrIndexBuilder<u32> = AddrIndexBuilder::default();
        b.insert(Addr::Lid(7), 100, 1);
        b.insert(g.clone().unwrap(), 100, 2);
        b.insert(Addr::Lid(7), 101, 4);
        b.insert(Addr::Lid(7), 100, 3);
        let idx = b.build();
        assert_eq!(idx.get(g.as_ref(), Some(&Addr::Lid(7)), 100), &[2]);
        assert!(idx.get(None, Some(&Addr::Lid(8)), 100).is_empty());
        assert!(idx.get(None, Some(&Addr::Lid(7)), 99).is_empty());
        // A key's claimants in the order they were added, whatever was added between them.
        assert_eq!(idx.get(None, Some(&Addr::Lid(7)), 100), &[1, 3]);
        assert_eq!(idx.get(None, Some(&Addr::Lid(7)), 101), &[4]);
        assert!(idx.get(None, Some(&Addr::Lid(7)), u64::MAX).is_empty());
    }

    #[test]
    fn a_qp_on_another_port_takes_its_own_lid_not_the_devices() {
        let d = Device {
            port: Some(1),
            lid: Some(5),
            ..Default::default()
        };
        let same = QueuePair::default();
        assert_eq!(qp_addrs(&d, &same).1, Some(Addr::Lid(5)));
        let other = QueuePair {
            monitor: Some(Box::new(QpMonitor {
                port: Some(2),
                ..Default::default()
            })),
            ..Default::default()
        };
        assert_eq!(qp_addrs(&d, &other).1, None);
        let own = QueuePair {
            monitor: Some(Box::new(QpMonitor {
                port: Some(2),
                local_lid: Some(9),
                stats: None,
                attrs: None,
            })),
            ..Default::default()
        };
        assert_eq!(qp_addrs(&d, &own).1, Some(Addr::Lid(9)));
    }
}
