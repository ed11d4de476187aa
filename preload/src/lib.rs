//! The engine side of `librccl_telemetry_preload.so`, the LD_PRELOAD verbs interposer.
//!
//! The interposer itself is C (`preload/c/*.c`, a file per concern: it touches verbs
//! structures, so it is compiled against the system's `<infiniband/verbs.h>`), linked with this archive into
//! `librccl_telemetry_preload.so` by `make preload`. It counts the data path itself, into the
//! engine's QP slots (through the header's slot mirror, under a per-QP lock or with atomic
//! adds, since verbs lets any thread post to any QP) and device stripes (through the header's
//! device forms). What it needs from the engine beyond the C API is here: turning on the
//! interposer's keys, one slot per QP under a per-device cap, the latency of a sampled
//! completion from any thread, the device-level SRQ and unknown-QP counts, and diagnostics.
#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::Ordering::Relaxed;

use rccl_telemetry::boundary;
use rccl_telemetry::counters::{QpExt, RcclQpStats};
use rccl_telemetry::registry;

/// The transport name the interposer's files carry.
pub const TRANSPORT: &str = "verbs-preload";

/// QP slots per device. QPs created beyond it are counted in `num_qp_untracked` and not
/// otherwise (slots are never freed, so a program that creates and destroys QPs in a loop
/// would otherwise grow without bound: 16384 slots are 5 MiB).
pub const MAX_QPS_PER_DEVICE: u64 = 16384;

/// The one channel the interposer uses on every device: verbs has no channel id, so the
/// device's QPs all sit in channel 0 and the file says `"num_channels": null`, `"id": null`.
const CHANNEL: c_int = 0;

/// Whether RCCL_TELEMETRY_ENABLE asks for telemetry, by the library's one rule
/// (`config::enabled_from`): 1 or 0, and never a line (a value it refuses is said by
/// `rtp_init`, which the interposer then does not call). Reads the environment only: the
/// interposer's constructor calls it in every process it is preloaded into, before anything
/// else of the engine has run.
#[no_mangle]
pub extern "C" fn rtp_enabled() -> c_int {
    boundary!("rtp_enabled", 0, c_int::from(enabled()))
}

/// RCCL_TELEMETRY_ENABLE, by `config::enabled_from`.
fn enabled() -> bool {
    use rccl_telemetry::config;
    config::enabled_from(std::env::var_os(config::ENV_ENABLE).as_deref()).0
}

/// Starts the engine (reads RCCL_TELEMETRY_ENABLE and the rest, once). 1 when telemetry is
/// on, with the interposer's keys enabled; 0 when it is off or could not start.
#[no_mangle]
pub extern "C" fn rtp_init() -> c_int {
    boundary!("rtp_init", 0, {
        if enabled() {
            registry::enable_verbs_keys();
        }
        c_int::from(rccl_telemetry::init() == 0 && rccl_telemetry::is_on())
    })
}

/// Registers an opened verbs device as device `index` (its position in ibv_get_device_list)
/// named `name`. Returns the device id, or -1 (index out of 0..31, or refused: one line).
///
/// # Safety
/// `name` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn rtp_register_device(index: c_int, name: *const c_char) -> c_int {
    boundary!("rtp_register_device", -1, {
        let Some(rt) = rccl_telemetry::runtime() else {
            return -1;
        };
        if name.is_null() {
            return -1;
        }
        // SAFETY: per the caller's contract.
        let name = unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned();
        match registry::register(index, &name, TRANSPORT, &rt.cfg.hw) {
            Ok(id) => {
                if let Some(d) = registry::device(id) {
                    d.channels_unknown.store(true, Relaxed);
                    rccl_telemetry::diag::debug(|| {
                        format!(
                            "verbs device {id}: {name} ({}, netdev \"{}\")",
                            d.hw.hw_type(),
                            d.hw.eth_device()
                        )
                    });
                }
                id
            }
            Err(e) => {
                rccl_telemetry::diag::warn(&format!("{e}; its QPs are not counted"));
                -1
            }
        }
    })
}

