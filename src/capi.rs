//! Every `extern "C"` item of the library, and nothing else: argument checks, the panic
//! boundary, conversion of C ints. `include/rccl_telemetry.h` is generated from this file, so
//! the doc comments of the exported items are written for the header's C reader: what a call
//! does, what it returns, which thread may call it, and what the caller's pointers must be
//! (said in a sentence, not under a Rust `# Safety` heading, which the lint below allows).
#![allow(non_snake_case)]
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, CStr};

use crate::counters::{RcclChannelStats, RcclQpStats, ROLE_CTS, ROLE_DATA};
use crate::{lifecycle, registry, runtime};

/// Device slots: deviceId is 0..RCCL_TELEMETRY_MAX_DEVS-1.
pub const RCCL_TELEMETRY_MAX_DEVS: i32 = 32;
/// Channel slots per device: chIdx is 0..RCCL_TELEMETRY_MAX_CHANNELS-1.
pub const RCCL_TELEMETRY_MAX_CHANNELS: i32 = 512;
/// The most QPs one rcclTelemetrySetupChannel call may ask for: a call asking for more is
/// refused (-1, *numSlots 0), its QPs counted in num_qp_untracked and the first refusal said
/// in one line. A channel grows past it by further calls.
pub const RCCL_TELEMETRY_MAX_QPS_PER_SETUP: i32 = 65536;
const _: () = assert!(RCCL_TELEMETRY_MAX_QPS_PER_SETUP as u64 == registry::MAX_QPS_PER_SETUP);
/// Size of the latency histogram in RcclTelemetrySwSnapshot (the file emits the configured count).
pub const RCCL_TELEMETRY_HISTOGRAM_SIZE: usize = 16;
/// PostTs token meaning "1-in-N sampling skipped this posting".
pub const RCCL_TELEMETRY_TS_UNSAMPLED: i64 = 1;

/// Runs `body`, turning a panic into a logged no-op that returns `default`. Exported so the
/// preload object's entry points use this same boundary.
#[macro_export]
macro_rules! boundary {
    ($name:literal, $default:expr, $body:expr) => {
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| $body)) {
            Ok(v) => v,
            Err(_) => {
                $crate::panics::contained_panic($name);
                $default
            }
        }
    };
}

/// A cold entry point (every call but the data-path hooks and the plain lookups): `body` in
/// the panic boundary (`$default` on a panic), with the termination and snapshot signals
/// blocked in the calling thread until it returns, so that a signal's handler never runs on a
/// thread holding a lock of the library the file's writer needs
/// ([`runtime::QuietSignals`]). Called from inside the logger (a line the library is saying),
/// it returns `$off` at once, what it returns while telemetry is off: the call that said the
/// line may hold a lock this one would wait for.
macro_rules! cold {
    ($name:literal, $off:expr, $default:expr, $body:expr) => {
        if $crate::diag::in_logger() {
            $off
        } else {
            let _quiet = $crate::runtime::QuietSignals::new();
            boundary!($name, $default, $body)
        }
    };
}

/// Software totals of one device, summed over its QPs and those of its finalized
/// communicators (live snapshot; nothing is reset).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RcclTelemetrySwSnapshot {
    pub device_id: c_int,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub num_cq_errors: u64,
    pub wqe_sent: u64,
    pub recv_wqe: u64,
    pub wqe_rcvd: u64,
    pub wqe_completed: u64,
    pub wqe_sampled: u64,
    /// -1 when nothing was sampled.
    pub wqe_completion_ns_min: i64,
    /// -1 when nothing was sampled.
    pub wqe_completion_ns_max: i64,
    pub wqe_completion_histogram: [u64; RCCL_TELEMETRY_HISTOGRAM_SIZE],
}

// ----------------------------------------------------------------------------------- lifecycle

/// Reads the environment and starts telemetry when RCCL_TELEMETRY_ENABLE=1. Returns
/// RCCL_TELEMETRY_INIT_STARTED (0: it counts), RCCL_TELEMETRY_INIT_OFF (1: not asked for),
/// RCCL_TELEMETRY_INIT_FINISHED (2: the final file was written, or this is a forked child of
/// a process with telemetry on; it stays off) or RCCL_TELEMETRY_INIT_FAILED (-1: asked for
/// but could not start; the reason is already logged). Only a negative result is a failure:
/// test `< 0` to log one (a test of `!= 0` would also log off and finished, which are no
/// failures). The run goes on in every case. Any
/// thread, any number of times: later calls return the first call's answer, or FINISHED
/// once telemetry has finished.
#[no_mangle]
pub extern "C" fn rcclTelemetryInit() -> c_int {
    cold!(
        "rcclTelemetryInit",
        RCCL_TELEMETRY_INIT_OFF,
        -1,
        lifecycle::init()
    )
}

/// Sets the library's variable `name` (an RCCL_TELEMETRY_* name, as the operators' guide
/// lists them) to `value`, for rcclTelemetryInit to read as if it were in the environment: how RCCL
/// passes the values of its own parameters and rccl.conf. Every variable the library reads
/// can be set so; a variable that is also in the environment keeps the environment's value
/// (as NCCL's environment wins over its configuration file). A NULL `value` removes what an
/// earlier call set. A name set twice keeps the later value. Call it before rcclTelemetryInit:
/// once Init has run (whatever it returned) the configuration is fixed, and a call changes
/// nothing and returns -1 (one line the first time, when telemetry was asked for). Returns 0 when set; -1 when refused: a
/// NULL name or one that is not RCCL_TELEMETRY_<NAME> (one line each), after Init, or out of
/// memory. A value is checked at Init, as the environment's is. Where no library takes it
/// (RCCL_TELEMETRY_STUBS, or the loader without the library) it returns 0 and does nothing:
/// telemetry is off there. Any thread. `name` and `value` are NULL or NUL-terminated strings,
/// copied before the call returns.
///
/// Example, RCCL turning the signal handlers off for its processes unless the operator says
/// otherwise: `rcclTelemetrySetParam("RCCL_TELEMETRY_SIGNALS", "0");` before Init.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetrySetParam(name: *const c_char, value: *const c_char) -> c_int {
    cold!("rcclTelemetrySetParam", 0, -1, {
        if name.is_null() {
            crate::diag::warn("rcclTelemetrySetParam: no name (NULL); ignored");
            return -1;
        }
        // SAFETY: per the caller's contract, both are NUL-terminated strings (value maybe NULL).
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        let value = (!value.is_null()).then(|| {
            use std::os::unix::ffi::OsStrExt;
            // SAFETY: as above.
            std::ffi::OsStr::from_bytes(unsafe { CStr::from_ptr(value) }.to_bytes()).to_owned()
        });
        lifecycle::set_param(&name, value)
    })
}

/// 1 when telemetry is enabled and initialised and the final file not yet written, else 0
/// (0 before Init, when disabled, after rcclTelemetryFlush or exit, and in a forked child).
/// Any thread; one load, inline where the inline hooks are on.
#[no_mangle]
pub extern "C" fn rcclTelemetryOn() -> c_int {
    c_int::from(runtime::is_on())
}

/// Writes the JSON file once; also run at process exit. Afterwards every entry point is inert:
/// rcclTelemetryOn 0, RegisterDevice -1, SetupChannel -1 (*numSlots 0), Resolve* NULL,
/// SwCapture -1, data-path calls change nothing, and the file is never rewritten.
/// Returns 0 on success, when disabled or already written, -1 on failure (reason and path
/// logged). Any thread, while hooks run: a second call while the first writes waits for it
/// (at most 10 s) and returns 0; hooks that race it are counted or not, never torn.
#[no_mangle]
pub extern "C" fn rcclTelemetryFlush() -> c_int {
    cold!("rcclTelemetryFlush", 0, -1, runtime::flush())
}

