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
//!   out what the hooks dereference (Init, RegisterDevice, ResolveQp, ResolveChannel) compare
//!   the two before calling the library. On a mismatch they call
//!   `rcclTelemetryInlineMismatch_` instead, which says so in one line and keeps telemetry off
//!   for the process: no handle is handed out, no stripe published, `enabled` stays 0. The
//!   hooks themselves check nothing, so the negotiation costs the data path nothing.
//!
//! A change to any layout below raises `INLINE_LAYOUT` (and the header's number with it: both
//! come from here). The offsets are pinned here at compile time and compared with the
//! header's C structs by `rust_tests/c_abi/inline.rs`.
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

// The layouts the header mirrors, each field with its offset and the name the C test prints.
// Changing a number (or what a field means) here means changing the header's structs and
// raising hot::INLINE_LAYOUT; the hot block's own entries ("hot.*") never change.
macro_rules! mirrored {
    ($($name:literal: $t:ty, $f:ident @ $off:expr;)*) => {
        $(const _: () = assert!(offset_of!($t, $f) == $off);)*

        /// Offsets and sizes as the Rust side lays them out, for the test that compares them
        /// with the header's mirrors: (name, value), names as `c_tests/inline_equiv.c` prints them.
        pub fn layout() -> Vec<(&'static str, usize)> {
            let mut v = vec![$(($name, offset_of!($t, $f))),*];
            v.push(("layout", INLINE_LAYOUT as usize));
            v.extend([("qp.size", size_of::<RcclQpStats>()), ("stripe.size", size_of::<DevShard>()), ("hot.size", size_of::<HotParams>()), ("log.size", size_of::<LogHist>())]);
            v
        }
    };
}

mirrored! {
    "qp.sent_write": RcclQpStats, sent_write @ 0;
    "qp.sent_imm": RcclQpStats, sent_imm @ 8;
    "qp.recv_wqe": RcclQpStats, recv_wqe @ 16;
    "qp.cts_signalled": RcclQpStats, cts_signalled @ 24;
    "qp.cts_unsignalled": RcclQpStats, cts_unsignalled @ 32;
    "qp.post_seq": RcclQpStats, post_seq @ 40;
    "qp.wqe_rcvd": RcclQpStats, wqe_rcvd @ 48;
    "qp.sample_mask": RcclQpStats, sample_mask @ 56;
    "qp.untracked": RcclQpStats, untracked @ 64;
    "qp.lat_min_inv": RcclQpStats, lat_min_inv @ 72;
    "qp.lat_max": RcclQpStats, lat_max @ 80;
    "qp.slot_miss": RcclQpStats, slot_miss @ 88;
    "qp.log_hist": RcclQpStats, log_hist @ 120;
    "qp.hist": RcclQpStats, hist @ 128;
    "log.owner": LogHist, owner @ 0;
    "log.counts": LogHist, counts @ 64;
    "ch.req_completed": RcclChannelStats, req_completed @ 0;
    "set.tx_bytes": DevCounters, tx_bytes @ 0;
    "set.rx_bytes": DevCounters, rx_bytes @ 8;
    "set.cq_errors": DevCounters, cq_errors @ 16;
    "set.cq_polls": DevCounters, cq_polls @ 24;
    "set.sizes": DevCounters, sizes @ 32;
    "stripe.owner": DevShard, owner @ 0;
    "stripe.own": DevShard, own @ 8;
    "hot.sample_mask": HotParams, sample_mask @ 0;
    "hot.ns_mult": HotParams, ns_mult @ 8;
    "hot.div_mul": HotParams, div_mul @ 16;
    "hot.div_shift": HotParams, div_shift @ 24;
    "hot.last_bucket": HotParams, last_bucket @ 32;
    "hot.use_tsc": HotParams, use_tsc @ 40;
    "hot.enabled": HotParams, enabled @ 48;
    "hot.layout": HotParams, layout @ 56;
    "hot.stripes": HotParams, stripes @ 64;
}
const _: () = assert!(size_of::<RcclQpStats>() == 256 && HIST == 16);
const _: () = assert!(size_of::<DevShard>() == 1152 && STRIPES == 16 && SIZE_BUCKETS == 66);
const _: () = assert!(size_of::<HotParams>() == 320 && MAX_DEVS == 32);
const _: () = assert!(size_of::<LogHist>() == 2112 && LOG_BUCKETS == 256);