/// One QP created on device `dev`: its slot (and, through `ext`, its interposer counters), or
/// NULL when it gets none (past MAX_QPS_PER_DEVICE, or out of memory), counted in
/// num_qp_untracked. The device's hardware baseline is taken at its first QP.
///
/// # Safety
/// `ext` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rtp_qp_slot(dev: c_int, ext: *mut *const QpExt) -> *const RcclQpStats {
    let (slot, e) = boundary!("rtp_qp_slot", (std::ptr::null(), std::ptr::null()), {
        let Some(d) = registry::device(dev) else {
            return (std::ptr::null(), std::ptr::null());
        };
        if let Some(c) = d.channel(CHANNEL) {
            if c.slots.reserved() >= MAX_QPS_PER_DEVICE {
                c.untracked.fetch_add(1, Relaxed);
                return (std::ptr::null(), std::ptr::null());
            }
        }
        match registry::setup_channel(dev, CHANNEL, 1) {
            Some((first, 1)) => {
                let c = d.channel(CHANNEL).expect("set up");
                let slot = c
                    .slots
                    .get(first)
                    .map_or(std::ptr::null(), |q| q as *const RcclQpStats);
                let e = c
                    .slots
                    .ext(first)
                    .map_or(std::ptr::null(), |q| q as *const QpExt);
                (slot, e)
            }
            _ => (std::ptr::null(), std::ptr::null()),
        }
    });
    if !ext.is_null() {
        // SAFETY: per the caller's contract.
        unsafe { *ext = e };
    }
    slot
}

/// The latency of a sampled send completion (token > 1), from any thread.
///
/// # Safety
/// `slot` is NULL or a slot from rtp_qp_slot.
#[no_mangle]
pub unsafe extern "C" fn rtp_latency(slot: *const RcclQpStats, token: i64) {
    // SAFETY: slots are NULL or stable addresses.
    boundary!(
        "rtp_latency",
        (),
        if let Some(q) = unsafe { slot.as_ref() } {
            if token > rccl_telemetry::latency::TS_UNSAMPLED {
                q.latency_shared(token);
            }
        }
    )
}

/// `n` receive WRs posted to a shared receive queue of device `dev`.
#[no_mangle]
pub extern "C" fn rtp_srq_recv(dev: c_int, n: u64) {
    if let Some(d) = registry::device(dev) {
        d.verbs.srq_recv_wqe.fetch_add(n, Relaxed);
    }
}

/// `n` completions drained on device `dev` whose qp_num is no tracked QP.
#[no_mangle]
pub extern "C" fn rtp_wc_unknown(dev: c_int, n: u64) {
    if let Some(d) = registry::device(dev) {
        d.verbs.wc_unknown_qp.fetch_add(n, Relaxed);
    }
}

/// One diagnostic line (`rccl-telemetry: ` + msg), or only under RCCL_TELEMETRY_DEBUG.
///
/// # Safety
/// `msg` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn rtp_diag(debug_only: c_int, msg: *const c_char) {
    if msg.is_null() {
        return;
    }
    // SAFETY: per the caller's contract.
    let m = unsafe { CStr::from_ptr(msg) }.to_string_lossy();
    if debug_only != 0 {
        rccl_telemetry::diag::debug(|| m.into_owned());
    } else {
        rccl_telemetry::diag::warn(&m);
    }
}

/// The QP types the interposer names (`"qp_type"`); anything else is `"other"`.
const QP_TYPES: &[&str] = &[
    "rc",
    "uc",
    "ud",
    "raw_packet",
    "xrc_send",
    "xrc_recv",
    "driver",
];

/// The slot a C caller passed, if any.
///
/// # Safety
/// `slot` is NULL or a slot from rtp_qp_slot (stable for the life of the process).
unsafe fn slot_ref(slot: *const RcclQpStats) -> Option<&'static RcclQpStats> {
    // SAFETY: per the caller's contract.
    unsafe { slot.as_ref() }
}

/// 16 raw bytes, or None for NULL.
///
/// # Safety
/// `p` is NULL or points to 16 readable bytes.
unsafe fn gid16(p: *const u8) -> Option<[u8; 16]> {
    if p.is_null() {
        return None;
    }
    let mut g = [0u8; 16];
    // SAFETY: per the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(p, g.as_mut_ptr(), 16) };
    Some(g)
}

