//! The communicators (rcclTelemetryCommInit .. rcclTelemetryCommFinalize): each one's identity
//! (RCCL's commHash, its rank and size), its own channel space on every device, and the
//! handle the C side holds. Separate from the devices because a communicator comes and goes
//! while devices and the default communicator's channels stay for the process.
//!
//! Handles: the opaque `rcclTelemetryComm_t*` is a token, never dereferenced: a table index
//! and the generation of that table entry. Finalization frees the entry (a later communicator
//! reuses it under the next generation), so the table is as large as the most communicators
//! alive at once, and a finalized communicator's handle names no live entry: every call with
//! it is a no-op, whatever came after.
//!
//! Channels: a communicator's (device, channel) gets a channel object of its own, taken from
//! the device's handed-back ones when one is usable (`Device::take_channel`), else new; its
//! QP slot indices start at 0, as on a fresh channel. Everything here is the cold path (setup,
//! resolution, finalization), behind one table lock and a lock per communicator.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::counters::RcclQpStats;

use super::{device, grant, no_channel, setup_args, Channel};

/// What names a communicator in every output: RCCL's commHash, this process's rank in it and
/// its size, and the process-wide sequence number that tells apart two communicators with the
/// same hash and rank (the default communicator, the process-wide calls, is id 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommIdent {
    pub id: u64,
    pub hash: u64,
    pub rank: i32,
    pub nranks: i32,
}

/// One live communicator.
pub struct Comm {
    pub ident: CommIdent,
    /// Wall-clock ns of rcclTelemetryCommInit.
    pub init_wall_ns: u64,
    state: Mutex<CommState>,
}

#[derive(Default)]
struct CommState {
    finalized: bool,
    /// (device, channel index) -> the channel object it owns there.
    channels: BTreeMap<(u32, u32), &'static Channel>,
}

struct Entry {
    gen: u64,
    comm: Option<Arc<Comm>>,
}

struct Table {
    entries: Vec<Entry>,
    /// Indices of entries without a communicator.
    free: Vec<u32>,
    /// The last id handed out.
    last_id: u64,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    entries: Vec::new(),
    free: Vec::new(),
    last_id: 0,
});

/// Bits of a handle that hold the entry index (+ 1, so no handle is 0).
const INDEX_BITS: u32 = 24;
/// Live communicators at most (the entry index must fit its bits).
pub const MAX_LIVE_COMMS: usize = (1 << INDEX_BITS) - 1;

fn handle(idx: u32, gen: u64) -> u64 {
    (gen << INDEX_BITS) | (u64::from(idx) + 1)
}

/// Creates a communicator; returns its handle (never 0) and the communicator, or why not:
/// [`MAX_LIVE_COMMS`] are alive, or the table cannot grow (out of memory).
pub fn create(hash: u64, rank: i32, nranks: i32, wall_ns: u64) -> Result<(u64, Arc<Comm>), String> {
    let mut t = TABLE.lock();
    let idx = match t.free.pop() {
        Some(i) => i,
        None if t.entries.len() >= MAX_LIVE_COMMS => {
            return Err(format!("{MAX_LIVE_COMMS} communicators are alive"))
        }
        // The table grows with the job: fallibly (a later communicator may find room).
        None if t.entries.try_reserve(1).is_err() => {
            return Err("out of memory for its table entry".into())
        }
        None => {
            t.entries.push(Entry { gen: 0, comm: None });
            (t.entries.len() - 1) as u32
        }
    };
    t.last_id += 1;
    let comm = Arc::new(Comm {
        ident: CommIdent {
            id: t.last_id,
            hash,
            rank,
            nranks,
        },
        init_wall_ns: wall_ns,
        state: Mutex::new(CommState::default()),
    });
    let e = &mut t.entries[idx as usize];
    e.gen += 1;
    e.comm = Some(comm.clone());
    Ok((handle(idx, e.gen), comm))
}

/// The live communicator of a handle (None for 0, a stray value, or a finalized one).
pub fn get(h: u64) -> Option<Arc<Comm>> {
    let idx = usize::try_from((h & ((1 << INDEX_BITS) - 1)).checked_sub(1)?).ok()?;
    let t = TABLE.lock();
    let e = t.entries.get(idx)?;
    (handle(idx as u32, e.gen) == h)
        .then(|| e.comm.clone())
        .flatten()
}

/// Every live communicator, by id.
pub fn live() -> Vec<Arc<Comm>> {
    let mut v: Vec<Arc<Comm>> = TABLE
        .lock()
        .entries
        .iter()
        .filter_map(|e| e.comm.clone())
        .collect();
    v.sort_unstable_by_key(|c| c.ident.id);
    v
}

/// The live communicator of id `id`.
pub fn by_id(id: u64) -> Option<Arc<Comm>> {
    TABLE
        .lock()
        .entries
        .iter()
        .filter_map(|e| e.comm.as_ref())
        .find(|c| c.ident.id == id)
        .cloned()
}

impl CommIdent {
    /// How a line names the communicator: `0x<commHash> rank <rank>/<nRanks>`.
    pub fn describe(&self) -> String {
        format!("0x{:x} rank {}/{}", self.hash, self.rank, self.nranks)
    }
}