/// Registers a RoCE device in slot `deviceId` (0..31) for transport `transport`
/// (e.g. "IB-CAST"). Returns deviceId, or -1 when disabled or refused. Registering the same
/// name in the same slot again returns deviceId. Any thread, concurrently with any call:
/// of two registrations of one slot under different names, one wins and the other is
/// refused. `roceDevice` and `transport` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryRegisterDevice(
    deviceId: c_int,
    roceDevice: *const c_char,
    transport: *const c_char,
) -> c_int {
    cold!("rcclTelemetryRegisterDevice", -1, -1, {
        let Some(rt) = runtime::runtime() else {
            return -1;
        };
        // SAFETY: the caller passes NULL or a NUL-terminated string.
        let name = unsafe { c_str(roceDevice) };
        let transport = unsafe { c_str(transport) };
        if name.is_empty() {
            crate::diag::warn(&format!(
                "rcclTelemetryRegisterDevice({deviceId}): no device name; not registered"
            ));
            return -1;
        }
        match registry::register(deviceId, &name, &transport, &rt.cfg.hw) {
            Ok(id) => {
                crate::diag::debug(|| {
                    let d = registry::device(id).expect("just registered");
                    format!(
                        "registered device {id}: {name} ({}, netdev \"{}\", transport {transport})",
                        d.hw.hw_type(),
                        d.hw.eth_device()
                    )
                });
                id
            }
            Err(e) => {
                crate::diag::warn(&e);
                -1
            }
        }
    })
}

/// The QP slot of an index form or a setup call, while telemetry counts (None before Init,
/// when disabled, after the final write and in a forked child: those calls are no-ops).
fn live_qp(dev: c_int, ch: c_int, qp: c_int) -> Option<&'static RcclQpStats> {
    runtime::is_on()
        .then(|| registry::qp(dev, ch, qp))
        .flatten()
}

fn live_channel(dev: c_int, ch: c_int) -> Option<&'static registry::Channel> {
    runtime::is_on()
        .then(|| registry::channel(dev, ch))
        .flatten()
}

/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn c_str(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: per the caller's contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

// ------------------------------------------------------------------------ connection setup

/// Reserves `numQps` QP slots on (devIdx, chIdx). Returns the first slot index and sets
/// `*numSlots` (if not NULL) to how many were granted; 0 and -1 when none. A shortfall is
/// counted in num_qp_untracked (on the channel, or on the device when chIdx is out of range):
/// more than RCCL_TELEMETRY_MAX_QPS_PER_SETUP asked for (refused whole), past the channel's
/// 16,777,216 slots, or memory that could not be had (each said once in one line). The
/// device's hardware-counter baseline is taken on its first call. Any thread, concurrently
/// with any call: concurrent calls on one channel get disjoint slots, and a slot is
/// resolvable (rcclTelemetryResolveQp) by any thread once the call that reserved it has
/// returned. `numSlots` is NULL or points to a writable int.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetrySetupChannel(
    devIdx: c_int,
    chIdx: c_int,
    numQps: c_int,
    numSlots: *mut c_int,
) -> c_int {
    let (first, granted) = cold!("rcclTelemetrySetupChannel", (-1, 0), (-1, 0), {
        if runtime::runtime().is_some_and(|rt| rt.cfg.fault == crate::config::Fault::SetupPanic) {
            panic!("forced by {}=setup_panic", crate::config::ENV_TEST_FAULT);
        }
        match runtime::runtime().and_then(|_| registry::setup_channel(devIdx, chIdx, numQps)) {
            Some((first, granted)) => (first as c_int, granted as c_int),
            None => (-1, 0),
        }
    });
    if !numSlots.is_null() {
        // SAFETY: per the caller's contract.
        unsafe { *numSlots = granted };
    }
    first
}

/// Tells whether QP slot qpIdx of (devIdx, chIdx) carries data (isDataQp != 0) or CTS. Any
/// thread, concurrently with any call; told twice, the later call wins.
#[no_mangle]
pub extern "C" fn rcclTelemetrySetQpRole(
    devIdx: c_int,
    chIdx: c_int,
    qpIdx: c_int,
    isDataQp: c_int,
) {
    cold!("rcclTelemetrySetQpRole", (), (), {
        if runtime::is_on() {
            registry::set_qp_role(
                devIdx,
                chIdx,
                qpIdx,
                if isDataQp != 0 { ROLE_DATA } else { ROLE_CTS },
            );
        }
    })
}

/// The transport has no real channel id on this device: the file shows
/// "num_channels": null and every channel "id": null. Any thread, concurrently with any call.
#[no_mangle]
pub extern "C" fn rcclTelemetryMarkChannelsUnknown(devIdx: c_int) {
    boundary!("rcclTelemetryMarkChannelsUnknown", (), {
        if let Some(d) = runtime::runtime().and_then(|_| registry::device(devIdx)) {
            d.channels_unknown
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    })
}

/// The stats handle of QP slot qpIdx on (devIdx, chIdx), to store on the QP at setup.
/// NULL when disabled or when the indices name no slot; valid for the life of the process.
/// Any thread, concurrently with any call (a lookup, no lock).
#[no_mangle]
pub extern "C" fn rcclTelemetryResolveQp(
    devIdx: c_int,
    chIdx: c_int,
    qpIdx: c_int,
) -> *mut RcclQpStats {
    boundary!("rcclTelemetryResolveQp", std::ptr::null_mut(), {
        live_qp(devIdx, chIdx, qpIdx).map_or(std::ptr::null_mut(), |q| {
            q as *const RcclQpStats as *mut RcclQpStats
        })
    })
}

/// The stats handle of channel chIdx on devIdx. NULL when disabled or when no slot was set
/// up there; valid for the life of the process. Any thread, concurrently with any call (a
/// lookup, no lock).
#[no_mangle]
pub extern "C" fn rcclTelemetryResolveChannel(
    devIdx: c_int,
    chIdx: c_int,
) -> *mut RcclChannelStats {
    boundary!("rcclTelemetryResolveChannel", std::ptr::null_mut(), {
        live_channel(devIdx, chIdx).map_or(std::ptr::null_mut(), |c| {
            &c.stats as *const RcclChannelStats as *mut RcclChannelStats
        })
    })
}

/// Tells a QP's identity and its peer's, once the transport has exchanged connection data
/// (cold path; never on the data path). qpNum: the local QPN; localGid/remoteGid: 16 raw GID
/// bytes (`union ibv_gid`) or NULL (an all-zero GID counts as NULL); localLid/remoteLid: 0
/// when unknown (RoCE). The file then shows the QP's "qp_num" and "peer", the device's
/// "gid"/"lid", and the QP's later sampled completions in the device's "peers" latency for
/// that remote NIC. A second call replaces the first. NULL handle, telemetry off or after
/// the final write: no-op. Any thread, concurrently with any call, the QP's own hooks
/// included (a completion racing it counts towards the old peer or the new one). `qp` is
/// NULL or a handle from rcclTelemetryResolveQp; `localGid` and `remoteGid` are NULL or point
/// to 16 readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryQpSetPeer(
    qp: *mut RcclQpStats,
    qpNum: u32,
    localGid: *const std::ffi::c_void,
    localLid: u16,
    remoteQpNum: u32,
    remoteGid: *const std::ffi::c_void,
    remoteLid: u16,
) {
    cold!("rcclTelemetryQpSetPeer", (), (), {
        if !runtime::is_on() {
            return;
        }
        // SAFETY: handles are NULL or stable slot addresses, valid for the process.
        let Some(q) = (unsafe { (qp as *const RcclQpStats).as_ref() }) else {
            return;
        };
        // SAFETY: per the caller's contract, each GID is NULL or 16 readable bytes.
        let (local_gid, remote_gid) = unsafe { (gid16(localGid), gid16(remoteGid)) };
        qp_set_peer(
            q,
            crate::peers::PeerInfo {
                qp_num: qpNum,
                local_gid,
                local_lid: localLid,
                port: None,
                gid_index: None,
                remote_qp_num: remoteQpNum,
                remote_gid,
                remote_lid: remoteLid,
            },
        );
    })
}

/// Tells slot `q` its identity and its peer (rcclTelemetryQpSetPeer, and the preload's
/// ibv_modify_qp): when the call hands the slot to another QP, the old QP's stall ends.
pub fn qp_set_peer(q: &'static RcclQpStats, p: crate::peers::PeerInfo) {
    if let Some((c, i)) = crate::peers::set_peer(q, p) {
        crate::stall_detector::replaced(c, i);
    }
}

/// # Safety
/// `p` is NULL or points to 16 readable bytes.
unsafe fn gid16(p: *const std::ffi::c_void) -> Option<[u8; 16]> {
    // SAFETY: per the caller's contract; read_unaligned, as a GID has no alignment.
    (!p.is_null()).then(|| unsafe { (p as *const [u8; 16]).read_unaligned() })
}

// ------------------------------------------------------------------ data path: handle forms