/// A QP's type at create (`type_`: "rc", "uc", "ud", ...; unknown names are "other").
///
/// # Safety
/// `slot` is NULL or a slot from rtp_qp_slot; `type_` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn rtp_qp_set_type(slot: *const RcclQpStats, type_: *const c_char) {
    boundary!("rtp_qp_set_type", (), {
        // SAFETY: per the caller's contract.
        let Some(q) = (unsafe { slot_ref(slot) }) else {
            return;
        };
        if type_.is_null() {
            return;
        }
        // SAFETY: per the caller's contract.
        let t = unsafe { CStr::from_ptr(type_) }.to_bytes();
        let name = QP_TYPES
            .iter()
            .find(|n| n.as_bytes() == t)
            .copied()
            .unwrap_or("other");
        rccl_telemetry::peers::set_qp_type(q, name);
    })
}

/// A QP's number (at create) and port (at its INIT transition; -1 unknown).
///
/// # Safety
/// `slot` is NULL or a slot from rtp_qp_slot.
#[no_mangle]
pub unsafe extern "C" fn rtp_qp_set_local(slot: *const RcclQpStats, qp_num: u32, port: c_int) {
    boundary!("rtp_qp_set_local", (), {
        // SAFETY: per the caller's contract.
        let Some(q) = (unsafe { slot_ref(slot) }) else {
            return;
        };
        rccl_telemetry::peers::set_local(q, qp_num, u8::try_from(port).ok().filter(|p| *p > 0));
    })
}

/// A QP's peer, from its transition to RTR: its own number, local GID (16 bytes or NULL) and
/// LID, port and GID index (-1 unknown), the remote QP number, GID (16 bytes or NULL) and LID.
/// Replaces what an earlier call said.
///
/// # Safety
/// `slot` is NULL or a slot from rtp_qp_slot; each GID is NULL or 16 readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rtp_qp_set_peer(
    slot: *const RcclQpStats,
    qp_num: u32,
    local_gid: *const u8,
    local_lid: u16,
    port: c_int,
    gid_index: c_int,
    remote_qp_num: u32,
    remote_gid: *const u8,
    remote_lid: u16,
) {
    boundary!("rtp_qp_set_peer", (), {
        // SAFETY: per the caller's contract.
        let Some(q) = (unsafe { slot_ref(slot) }) else {
            return;
        };
        let p = rccl_telemetry::peers::PeerInfo {
            qp_num,
            // SAFETY: per the caller's contract.
            local_gid: unsafe { gid16(local_gid) },
            local_lid,
            port: u8::try_from(port).ok().filter(|p| *p > 0),
            gid_index: u32::try_from(gid_index).ok(),
            remote_qp_num,
            // SAFETY: per the caller's contract.
            remote_gid: unsafe { gid16(remote_gid) },
            remote_lid,
        };
        rccl_telemetry::capi::qp_set_peer(q, p);
    })
}

/// A QP's path and retry settings from one successful ibv_modify_qp: each field the value the
/// call set, or -1 where its attribute mask did not carry it (path_mtu in bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RtpQpAttrs {
    pub traffic_class: c_int,
    pub sl: c_int,
    pub path_mtu: c_int,
    pub port: c_int,
    pub sgid_index: c_int,
    pub hop_limit: c_int,
    pub max_dest_rd_atomic: c_int,
    pub min_rnr_timer: c_int,
    pub timeout: c_int,
    pub retry_cnt: c_int,
    pub rnr_retry: c_int,
    pub max_rd_atomic: c_int,
}

impl RtpQpAttrs {
    fn told(&self) -> rccl_telemetry::peers::QpAttrs {
        let b = |v: c_int| u8::try_from(v).ok();
        rccl_telemetry::peers::QpAttrs {
            traffic_class: b(self.traffic_class),
            sl: b(self.sl),
            path_mtu: u32::try_from(self.path_mtu).ok().filter(|m| *m > 0),
            timeout: b(self.timeout),
            retry_cnt: b(self.retry_cnt),
            rnr_retry: b(self.rnr_retry),
            min_rnr_timer: b(self.min_rnr_timer),
            sgid_index: b(self.sgid_index),
            port: b(self.port).filter(|p| *p > 0),
            hop_limit: b(self.hop_limit),
            max_rd_atomic: b(self.max_rd_atomic),
            max_dest_rd_atomic: b(self.max_dest_rd_atomic),
        }
    }
}

