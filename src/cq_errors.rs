//! Error completions per QP and per device, by status (`rcclTelemetryQpCqError`, and the
//! verbs interposer's poll wrappers): which QP failed, with which `ibv_wc_status`, when, and
//! (in the interposer) with which WR.
//!
//! Storage: nothing in the slot (its layout is mirrored by the header). One side table for
//! the process, keyed by the slot's address, behind one mutex: error completions are the cold
//! path (a QP that fails gives one error, then one flush error per outstanding WR, bounded by
//! its queue depth). Each device keeps its own counts by status as well, so that an error the
//! interposer cannot attribute to a QP it tracks still counts by status.
//!
//! A QP's first error asks the writer thread (through the waker the runtime installs) for a
//! snapshot, so that the evidence is on disk before the job is killed; the writer rate-limits
//! those (`writer::Triggered`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering::*};

use parking_lot::Mutex;

use crate::counters::RcclQpStats;
use crate::{latency, registry};

pub use rccl_telemetry_format::wc_status::{status_name, STATUS_NAMES};

/// `enum ibv_wr_opcode` without its `IBV_WR_` prefix (the send WR that failed).
pub fn opcode_name(op: i32) -> &'static str {
    match op {
        0 => "RDMA_WRITE",
        1 => "RDMA_WRITE_WITH_IMM",
        2 => "SEND",
        3 => "SEND_WITH_IMM",
        4 => "RDMA_READ",
        5 => "ATOMIC_CMP_AND_SWP",
        6 => "ATOMIC_FETCH_AND_ADD",
        7 => "LOCAL_INV",
        8 => "BIND_MW",
        9 => "SEND_WITH_INV",
        10 => "TSO",
        11 => "DRIVER1",
        14 => "FLUSH",
        15 => "ATOMIC_WRITE",
        _ => "OTHER",
    }
}

/// The opcode value the interposer passes for a failed receive WR.
pub const OPCODE_RECV: i32 = -2;

/// What the interposer's send record knew of the WR an error completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrInfo {
    /// `enum ibv_wr_opcode`, or [`OPCODE_RECV`].
    pub opcode: i32,
    /// Its payload (the sum of its SGEs); None when unknown (a receive).
    pub bytes: Option<u64>,
    /// Its PostTs token (> 1: a clock reading, its age is known; else not).
    pub token: i64,
}

/// A QP's first error completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstError {
    pub status: i32,
    pub vendor_err: u32,
    /// Wall clock, ns since the epoch, when it was counted.
    pub wall_ns: u64,
    pub opcode: Option<&'static str>,
    pub bytes: Option<u64>,
    /// How long the WR had been posted when its error was polled.
    pub age_ms: Option<u64>,
}

/// One QP's errors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QpErrors {
    /// Error completions by status value.
    pub by_status: BTreeMap<i32, u64>,
    pub first: Option<FirstError>,
    /// The state the first error left the QP in, when it follows from it (RC: "ERR").
    pub state: Option<&'static str>,
}

struct Table {
    qps: Option<HashMap<usize, QpErrors>>,
    devs: [Option<BTreeMap<i32, u64>>; registry::MAX_DEVS],
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    qps: None,
    devs: [const { None }; registry::MAX_DEVS],
});

/// Whether a QP's error that could not be recorded per QP was said (once per process).
static NO_MEMORY_SAID: AtomicBool = AtomicBool::new(false);

/// A QP's first error was counted since the writer last looked.
static PENDING: AtomicBool = AtomicBool::new(false);
/// Wakes the writer (installed by the runtime; async: one byte on its request pipe).
static WAKER: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

/// Installs what wakes the writer when a QP's first error is counted.
pub fn set_waker(f: fn()) {
    WAKER.store(f as *mut (), Release);
}

/// Whether a QP had its first error since the last call (the writer's snapshot trigger).
pub fn take_pending() -> bool {
    PENDING.swap(false, AcqRel)
}