/// The token to store with a posted work request: RCCL_TELEMETRY_TS_UNSAMPLED (1) when
/// 1-in-N sampling skips this posting, otherwise a clock reading (> 1) to hand back to
/// rcclTelemetryQpWqeComplete. 0 for a NULL handle.
///
/// `qp` is NULL or a handle from rcclTelemetryResolveQp.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryPostTs(qp: *mut RcclQpStats) -> i64 {
    // SAFETY: handles are NULL or stable slot addresses.
    boundary!(
        "rcclTelemetryPostTs",
        0,
        unsafe { qp.as_ref() }.map_or(0, RcclQpStats::post_ts)
    )
}

/// One send WQE posted: num_wqe_sent, and num_write_imm_wqe (withImm != 0) or num_write_wqe.
///
/// `qp` is NULL or a handle from rcclTelemetryResolveQp.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryQpSendPosted(qp: *mut RcclQpStats, withImm: c_int) {
    // SAFETY: handles are NULL or stable slot addresses.
    boundary!(
        "rcclTelemetryQpSendPosted",
        (),
        if let Some(q) = unsafe { qp.as_ref() } {
            q.send_posted(withImm != 0)
        }
    )
}

/// One receive WQE posted (ibv_post_recv): num_recv_wqe.
///
/// `qp` is NULL or a handle from rcclTelemetryResolveQp.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryQpRecvPosted(qp: *mut RcclQpStats) {
    // SAFETY: handles are NULL or stable slot addresses.
    boundary!(
        "rcclTelemetryQpRecvPosted",
        (),
        if let Some(q) = unsafe { qp.as_ref() } {
            q.recv_posted()
        }
    )
}

/// One CTS message posted, signalled or not.
///
/// `qp` is NULL or a handle from rcclTelemetryResolveQp.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryQpCtsSent(qp: *mut RcclQpStats, signalled: c_int) {
    // SAFETY: handles are NULL or stable slot addresses.
    boundary!(
        "rcclTelemetryQpCtsSent",
        (),
        if let Some(q) = unsafe { qp.as_ref() } {
            q.cts_sent(signalled != 0)
        }
    )
}

/// A sender found the CTS FIFO slot not yet published: num_slot_miss.
///
/// `qp` is NULL or a handle from rcclTelemetryResolveQp.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryQpSlotMiss(qp: *mut RcclQpStats) {
    // SAFETY: handles are NULL or stable slot addresses.
    boundary!(
        "rcclTelemetryQpSlotMiss",
        (),
        if let Some(q) = unsafe { qp.as_ref() } {
            q.slot_missed()
        }
    )
}

/// One completion drained from the CQ for this QP. postTs: 0 = matched no tracked posting,
/// 1 = matched but not sampled, > 1 = the token from rcclTelemetryPostTs (latency measured).
///
/// `qp` is NULL or a handle from rcclTelemetryResolveQp.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryQpWqeComplete(qp: *mut RcclQpStats, postTs: i64) {
    // SAFETY: handles are NULL or stable slot addresses.
    boundary!(
        "rcclTelemetryQpWqeComplete",
        (),
        if let Some(q) = unsafe { qp.as_ref() } {
            q.wqe_complete(postTs)
        }
    )
}

/// rcclTelemetryQpWqeComplete for a completion whose poll returned at `nowTs`,
/// a reading from rcclTelemetryPollTs taken once after the ibv_poll_cq call that returned it.
/// A caller that drains several completions per poll pays one clock read per poll instead of
/// one per sampled completion; the latency is measured to the poll's return. Same counters
/// and buckets as rcclTelemetryQpWqeComplete for the same tokens; `nowTs` <= 1 reads the
/// clock as that function does.
///
/// `qp` is NULL or a handle from rcclTelemetryResolveQp.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryQpWqeCompleteAt(
    qp: *mut RcclQpStats,
    postTs: i64,
    nowTs: i64,
) {
    // SAFETY: handles are NULL or stable slot addresses.
    boundary!(
        "rcclTelemetryQpWqeCompleteAt",
        (),
        if let Some(q) = unsafe { qp.as_ref() } {
            q.wqe_complete_at(postTs, nowTs)
        }
    )
}

/// A clock reading for rcclTelemetryQpWqeCompleteAt (the token clock, always > 1).
/// Take it once after each ibv_poll_cq that returned completions, and only when telemetry
/// is on. Inline in the header (no call) where the inline hooks are on.
#[no_mangle]
pub extern "C" fn rcclTelemetryPollTs() -> i64 {
    crate::latency::now_token()
}

/// One network request completed on this channel: num_req_completed.
///
/// `ch` is NULL or a handle from rcclTelemetryResolveChannel.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryChRequestCompleted(ch: *mut RcclChannelStats) {
    // SAFETY: handles are NULL or stable channel addresses.
    boundary!(
        "rcclTelemetryChRequestCompleted",
        (),
        if let Some(c) = unsafe { ch.as_ref() } {
            c.request_completed()
        }
    )
}

// ------------------------------------------------------------------ data path: device forms

/// Software byte count on a device (isSend != 0: tx_bytes, else rx_bytes).
#[no_mangle]
pub extern "C" fn rcclTelemetryBytes(devIdx: c_int, isSend: c_int, bytes: u64) {
    boundary!(
        "rcclTelemetryBytes",
        (),
        device_op(devIdx, |s, o| registry::add(
            if isSend != 0 {
                &s.tx_bytes
            } else {
                &s.rx_bytes
            },
            bytes,
            o
        ))
    )
}

/// One completion drained with an error status: num_cq_errors.
#[no_mangle]
pub extern "C" fn rcclTelemetryCqError(devIdx: c_int) {
    boundary!(
        "rcclTelemetryCqError",
        (),
        device_op(devIdx, |s, o| registry::add(&s.cq_errors, 1, o))
    )
}

/// One completion drained with an error status on this QP (cold path: where the transport
/// handles a work completion whose status is not IBV_WC_SUCCESS). `status` is the
/// `enum ibv_wc_status` value, `vendorErr` the completion's vendor_err. The QP's file entry
/// counts it by status ("cq_errors") and names its first error ("first_cq_error", with the
/// wall time; "qp_state" "ERR", where an error leaves an RC QP); the device counts it in
/// num_cq_errors and by status ("cq_errors_by_status"), so do not also call
/// rcclTelemetryCqError for it. A QP's first error asks the writer thread for a snapshot
/// (trigger "cq_error", rate-limited). NULL handle, telemetry off or after the final write:
/// no-op. Any thread, concurrently with any call. `qp` is NULL or a handle from
/// rcclTelemetryResolveQp.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryQpCqError(
    qp: *mut RcclQpStats,
    status: c_int,
    vendorErr: u32,
) {
    cold!("rcclTelemetryQpCqError", (), (), {
        if !runtime::is_on() {
            return;
        }
        // SAFETY: handles are NULL or stable slot addresses, valid for the process.
        let Some(q) = (unsafe { (qp as *const RcclQpStats).as_ref() }) else {
            return;
        };
        // The device counts it before its record can wake the writer for a snapshot, so a
        // snapshot never shows a QP's error without its device's count.
        let Some((dev, _, _)) = registry::slot_home(q) else {
            return;
        };
        device_op(dev as c_int, |s, o| registry::add(&s.cq_errors, 1, o));
        crate::cq_errors::record(q, status, vendorErr, None, Some("ERR"));
    })
}

/// Adds `polls` ibv_poll_cq calls to cq_poll_count.
#[no_mangle]
pub extern "C" fn rcclTelemetryAddCqPolls(devIdx: c_int, polls: u64) {
    boundary!(
        "rcclTelemetryAddCqPolls",
        (),
        device_op(devIdx, |s, o| registry::add(&s.cq_polls, polls, o))
    )
}

/// One send WQE of `bytes` payload, for wqe_size_stats.
#[no_mangle]
pub extern "C" fn rcclTelemetryWqeSize(devIdx: c_int, bytes: u64) {
    boundary!(
        "rcclTelemetryWqeSize",
        (),
        device_op(devIdx, |s, o| registry::add(
            &s.sizes[crate::counters::size_bucket(bytes)],
            1,
            o
        ))
    )
}

#[inline(always)]
fn device_op(dev: c_int, f: impl FnOnce(&registry::DevCounters, bool)) {
    if let Some(d) = registry::device(dev).filter(|_| runtime::is_on()) {
        d.stripes[registry::stripe()].with(f);
    }
}

