//! The hot parameter block: what the data path reads on every call, on both sides of the C ABI.
//!
//! One exported object, `rcclTelemetryHotV3`, holds the sampling, clock and histogram
//! parameters written once at Init and each device's stripe table, published at registration
//! (NULL while the device is unregistered or telemetry is off). The library's own hot path
//! (`latency`, `registry`) and the header's inline hooks both read it; `inline_abi` pins its
//! layout. The block's own layout is frozen for the life of the SONAME (every library of it
//! exports this symbol, so a header never fails to load against one); what the inline hooks
//! reach through it and through handles has a layout number, [`INLINE_LAYOUT`], that the
//! header checks before it takes a handle (see `inline_abi`). This module depends on nothing
//! else in the crate, so none of its readers import each other for it.

use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, AtomicU64};

/// The layout of what the header's inline hooks reach through handles and stripes (the QP,
/// channel and stripe slots, the log-scale histogram): the header's
/// RCCL_TELEMETRY_INLINE_LAYOUT must equal it. Raise it with any change to those layouts
/// (`inline_abi` lists them); a header of another number leaves telemetry off, with one line.
pub const INLINE_LAYOUT: u64 = 4;

/// Device slots (`RCCL_TELEMETRY_MAX_DEVS`).
pub const MAX_DEVS: usize = 32;

/// The stripe hash, shared with the header: thread control blocks sit pages apart, so mix
/// the page number (the thread pointer `>> STRIPE_PAGE_SHIFT`) and keep the top bits.
pub const STRIPE_MIX: u64 = 0x9E37_79B9_7F4A_7C15;
pub const STRIPE_PAGE_SHIFT: u32 = 12;

/// Parameters and tables the inline hooks read. Every field is written with a relaxed (or,
/// for the stripe pointers, release) store and read with atomic loads on both sides.
#[repr(C, align(64))]
pub struct HotParams {
    /// N - 1 where N is the sampling interval (a power of two). 0 at the default N = 1.
    /// Copied into every QP slot when it is reserved; the inline PostTs reads the copy.
    pub sample_mask: AtomicU64,
    /// ns = (ticks * ns_mult) >> 32.
    pub ns_mult: AtomicU64,
    /// The histogram interval's divider (see `latency::Divider`).
    pub div_mul: AtomicU64,
    pub div_shift: AtomicU64,
    /// Number of histogram buckets - 1 (the last bucket takes everything above).
    pub last_bucket: AtomicU64,
    /// 1 when tokens are TSC ticks, 0 when they are CLOCK_MONOTONIC ns.
    pub use_tsc: AtomicU64,
    /// 1 while telemetry counts: set when Init turns it on, cleared when the final file is
    /// claimed (Flush or exit) and in a forked child. What an inline rcclTelemetryOn reads.
    pub enabled: AtomicU64,
    /// [`INLINE_LAYOUT`], constant from load: what the header's wrappers of Init,
    /// RegisterDevice and the Resolve calls compare with their own layout number.
    pub layout: AtomicU64,
    /// Device d's stripes (`registry::DevShard`, `registry::STRIPES` of them), or NULL. Kept
    /// untyped here so this module needs no registry types; `registry` alone stores them.
    pub stripes: [AtomicPtr<c_void>; MAX_DEVS],
}

/// The one instance, read by the header's inline hooks. Read-only for callers.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static rcclTelemetryHotV3: HotParams = HotParams {
    sample_mask: AtomicU64::new(0),
    ns_mult: AtomicU64::new(1 << 32),
    div_mul: AtomicU64::new(0),
    div_shift: AtomicU64::new(0),
    last_bucket: AtomicU64::new(4),
    use_tsc: AtomicU64::new(0),
    enabled: AtomicU64::new(0),
    layout: AtomicU64::new(INLINE_LAYOUT),
    stripes: [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_DEVS],
};