/// How a line names the owner of a channel: None for the default communicator (and a
/// communicator no longer live).
pub fn describe(owner: u64) -> Option<String> {
    (owner != super::OWNER_DEFAULT && owner != super::OWNER_FREE)
        .then(|| by_id(owner))
        .flatten()
        .map(|c| c.ident.describe())
}

impl Comm {
    /// SetupChannel in the communicator's channel space: reserves `num_qps` slots on its
    /// channel `ch` of device `dev`, which gets a channel object of its own on first use (a
    /// handed-back one that `usable` accepts, else a new one). None when nothing was granted
    /// (as the process-wide call) or the communicator is finalized.
    pub fn setup_channel(
        &self,
        dev: i32,
        ch: i32,
        num_qps: i32,
        usable: &dyn Fn(&'static Channel) -> bool,
    ) -> Option<(u64, u64)> {
        let mut st = self.state.lock();
        if st.finalized {
            return None;
        }
        let (d, chi, n) = setup_args(dev, ch, num_qps)?;
        let call = || {
            format!(
                "rcclTelemetryCommSetupChannel({}, {dev}, {ch}, {num_qps})",
                self.ident.describe()
            )
        };
        let key = (d.id, chi as u32);
        let c = match st.channels.get(&key) {
            Some(c) => *c,
            None => match d.take_channel(chi as u32, self.ident.id, usable) {
                Some(c) => *st.channels.entry(key).or_insert(c),
                None => return no_channel(d, n, &call),
            },
        };
        grant(c, n, &call)
    }

    /// The communicator's channel `ch` of device `dev` (None: none set up there, or finalized).
    pub fn channel(&self, dev: i32, ch: i32) -> Option<&'static Channel> {
        let st = self.state.lock();
        if st.finalized {
            return None;
        }
        let key = (u32::try_from(dev).ok()?, u32::try_from(ch).ok()?);
        st.channels.get(&key).copied()
    }

    /// Slot `qp` of the communicator's channel (dev, ch).
    pub fn qp(&self, dev: i32, ch: i32, qp: i32) -> Option<&'static RcclQpStats> {
        self.channel(dev, ch)?.slots.get(u64::try_from(qp).ok()?)
    }

    /// Records the role of slot `qp` of the communicator's (dev, ch); false when no slot.
    pub fn set_qp_role(&self, dev: i32, ch: i32, qp: i32, role: u8) -> bool {
        match (self.channel(dev, ch), u64::try_from(qp)) {
            (Some(c), Ok(i)) => c.slots.set_role(i, role),
            _ => false,
        }
    }

    /// The communicator's channels, by (device, channel index).
    pub fn channels(&self) -> Vec<&'static Channel> {
        self.state.lock().channels.values().copied().collect()
    }
}

/// Starts finalizing the communicator of handle `h`: it leaves the table (its handle is dead
/// from here on) and makes no further channel. Returns it and its channels, by (device,
/// channel index); None when the handle names no live communicator.
pub fn begin_finalize(h: u64) -> Option<(Arc<Comm>, Vec<&'static Channel>)> {
    let comm = {
        let mut t = TABLE.lock();
        let idx = usize::try_from((h & ((1 << INDEX_BITS) - 1)).checked_sub(1)?).ok()?;
        let e = t.entries.get_mut(idx)?;
        if handle(idx as u32, e.gen) != h {
            return None;
        }
        let comm = e.comm.take()?;
        // Out of memory: the entry is not reused (the table grows past it instead).
        if t.free.try_reserve(1).is_ok() {
            t.free.push(idx as u32);
        }
        comm
    };
    let chans = {
        let mut st = comm.state.lock();
        st.finalized = true;
        st.channels.values().copied().collect()
    };
    Some((comm, chans))
}

/// Hands a finalized communicator's channel back to its device, cleared (the caller has
/// folded its counts; it holds `lifetime_change`).
pub fn give_back(c: &'static Channel, former: u64) {
    if let Some(d) = device(c.dev as i32) {
        d.give_back(c, former);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finalized_handle_names_nothing_even_once_its_entry_is_reused() {
        let (h1, c1) = create(0xabc, 0, 2, 1).unwrap();
        assert_ne!(h1, 0);
        assert_eq!(get(h1).map(|c| c.ident), Some(c1.ident));
        assert!(get(0).is_none() && get(h1 ^ (1 << 40)).is_none());
        let (c, chans) = begin_finalize(h1).unwrap();
        assert_eq!(c.ident.id, c1.ident.id);
        assert!(chans.is_empty());
        assert!(get(h1).is_none(), "finalized");
        assert!(begin_finalize(h1).is_none(), "finalized once");
        // The next communicator may take the same entry: the old handle still names nothing.
        let (h2, c2) = create(0xabc, 0, 2, 2).unwrap();
        assert_ne!(h2, h1);
        assert!(c2.ident.id > c1.ident.id, "ids are never reused");
        assert!(get(h1).is_none());
        assert_eq!(get(h2).map(|c| c.ident.id), Some(c2.ident.id));
        assert!(live().iter().any(|c| c.ident.id == c2.ident.id));
        assert!(!live().iter().any(|c| c.ident.id == c1.ident.id));
        // A finalized communicator makes no channel.
        assert!(c.setup_channel(0, 0, 1, &|_| true).is_none());
        assert!(c.channel(0, 0).is_none());
        begin_finalize(h2).unwrap();
    }
}