// ------------------------------------------------------------------- data path: index forms

/// Index form of rcclTelemetryQpWqeComplete.
#[no_mangle]
pub extern "C" fn rcclTelemetryWqeComplete(devIdx: c_int, chIdx: c_int, qpIdx: c_int, postTs: i64) {
    boundary!(
        "rcclTelemetryWqeComplete",
        (),
        if let Some(q) = live_qp(devIdx, chIdx, qpIdx) {
            q.wqe_complete_shared(postTs)
        }
    )
}

/// Index form of the posting hooks: isSend != 0 counts num_wqe_sent, else num_recv_wqe.
/// (The opcode split is rcclTelemetryWriteWqe.)
#[no_mangle]
pub extern "C" fn rcclTelemetryWqePosted(devIdx: c_int, chIdx: c_int, qpIdx: c_int, isSend: c_int) {
    boundary!(
        "rcclTelemetryWqePosted",
        (),
        if let Some(q) = live_qp(devIdx, chIdx, qpIdx) {
            (if isSend != 0 {
                &q.idx_sent
            } else {
                &q.recv_wqe
            })
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    )
}

/// Index form of rcclTelemetryChRequestCompleted.
#[no_mangle]
pub extern "C" fn rcclTelemetryRequestCompleted(devIdx: c_int, chIdx: c_int) {
    boundary!(
        "rcclTelemetryRequestCompleted",
        (),
        if let Some(c) = live_channel(devIdx, chIdx) {
            c.stats
                .req_completed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    )
}

/// Index form of rcclTelemetryQpSlotMiss.
#[no_mangle]
pub extern "C" fn rcclTelemetrySlotMiss(devIdx: c_int, chIdx: c_int, qpIdx: c_int) {
    boundary!(
        "rcclTelemetrySlotMiss",
        (),
        if let Some(q) = live_qp(devIdx, chIdx, qpIdx) {
            q.slot_miss
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    )
}

/// Index form of rcclTelemetryQpCtsSent.
#[no_mangle]
pub extern "C" fn rcclTelemetryCtsSent(
    devIdx: c_int,
    chIdx: c_int,
    qpIdx: c_int,
    signalled: c_int,
) {
    boundary!(
        "rcclTelemetryCtsSent",
        (),
        if let Some(q) = live_qp(devIdx, chIdx, qpIdx) {
            (if signalled != 0 {
                &q.cts_signalled
            } else {
                &q.cts_unsignalled
            })
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    )
}

/// Index form of the opcode split: withImm != 0 counts num_write_imm_wqe, else num_write_wqe.
#[no_mangle]
pub extern "C" fn rcclTelemetryWriteWqe(devIdx: c_int, chIdx: c_int, qpIdx: c_int, withImm: c_int) {
    boundary!(
        "rcclTelemetryWriteWqe",
        (),
        if let Some(q) = live_qp(devIdx, chIdx, qpIdx) {
            (if withImm != 0 {
                &q.idx_imm
            } else {
                &q.idx_write
            })
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    )
}

/// Index form of rcclTelemetryPostTs, for callers without handles. Claims the
/// posting position atomically, so any thread may call it. 0 when the indices name no slot.
#[no_mangle]
pub extern "C" fn rcclTelemetryPostTsIdx(devIdx: c_int, chIdx: c_int, qpIdx: c_int) -> i64 {
    boundary!(
        "rcclTelemetryPostTsIdx",
        0,
        live_qp(devIdx, chIdx, qpIdx).map_or(0, RcclQpStats::post_ts_shared)
    )
}

/// A clock reading usable as a PostTs token (always > 1), in the library's units: what the
/// header's inline PostTs and completion hooks use when tokens are not TSC readings.
#[no_mangle]
pub extern "C" fn rcclTelemetryNowToken() -> i64 {
    crate::latency::now_token()
}

// ---------------------------------------------------------------------------- live snapshot

/// Writes up to maxDevs entries, one per registered device in id order, with its software
/// totals so far. Returns the number written; -1 when disabled, `out` is NULL or maxDevs < 0.
/// Never resets anything. Any thread, while hooks run. `out` points to at least maxDevs
/// writable entries.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetrySwCapture(
    out: *mut RcclTelemetrySwSnapshot,
    maxDevs: c_int,
) -> c_int {
    cold!("rcclTelemetrySwCapture", -1, -1, {
        if !runtime::is_on() || out.is_null() || maxDevs < 0 {
            return -1;
        }
        let _view = registry::read_view();
        let mut n = 0;
        for d in registry::devices().take(maxDevs as usize) {
            let snap = sw_snapshot(d);
            // SAFETY: per the caller's contract, out has maxDevs entries and n < maxDevs.
            unsafe { out.add(n).write(snap) };
            n += 1;
        }
        n as c_int
    })
}

fn sw_snapshot(d: &registry::Device) -> RcclTelemetrySwSnapshot {
    // The finalized communicators' counts first: the totals never go down when one goes.
    let mut total = crate::comms::device_total(d.id).totals;
    for c in d.channels() {
        for (_, q) in c.slots.iter() {
            total.accumulate(&q.snapshot());
        }
    }
    let t = registry::dev_totals(d);
    RcclTelemetrySwSnapshot {
        device_id: d.id as c_int,
        tx_bytes: t.tx_bytes,
        rx_bytes: t.rx_bytes,
        num_cq_errors: t.cq_errors,
        wqe_sent: total.wqe_sent,
        recv_wqe: total.recv_wqe,
        wqe_rcvd: total.wqe_rcvd,
        wqe_completed: total.wqe_completed,
        wqe_sampled: total.sampled(),
        wqe_completion_ns_min: total.lat_min,
        wqe_completion_ns_max: total.lat_max,
        wqe_completion_histogram: total.hist,
    }
}

// ------------------------------------------------------------------------------ communicators

/// A communicator's telemetry context (opaque; the pointer is a token and is never
/// dereferenced).
#[allow(non_camel_case_types)]
pub struct rcclTelemetryComm {
    _opaque: [u8; 0],
}

/// The handle rcclTelemetryCommInit returns.
#[allow(non_camel_case_types)]
pub type rcclTelemetryComm_t = rcclTelemetryComm;

/// Whether a stale communicator handle was already reported (once per process).
static STALE_COMM_SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The live communicator of a handle, while telemetry counts. NULL: None, silently; a
/// finalized or unknown handle: None, with one line per process naming the call.
fn live_comm(
    comm: *mut rcclTelemetryComm_t,
    call: &str,
) -> Option<std::sync::Arc<registry::comm::Comm>> {
    if comm.is_null() || !runtime::is_on() {
        return None;
    }
    let c = registry::comm::get(comm as usize as u64);
    if c.is_none() && !STALE_COMM_SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        crate::diag::warn(&format!(
            "{call}: the communicator handle is finalized or unknown; ignored (its calls are no-ops; said once)"
        ));
    }
    c
}

/// Creates the telemetry context of a communicator, at ncclCommInitRank (cold path):
/// `commHash` is RCCL's comm->commHash, `rank` this rank's place in it (0..nRanks-1),
/// `nRanks` its size. Channels and QPs set up through it are its own: its channel chIdx on a
/// device is not the process-wide calls' channel chIdx nor another communicator's, and every
/// output names it (commHash in hex, rank, nRanks) beside them. NULL when telemetry is off
/// (every Comm call then a no-op), and with one line for a rank outside 0..nRanks-1.
/// Thread-safe.
#[no_mangle]
pub extern "C" fn rcclTelemetryCommInit(
    commHash: u64,
    rank: c_int,
    nRanks: c_int,
) -> *mut rcclTelemetryComm_t {
    cold!(
        "rcclTelemetryCommInit",
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        {
            if !runtime::is_on() {
                return std::ptr::null_mut();
            }
            if nRanks < 1 || rank < 0 || rank >= nRanks {
                crate::diag::warn(&format!(
                "rcclTelemetryCommInit(0x{commHash:x}, rank {rank}, nRanks {nRanks}): rank is not in 0..nRanks-1; no context (its calls are no-ops)"
            ));
                return std::ptr::null_mut();
            }
            match registry::comm::create(commHash, rank, nRanks, crate::latency::realtime_ns()) {
                Ok((h, c)) => {
                    crate::diag::debug(|| {
                        format!(
                            "communicator {} is context {}",
                            c.ident.describe(),
                            c.ident.id
                        )
                    });
                    h as usize as *mut rcclTelemetryComm_t
                }
                Err(why) => {
                    crate::diag::warn(&format!(
                    "rcclTelemetryCommInit(0x{commHash:x}): {why}; no context (its calls are no-ops)"
                ));
                    std::ptr::null_mut()
                }
            }
        }
    )
}

/// rcclTelemetrySetupChannel in the communicator's own channel space: reserves `numQps` QP
/// slots on its channel chIdx of device devIdx (slot indices start at 0 on each of its
/// channels). Returns the first slot index and sets `*numSlots` (if not NULL) to how many were
/// granted; -1 and 0 when none, for a NULL or finalized communicator, or while telemetry is
/// off. Cold path; thread-safe.
///
/// The caller's pointers: `comm` is NULL or a handle from rcclTelemetryCommInit;
/// `numSlots` is NULL or points to a writable int.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryCommSetupChannel(
    comm: *mut rcclTelemetryComm_t,
    devIdx: c_int,
    chIdx: c_int,
    numQps: c_int,
    numSlots: *mut c_int,
) -> c_int {
    let (first, granted) = cold!("rcclTelemetryCommSetupChannel", (-1, 0), (-1, 0), {
        match live_comm(comm, "rcclTelemetryCommSetupChannel")
            .and_then(|c| c.setup_channel(devIdx, chIdx, numQps, &crate::comms::usable))
        {
            Some((first, granted)) => (first as c_int, granted as c_int),
            None => (-1, 0),
        }
    });
    if !numSlots.is_null() {
        // SAFETY: per the caller's contract.
        unsafe { *numSlots = granted };
    }
    first
}

/// rcclTelemetrySetQpRole for the communicator's QP slot qpIdx of (devIdx, chIdx).
///
/// The caller's pointers: `comm` is NULL or a handle from rcclTelemetryCommInit.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryCommSetQpRole(
    comm: *mut rcclTelemetryComm_t,
    devIdx: c_int,
    chIdx: c_int,
    qpIdx: c_int,
    isDataQp: c_int,
) {
    cold!("rcclTelemetryCommSetQpRole", (), (), {
        if let Some(c) = live_comm(comm, "rcclTelemetryCommSetQpRole") {
            let role = if isDataQp != 0 { ROLE_DATA } else { ROLE_CTS };
            c.set_qp_role(devIdx, chIdx, qpIdx, role);
        }
    })
}

/// The stats handle of the communicator's QP slot qpIdx on (devIdx, chIdx), to store on the
/// QP at setup, and to use with the same hooks as any handle. NULL for a NULL or finalized
/// communicator, while telemetry is off, or when the indices name no slot. Valid until the
/// communicator's rcclTelemetryCommFinalize.
///
/// The caller's pointers: `comm` is NULL or a handle from rcclTelemetryCommInit.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryCommResolveQp(
    comm: *mut rcclTelemetryComm_t,
    devIdx: c_int,
    chIdx: c_int,
    qpIdx: c_int,
) -> *mut RcclQpStats {
    cold!(
        "rcclTelemetryCommResolveQp",
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        {
            live_comm(comm, "rcclTelemetryCommResolveQp")
                .and_then(|c| c.qp(devIdx, chIdx, qpIdx))
                .map_or(std::ptr::null_mut(), |q| {
                    q as *const RcclQpStats as *mut RcclQpStats
                })
        }
    )
}

