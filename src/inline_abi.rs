//! What the header's inline fast paths may touch, and the promise that it stays put.
//!
//! The data-path hooks are inline in `include/rccl_telemetry.h`: a hook bumps its counters in
//! the caller's code instead of calling into the library, so a counted WQE costs loads and
//! stores, not five calls. (The exported functions stay, with the same effect, for callers
//! that take their address or build with `RCCL_TELEMETRY_NO_INLINE`.) For that the header
//! mirrors a few layouts:
//!
//! - the QP slot (`RcclQpStats`) and the channel slot (`RcclChannelStats`): the counters of
//!   the handle forms;
//! - one device-form stripe (`DevShard`): the owner word and the owner's counter set;
//! - a channel's log-scale histogram (`LogHist`): the owner word and the owner's counts;
//!   the QP slot holds its address alone (0 when the slot records none);
//! - [`HotParams`] (module `hot`), exported as `rcclTelemetryHotV3`: sampling, clock and histogram
//!   parameters written once at Init, and each device's stripe table, published at
//!   registration (NULL while the device is unregistered or telemetry is off).
//!
//! Callers still hold only opaque pointers; the mirrors are the library's own code, shipped in
//! the header. Two promises keep a header and a library of different versions from ever
//! miscounting or failing to load:
//!
//! - `HotParams` itself is frozen for the life of the SONAME, and every library of it exports
//!   `rcclTelemetryHotV3` (the name is historical): the header's reference always binds.
//! - Everything else above has a layout number, `hot::INLINE_LAYOUT`, which the library
//!   publishes in `rcclTelemetryHotV3.layout` from load. The header carries its own,
//!   RCCL_TELEMETRY_INLINE_LAYOUT, and its wrappers of the calls that start telemetry or hand
//!   out what the hooks dereference (Init, RegisterDevice, ResolveQp, ResolveChannel, CommInit,
//!   CommResolveQp, CommResolveChannel; `make header-check` fails on a function returning a
//!   handle without one) compare
//!   the two before calling the library. On a mismatch they call
//!   `rcclTelemetryInlineMismatch_` instead, which says so in one line and keeps telemetry off
//!   for the process: no handle is handed out, no stripe published, `enabled` stays 0. The
//!   hooks themselves check nothing, so the negotiation costs the data path nothing.
//!
//! A change to any layout below raises `INLINE_LAYOUT` (and the header's number with it: both
//! come from here). The offsets are pinned here at compile time.
//!
//! The Rust structs are the one definition: the header's C mirrors (`rcclTelemetryQp_` and the
//! rest) are generated from them as [`MIRRORS`] lists them, by examples/rccl_telemetry_header.rs
//! (`make header`), in place of the [`MARKER`] line of src/rccl_telemetry_inline.h. Each mirror
//! declares the fields the hooks use at their Rust offsets (`offset_of!`), as the C type the
//! list gives (a Rust stand-in, [`CType`], checked at compile time to be the Rust field's
//! size), and every other byte as a `library_only_` array, up to the Rust size; its array
//! lengths are the Rust constants (`HIST`, `LOG_BUCKETS`, `SIZE_BUCKETS`, `MAX_DEVS`), and so
//! are the few numbers the hooks compute with (`RCCL_TELEMETRY_MAX_DEVS_`, the stripe hash, the
//! histogram mask, the last log-scale bucket). The header asserts (`static_assert`, C11 and
//! C++) that the C compiler's offsets and sizes are the generated ones, and
//! `rust_tests/c_abi/inline.rs` compares them with [`layout`] once more, through a C program
//! (`c_tests/inline_equiv.c layout`). [`MIRRORS`] is `const` and the generator lives in the
//! example, so none of it is in the library: its code and data are as without it.
//!
//! A (PIE or non-PIE) executable that reads `rcclTelemetryHotV3` usually gets a copy of it by
//! a copy relocation; the library reaches the symbol through its GOT (`R_X86_64_GLOB_DAT`), so
//! both sides use that one copy. Its size is part of the layout for the same reason. The
//! equivalence test in `rust_tests/c_abi/inline.rs` would fail if they ever saw two objects (the
//! inline device forms would find no stripes).

use std::mem::{offset_of, size_of};

use crate::counters::{RcclChannelStats, RcclQpStats, HIST, SIZE_BUCKETS};
use crate::hot::{HotParams, INLINE_LAYOUT, MAX_DEVS};
use crate::loghist::{LogHist, LOG_BUCKETS};
use crate::registry::{DevCounters, DevShard, STRIPES};

