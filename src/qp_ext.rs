//! The verbs interposer's per-QP counters (`QpExt`), kept beside a QP slot, and the one
//! constant that encodes one of them (`STALL_EXPECT`). The interposer's C code
//! (`preload/c/`) reads and writes them: its declarations of both are generated from this
//! file by cbindgen (preload/build.rs into the preload crate's OUT_DIR, `make preload` into
//! build/preload/include/engine.h), so this is their one definition. A file of its own so that
//! cbindgen sees only what the C side needs; `counters` re-exports the types.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Bit 63 of [`QpExt::stall_out`]: a signalled WR is among the outstanding ones (set by the
/// interposer's walk, read by `stall_detector`).
pub const STALL_EXPECT: u64 = 1u64 << 63;

/// Per-QP counters the verbs interposer (`librccl_telemetry_preload.so`) keeps beside a slot:
/// the opcodes the slot has no key for, and the send-queue bookkeeping of unsignalled runs.
/// Allocated only in that mode (see `registry::enable_verbs_keys`); every field may be
/// updated from any thread (atomic adds). The preload's C code gets this type from here: its
/// `engine.h` (as `rtp_qpext`, every `AtomicU64` a `uint64_t`) is generated from this file by
/// preload/build.rs.
#[repr(C, align(64))]
#[derive(Default)]
pub struct QpExt {
    /// IBV_WR_SEND, SEND_WITH_IMM, SEND_WITH_INV.
    pub send_wqe: AtomicU64,
    /// IBV_WR_RDMA_READ.
    pub read_wqe: AtomicU64,
    /// IBV_WR_ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD (and the masked forms).
    pub atomic_wqe: AtomicU64,
    /// Every other send opcode (LOCAL_INV, BIND_MW, TSO, DRIVER1, FLUSH, ATOMIC_WRITE, ...).
    pub other_wqe: AtomicU64,
    /// Send WRs retired by a later signalled completion, without one of their own.
    pub retired_unsignalled: AtomicU64,
    /// Signalled send WRs that found the QP's bounded in-flight record full: counted, not
    /// matched (their completion counts as untracked).
    pub track_full: AtomicU64,
    /// Written only by the interposer's walk of its send records, which the stall detector's
    /// tick runs (never the data path): the send WRs outstanding, with [`STALL_EXPECT`] set
    /// when a signalled one is among them; cleared when the QP is destroyed.
    pub stall_out: AtomicU64,
    /// The PostTs token of the oldest outstanding send WR (> 1: a clock reading; else 0).
    pub stall_oldest: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<QpExt>() == 64);

/// A point-in-time copy of one QP's `QpExt` (or a sum of several).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExtSnapshot {
    pub send_wqe: u64,
    pub read_wqe: u64,
    pub atomic_wqe: u64,
    pub other_wqe: u64,
    pub retired_unsignalled: u64,
    pub track_full: u64,
}

impl QpExt {
    pub fn snapshot(&self) -> ExtSnapshot {
        ExtSnapshot {
            send_wqe: self.send_wqe.load(Relaxed),
            read_wqe: self.read_wqe.load(Relaxed),
            atomic_wqe: self.atomic_wqe.load(Relaxed),
            other_wqe: self.other_wqe.load(Relaxed),
            retired_unsignalled: self.retired_unsignalled.load(Relaxed),
            track_full: self.track_full.load(Relaxed),
        }
    }
}

impl ExtSnapshot {
    pub fn accumulate(&mut self, o: &ExtSnapshot) {
        self.send_wqe += o.send_wqe;
        self.read_wqe += o.read_wqe;
        self.atomic_wqe += o.atomic_wqe;
        self.other_wqe += o.other_wqe;
        self.retired_unsignalled += o.retired_unsignalled;
        self.track_full += o.track_full;
    }
}