/// The stats handle of the communicator's channel chIdx on devIdx. NULL as for
/// rcclTelemetryCommResolveQp, or when it set up no slot there. Valid until the
/// communicator's rcclTelemetryCommFinalize.
///
/// The caller's pointers: `comm` is NULL or a handle from rcclTelemetryCommInit.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryCommResolveChannel(
    comm: *mut rcclTelemetryComm_t,
    devIdx: c_int,
    chIdx: c_int,
) -> *mut RcclChannelStats {
    cold!(
        "rcclTelemetryCommResolveChannel",
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        {
            live_comm(comm, "rcclTelemetryCommResolveChannel")
                .and_then(|c| c.channel(devIdx, chIdx))
                .map_or(std::ptr::null_mut(), |c| {
                    &c.stats as *const RcclChannelStats as *mut RcclChannelStats
                })
        }
    )
}

/// Ends a communicator's telemetry, at ncclCommDestroy (or ncclCommAbort), after its QPs are
/// destroyed and no hook runs on its handles any more. Its counts are folded into a compact
/// record (every counter summed, histograms merged, its peers' latency, its error completions,
/// its QPs' stalls ended now), which the file keeps under each device ("finalized_comms"), and
/// the device totals and SwCapture keep counting; its channels' memory goes to later
/// communicators, cleared. Afterwards the communicator handle and every handle resolved
/// through it must not be used again: calls with the communicator handle are no-ops (one line
/// the first time). A late count, one that still reaches one of its slots through a kept QP
/// or channel handle, is outside the contract, and lands as follows: while the channel is
/// free it goes to this communicator's record (the channel is checked before it is handed
/// out, and one with late counts is not handed out then); a handed-back channel is reused
/// last (the one free longest goes first), and a channel is cleared up to the most slots it
/// ever had at each hand-back, so a late count never reaches a communicator that never had
/// that slot. Only a count made after the channel went to a later communicator, in a slot
/// that communicator uses, is counted as that communicator's. NULL, a finalized handle, or
/// telemetry off: no-op.
/// Thread-safe; it waits for a file or textfile being read from the counters, not for its
/// disk write.
///
/// The caller's pointers: `comm` is NULL or a handle from rcclTelemetryCommInit.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryCommFinalize(comm: *mut rcclTelemetryComm_t) {
    cold!("rcclTelemetryCommFinalize", (), (), {
        if comm.is_null() || !runtime::is_on() {
            return;
        }
        let fault = || runtime::fault_point(crate::config::Fault::FinalizeSigterm);
        if !crate::comms::finalize_with(comm as usize as u64, fault)
            && !STALE_COMM_SAID.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            crate::diag::warn(
                "rcclTelemetryCommFinalize: the communicator handle is finalized or unknown; ignored (said once)",
            );
        }
    })
}

// ------------------------------------------------------------------ version and ABI negotiation

/// Parses a decimal version component at compile time (Cargo's CARGO_PKG_VERSION_*).
const fn version_part(s: &str) -> c_int {
    let b = s.as_bytes();
    let mut i = 0;
    let mut v: c_int = 0;
    while i < b.len() {
        assert!(b[i].is_ascii_digit(), "a version component is decimal");
        v = v * 10 + (b[i] - b'0') as c_int;
        i += 1;
    }
    v
}

/// This library's version as RCCL_TELEMETRY_VERSION_CODE encodes it: major * 10000 +
/// minor * 100 + patch (the header's macros are generated from the same Cargo version).
pub(crate) const VERSION_CODE: c_int = version_part(env!("CARGO_PKG_VERSION_MAJOR")) * 10000
    + version_part(env!("CARGO_PKG_VERSION_MINOR")) * 100
    + version_part(env!("CARGO_PKG_VERSION_PATCH"));

/// The version of the running library, as RCCL_TELEMETRY_VERSION_CODE encodes it (major *
/// 10000 + minor * 100 + patch): compare it with the header's RCCL_TELEMETRY_VERSION_CODE to
/// tell which library a program was built against from the one it runs with. Any state, any
/// thread; never fails.
#[no_mangle]
pub extern "C" fn rcclTelemetryGetVersion() -> c_int {
    VERSION_CODE
}

/// Called by the header's inline wrappers of Init, RegisterDevice and the calls that hand out
/// handles (the Resolve calls, CommInit and the Comm Resolve calls) when the inline hooks they were compiled with expect a layout (`headerLayout`,
/// RCCL_TELEMETRY_INLINE_LAYOUT) this library does not provide: telemetry stays off for
/// the process (one line on stderr when it was asked for). Returns what the wrapped Init
/// returns then: -1 when telemetry was asked for, else 0. Not for direct use.
#[no_mangle]
pub extern "C" fn rcclTelemetryInlineMismatch_(headerLayout: c_int) -> c_int {
    boundary!(
        "rcclTelemetryInlineMismatch_",
        -1,
        lifecycle::inline_layout_refused(headerLayout)
    )
}

// ------------------------------------------------------------- inside RCCL's process