/// The line of src/rccl_telemetry_inline.h that the generated mirrors replace.
pub const MARKER: &str =
    "/* @inline_abi: the generated layouts (src/inline_abi.rs, make header) go here. */";

/// A mirrored layout, as the header generator sees it (examples/rccl_telemetry_header.rs).
/// Everything here is `const`: the data exists in the generator only, never in the library.
pub struct MirrorLayout {
    /// The C typedef's name.
    pub c_name: &'static str,
    /// The Rust struct it mirrors.
    pub rust_name: &'static str,
    /// The C comment above the typedef, by line.
    pub doc: &'static [&'static str],
    /// `size_of` the Rust struct: the C struct is padded to it.
    pub size: usize,
    /// The fields the hooks use, in the Rust struct's order.
    pub fields: &'static [MirrorField],
}

/// A mirrored field: `c_type` (`*` when `pointer`) `name`, `[len]` when `len` is not 0.
pub struct MirrorField {
    pub name: &'static str,
    /// `offset_of!` in the Rust struct.
    pub offset: usize,
    /// Its size in bytes (the Rust field's, checked at compile time).
    pub size: usize,
    pub c_type: &'static str,
    pub pointer: bool,
    pub len: usize,
}

/// A Rust type standing for the C type a mirror declares a field as: `u64` (`uint64_t`),
/// `usize` (`uintptr_t`), a mirrored struct, `*const` one, or an array of one of those.
pub trait CType {
    const C_TYPE: &'static str;
    const POINTER: bool = false;
    /// The array length; 0 when not an array.
    const LEN: usize = 0;
}

/// A layout the header mirrors, by its C name.
pub trait Mirror {
    const C_NAME: &'static str;
}

impl CType for u64 {
    const C_TYPE: &'static str = "uint64_t";
}

/// A thread pointer (`AtomicUsize` in Rust).
impl CType for usize {
    const C_TYPE: &'static str = "uintptr_t";
}

/// A pointer to a mirrored layout.
impl<T: Mirror> CType for *const T {
    const C_TYPE: &'static str = T::C_NAME;
    const POINTER: bool = true;
}

impl<T: CType, const N: usize> CType for [T; N] {
    const C_TYPE: &'static str = T::C_TYPE;
    const POINTER: bool = T::POINTER;
    const LEN: usize = {
        assert!(T::LEN == 0 && N > 0, "one level of arrays, not empty");
        N
    };
}

/// The size of what `_` points to (for a field's size, from its address in a `MaybeUninit`).
const fn size_of_pointee<T>(_: *const T) -> usize {
    size_of::<T>()
}