/// One error completion of status `status` on slot `qp`. Returns the slot's device, for its
/// `num_cq_errors` (None when the handle is no telemetry slot: nothing is counted).
pub fn record(
    qp: &'static RcclQpStats,
    status: i32,
    vendor_err: u32,
    wr: Option<WrInfo>,
    state: Option<&'static str>,
) -> Option<u32> {
    let (dev, _, _) = registry::slot_home(qp)?;
    let first = {
        let mut t = TABLE.lock();
        *t.devs[dev as usize]
            .get_or_insert_with(BTreeMap::new)
            .entry(status)
            .or_insert(0) += 1;
        let qps = t.qps.get_or_insert_with(HashMap::new);
        let key = qp as *const RcclQpStats as usize;
        if !qps.contains_key(&key) && qps.try_reserve(1).is_err() {
            drop(t);
            crate::diag::warn_once(&NO_MEMORY_SAID, || {
                "out of memory: error completions of QPs with no earlier error are counted on their device (num_cq_errors, cq_errors_by_status) but not per QP while that lasts".into()
            });
            return Some(dev);
        }
        let e = qps.entry(key).or_default();
        *e.by_status.entry(status).or_insert(0) += 1;
        let first = e.first.is_none();
        if first {
            e.first = Some(FirstError {
                status,
                vendor_err,
                wall_ns: latency::realtime_ns(),
                opcode: wr.map(|w| {
                    if w.opcode == OPCODE_RECV {
                        "RECV"
                    } else {
                        opcode_name(w.opcode)
                    }
                }),
                bytes: wr.and_then(|w| w.bytes),
                age_ms: wr
                    .filter(|w| w.token > latency::TS_UNSAMPLED)
                    .map(|w| latency::elapsed_ns(w.token) / 1_000_000),
            });
            e.state = state;
        }
        first
    };
    if first {
        PENDING.store(true, Release);
        let w = WAKER.load(Acquire);
        if !w.is_null() {
            // SAFETY: set_waker stored a `fn()`.
            let f: fn() = unsafe { std::mem::transmute(w) };
            f();
        }
    }
    Some(dev)
}

/// An error completion of device `dev` that no tracked QP owns (counted by status only).
pub fn record_device(dev: u32, status: i32) {
    if let Some(m) = TABLE.lock().devs.get_mut(dev as usize) {
        *m.get_or_insert_with(BTreeMap::new)
            .entry(status)
            .or_insert(0) += 1;
    }
}

/// Slot `qp`'s errors (None when it had none).
pub fn of(qp: &RcclQpStats) -> Option<QpErrors> {
    TABLE
        .lock()
        .qps
        .as_ref()?
        .get(&(qp as *const RcclQpStats as usize))
        .cloned()
}

/// Removes and returns slot `qp`'s errors (its communicator is finalized: the slot's next
/// owner starts with none).
pub fn take(qp: &RcclQpStats) -> Option<QpErrors> {
    TABLE
        .lock()
        .qps
        .as_mut()?
        .remove(&(qp as *const RcclQpStats as usize))
}

/// Every errored slot's errors, by slot address (one lock for a whole file).
pub fn all() -> HashMap<usize, QpErrors> {
    TABLE.lock().qps.clone().unwrap_or_default()
}

/// Device `dev`'s error completions by status value.
pub fn device(dev: u32) -> BTreeMap<i32, u64> {
    TABLE
        .lock()
        .devs
        .get(dev as usize)
        .cloned()
        .flatten()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_are_the_enum_without_its_prefix() {
        assert_eq!(status_name(12), "RETRY_EXC_ERR");
        assert_eq!(status_name(13), "RNR_RETRY_EXC_ERR");
        assert_eq!(status_name(5), "WR_FLUSH_ERR");
        assert_eq!(status_name(10), "REM_ACCESS_ERR");
        assert_eq!(status_name(23), "TM_RNDV_INCOMPLETE");
        assert_eq!(status_name(24), "UNKNOWN_24");
        assert_eq!(status_name(-1), "UNKNOWN_-1");
        assert_eq!(opcode_name(0), "RDMA_WRITE");
        assert_eq!(opcode_name(4), "RDMA_READ");
        assert_eq!(opcode_name(12), "OTHER");
    }
}