/// rcclTelemetryInit's results. Telemetry started (or an earlier call started it): it counts.
pub const RCCL_TELEMETRY_INIT_STARTED: i32 = 0;
/// Not asked for (RCCL_TELEMETRY_ENABLE is not "1"): every call is a no-op. Not an error.
pub const RCCL_TELEMETRY_INIT_OFF: i32 = 1;
/// Telemetry has finished in this process: its final file was written (rcclTelemetryFlush,
/// or exit), or this is a forked child of a process with telemetry on. It stays off; not an
/// error.
pub const RCCL_TELEMETRY_INIT_FINISHED: i32 = 2;
/// Asked for but could not start (the reason is already logged): the run goes on without it.
pub const RCCL_TELEMETRY_INIT_FAILED: i32 = -1;
const _: () = assert!(
    RCCL_TELEMETRY_INIT_STARTED == lifecycle::INIT_STARTED
        && RCCL_TELEMETRY_INIT_OFF == lifecycle::INIT_OFF
        && RCCL_TELEMETRY_INIT_FINISHED == lifecycle::INIT_FINISHED
        && RCCL_TELEMETRY_INIT_FAILED == lifecycle::INIT_FAILED
);

/// The levels and subsystem flag the library passes to a logger (NCCL's `NCCL_LOG_WARN`,
/// `NCCL_LOG_INFO` and `NCCL_NET`, for a logger written without NCCL's header).
pub const RCCL_TELEMETRY_LOG_WARN: i32 = 2;
pub const RCCL_TELEMETRY_LOG_INFO: i32 = 3;
pub const RCCL_TELEMETRY_LOG_NET: u32 = 0x10;
const _: () = assert!(
    RCCL_TELEMETRY_LOG_WARN == crate::diag::LOG_WARN
        && RCCL_TELEMETRY_LOG_INFO == crate::diag::LOG_INFO
        && RCCL_TELEMETRY_LOG_NET as std::ffi::c_ulong == crate::diag::SUBSYS_NET
);

/// NCCL's `ncclDebugLogger_t`: called with a level (`NCCL_LOG_WARN` 2, `NCCL_LOG_INFO` 3), the
/// subsystem flags (`NCCL_NET`, 0x10), the library's source file and line, and a printf
/// format ("%s") with one string: the whole line, which starts with "rccl-telemetry: ".
#[allow(non_camel_case_types)]
pub type rcclTelemetryLogger_t = Option<
    unsafe extern "C" fn(
        level: c_int,
        flags: std::ffi::c_ulong,
        file: *const c_char,
        line: c_int,
        fmt: *const c_char,
        ...
    ),
>;

/// Sends every later line of the library to `logger` instead of stderr; NULL goes back to
/// stderr. RCCL passes its own logger, so that the lines follow NCCL_DEBUG and
/// NCCL_DEBUG_FILE, through a three-line trampoline (NCCL types the level as
/// `ncclDebugLogLevel`, and a cast between the two function types is what clang's
/// -Wcast-function-type and control-flow integrity reject; the library always passes the
/// format "%s" and one string):
///
/// ```c
/// static void telemetryLog(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
///   va_list ap; va_start(ap, fmt); const char *msg = va_arg(ap, const char *); va_end(ap);
///   ncclDebugLog((ncclDebugLogLevel)level, flags, file, line, "%s", msg);
/// }
/// rcclTelemetrySetLogger(telemetryLog);
/// ```
///
/// Call it
/// before rcclTelemetryInit to have Init's own lines go there too; any state, any thread. The
/// logger is called from whichever thread has something to say (the caller's, the library's
/// writer thread, the exit handler), never from a signal handler, and must stay callable
/// until the process exits or it is replaced. It may call back into the library: a call made
/// from inside the logger (a logger that flushes on a warning, say) returns at once with what
/// it returns while telemetry is off and does nothing (Init RCCL_TELEMETRY_INIT_OFF, Flush 0,
/// a handle NULL, the other int results -1), since the call that is saying the line may hold
/// a lock that one needs; the data-path hooks, the process-wide Resolve lookups, On,
/// GetVersion and SetLogger itself work as anywhere.
#[no_mangle]
pub extern "C" fn rcclTelemetrySetLogger(logger: rcclTelemetryLogger_t) {
    crate::diag::set_logger(logger);
}

// ------------------------------------------------------------------ the table for dlopen

/// The version of rcclTelemetryApi_t this header knows (what a program built with
/// RCCL_TELEMETRY_DLOPEN asks rcclTelemetryGetApi for). The table only grows: a later
/// version appends entries, so a table of any version is a prefix of a later one. Version 1
/// ends with `setLogger`; version 2 adds `setParam` and `qpSetAttrs`.
pub const RCCL_TELEMETRY_API_VERSION: i32 = 2;

/// The library's entry points as one table (NCCL's plugin convention): what the header's
/// loader (RCCL_TELEMETRY_DLOPEN) calls through, never needing the library at link time.
/// `version` and `size` say which table this is: a caller reads the entries that end within
/// `size` bytes and treats the rest as absent. `hot` is the block the inline hooks read
/// (rcclTelemetryHotV3). Entries are append-only, in this order, for the life of the SONAME;
/// each is the exported function of its name (`init` is rcclTelemetryInit, and so on).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(non_camel_case_types)]
pub struct rcclTelemetryApi {
    pub version: c_int,
    pub size: c_int,
    pub hot: *const std::ffi::c_void,
    pub logAdd_: unsafe extern "C" fn(h: *mut std::ffi::c_void, i: u64),
    pub inlineMismatch_: extern "C" fn(headerLayout: c_int) -> c_int,
    pub init: extern "C" fn() -> c_int,
    pub on: extern "C" fn() -> c_int,
    pub flush: extern "C" fn() -> c_int,
    pub registerDevice: unsafe extern "C" fn(
        deviceId: c_int,
        roceDevice: *const c_char,
        transport: *const c_char,
    ) -> c_int,
    pub setupChannel: unsafe extern "C" fn(
        devIdx: c_int,
        chIdx: c_int,
        numQps: c_int,
        numSlots: *mut c_int,
    ) -> c_int,
    pub setQpRole: extern "C" fn(devIdx: c_int, chIdx: c_int, qpIdx: c_int, isDataQp: c_int),
    pub markChannelsUnknown: extern "C" fn(devIdx: c_int),
    pub resolveQp: extern "C" fn(devIdx: c_int, chIdx: c_int, qpIdx: c_int) -> *mut RcclQpStats,
    pub resolveChannel: extern "C" fn(devIdx: c_int, chIdx: c_int) -> *mut RcclChannelStats,
    pub qpSetPeer: unsafe extern "C" fn(
        qp: *mut RcclQpStats,
        qpNum: u32,
        localGid: *const std::ffi::c_void,
        localLid: u16,
        remoteQpNum: u32,
        remoteGid: *const std::ffi::c_void,
        remoteLid: u16,
    ),
    pub postTs: unsafe extern "C" fn(qp: *mut RcclQpStats) -> i64,
    pub qpSendPosted: unsafe extern "C" fn(qp: *mut RcclQpStats, withImm: c_int),
    pub qpRecvPosted: unsafe extern "C" fn(qp: *mut RcclQpStats),
    pub qpCtsSent: unsafe extern "C" fn(qp: *mut RcclQpStats, signalled: c_int),
    pub qpSlotMiss: unsafe extern "C" fn(qp: *mut RcclQpStats),
    pub qpWqeComplete: unsafe extern "C" fn(qp: *mut RcclQpStats, postTs: i64),
    pub qpWqeCompleteAt: unsafe extern "C" fn(qp: *mut RcclQpStats, postTs: i64, nowTs: i64),
    pub pollTs: extern "C" fn() -> i64,
    pub chRequestCompleted: unsafe extern "C" fn(ch: *mut RcclChannelStats),
    pub bytes: extern "C" fn(devIdx: c_int, isSend: c_int, bytes: u64),
    pub cqError: extern "C" fn(devIdx: c_int),
    pub qpCqError: unsafe extern "C" fn(qp: *mut RcclQpStats, status: c_int, vendorErr: u32),
    pub addCqPolls: extern "C" fn(devIdx: c_int, polls: u64),
    pub wqeSize: extern "C" fn(devIdx: c_int, bytes: u64),
    pub wqeComplete: extern "C" fn(devIdx: c_int, chIdx: c_int, qpIdx: c_int, postTs: i64),
    pub wqePosted: extern "C" fn(devIdx: c_int, chIdx: c_int, qpIdx: c_int, isSend: c_int),
    pub requestCompleted: extern "C" fn(devIdx: c_int, chIdx: c_int),
    pub slotMiss: extern "C" fn(devIdx: c_int, chIdx: c_int, qpIdx: c_int),
    pub ctsSent: extern "C" fn(devIdx: c_int, chIdx: c_int, qpIdx: c_int, signalled: c_int),
    pub writeWqe: extern "C" fn(devIdx: c_int, chIdx: c_int, qpIdx: c_int, withImm: c_int),
    pub postTsIdx: extern "C" fn(devIdx: c_int, chIdx: c_int, qpIdx: c_int) -> i64,
    pub nowToken: extern "C" fn() -> i64,
    pub swCapture: unsafe extern "C" fn(out: *mut RcclTelemetrySwSnapshot, maxDevs: c_int) -> c_int,
    pub commInit:
        extern "C" fn(commHash: u64, rank: c_int, nRanks: c_int) -> *mut rcclTelemetryComm_t,
    pub commSetupChannel: unsafe extern "C" fn(
        comm: *mut rcclTelemetryComm_t,
        devIdx: c_int,
        chIdx: c_int,
        numQps: c_int,
        numSlots: *mut c_int,
    ) -> c_int,
    pub commSetQpRole: unsafe extern "C" fn(
        comm: *mut rcclTelemetryComm_t,
        devIdx: c_int,
        chIdx: c_int,
        qpIdx: c_int,
        isDataQp: c_int,
    ),
    pub commResolveQp: unsafe extern "C" fn(
        comm: *mut rcclTelemetryComm_t,
        devIdx: c_int,
        chIdx: c_int,
        qpIdx: c_int,
    ) -> *mut RcclQpStats,
    pub commResolveChannel: unsafe extern "C" fn(
        comm: *mut rcclTelemetryComm_t,
        devIdx: c_int,
        chIdx: c_int,
    ) -> *mut RcclChannelStats,
    pub commFinalize: unsafe extern "C" fn(comm: *mut rcclTelemetryComm_t),
    pub getVersion: extern "C" fn() -> c_int,
    pub setLogger: extern "C" fn(logger: rcclTelemetryLogger_t),
    // Version 2.
    pub setParam: unsafe extern "C" fn(name: *const c_char, value: *const c_char) -> c_int,
    pub qpSetAttrs:
        unsafe extern "C" fn(qp: *mut RcclQpStats, attrs: *const rcclTelemetryQpAttrs_t) -> c_int,
}