/// A QP's settings from a successful ibv_modify_qp (RTR: the path, RTS: the retries): the
/// fields told replace the QP's, the others stay.
///
/// # Safety
/// `slot` is NULL or a slot from rtp_qp_slot; `a` is NULL or points to an `rtp_qp_attrs`.
#[no_mangle]
pub unsafe extern "C" fn rtp_qp_set_attrs(slot: *const RcclQpStats, a: *const RtpQpAttrs) {
    boundary!("rtp_qp_set_attrs", (), {
        // SAFETY: per the caller's contract.
        let (Some(q), Some(a)) = (unsafe { slot_ref(slot) }, unsafe { a.as_ref() }) else {
            return;
        };
        rccl_telemetry::peers::set_attrs(q, a.told());
    })
}

/// One error completion polled (cold path): on `slot`'s QP, with what the send record knew of
/// the failed WR (`opcode`: its `enum ibv_wr_opcode`, -2 a receive, -1 unknown; `bytes` -1
/// unknown; `token` its PostTs token), or, with a NULL slot, on device `dev` only (a QP the
/// interposer does not track). `rc` != 0: the QP is RC or XRC, so the error left it in ERR.
/// The device's num_cq_errors is counted by the caller.
///
/// # Safety
/// `slot` is NULL or a slot from rtp_qp_slot.
#[no_mangle]
pub unsafe extern "C" fn rtp_cq_error(
    slot: *const RcclQpStats,
    dev: c_int,
    status: c_int,
    vendor_err: u32,
    opcode: c_int,
    bytes: i64,
    token: i64,
    rc: c_int,
) {
    boundary!("rtp_cq_error", (), {
        if !rccl_telemetry::is_on() {
            return;
        }
        // SAFETY: per the caller's contract.
        match unsafe { slot_ref(slot) } {
            Some(q) => {
                let wr = (opcode != -1).then_some(rccl_telemetry::cq_errors::WrInfo {
                    opcode,
                    bytes: u64::try_from(bytes).ok(),
                    token,
                });
                rccl_telemetry::cq_errors::record(
                    q,
                    status,
                    vendor_err,
                    wr,
                    (rc != 0).then_some("ERR"),
                );
            }
            None => {
                if let Ok(d) = u32::try_from(dev) {
                    rccl_telemetry::cq_errors::record_device(d, status);
                }
            }
        }
    })
}

/// Registers the interposer's walk of its send records, which the stall detector's tick calls
/// (on the writer thread) before it reads the slots' `QpExt::stall_out` / `stall_oldest`.
#[no_mangle]
pub extern "C" fn rtp_stall_walker(walk: Option<extern "C" fn()>) {
    if let Some(f) = walk {
        rccl_telemetry::stall_detector::set_walker(f);
    }
}

/// The size of `QpExt` and the offsets of its fields, in declaration order:
/// [size, send, read, atomic, other, retired, track_full], then the offset in the QP slot of
/// `idx_sent` (num_wqe_sent without an opcode key), which the C side takes from
/// here (the slot's layout is the engine's alone). The C side's `rtp_qpext` is generated from
/// `QpExt` (preload/build.rs), so the first seven can only disagree with it when the header
/// and the archive come from different builds: the interposer still checks them at start, as
/// a belt.
///
/// # Safety
/// `out` is NULL or points at `n` writable `u64`s.
#[no_mangle]
pub unsafe extern "C" fn rtp_ext_layout(out: *mut u64, n: c_int) -> c_int {
    use std::mem::{offset_of, size_of};
    let l = [
        size_of::<QpExt>(),
        offset_of!(QpExt, send_wqe),
        offset_of!(QpExt, read_wqe),
        offset_of!(QpExt, atomic_wqe),
        offset_of!(QpExt, other_wqe),
        offset_of!(QpExt, retired_unsignalled),
        offset_of!(QpExt, track_full),
        offset_of!(RcclQpStats, idx_sent),
    ];
    if out.is_null() || n < l.len() as c_int {
        return -1;
    }
    for (i, v) in l.iter().enumerate() {
        // SAFETY: out has at least n >= l.len() entries.
        unsafe { *out.add(i) = *v as u64 };
    }
    l.len() as c_int
}