// The layouts the header mirrors: for each, its doc (the header's comment), its C name, the
// Rust struct and the prefix the C test prints, then the fields the hooks use, each with its
// offset and the C type it is declared as. Changing a number (or what a field means) here
// means raising hot::INLINE_LAYOUT; the hot block's own entries ("hot.*") never change.
macro_rules! mirrors {
    ($(
        $(#[doc = $doc:literal])*
        $c:ident = $t:ident, $prefix:literal {
            $($f:ident @ $off:literal: $ct:ty,)*
        }
    )*) => {
        $(
            impl Mirror for $t {
                const C_NAME: &'static str = stringify!($c);
            }
            impl CType for $t {
                const C_TYPE: &'static str = stringify!($c);
            }
            $(const _: () = {
                assert!(offset_of!($t, $f) == $off);
                let t = std::mem::MaybeUninit::<$t>::uninit();
                // SAFETY: the field's address is taken, nothing is read.
                let f = unsafe { std::ptr::addr_of!((*t.as_ptr()).$f) };
                assert!(size_of_pointee(f) == size_of::<$ct>(), "the C type is not the field's size");
            };)*
        )*

        /// The layouts the header mirrors, in the header's order.
        pub const MIRRORS: &[MirrorLayout] = &[$(MirrorLayout {
            c_name: stringify!($c),
            rust_name: stringify!($t),
            doc: &[$($doc),*],
            size: size_of::<$t>(),
            fields: &[$(MirrorField {
                name: stringify!($f),
                offset: offset_of!($t, $f),
                size: size_of::<$ct>(),
                c_type: <$ct as CType>::C_TYPE,
                pointer: <$ct as CType>::POINTER,
                len: <$ct as CType>::LEN,
            }),*],
        }),*];

        /// Offsets and sizes as the Rust side lays them out, for the test that compares them
        /// with the header's mirrors: (name, value), names as `c_tests/inline_equiv.c` prints them.
        pub fn layout() -> Vec<(&'static str, usize)> {
            let mut v = vec![$($((concat!($prefix, ".", stringify!($f)), offset_of!($t, $f))),*),*];
            v.push(("layout", INLINE_LAYOUT as usize));
            v.extend([("qp.size", size_of::<RcclQpStats>()), ("stripe.size", size_of::<DevShard>()), ("hot.size", size_of::<HotParams>()), ("log.size", size_of::<LogHist>())]);
            v
        }
    };
}

mirrors! {
    /// Mirror of the library's QP slot (5 cache lines): what every WQE touches (sample_mask is
    /// N - 1 for 1-in-N sampling), what rare and sampled events touch (untracked: completions
    /// that matched no posting; mon_thr: the WQE latency monitor's threshold in ns, 0 when it
    /// is off; log_hist: the address of the channel's log-scale histogram, 0 when the slot
    /// records none), the linear histogram, and the monitor's line (mon_hist: the address of
    /// the QP's own log-scale counts; the sum and the 128-bit sum of squares of the measured
    /// latencies; slow: completions above mon_thr, the latest one's latency and token).
    rcclTelemetryQp_ = RcclQpStats, "qp" {
        sent_write @ 0: u64,
        sent_imm @ 8: u64,
        recv_wqe @ 16: u64,
        cts_signalled @ 24: u64,
        cts_unsignalled @ 32: u64,
        post_seq @ 40: u64,
        wqe_rcvd @ 48: u64,
        sample_mask @ 56: u64,
        untracked @ 64: u64,
        lat_min_inv @ 72: u64,
        lat_max @ 80: u64,
        slot_miss @ 88: u64,
        mon_thr @ 112: u64,
        log_hist @ 120: u64,
        hist @ 128: [u64; HIST],
        mon_hist @ 256: u64,
        mon_sum @ 264: u64,
        mon_sq_lo @ 272: u64,
        mon_sq_hi @ 280: u64,
        slow @ 288: u64,
        slow_ns @ 296: u64,
        slow_post @ 304: u64,
    }
    /// Mirror of a channel's log-scale completion histogram: the thread that owns counts[]
    /// (first to record) adds to it inline; any other thread calls rcclTelemetryLogAdd_.
    /// Bucket i: 0..15 hold 0..15 ns exactly, then 8 per power of two (see
    /// rcclTelemetryLogIndex_); the last bucket (from 16.1 s) also holds everything longer.
    rcclTelemetryLog_ = LogHist, "log" {
        owner @ 0: usize,
        counts @ 64: [u64; LOG_BUCKETS],
    }
    /// Mirror of the channel slot.
    rcclTelemetryCh_ = RcclChannelStats, "ch" {
        req_completed @ 0: u64,
    }
    /// One set of device-form counters; sizes[b] counts WQEs of 0 (b = 0) or
    /// (2^(b-2), 2^(b-1)] bytes.
    rcclTelemetryDevSet_ = DevCounters, "set" {
        tx_bytes @ 0: u64,
        rx_bytes @ 8: u64,
        cq_errors @ 16: u64,
        cq_polls @ 24: u64,
        sizes @ 32: [u64; SIZE_BUCKETS],
    }
    /// One of a device's stripes: the owner's thread pointer, its set (the shared set follows,
    /// the library's alone).
    rcclTelemetryStripe_ = DevShard, "stripe" {
        owner @ 0: usize,
        own @ 8: DevCounters,
    }
    /// Written by the library at Init and at device registration; read-only for callers.
    /// enabled: 1 from Init until the final file is claimed (Flush or exit), 0 in a forked
    /// child. layout: the library's RCCL_TELEMETRY_INLINE_LAYOUT, constant from load.
    rcclTelemetryHot_ = HotParams, "hot" {
        sample_mask @ 0: u64,
        ns_mult @ 8: u64,
        div_mul @ 16: u64,
        div_shift @ 24: u64,
        last_bucket @ 32: u64,
        use_tsc @ 40: u64,
        enabled @ 48: u64,
        layout @ 56: u64,
        stripes @ 64: [*const DevShard; MAX_DEVS],
    }
}
const _: () = assert!(size_of::<RcclQpStats>() == 320 && HIST == 16);
const _: () = assert!(size_of::<DevShard>() == 1152 && STRIPES == 16 && SIZE_BUCKETS == 66);
const _: () = assert!(size_of::<HotParams>() == 320 && MAX_DEVS == 32);
const _: () = assert!(size_of::<LogHist>() == 2112 && LOG_BUCKETS == 256);