/// The table rcclTelemetryGetApi returns.
#[allow(non_camel_case_types)]
pub type rcclTelemetryApi_t = rcclTelemetryApi;

/// The table with one entry past this library's: what a later library hands an older header.
#[repr(C)]
struct ApiNewer {
    api: rcclTelemetryApi,
    later: Option<extern "C" fn()>,
}

// SAFETY: the table is immutable; `hot` points to a block of atomics.
unsafe impl Sync for ApiNewer {}
// SAFETY: as above.
unsafe impl Send for ApiNewer {}

/// rcclTelemetryLogAdd_ with the table's untyped histogram pointer.
unsafe extern "C" fn log_add(h: *mut std::ffi::c_void, i: u64) {
    // SAFETY: the header passes what it read from a slot's log_hist word (or NULL).
    unsafe { crate::loghist::rcclTelemetryLogAdd_(h as *const crate::loghist::LogHist, i) }
}

/// A test-only environment variable: "older" hands out the table as a library without the
/// communicator calls would (version 0, cut before `commInit`), "v1" as a library of table
/// version 1 would (cut before `setParam`), "newer" as a later library would (version + 1,
/// one entry more). rust_tests/c_abi/modes.rs drives the loader with it.
const ENV_TEST_API_TABLE: &str = "RCCL_TELEMETRY_TEST_API_TABLE";

static API: ApiNewer = ApiNewer {
    api: rcclTelemetryApi {
        version: RCCL_TELEMETRY_API_VERSION,
        size: std::mem::size_of::<rcclTelemetryApi>() as c_int,
        hot: &crate::hot::rcclTelemetryHotV3 as *const crate::hot::HotParams
            as *const std::ffi::c_void,
        logAdd_: log_add,
        inlineMismatch_: rcclTelemetryInlineMismatch_,
        init: rcclTelemetryInit,
        on: rcclTelemetryOn,
        flush: rcclTelemetryFlush,
        registerDevice: rcclTelemetryRegisterDevice,
        setupChannel: rcclTelemetrySetupChannel,
        setQpRole: rcclTelemetrySetQpRole,
        markChannelsUnknown: rcclTelemetryMarkChannelsUnknown,
        resolveQp: rcclTelemetryResolveQp,
        resolveChannel: rcclTelemetryResolveChannel,
        qpSetPeer: rcclTelemetryQpSetPeer,
        postTs: rcclTelemetryPostTs,
        qpSendPosted: rcclTelemetryQpSendPosted,
        qpRecvPosted: rcclTelemetryQpRecvPosted,
        qpCtsSent: rcclTelemetryQpCtsSent,
        qpSlotMiss: rcclTelemetryQpSlotMiss,
        qpWqeComplete: rcclTelemetryQpWqeComplete,
        qpWqeCompleteAt: rcclTelemetryQpWqeCompleteAt,
        pollTs: rcclTelemetryPollTs,
        chRequestCompleted: rcclTelemetryChRequestCompleted,
        bytes: rcclTelemetryBytes,
        cqError: rcclTelemetryCqError,
        qpCqError: rcclTelemetryQpCqError,
        addCqPolls: rcclTelemetryAddCqPolls,
        wqeSize: rcclTelemetryWqeSize,
        wqeComplete: rcclTelemetryWqeComplete,
        wqePosted: rcclTelemetryWqePosted,
        requestCompleted: rcclTelemetryRequestCompleted,
        slotMiss: rcclTelemetrySlotMiss,
        ctsSent: rcclTelemetryCtsSent,
        writeWqe: rcclTelemetryWriteWqe,
        postTsIdx: rcclTelemetryPostTsIdx,
        nowToken: rcclTelemetryNowToken,
        swCapture: rcclTelemetrySwCapture,
        commInit: rcclTelemetryCommInit,
        commSetupChannel: rcclTelemetryCommSetupChannel,
        commSetQpRole: rcclTelemetryCommSetQpRole,
        commResolveQp: rcclTelemetryCommResolveQp,
        commResolveChannel: rcclTelemetryCommResolveChannel,
        commFinalize: rcclTelemetryCommFinalize,
        getVersion: rcclTelemetryGetVersion,
        setLogger: rcclTelemetrySetLogger,
        setParam: rcclTelemetrySetParam,
        qpSetAttrs: rcclTelemetryQpSetAttrs,
    },
    later: None,
};

/// The copies a test hands out in place of the table (ENV_TEST_API_TABLE).
static API_OLDER: std::sync::OnceLock<ApiNewer> = std::sync::OnceLock::new();
static API_V1: std::sync::OnceLock<ApiNewer> = std::sync::OnceLock::new();
static API_NEWER: std::sync::OnceLock<ApiNewer> = std::sync::OnceLock::new();

fn copy_of_api(version: c_int, size: usize) -> ApiNewer {
    let a = &API.api;
    ApiNewer {
        api: rcclTelemetryApi {
            version,
            size: size as c_int,
            ..*a
        },
        later: None,
    }
}

/// The library's entry points as a table, for a program that loads the library with dlopen
/// (the header's RCCL_TELEMETRY_DLOPEN): `version` is the table version the caller knows
/// (its RCCL_TELEMETRY_API_VERSION). Returns this library's table, whose own version and
/// size may differ from the caller's: the entries both know work, the caller treats the rest
/// as absent. NULL for a version below 1. Any state, any thread; the table lives as long as
/// the process. Its entries are the plain functions: the handles they hand out are not
/// checked against the caller's inline layout, which the header's loader does before using
/// them (as its wrappers do for a linked program).
#[no_mangle]
pub extern "C" fn rcclTelemetryGetApi(version: c_int) -> *const rcclTelemetryApi_t {
    if version < 1 {
        return std::ptr::null();
    }
    let test = std::env::var_os(ENV_TEST_API_TABLE);
    let table = match test.as_ref().and_then(|v| v.to_str()) {
        Some("older") => API_OLDER
            .get_or_init(|| copy_of_api(0, std::mem::offset_of!(rcclTelemetryApi, commInit))),
        Some("v1") => {
            API_V1.get_or_init(|| copy_of_api(1, std::mem::offset_of!(rcclTelemetryApi, setParam)))
        }
        Some("newer") => API_NEWER.get_or_init(|| {
            copy_of_api(
                RCCL_TELEMETRY_API_VERSION + 1,
                std::mem::size_of::<ApiNewer>(),
            )
        }),
        _ => &API,
    };
    &table.api
}

// ------------------------------------------------------------------ QP path and retry settings

/// A QP's path and retry settings as the transport set them (rcclTelemetryQpSetAttrs). `size`
/// is sizeof(rcclTelemetryQpAttrs_t) as the caller compiled it: fields may be appended in a
/// later release, and a caller's struct sets the fields it covers.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
#[allow(non_camel_case_types)]
pub struct rcclTelemetryQpAttrs {
    /// sizeof(rcclTelemetryQpAttrs_t) as the caller compiled it.
    pub size: usize,
    /// Path MTU in bytes: 256 .. 4096 (0: not known, left as it was).
    pub pathMtu: u32,
    /// GRH traffic class (DSCP << 2 | ECN).
    pub trafficClass: u8,
    pub serviceLevel: u8,
    pub portNum: u8,
    pub sgidIndex: u8,
    pub hopLimit: u8,
    /// Local ACK timeout exponent: 4.096 us * 2^timeout.
    pub timeout: u8,
    pub retryCnt: u8,
    /// 7 = infinite.
    pub rnrRetry: u8,
    /// IB encoding: 0 = 655.36 ms.
    pub minRnrTimer: u8,
    pub maxRdAtomic: u8,
    pub maxDestRdAtomic: u8,
}

/// The settings struct's C name.
#[allow(non_camel_case_types)]
pub type rcclTelemetryQpAttrs_t = rcclTelemetryQpAttrs;

/// rcclTelemetryQpSetAttrs' result for an attrs pointer that is NULL or whose size does not
/// reach its first field after `size`.
pub const RCCL_TELEMETRY_QP_ATTRS_BAD_SIZE: i32 = -1;

impl rcclTelemetryQpAttrs {
    /// What a caller's struct of `size` bytes tells: the fields that end within it.
    fn told(&self, size: usize) -> crate::peers::QpAttrs {
        macro_rules! field {
            ($f:ident) => {
                (std::mem::offset_of!(rcclTelemetryQpAttrs, $f) + std::mem::size_of_val(&self.$f)
                    <= size)
                    .then_some(self.$f)
            };
        }
        crate::peers::QpAttrs {
            traffic_class: field!(trafficClass),
            sl: field!(serviceLevel),
            path_mtu: field!(pathMtu).filter(|&m| m != 0),
            timeout: field!(timeout),
            retry_cnt: field!(retryCnt),
            rnr_retry: field!(rnrRetry),
            min_rnr_timer: field!(minRnrTimer),
            sgid_index: field!(sgidIndex),
            port: field!(portNum),
            hop_limit: field!(hopLimit),
            max_rd_atomic: field!(maxRdAtomic),
            max_dest_rd_atomic: field!(maxDestRdAtomic),
        }
    }
}

/// The smallest `size` rcclTelemetryQpSetAttrs takes: one that covers the first field.
const QP_ATTRS_MIN_SIZE: usize = std::mem::offset_of!(rcclTelemetryQpAttrs, pathMtu) + 4;

/// Records a QP's path and retry settings (cold path: where the transport moves the QP to RTR
/// and to RTS). `attrs->size` says how much of the struct the caller has: the fields that end
/// within it are recorded (a later call's replace an earlier call's; fields it does not cover,
/// and a pathMtu of 0, keep what was recorded before), a size larger than this library's
/// struct is accepted (fields it does not know are ignored). The file then shows the QP's
/// "attrs", which the analyser compares across a NIC's QPs and between the ends of a link.
/// Returns 0 when recorded or ignored (NULL handle, telemetry off, after the final write),
/// RCCL_TELEMETRY_QP_ATTRS_BAD_SIZE (-1) when `attrs` is NULL or its size does not reach the
/// field after `size`. Any thread, concurrently with any call. `qp` is NULL or a handle from
/// rcclTelemetryResolveQp; `attrs` is NULL or points to `attrs->size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn rcclTelemetryQpSetAttrs(
    qp: *mut RcclQpStats,
    attrs: *const rcclTelemetryQpAttrs_t,
) -> c_int {
    boundary!("rcclTelemetryQpSetAttrs", -1, {
        if attrs.is_null() {
            return RCCL_TELEMETRY_QP_ATTRS_BAD_SIZE;
        }
        // SAFETY: `attrs` points to at least its `size` field, read unaligned as a caller's
        // struct may be packed into a larger one.
        let size = unsafe { std::ptr::addr_of!((*attrs).size).read_unaligned() };
        if size < QP_ATTRS_MIN_SIZE {
            return RCCL_TELEMETRY_QP_ATTRS_BAD_SIZE;
        }
        if !runtime::is_on() {
            return 0;
        }
        // SAFETY: handles are NULL or stable slot addresses, valid for the process.
        let Some(q) = (unsafe { (qp as *const RcclQpStats).as_ref() }) else {
            return 0;
        };
        let mut a = rcclTelemetryQpAttrs::default();
        let n = size.min(std::mem::size_of::<rcclTelemetryQpAttrs>());
        // SAFETY: per the caller's contract `attrs` has `size` readable bytes, of which the
        // first `n` are copied into a struct of at least `n` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                attrs as *const u8,
                &mut a as *mut rcclTelemetryQpAttrs as *mut u8,
                n,
            )
        };
        crate::peers::set_attrs(q, a.told(size));
        0
    })
}

#[cfg(test)]
mod qp_attrs_tests {
    use super::*;

    #[test]
    fn a_size_sets_the_fields_it_covers() {
        let a = rcclTelemetryQpAttrs {
            size: 0,
            pathMtu: 1024,
            trafficClass: 106,
            serviceLevel: 3,
            portNum: 1,
            sgidIndex: 3,
            hopLimit: 64,
            timeout: 14,
            retryCnt: 7,
            rnrRetry: 7,
            minRnrTimer: 12,
            maxRdAtomic: 1,
            maxDestRdAtomic: 1,
        };
        let full = a.told(std::mem::size_of::<rcclTelemetryQpAttrs>());
        assert_eq!(
            (full.traffic_class, full.path_mtu, full.max_dest_rd_atomic),
            (Some(106), Some(1024), Some(1))
        );
        assert_eq!(a.told(1 << 20), full, "a larger size is the whole struct");
        let mtu_only = a.told(QP_ATTRS_MIN_SIZE);
        assert_eq!(
            mtu_only,
            crate::peers::QpAttrs {
                path_mtu: Some(1024),
                ..Default::default()
            }
        );
        let to_timeout = a.told(std::mem::offset_of!(rcclTelemetryQpAttrs, timeout) + 1);
        assert_eq!(
            (
                to_timeout.timeout,
                to_timeout.hop_limit,
                to_timeout.retry_cnt
            ),
            (Some(14), Some(64), None)
        );
        let zero_mtu = rcclTelemetryQpAttrs { pathMtu: 0, ..a };
        assert_eq!(zero_mtu.told(QP_ATTRS_MIN_SIZE), Default::default());
    }

    #[test]
    fn a_size_below_the_first_field_or_no_struct_is_refused() {
        let small = rcclTelemetryQpAttrs {
            size: QP_ATTRS_MIN_SIZE - 1,
            ..Default::default()
        };
        // SAFETY: a valid struct; NULL handles.
        unsafe {
            assert_eq!(
                rcclTelemetryQpSetAttrs(std::ptr::null_mut(), &small),
                RCCL_TELEMETRY_QP_ATTRS_BAD_SIZE
            );
            assert_eq!(
                rcclTelemetryQpSetAttrs(std::ptr::null_mut(), std::ptr::null()),
                RCCL_TELEMETRY_QP_ATTRS_BAD_SIZE
            );
            let ok = rcclTelemetryQpAttrs {
                size: QP_ATTRS_MIN_SIZE,
                ..small
            };
            assert_eq!(rcclTelemetryQpSetAttrs(std::ptr::null_mut(), &ok), 0);
        }
    }
}
