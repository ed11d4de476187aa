/*
 * rccl_telemetry.h: the C ABI of librccl_telemetry (per device / channel / QP network
 * telemetry for RCCL's IB-CAST transport). Needs no verbs header.
 *
 * Off unless RCCL_TELEMETRY_ENABLE=1. Every entry point is safe to call in any state: when
 * disabled, before Init, after Flush, with a NULL handle or out-of-range indices it is a
 * silent no-op (the int-returning ones return -1; Init says which state it found). No entry
 * point fails the caller, aborts (not even when memory runs out), blocks the data path on
 * I/O, or lets a panic cross this boundary. Lines go to stderr, or to RCCL's logger
 * (rcclTelemetrySetLogger).
 *
 * Threading, the data path: any number of threads may call hooks concurrently on different
 * handles. A given QP or channel handle is driven by one thread at a time (RCCL's
 * proxy-thread model); counts are exact under that contract. Device forms and index forms
 * may be called from any thread concurrently and are exact. (Driving one QP through its
 * handle on one thread while another thread uses the index forms on the same QP is outside
 * the contract.)
 *
 * Threading, every other function (Init, Flush, SetLogger, RegisterDevice, SetupChannel,
 * SetQpRole, MarkChannelsUnknown, ResolveQp, ResolveChannel, QpSetPeer, QpSetAttrs, QpCqError,
 * SwCapture, and every rcclTelemetryComm* call): any thread, concurrently with one another
 * and with the hooks. Each takes only the library's own short locks, none of which a hook
 * waits on. What a call establishes (a device, a slot, a role, a peer) is seen by every call
 * made after it returns; of two calls racing on one object, one's effect is kept whole. A
 * call that ends something (Flush, for every count of the process; a communicator's
 * finalize, for its handles) is ordered by the caller after the calls that use it, as RCCL
 * does at teardown; a call that races it is safe, and counted or not.
 *
 * Names: functions rcclTelemetry<Name> in lower camel case, a verb first when the function
 * acts (rcclTelemetrySetLogger); types rcclTelemetry<Name>_t (the handles and
 * RcclTelemetrySwSnapshot keep the names RCCL's call sites use); constants and macros
 * RCCL_TELEMETRY_<NAME>; a trailing underscore marks the library's internals.
 *
 * Without the library: define RCCL_TELEMETRY_STUBS before including this header for a build
 * without telemetry (every entry point an empty inline function), or RCCL_TELEMETRY_DLOPEN to
 * load the library at rcclTelemetryInit when it is installed (no link-time dependency); both
 * are described where they are defined, below.
 *
 * Handles come from rcclTelemetryResolveQp / rcclTelemetryResolveChannel once, at
 * connection setup; they stay valid for the life of the process. Store them on the QP.
 *
 * Communicators: each communicator gets a context of its own, so two communicators on one
 * (device, channel) stay apart in every count and output. The order RCCL follows: at
 * ncclCommInitRank rcclTelemetryCommInit(comm->commHash, rank, nRanks); at connection setup
 * rcclTelemetryCommSetupChannel / rcclTelemetryCommSetQpRole / rcclTelemetryCommResolveQp /
 * rcclTelemetryCommResolveChannel in place of the process-wide forms (the hooks are the
 * same); at ncclCommDestroy, once its QPs are destroyed and no hook runs on its handles,
 * rcclTelemetryCommFinalize. Its handles are dead from then on; its counts stay in the file
 * and the device totals. The process-wide calls are a communicator that is never finalized.
 */


#ifndef RCCL_TELEMETRY_H
#define RCCL_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>

/* The version of this header; rcclTelemetryGetVersion() returns the running library's
 * RCCL_TELEMETRY_VERSION_CODE. */
#define RCCL_TELEMETRY_VERSION_MAJOR 1
#define RCCL_TELEMETRY_VERSION_MINOR 0
#define RCCL_TELEMETRY_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch */
#define RCCL_TELEMETRY_VERSION_CODE 10000
/* The layout of the library internals the inline hooks read (the library publishes its
 * own in rcclTelemetryHotV3.layout; the header's wrappers check that they are equal). */
#define RCCL_TELEMETRY_INLINE_LAYOUT 4

// Device slots: deviceId is 0..RCCL_TELEMETRY_MAX_DEVS-1.
#define RCCL_TELEMETRY_MAX_DEVS 32

// Channel slots per device: chIdx is 0..RCCL_TELEMETRY_MAX_CHANNELS-1.
#define RCCL_TELEMETRY_MAX_CHANNELS 512

// The most QPs one rcclTelemetrySetupChannel call may ask for: a call asking for more is
// refused (-1, *numSlots 0), its QPs counted in num_qp_untracked and the first refusal said
// in one line. A channel grows past it by further calls.
#define RCCL_TELEMETRY_MAX_QPS_PER_SETUP 65536

// Size of the latency histogram in RcclTelemetrySwSnapshot (the file emits the configured count).
#define RCCL_TELEMETRY_HISTOGRAM_SIZE 16

// PostTs token meaning "1-in-N sampling skipped this posting".
#define RCCL_TELEMETRY_TS_UNSAMPLED 1

// rcclTelemetryInit's results. Telemetry started (or an earlier call started it): it counts.
#define RCCL_TELEMETRY_INIT_STARTED 0

// Not asked for (RCCL_TELEMETRY_ENABLE is not "1"): every call is a no-op. Not an error.
#define RCCL_TELEMETRY_INIT_OFF 1

// Telemetry has finished in this process: its final file was written (rcclTelemetryFlush,
// or exit), or this is a forked child of a process with telemetry on. It stays off; not an
// error.
#define RCCL_TELEMETRY_INIT_FINISHED 2

// Asked for but could not start (the reason is already logged): the run goes on without it.
#define RCCL_TELEMETRY_INIT_FAILED -1

// The levels and subsystem flag the library passes to a logger (NCCL's `NCCL_LOG_WARN`,
// `NCCL_LOG_INFO` and `NCCL_NET`, for a logger written without NCCL's header).
#define RCCL_TELEMETRY_LOG_WARN 2

#define RCCL_TELEMETRY_LOG_INFO 3

#define RCCL_TELEMETRY_LOG_NET 16

// The version of rcclTelemetryApi_t this header knows (what a program built with
// RCCL_TELEMETRY_DLOPEN asks rcclTelemetryGetApi for). The table only grows: a later
// version appends entries, so a table of any version is a prefix of a later one. Version 1
// ends with `setLogger`; version 2 adds `setParam` and `qpSetAttrs`.
#define RCCL_TELEMETRY_API_VERSION 2

// rcclTelemetryQpSetAttrs' result for an attrs pointer that is NULL or whose size does not
// reach its first field after `size`.
#define RCCL_TELEMETRY_QP_ATTRS_BAD_SIZE -1

// A channel's statistics handle (from rcclTelemetryResolveChannel): opaque, to be passed to
// rcclTelemetryChRequestCompleted; its address never changes.
typedef struct RcclChannelStats RcclChannelStats;

// A QP's statistics handle (from rcclTelemetryResolveQp): opaque, to be stored on the QP
// and passed to the handle forms of the hooks; its address never changes.
typedef struct RcclQpStats RcclQpStats;

// A communicator's telemetry context (opaque; the pointer is a token and is never
// dereferenced).
typedef struct rcclTelemetryComm rcclTelemetryComm;

// Software totals of one device, summed over its QPs and those of its finalized
// communicators (live snapshot; nothing is reset).
typedef struct RcclTelemetrySwSnapshot {
  int device_id;
  uint64_t tx_bytes;
  uint64_t rx_bytes;
  uint64_t num_cq_errors;
  uint64_t wqe_sent;
  uint64_t recv_wqe;
  uint64_t wqe_rcvd;
  uint64_t wqe_completed;
  uint64_t wqe_sampled;
  // -1 when nothing was sampled.
  int64_t wqe_completion_ns_min;
  // -1 when nothing was sampled.
  int64_t wqe_completion_ns_max;
  uint64_t wqe_completion_histogram[RCCL_TELEMETRY_HISTOGRAM_SIZE];
} RcclTelemetrySwSnapshot;

// The handle rcclTelemetryCommInit returns.
typedef struct rcclTelemetryComm rcclTelemetryComm_t;

// NCCL's `ncclDebugLogger_t`: called with a level (`NCCL_LOG_WARN` 2, `NCCL_LOG_INFO` 3), the
// subsystem flags (`NCCL_NET`, 0x10), the library's source file and line, and a printf
// format ("%s") with one string: the whole line, which starts with "rccl-telemetry: ".
typedef void (*rcclTelemetryLogger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);

// A QP's path and retry settings as the transport set them (rcclTelemetryQpSetAttrs). `size`
// is sizeof(rcclTelemetryQpAttrs_t) as the caller compiled it: fields may be appended in a
// later release, and a caller's struct sets the fields it covers.
typedef struct rcclTelemetryQpAttrs {
  // sizeof(rcclTelemetryQpAttrs_t) as the caller compiled it.
  size_t size;
  // Path MTU in bytes: 256 .. 4096 (0: not known, left as it was).
  uint32_t pathMtu;
  // GRH traffic class (DSCP << 2 | ECN).
  uint8_t trafficClass;
  uint8_t serviceLevel;
  uint8_t portNum;
  uint8_t sgidIndex;
  uint8_t hopLimit;
  // Local ACK timeout exponent: 4.096 us * 2^timeout.
  uint8_t timeout;
  uint8_t retryCnt;
  // 7 = infinite.
  uint8_t rnrRetry;
  // IB encoding: 0 = 655.36 ms.
  uint8_t minRnrTimer;
  uint8_t maxRdAtomic;
  uint8_t maxDestRdAtomic;
} rcclTelemetryQpAttrs;

// The settings struct's C name.
typedef struct rcclTelemetryQpAttrs rcclTelemetryQpAttrs_t;

// The library's entry points as one table (NCCL's plugin convention): what the header's
// loader (RCCL_TELEMETRY_DLOPEN) calls through, never needing the library at link time.
// `version` and `size` say which table this is: a caller reads the entries that end within
// `size` bytes and treats the rest as absent. `hot` is the block the inline hooks read
// (rcclTelemetryHotV3). Entries are append-only, in this order, for the life of the SONAME;
// each is the exported function of its name (`init` is rcclTelemetryInit, and so on).
typedef struct rcclTelemetryApi {
  int version;
  int size;
  const void *hot;
  void (*logAdd_)(void *h, uint64_t i);
  int (*inlineMismatch_)(int headerLayout);
  int (*init)(void);
  int (*on)(void);
  int (*flush)(void);
  int (*registerDevice)(int deviceId, const char *roceDevice, const char *transport);
  int (*setupChannel)(int devIdx, int chIdx, int numQps, int *numSlots);
  void (*setQpRole)(int devIdx, int chIdx, int qpIdx, int isDataQp);
  void (*markChannelsUnknown)(int devIdx);
  struct RcclQpStats *(*resolveQp)(int devIdx, int chIdx, int qpIdx);
  struct RcclChannelStats *(*resolveChannel)(int devIdx, int chIdx);
  void (*qpSetPeer)(struct RcclQpStats *qp, uint32_t qpNum, const void *localGid, uint16_t localLid, uint32_t remoteQpNum, const void *remoteGid, uint16_t remoteLid);
  int64_t (*postTs)(struct RcclQpStats *qp);
  void (*qpSendPosted)(struct RcclQpStats *qp, int withImm);
  void (*qpRecvPosted)(struct RcclQpStats *qp);
  void (*qpCtsSent)(struct RcclQpStats *qp, int signalled);
  void (*qpSlotMiss)(struct RcclQpStats *qp);
  void (*qpWqeComplete)(struct RcclQpStats *qp, int64_t postTs);
  void (*qpWqeCompleteAt)(struct RcclQpStats *qp, int64_t postTs, int64_t nowTs);
  int64_t (*pollTs)(void);
  void (*chRequestCompleted)(struct RcclChannelStats *ch);
  void (*bytes)(int devIdx, int isSend, uint64_t bytes);
  void (*cqError)(int devIdx);
  void (*qpCqError)(struct RcclQpStats *qp, int status, uint32_t vendorErr);
  void (*addCqPolls)(int devIdx, uint64_t polls);
  void (*wqeSize)(int devIdx, uint64_t bytes);
  void (*wqeComplete)(int devIdx, int chIdx, int qpIdx, int64_t postTs);
  void (*wqePosted)(int devIdx, int chIdx, int qpIdx, int isSend);
  void (*requestCompleted)(int devIdx, int chIdx);
  void (*slotMiss)(int devIdx, int chIdx, int qpIdx);
  void (*ctsSent)(int devIdx, int chIdx, int qpIdx, int signalled);
  void (*writeWqe)(int devIdx, int chIdx, int qpIdx, int withImm);
  int64_t (*postTsIdx)(int devIdx, int chIdx, int qpIdx);
  int64_t (*nowToken)(void);
  int (*swCapture)(struct RcclTelemetrySwSnapshot *out, int maxDevs);
  rcclTelemetryComm_t *(*commInit)(uint64_t commHash, int rank, int nRanks);
  int (*commSetupChannel)(rcclTelemetryComm_t *comm, int devIdx, int chIdx, int numQps, int *numSlots);
  void (*commSetQpRole)(rcclTelemetryComm_t *comm, int devIdx, int chIdx, int qpIdx, int isDataQp);
  struct RcclQpStats *(*commResolveQp)(rcclTelemetryComm_t *comm, int devIdx, int chIdx, int qpIdx);
  struct RcclChannelStats *(*commResolveChannel)(rcclTelemetryComm_t *comm, int devIdx, int chIdx);
  void (*commFinalize)(rcclTelemetryComm_t *comm);
  int (*getVersion)(void);
  void (*setLogger)(rcclTelemetryLogger_t logger);
  int (*setParam)(const char *name, const char *value);
  int (*qpSetAttrs)(struct RcclQpStats *qp, const rcclTelemetryQpAttrs_t *attrs);
} rcclTelemetryApi;

// The table rcclTelemetryGetApi returns.
typedef struct rcclTelemetryApi rcclTelemetryApi_t;

#if !defined(RCCL_TELEMETRY_STUBS) && !defined(RCCL_TELEMETRY_DLOPEN)
#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// Reads the environment and starts telemetry when RCCL_TELEMETRY_ENABLE=1. Returns
// RCCL_TELEMETRY_INIT_STARTED (0: it counts), RCCL_TELEMETRY_INIT_OFF (1: not asked for),
// RCCL_TELEMETRY_INIT_FINISHED (2: the final file was written, or this is a forked child of
// a process with telemetry on; it stays off) or RCCL_TELEMETRY_INIT_FAILED (-1: asked for
// but could not start; the reason is already logged). Only a negative result is a failure:
// test `< 0` to log one (a test of `!= 0` would also log off and finished, which are no
// failures). The run goes on in every case. Any
// thread, any number of times: later calls return the first call's answer, or FINISHED
// once telemetry has finished.
int rcclTelemetryInit(void);

// Sets the library's variable `name` (an RCCL_TELEMETRY_* name, as the operators' guide
// lists them) to `value`, for rcclTelemetryInit to read as if it were in the environment: how RCCL
// passes the values of its own parameters and rccl.conf. Every variable the library reads
// can be set so; a variable that is also in the environment keeps the environment's value
// (as NCCL's environment wins over its configuration file). A NULL `value` removes what an
// earlier call set. A name set twice keeps the later value. Call it before rcclTelemetryInit:
// once Init has run (whatever it returned) the configuration is fixed, and a call changes
// nothing and returns -1 (one line the first time, when telemetry was asked for). Returns 0 when set; -1 when refused: a
// NULL name or one that is not RCCL_TELEMETRY_<NAME> (one line each), after Init, or out of
// memory. A value is checked at Init, as the environment's is. Where no library takes it
// (RCCL_TELEMETRY_STUBS, or the loader without the library) it returns 0 and does nothing:
// telemetry is off there. Any thread. `name` and `value` are NULL or NUL-terminated strings,
// copied before the call returns.
//
// Example, RCCL turning the signal handlers off for its processes unless the operator says
// otherwise: `rcclTelemetrySetParam("RCCL_TELEMETRY_SIGNALS", "0");` before Init.
int rcclTelemetrySetParam(const char *name, const char *value);

// 1 when telemetry is enabled and initialised and the final file not yet written, else 0
// (0 before Init, when disabled, after rcclTelemetryFlush or exit, and in a forked child).
// Any thread; one load, inline where the inline hooks are on.
int rcclTelemetryOn(void);

// Writes the JSON file once; also run at process exit. Afterwards every entry point is inert:
// rcclTelemetryOn 0, RegisterDevice -1, SetupChannel -1 (*numSlots 0), Resolve* NULL,
// SwCapture -1, data-path calls change nothing, and the file is never rewritten.
// Returns 0 on success, when disabled or already written, -1 on failure (reason and path
// logged). Any thread, while hooks run: a second call while the first writes waits for it
// (at most 10 s) and returns 0; hooks that race it are counted or not, never torn.
int rcclTelemetryFlush(void);

// Registers a RoCE device in slot `deviceId` (0..31) for transport `transport`
// (e.g. "IB-CAST"). Returns deviceId, or -1 when disabled or refused. Registering the same
// name in the same slot again returns deviceId. Any thread, concurrently with any call:
// of two registrations of one slot under different names, one wins and the other is
// refused. `roceDevice` and `transport` are NULL or NUL-terminated strings.
int rcclTelemetryRegisterDevice(int deviceId, const char *roceDevice, const char *transport);

// Reserves `numQps` QP slots on (devIdx, chIdx). Returns the first slot index and sets
// `*numSlots` (if not NULL) to how many were granted; 0 and -1 when none. A shortfall is
// counted in num_qp_untracked (on the channel, or on the device when chIdx is out of range):
// more than RCCL_TELEMETRY_MAX_QPS_PER_SETUP asked for (refused whole), past the channel's
// 16,777,216 slots, or memory that could not be had (each said once in one line). The
// device's hardware-counter baseline is taken on its first call. Any thread, concurrently
// with any call: concurrent calls on one channel get disjoint slots, and a slot is
// resolvable (rcclTelemetryResolveQp) by any thread once the call that reserved it has
// returned. `numSlots` is NULL or points to a writable int.
int rcclTelemetrySetupChannel(int devIdx, int chIdx, int numQps, int *numSlots);

// Tells whether QP slot qpIdx of (devIdx, chIdx) carries data (isDataQp != 0) or CTS. Any
// thread, concurrently with any call; told twice, the later call wins.
void rcclTelemetrySetQpRole(int devIdx, int chIdx, int qpIdx, int isDataQp);

// The transport has no real channel id on this device: the file shows
// "num_channels": null and every channel "id": null. Any thread, concurrently with any call.
void rcclTelemetryMarkChannelsUnknown(int devIdx);

// The stats handle of QP slot qpIdx on (devIdx, chIdx), to store on the QP at setup.
// NULL when disabled or when the indices name no slot; valid for the life of the process.
// Any thread, concurrently with any call (a lookup, no lock).
struct RcclQpStats *rcclTelemetryResolveQp(int devIdx, int chIdx, int qpIdx);

// The stats handle of channel chIdx on devIdx. NULL when disabled or when no slot was set
// up there; valid for the life of the process. Any thread, concurrently with any call (a
// lookup, no lock).
struct RcclChannelStats *rcclTelemetryResolveChannel(int devIdx, int chIdx);

// Tells a QP's identity and its peer's, once the transport has exchanged connection data
// (cold path; never on the data path). qpNum: the local QPN; localGid/remoteGid: 16 raw GID
// bytes (`union ibv_gid`) or NULL (an all-zero GID counts as NULL); localLid/remoteLid: 0
// when unknown (RoCE). The file then shows the QP's "qp_num" and "peer", the device's
// "gid"/"lid", and the QP's later sampled completions in the device's "peers" latency for
// that remote NIC. A second call replaces the first. NULL handle, telemetry off or after
// the final write: no-op. Any thread, concurrently with any call, the QP's own hooks
// included (a completion racing it counts towards the old peer or the new one). `qp` is
// NULL or a handle from rcclTelemetryResolveQp; `localGid` and `remoteGid` are NULL or point
// to 16 readable bytes.
void rcclTelemetryQpSetPeer(struct RcclQpStats *qp, uint32_t qpNum, const void *localGid, uint16_t localLid, uint32_t remoteQpNum, const void *remoteGid, uint16_t remoteLid);

// The token to store with a posted work request: RCCL_TELEMETRY_TS_UNSAMPLED (1) when
// 1-in-N sampling skips this posting, otherwise a clock reading (> 1) to hand back to
// rcclTelemetryQpWqeComplete. 0 for a NULL handle.
//
// `qp` is NULL or a handle from rcclTelemetryResolveQp.
int64_t rcclTelemetryPostTs(struct RcclQpStats *qp);

// One send WQE posted: num_wqe_sent, and num_write_imm_wqe (withImm != 0) or num_write_wqe.
//
// `qp` is NULL or a handle from rcclTelemetryResolveQp.
void rcclTelemetryQpSendPosted(struct RcclQpStats *qp, int withImm);

// One receive WQE posted (ibv_post_recv): num_recv_wqe.
//
// `qp` is NULL or a handle from rcclTelemetryResolveQp.
void rcclTelemetryQpRecvPosted(struct RcclQpStats *qp);

// One CTS message posted, signalled or not.
//
// `qp` is NULL or a handle from rcclTelemetryResolveQp.
void rcclTelemetryQpCtsSent(struct RcclQpStats *qp, int signalled);

// A sender found the CTS FIFO slot not yet published: num_slot_miss.
//
// `qp` is NULL or a handle from rcclTelemetryResolveQp.
void rcclTelemetryQpSlotMiss(struct RcclQpStats *qp);

// One completion drained from the CQ for this QP. postTs: 0 = matched no tracked posting,
// 1 = matched but not sampled, > 1 = the token from rcclTelemetryPostTs (latency measured).
//
// `qp` is NULL or a handle from rcclTelemetryResolveQp.
void rcclTelemetryQpWqeComplete(struct RcclQpStats *qp, int64_t postTs);

// rcclTelemetryQpWqeComplete for a completion whose poll returned at `nowTs`,
// a reading from rcclTelemetryPollTs taken once after the ibv_poll_cq call that returned it.
// A caller that drains several completions per poll pays one clock read per poll instead of
// one per sampled completion; the latency is measured to the poll's return. Same counters
// and buckets as rcclTelemetryQpWqeComplete for the same tokens; `nowTs` <= 1 reads the
// clock as that function does.
//
// `qp` is NULL or a handle from rcclTelemetryResolveQp.
void rcclTelemetryQpWqeCompleteAt(struct RcclQpStats *qp, int64_t postTs, int64_t nowTs);

// A clock reading for rcclTelemetryQpWqeCompleteAt (the token clock, always > 1).
// Take it once after each ibv_poll_cq that returned completions, and only when telemetry
// is on. Inline in the header (no call) where the inline hooks are on.
int64_t rcclTelemetryPollTs(void);

// One network request completed on this channel: num_req_completed.
//
// `ch` is NULL or a handle from rcclTelemetryResolveChannel.
void rcclTelemetryChRequestCompleted(struct RcclChannelStats *ch);

// Software byte count on a device (isSend != 0: tx_bytes, else rx_bytes).
void rcclTelemetryBytes(int devIdx, int isSend, uint64_t bytes);

// One completion drained with an error status: num_cq_errors.
void rcclTelemetryCqError(int devIdx);

// One completion drained with an error status on this QP (cold path: where the transport
// handles a work completion whose status is not IBV_WC_SUCCESS). `status` is the
// `enum ibv_wc_status` value, `vendorErr` the completion's vendor_err. The QP's file entry
// counts it by status ("cq_errors") and names its first error ("first_cq_error", with the
// wall time; "qp_state" "ERR", where an error leaves an RC QP); the device counts it in
// num_cq_errors and by status ("cq_errors_by_status"), so do not also call
// rcclTelemetryCqError for it. A QP's first error asks the writer thread for a snapshot
// (trigger "cq_error", rate-limited). NULL handle, telemetry off or after the final write:
// no-op. Any thread, concurrently with any call. `qp` is NULL or a handle from
// rcclTelemetryResolveQp.
void rcclTelemetryQpCqError(struct RcclQpStats *qp, int status, uint32_t vendorErr);

// Adds `polls` ibv_poll_cq calls to cq_poll_count.
void rcclTelemetryAddCqPolls(int devIdx, uint64_t polls);

// One send WQE of `bytes` payload, for wqe_size_stats.
void rcclTelemetryWqeSize(int devIdx, uint64_t bytes);

// Index form of rcclTelemetryQpWqeComplete.
void rcclTelemetryWqeComplete(int devIdx, int chIdx, int qpIdx, int64_t postTs);

// Index form of the posting hooks: isSend != 0 counts num_wqe_sent, else num_recv_wqe.
// (The opcode split is rcclTelemetryWriteWqe.)
void rcclTelemetryWqePosted(int devIdx, int chIdx, int qpIdx, int isSend);

// Index form of rcclTelemetryChRequestCompleted.
void rcclTelemetryRequestCompleted(int devIdx, int chIdx);

// Index form of rcclTelemetryQpSlotMiss.
void rcclTelemetrySlotMiss(int devIdx, int chIdx, int qpIdx);

// Index form of rcclTelemetryQpCtsSent.
void rcclTelemetryCtsSent(int devIdx, int chIdx, int qpIdx, int signalled);

// Index form of the opcode split: withImm != 0 counts num_write_imm_wqe, else num_write_wqe.
void rcclTelemetryWriteWqe(int devIdx, int chIdx, int qpIdx, int withImm);

// Index form of rcclTelemetryPostTs, for callers without handles. Claims the
// posting position atomically, so any thread may call it. 0 when the indices name no slot.
int64_t rcclTelemetryPostTsIdx(int devIdx, int chIdx, int qpIdx);

// A clock reading usable as a PostTs token (always > 1), in the library's units: what the
// header's inline PostTs and completion hooks use when tokens are not TSC readings.
int64_t rcclTelemetryNowToken(void);

// Writes up to maxDevs entries, one per registered device in id order, with its software
// totals so far. Returns the number written; -1 when disabled, `out` is NULL or maxDevs < 0.
// Never resets anything. Any thread, while hooks run. `out` points to at least maxDevs
// writable entries.
int rcclTelemetrySwCapture(struct RcclTelemetrySwSnapshot *out, int maxDevs);

// Creates the telemetry context of a communicator, at ncclCommInitRank (cold path):
// `commHash` is RCCL's comm->commHash, `rank` this rank's place in it (0..nRanks-1),
// `nRanks` its size. Channels and QPs set up through it are its own: its channel chIdx on a
// device is not the process-wide calls' channel chIdx nor another communicator's, and every
// output names it (commHash in hex, rank, nRanks) beside them. NULL when telemetry is off
// (every Comm call then a no-op), and with one line for a rank outside 0..nRanks-1.
// Thread-safe.
rcclTelemetryComm_t *rcclTelemetryCommInit(uint64_t commHash, int rank, int nRanks);

// rcclTelemetrySetupChannel in the communicator's own channel space: reserves `numQps` QP
// slots on its channel chIdx of device devIdx (slot indices start at 0 on each of its
// channels). Returns the first slot index and sets `*numSlots` (if not NULL) to how many were
// granted; -1 and 0 when none, for a NULL or finalized communicator, or while telemetry is
// off. Cold path; thread-safe.
//
// The caller's pointers: `comm` is NULL or a handle from rcclTelemetryCommInit;
// `numSlots` is NULL or points to a writable int.
int rcclTelemetryCommSetupChannel(rcclTelemetryComm_t *comm, int devIdx, int chIdx, int numQps, int *numSlots);

// rcclTelemetrySetQpRole for the communicator's QP slot qpIdx of (devIdx, chIdx).
//
// The caller's pointers: `comm` is NULL or a handle from rcclTelemetryCommInit.
void rcclTelemetryCommSetQpRole(rcclTelemetryComm_t *comm, int devIdx, int chIdx, int qpIdx, int isDataQp);

// The stats handle of the communicator's QP slot qpIdx on (devIdx, chIdx), to store on the
// QP at setup, and to use with the same hooks as any handle. NULL for a NULL or finalized
// communicator, while telemetry is off, or when the indices name no slot. Valid until the
// communicator's rcclTelemetryCommFinalize.
//
// The caller's pointers: `comm` is NULL or a handle from rcclTelemetryCommInit.
struct RcclQpStats *rcclTelemetryCommResolveQp(rcclTelemetryComm_t *comm, int devIdx, int chIdx, int qpIdx);

// The stats handle of the communicator's channel chIdx on devIdx. NULL as for
// rcclTelemetryCommResolveQp, or when it set up no slot there. Valid until the
// communicator's rcclTelemetryCommFinalize.
//
// The caller's pointers: `comm` is NULL or a handle from rcclTelemetryCommInit.
struct RcclChannelStats *rcclTelemetryCommResolveChannel(rcclTelemetryComm_t *comm, int devIdx, int chIdx);

// Ends a communicator's telemetry, at ncclCommDestroy (or ncclCommAbort), after its QPs are
// destroyed and no hook runs on its handles any more. Its counts are folded into a compact
// record (every counter summed, histograms merged, its peers' latency, its error completions,
// its QPs' stalls ended now), which the file keeps under each device ("finalized_comms"), and
// the device totals and SwCapture keep counting; its channels' memory goes to later
// communicators, cleared. Afterwards the communicator handle and every handle resolved
// through it must not be used again: calls with the communicator handle are no-ops (one line
// the first time). A late count, one that still reaches one of its slots through a kept QP
// or channel handle, is outside the contract, and lands as follows: while the channel is
// free it goes to this communicator's record (the channel is checked before it is handed
// out, and one with late counts is not handed out then); a handed-back channel is reused
// last (the one free longest goes first), and a channel is cleared up to the most slots it
// ever had at each hand-back, so a late count never reaches a communicator that never had
// that slot. Only a count made after the channel went to a later communicator, in a slot
// that communicator uses, is counted as that communicator's. NULL, a finalized handle, or
// telemetry off: no-op.
// Thread-safe; it waits for a file or textfile being read from the counters, not for its
// disk write.
//
// The caller's pointers: `comm` is NULL or a handle from rcclTelemetryCommInit.
void rcclTelemetryCommFinalize(rcclTelemetryComm_t *comm);

// The version of the running library, as RCCL_TELEMETRY_VERSION_CODE encodes it (major *
// 10000 + minor * 100 + patch): compare it with the header's RCCL_TELEMETRY_VERSION_CODE to
// tell which library a program was built against from the one it runs with. Any state, any
// thread; never fails.
int rcclTelemetryGetVersion(void);

// Sends every later line of the library to `logger` instead of stderr; NULL goes back to
// stderr. RCCL passes its own logger, so that the lines follow NCCL_DEBUG and
// NCCL_DEBUG_FILE, through a three-line trampoline (NCCL types the level as
// `ncclDebugLogLevel`, and a cast between the two function types is what clang's
// -Wcast-function-type and control-flow integrity reject; the library always passes the
// format "%s" and one string):
//
// ```c
// static void telemetryLog(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
//   va_list ap; va_start(ap, fmt); const char *msg = va_arg(ap, const char *); va_end(ap);
//   ncclDebugLog((ncclDebugLogLevel)level, flags, file, line, "%s", msg);
// }
// rcclTelemetrySetLogger(telemetryLog);
// ```
//
// Call it
// before rcclTelemetryInit to have Init's own lines go there too; any state, any thread. The
// logger is called from whichever thread has something to say (the caller's, the library's
// writer thread, the exit handler), never from a signal handler, and must stay callable
// until the process exits or it is replaced. It may call back into the library: a call made
// from inside the logger (a logger that flushes on a warning, say) returns at once with what
// it returns while telemetry is off and does nothing (Init RCCL_TELEMETRY_INIT_OFF, Flush 0,
// a handle NULL, the other int results -1), since the call that is saying the line may hold
// a lock that one needs; the data-path hooks, the process-wide Resolve lookups, On,
// GetVersion and SetLogger itself work as anywhere.
void rcclTelemetrySetLogger(rcclTelemetryLogger_t logger);

// The library's entry points as a table, for a program that loads the library with dlopen
// (the header's RCCL_TELEMETRY_DLOPEN): `version` is the table version the caller knows
// (its RCCL_TELEMETRY_API_VERSION). Returns this library's table, whose own version and
// size may differ from the caller's: the entries both know work, the caller treats the rest
// as absent. NULL for a version below 1. Any state, any thread; the table lives as long as
// the process. Its entries are the plain functions: the handles they hand out are not
// checked against the caller's inline layout, which the header's loader does before using
// them (as its wrappers do for a linked program).
const rcclTelemetryApi_t *rcclTelemetryGetApi(int version);

// Records a QP's path and retry settings (cold path: where the transport moves the QP to RTR
// and to RTS). `attrs->size` says how much of the struct the caller has: the fields that end
// within it are recorded (a later call's replace an earlier call's; fields it does not cover,
// and a pathMtu of 0, keep what was recorded before), a size larger than this library's
// struct is accepted (fields it does not know are ignored). The file then shows the QP's
// "attrs", which the analyser compares across a NIC's QPs and between the ends of a link.
// Returns 0 when recorded or ignored (NULL handle, telemetry off, after the final write),
// RCCL_TELEMETRY_QP_ATTRS_BAD_SIZE (-1) when `attrs` is NULL or its size does not reach the
// field after `size`. Any thread, concurrently with any call. `qp` is NULL or a handle from
// rcclTelemetryResolveQp; `attrs` is NULL or points to `attrs->size` readable bytes.
int rcclTelemetryQpSetAttrs(struct RcclQpStats *qp, const rcclTelemetryQpAttrs_t *attrs);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus
#endif

#endif  /* RCCL_TELEMETRY_H */

#ifndef RCCL_TELEMETRY_INLINE_H
#define RCCL_TELEMETRY_INLINE_H
/* ------------------------------------------------------------------------------------ */
/* Inline hooks. The data-path hooks above are also defined here as inline code that     */
/* counts in the caller, so a counted WQE costs a few loads and stores instead of calls: */
/* a NULL handle or an unregistered device costs one test; the handle forms bump the     */
/* slot's counters with a relaxed load and store (one thread per handle, the contract);  */
/* PostTs reads the TSC inline; the device forms count into the calling thread's stripe  */
/* when it owns it and call the library otherwise (first use, or a shared stripe).       */
/* The names with a trailing underscore are the library's internals. Their layout is       */
/* negotiated, never assumed: the library publishes its layout number in                  */
/* rcclTelemetryHotV3.layout (a block every library of this SONAME exports, whose own      */
/* layout never changes), and the wrappers of Init, RegisterDevice and of every function */
/* that hands out a handle (ResolveQp, ResolveChannel, CommInit, CommResolveQp,            */
/* CommResolveChannel) below compare it with RCCL_TELEMETRY_INLINE_LAYOUT before calling  */
/* the library. On a mismatch (a header older or newer than the running library's        */
/* layout) they hand out nothing and telemetry stays off for the process, with one line  */
/* on stderr */
/* when it was asked for: never a link or load failure, never a miscount. The hooks        */
/* themselves check nothing: the negotiation costs the data path nothing.                  */
/* Define RCCL_TELEMETRY_NO_INLINE (RCCL_TELEMETRY_NO_INLINE_GUARDS means the same) to    */
/* call the exported functions instead: same counts, one call per hook. Taking a hook's   */
/* address, or writing (rcclTelemetryQpSendPosted)(qp, 0), always names the function.    */

/* ------------------------------------------------------------------------------------ */
/* Three ways to build against this header; define at most one of these before including */
/* it:                                                                                     */
/* - neither: the program links the library (-lrccl_telemetry) and calls it.              */
/* - RCCL_TELEMETRY_STUBS: every entry point is an empty static inline function that      */
/*   returns what it returns while telemetry is off (Init RCCL_TELEMETRY_INIT_OFF, Flush,  */
/*   On and the tokens 0, handles NULL, the other int results -1 with *numSlots 0,        */
/*   GetVersion 0, the clock readings 2): no library at link or run time, for a build     */
/*   without telemetry (a project's -DENABLE_RCCL_TELEMETRY=OFF).                         */
/* - RCCL_TELEMETRY_DLOPEN: the program does not link the library; rcclTelemetryInit      */
/*   loads it with dlopen and every call goes through the table of rcclTelemetryGetApi.  */
/*   Without the library Init returns RCCL_TELEMETRY_INIT_OFF after one line, and every   */
/*   call is a no-op as under RCCL_TELEMETRY_STUBS; before Init, too. A library whose      */
/*   table is older or newer than this header's: the entry points both know work, the      */
/*   rest are no-ops (one line). The inline hooks stay inline. Needs dlopen and           */
/*   pthread_once (-ldl -lpthread before glibc 2.34) and GCC or Clang.                    */
#if defined(RCCL_TELEMETRY_STUBS) && defined(RCCL_TELEMETRY_DLOPEN)
#error "rccl_telemetry.h: define RCCL_TELEMETRY_STUBS or RCCL_TELEMETRY_DLOPEN, not both"
#endif

/* Casts that C and C++ (-Wold-style-cast, -Wzero-as-null-pointer-constant) both accept. */
#ifdef __cplusplus
#define RCCL_TELEMETRY_PTR_(T, p) static_cast<T>(static_cast<void *>(p))
#define RCCL_TELEMETRY_AS_(T, x) static_cast<T>(x)
#define RCCL_TELEMETRY_NULL_ nullptr
#else
#define RCCL_TELEMETRY_PTR_(T, p) ((T)(void *)(p))
#define RCCL_TELEMETRY_AS_(T, x) ((T)(x))
#define RCCL_TELEMETRY_NULL_ ((void *)0)
#endif
#ifdef __cplusplus
#define RCCL_TELEMETRY_INT_PTR_(T, x) reinterpret_cast<T>(x)
#else
#define RCCL_TELEMETRY_INT_PTR_(T, x) ((T)(x))
#endif
#define RCCL_TELEMETRY_LD_(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define RCCL_TELEMETRY_ADD_(x, v) __atomic_store_n(&(x), RCCL_TELEMETRY_LD_(x) + (v), __ATOMIC_RELAXED)

#ifdef __cplusplus
#define RCCL_TELEMETRY_CPTR_(T, p) static_cast<T>(p)
#else
#define RCCL_TELEMETRY_CPTR_(T, p) ((T)(p))
#endif

/* A PostTs token as the library takes it (int64_t), from the integer the caller keeps it in */
/* (RCCL keeps it in a uint64_t): converted explicitly, so that a caller built with          */
/* -Wsign-conversion -Werror passes its own type unchanged. The functions that take tokens    */
/* are called through it (the macros below).                                                  */
#ifdef __cplusplus
template <typename T>
static inline int64_t rcclTelemetryToken_(T t) {
  return static_cast<int64_t>(t);
}
#define RCCL_TELEMETRY_TOKEN_(x) rcclTelemetryToken_(x)
#else
#define RCCL_TELEMETRY_TOKEN_(x) ((int64_t)(x))
#endif

#if defined(RCCL_TELEMETRY_NO_INLINE_GUARDS) && !defined(RCCL_TELEMETRY_NO_INLINE)
#define RCCL_TELEMETRY_NO_INLINE 1
#endif

/* The mirrors of the library's layouts, where its layouts are these (64-bit). */
#if !defined(RCCL_TELEMETRY_STUBS) && (defined(__x86_64__) || defined(__aarch64__))
#define RCCL_TELEMETRY_MIRRORS_ 1
#ifdef __cplusplus
extern "C" {
#endif
/* The library's own layouts and the constants the inline hooks compute with.         */
/* Device slots (RCCL_TELEMETRY_MAX_DEVS). */
#define RCCL_TELEMETRY_MAX_DEVS_ 32u
/* A thread's stripe (of a device's 16): the top bits of its mixed page number,
 * ((tp >> RCCL_TELEMETRY_STRIPE_PAGE_SHIFT_) * RCCL_TELEMETRY_STRIPE_MIX_) >>
 * RCCL_TELEMETRY_STRIPE_SHIFT_ (registry::stripe). */
#define RCCL_TELEMETRY_STRIPE_PAGE_SHIFT_ 12
#define RCCL_TELEMETRY_STRIPE_MIX_ 0x9E3779B97F4A7C15ull
#define RCCL_TELEMETRY_STRIPE_SHIFT_ 60
/* The QP slot's linear histogram buckets (a power of two). */
#define RCCL_TELEMETRY_HIST_ 16u
/* Where the last stored log-scale bucket, bucket 255, starts: 16.1 s. */
#define RCCL_TELEMETRY_LOG_LAST_NS_ (RCCL_TELEMETRY_AS_(uint64_t, 15) << 30)
/* Mirror of the library's QP slot (5 cache lines): what every WQE touches (sample_mask is
 * N - 1 for 1-in-N sampling), what rare and sampled events touch (untracked: completions
 * that matched no posting; mon_thr: the WQE latency monitor's threshold in ns, 0 when it
 * is off; log_hist: the address of the channel's log-scale histogram, 0 when the slot
 * records none), the linear histogram, and the monitor's line (mon_hist: the address of
 * the QP's own log-scale counts; the sum and the 128-bit sum of squares of the measured
 * latencies; slow: completions above mon_thr, the latest one's latency and token). */
typedef struct rcclTelemetryQp_ {
  uint64_t sent_write;
  uint64_t sent_imm;
  uint64_t recv_wqe;
  uint64_t cts_signalled;
  uint64_t cts_unsignalled;
  uint64_t post_seq;
  uint64_t wqe_rcvd;
  uint64_t sample_mask;
  uint64_t untracked;
  uint64_t lat_min_inv;
  uint64_t lat_max;
  uint64_t slot_miss;
  uint64_t library_only_[2];
  uint64_t mon_thr;
  uint64_t log_hist;
  uint64_t hist[16];
  uint64_t mon_hist;
  uint64_t mon_sum;
  uint64_t mon_sq_lo;
  uint64_t mon_sq_hi;
  uint64_t slow;
  uint64_t slow_ns;
  uint64_t slow_post;
  uint64_t library_only1_[1];
} rcclTelemetryQp_;
/* Mirror of a channel's log-scale completion histogram: the thread that owns counts[]
 * (first to record) adds to it inline; any other thread calls rcclTelemetryLogAdd_.
 * Bucket i: 0..15 hold 0..15 ns exactly, then 8 per power of two (see
 * rcclTelemetryLogIndex_); the last bucket (from 16.1 s) also holds everything longer. */
typedef struct rcclTelemetryLog_ {
  uintptr_t owner;
  uint64_t library_only_[7];
  uint64_t counts[256];
} rcclTelemetryLog_;
/* Mirror of the channel slot. */
typedef struct rcclTelemetryCh_ {
  uint64_t req_completed;
  uint64_t library_only_[7];
} rcclTelemetryCh_;
/* One set of device-form counters; sizes[b] counts WQEs of 0 (b = 0) or
 * (2^(b-2), 2^(b-1)] bytes. */
typedef struct rcclTelemetryDevSet_ {
  uint64_t tx_bytes;
  uint64_t rx_bytes;
  uint64_t cq_errors;
  uint64_t cq_polls;
  uint64_t sizes[66];
} rcclTelemetryDevSet_;
/* One of a device's stripes: the owner's thread pointer, its set (the shared set follows,
 * the library's alone). */
typedef struct rcclTelemetryStripe_ {
  uintptr_t owner;
  rcclTelemetryDevSet_ own;
  uint64_t library_only_[73];
} rcclTelemetryStripe_;
/* Written by the library at Init and at device registration; read-only for callers.
 * enabled: 1 from Init until the final file is claimed (Flush or exit), 0 in a forked
 * child. layout: the library's RCCL_TELEMETRY_INLINE_LAYOUT, constant from load. */
typedef struct rcclTelemetryHot_ {
  uint64_t sample_mask;
  uint64_t ns_mult;
  uint64_t div_mul;
  uint64_t div_shift;
  uint64_t last_bucket;
  uint64_t use_tsc;
  uint64_t enabled;
  uint64_t layout;
  rcclTelemetryStripe_ *stripes[32];
} rcclTelemetryHot_;
/* The C compiler's layout is the library's. */
#if defined(__cplusplus) || (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L)
#ifdef __cplusplus
#define RCCL_TELEMETRY_ASSERT_(c, m) static_assert(c, m)
#else
#define RCCL_TELEMETRY_ASSERT_(c, m) _Static_assert(c, m)
#endif
#define RCCL_TELEMETRY_SIZE_(T, n) RCCL_TELEMETRY_ASSERT_(sizeof(T) == (n), #T " is not the library's size")
#define RCCL_TELEMETRY_AT_(T, f, o) \
  RCCL_TELEMETRY_ASSERT_(__builtin_offsetof(T, f) == (o), #T "." #f " is not at the library's offset")
RCCL_TELEMETRY_SIZE_(rcclTelemetryQp_, 320); /* RcclQpStats */
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, sent_write, 0);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, sent_imm, 8);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, recv_wqe, 16);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, cts_signalled, 24);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, cts_unsignalled, 32);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, post_seq, 40);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, wqe_rcvd, 48);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, sample_mask, 56);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, untracked, 64);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, lat_min_inv, 72);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, lat_max, 80);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, slot_miss, 88);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, mon_thr, 112);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, log_hist, 120);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, hist, 128);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, mon_hist, 256);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, mon_sum, 264);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, mon_sq_lo, 272);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, mon_sq_hi, 280);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, slow, 288);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, slow_ns, 296);
RCCL_TELEMETRY_AT_(rcclTelemetryQp_, slow_post, 304);
RCCL_TELEMETRY_SIZE_(rcclTelemetryLog_, 2112); /* LogHist */
RCCL_TELEMETRY_AT_(rcclTelemetryLog_, owner, 0);
RCCL_TELEMETRY_AT_(rcclTelemetryLog_, counts, 64);
RCCL_TELEMETRY_SIZE_(rcclTelemetryCh_, 64); /* RcclChannelStats */
RCCL_TELEMETRY_AT_(rcclTelemetryCh_, req_completed, 0);
RCCL_TELEMETRY_SIZE_(rcclTelemetryDevSet_, 560); /* DevCounters */
RCCL_TELEMETRY_AT_(rcclTelemetryDevSet_, tx_bytes, 0);
RCCL_TELEMETRY_AT_(rcclTelemetryDevSet_, rx_bytes, 8);
RCCL_TELEMETRY_AT_(rcclTelemetryDevSet_, cq_errors, 16);
RCCL_TELEMETRY_AT_(rcclTelemetryDevSet_, cq_polls, 24);
RCCL_TELEMETRY_AT_(rcclTelemetryDevSet_, sizes, 32);
RCCL_TELEMETRY_SIZE_(rcclTelemetryStripe_, 1152); /* DevShard */
RCCL_TELEMETRY_AT_(rcclTelemetryStripe_, owner, 0);
RCCL_TELEMETRY_AT_(rcclTelemetryStripe_, own, 8);
RCCL_TELEMETRY_SIZE_(rcclTelemetryHot_, 320); /* HotParams */
RCCL_TELEMETRY_AT_(rcclTelemetryHot_, sample_mask, 0);
RCCL_TELEMETRY_AT_(rcclTelemetryHot_, ns_mult, 8);
RCCL_TELEMETRY_AT_(rcclTelemetryHot_, div_mul, 16);
RCCL_TELEMETRY_AT_(rcclTelemetryHot_, div_shift, 24);
RCCL_TELEMETRY_AT_(rcclTelemetryHot_, last_bucket, 32);
RCCL_TELEMETRY_AT_(rcclTelemetryHot_, use_tsc, 40);
RCCL_TELEMETRY_AT_(rcclTelemetryHot_, enabled, 48);
RCCL_TELEMETRY_AT_(rcclTelemetryHot_, layout, 56);
RCCL_TELEMETRY_AT_(rcclTelemetryHot_, stripes, 64);
#endif
#ifdef __cplusplus
}
#endif
#endif

#if defined(RCCL_TELEMETRY_MIRRORS_) && !defined(RCCL_TELEMETRY_NO_INLINE) && defined(__GNUC__) && \
    defined(__SIZEOF_INT128__)
/* Defined when the inline hooks below are in use. */
#define RCCL_TELEMETRY_INLINE_HOOKS 1
#endif

#if defined(RCCL_TELEMETRY_DLOPEN)
/* ------------------------------------------------------------------------------------ */
/* The loader (RCCL_TELEMETRY_DLOPEN). rcclTelemetryInit dlopens the library by its      */
/* SONAME (RTLD_NOW | RTLD_LOCAL; RCCL_TELEMETRY_DLOPEN_NAME, defined before including    */
/* this header, names another file) and copies the table rcclTelemetryGetApi hands out:  */
/* the entries this header and the library both know; the rest stay NULL, and a call     */
/* through a NULL entry is a no-op returning what it returns while telemetry is off. The  */
/* inline hooks read the library's hot block through a pointer, a zeroed block until the */
/* library is loaded. Its state is shared by every translation unit of a program or     */
/* shared object that includes this header (weak definitions) and private to it (hidden: */
/* each shared object loads for itself; the library is loaded once).                    */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef RCCL_TELEMETRY_DLOPEN_NAME
#define RCCL_TELEMETRY_DLOPEN_NAME "librccl_telemetry.so.0"
#endif
#define RCCL_TELEMETRY_DL_ __attribute__((weak, visibility("hidden")))
#ifdef __cplusplus
extern "C" {
#endif
extern rcclTelemetryApi_t rcclTelemetryDlOff_;
extern rcclTelemetryApi_t rcclTelemetryDlTable_;
extern rcclTelemetryApi_t *rcclTelemetryDlApiP_;
extern pthread_once_t rcclTelemetryDlOnce_;
extern rcclTelemetryLogger_t rcclTelemetryDlLogger_;
extern int rcclTelemetryDlEnable_;
extern int rcclTelemetryDlDebug_;
extern char rcclTelemetryDlLine_[512];
extern int rcclTelemetryDlLineWarn_;
extern int rcclTelemetryDlLineSaid_;
RCCL_TELEMETRY_DL_ rcclTelemetryApi_t rcclTelemetryDlOff_;
RCCL_TELEMETRY_DL_ rcclTelemetryApi_t rcclTelemetryDlTable_;
RCCL_TELEMETRY_DL_ rcclTelemetryApi_t *rcclTelemetryDlApiP_ = &rcclTelemetryDlOff_;
RCCL_TELEMETRY_DL_ pthread_once_t rcclTelemetryDlOnce_ = PTHREAD_ONCE_INIT;
RCCL_TELEMETRY_DL_ rcclTelemetryLogger_t rcclTelemetryDlLogger_;
/* RCCL_TELEMETRY_ENABLE and RCCL_TELEMETRY_DEBUG as given through rcclTelemetrySetParam    */
/* (-1: not given; else whether ENABLE is "1", whether DEBUG is not "0"), for the loader's  */
/* own line; the environment wins over them, as in the library.                            */
RCCL_TELEMETRY_DL_ int rcclTelemetryDlEnable_ = -1;
RCCL_TELEMETRY_DL_ int rcclTelemetryDlDebug_ = -1;
/* The loader's line about the library file (empty: none), kept until Init says it, once:   */
/* by then every parameter RCCL passes before Init has been given.                          */
RCCL_TELEMETRY_DL_ char rcclTelemetryDlLine_[512];
RCCL_TELEMETRY_DL_ int rcclTelemetryDlLineWarn_;
RCCL_TELEMETRY_DL_ int rcclTelemetryDlLineSaid_;
#ifdef RCCL_TELEMETRY_MIRRORS_
extern rcclTelemetryHot_ rcclTelemetryDlOffHot_;
extern const rcclTelemetryHot_ *rcclTelemetryDlHot_;
RCCL_TELEMETRY_DL_ rcclTelemetryHot_ rcclTelemetryDlOffHot_;
RCCL_TELEMETRY_DL_ const rcclTelemetryHot_ *rcclTelemetryDlHot_ = &rcclTelemetryDlOffHot_;
#endif
#ifdef __cplusplus
}
#endif

/* The loaded table, or the all-NULL one before (or without) the library. */
static inline const rcclTelemetryApi_t *rcclTelemetryDlApi_(void) {
  return __atomic_load_n(&rcclTelemetryDlApiP_, __ATOMIC_ACQUIRE);
}

/* Whether `v` is `want` once surrounding ASCII whitespace is dropped (how the library    */
/* reads a value: " 1" is "1").                                                           */
static inline int rcclTelemetryDlIs_(const char *v, const char *want) {
  size_t n;
  while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\f' || *v == '\r') v++;
  n = strlen(v);
  while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\n' || v[n - 1] == '\f' || v[n - 1] == '\r'))
    n--;
  return n == strlen(want) && strncmp(v, want, n) == 0;
}

/* Whether telemetry was asked for (RCCL_TELEMETRY_ENABLE=1) and whether RCCL_TELEMETRY_DEBUG */
/* is on: the environment's value, else the one given through rcclTelemetrySetParam.        */
static inline int rcclTelemetryDlAsked_(void) {
  const char *enable = getenv("RCCL_TELEMETRY_ENABLE");
  return enable ? rcclTelemetryDlIs_(enable, "1") : __atomic_load_n(&rcclTelemetryDlEnable_, __ATOMIC_ACQUIRE) == 1;
}
static inline int rcclTelemetryDlDebugOn_(void) {
  const char *debug = getenv("RCCL_TELEMETRY_DEBUG");
  return debug ? !rcclTelemetryDlIs_(debug, "0") : __atomic_load_n(&rcclTelemetryDlDebug_, __ATOMIC_ACQUIRE) == 1;
}

/* Says one line of the loader's as the library says its own: to the logger when one is set */
/* (a warning when telemetry was asked for and `warn`, else information), otherwise on       */
/* stderr when it is such a warning or RCCL_TELEMETRY_DEBUG is on.                            */
static inline void rcclTelemetryDlSay_(int warn, const char *msg) {
  int level = warn && rcclTelemetryDlAsked_() ? RCCL_TELEMETRY_LOG_WARN : RCCL_TELEMETRY_LOG_INFO;
  rcclTelemetryLogger_t logger = __atomic_load_n(&rcclTelemetryDlLogger_, __ATOMIC_ACQUIRE);
  if (logger)
    logger(level, RCCL_TELEMETRY_LOG_NET, __FILE__, __LINE__, "%s", msg);
  else if (level == RCCL_TELEMETRY_LOG_WARN || rcclTelemetryDlDebugOn_())
    fprintf(stderr, "%s\n", msg);
}

/* Opens the library and copies its table (once, by pthread_once: at the first             */
/* rcclTelemetrySetParam or Init); what it has to say waits for Init (rcclTelemetryDlLine_). */
static inline void rcclTelemetryDlLoad_(void) {
  void *lib = dlopen(RCCL_TELEMETRY_DLOPEN_NAME, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    snprintf(rcclTelemetryDlLine_, sizeof rcclTelemetryDlLine_,
             "rccl-telemetry: %s could not be loaded (%s); telemetry is off", RCCL_TELEMETRY_DLOPEN_NAME,
             why ? why : "no reason given");
    rcclTelemetryDlLineWarn_ = 1;
    return;
  }
  void *sym = dlsym(lib, "rcclTelemetryGetApi");
  const rcclTelemetryApi_t *(*getApi)(int) = RCCL_TELEMETRY_NULL_;
  if (sym) memcpy(&getApi, &sym, sizeof getApi);
  const rcclTelemetryApi_t *t = getApi ? getApi(RCCL_TELEMETRY_API_VERSION) : RCCL_TELEMETRY_NULL_;
  if (!t) {
    snprintf(rcclTelemetryDlLine_, sizeof rcclTelemetryDlLine_,
             "rccl-telemetry: %s has no rcclTelemetryGetApi table of version %d (a library older than this "
             "header's loader); telemetry is off",
             RCCL_TELEMETRY_DLOPEN_NAME, RCCL_TELEMETRY_API_VERSION);
    rcclTelemetryDlLineWarn_ = 1;
    return;
  }
  size_t n = t->size > 0 ? RCCL_TELEMETRY_AS_(size_t, t->size) : 0u;
  if (n > sizeof rcclTelemetryDlTable_) n = sizeof rcclTelemetryDlTable_;
  n -= n % sizeof(void *);
  memcpy(&rcclTelemetryDlTable_, t, n);
  rcclTelemetryDlTable_.size = RCCL_TELEMETRY_AS_(int, n);
  if (t->version != RCCL_TELEMETRY_API_VERSION) {
    size_t off = (sizeof rcclTelemetryDlTable_ - n) / sizeof(void *);
    if (off)
      snprintf(rcclTelemetryDlLine_, sizeof rcclTelemetryDlLine_,
               "rccl-telemetry: %s provides table version %d, this program's header version %d: the entry "
               "points both know work, the %d this library lacks are off",
               RCCL_TELEMETRY_DLOPEN_NAME, t->version, RCCL_TELEMETRY_API_VERSION, RCCL_TELEMETRY_AS_(int, off));
    else
      snprintf(rcclTelemetryDlLine_, sizeof rcclTelemetryDlLine_,
               "rccl-telemetry: %s provides table version %d, this program's header version %d: every entry "
               "point the header knows works",
               RCCL_TELEMETRY_DLOPEN_NAME, t->version, RCCL_TELEMETRY_API_VERSION);
    rcclTelemetryDlLineWarn_ = off != 0;
  }
#ifdef RCCL_TELEMETRY_MIRRORS_
  if (rcclTelemetryDlTable_.hot)
    __atomic_store_n(&rcclTelemetryDlHot_, RCCL_TELEMETRY_CPTR_(const rcclTelemetryHot_ *, rcclTelemetryDlTable_.hot),
                     __ATOMIC_RELEASE);
#endif
  __atomic_store_n(&rcclTelemetryDlApiP_, &rcclTelemetryDlTable_, __ATOMIC_RELEASE);
  rcclTelemetryLogger_t logger = __atomic_load_n(&rcclTelemetryDlLogger_, __ATOMIC_ACQUIRE);
  if (logger && rcclTelemetryDlTable_.setLogger) rcclTelemetryDlTable_.setLogger(logger);
}

/* Loads the library on the first call; whether it is there (its Init is). */
static inline int rcclTelemetryDlLoaded_(void) {
  (void)pthread_once(&rcclTelemetryDlOnce_, rcclTelemetryDlLoad_);
  return rcclTelemetryDlApi_()->init ? 1 : 0;
}

/* Loads the library and says the loader's line, the first time (Init's); whether it is  */
/* there.                                                                                */
static inline int rcclTelemetryDlInitLoad_(void) {
  int loaded = rcclTelemetryDlLoaded_();
  if (rcclTelemetryDlLine_[0] && !__atomic_exchange_n(&rcclTelemetryDlLineSaid_, 1, __ATOMIC_ACQ_REL))
    rcclTelemetryDlSay_(rcclTelemetryDlLineWarn_, rcclTelemetryDlLine_);
  return loaded;
}

/* rcclTelemetryInit loads the library, then starts it; OFF without it. */
static inline int rcclTelemetryInit(void) {
  if (!rcclTelemetryDlInitLoad_()) return RCCL_TELEMETRY_INIT_OFF;
  return rcclTelemetryDlApi_()->init();
}

/* rcclTelemetrySetParam loads the library (parameters come before Init) and passes the  */
/* parameter on; 0 and nothing done without the library or with a table that lacks it.    */
/* RCCL_TELEMETRY_ENABLE and RCCL_TELEMETRY_DEBUG are also kept for the loader's own line, */
/* so that telemetry asked for through a parameter is as asked for through the            */
/* environment (a missing library is then a warning).                                     */
static inline int rcclTelemetrySetParam(const char *name, const char *value) {
  if (name && strcmp(name, "RCCL_TELEMETRY_ENABLE") == 0)
    __atomic_store_n(&rcclTelemetryDlEnable_, value ? rcclTelemetryDlIs_(value, "1") : -1, __ATOMIC_RELEASE);
  else if (name && strcmp(name, "RCCL_TELEMETRY_DEBUG") == 0)
    __atomic_store_n(&rcclTelemetryDlDebug_, value ? !rcclTelemetryDlIs_(value, "0") : -1, __ATOMIC_RELEASE);
  if (!rcclTelemetryDlLoaded_()) return 0;
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  return a_->setParam ? a_->setParam(name, value) : 0;
}

/* rcclTelemetrySetLogger: kept for the loader's own lines, and passed on to the library. */
static inline void rcclTelemetrySetLogger(rcclTelemetryLogger_t logger) {
  __atomic_store_n(&rcclTelemetryDlLogger_, logger, __ATOMIC_RELEASE);
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->setLogger) a_->setLogger(logger);
}

static inline int rcclTelemetryDlInlineMismatch_(int headerLayout) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  return a_->inlineMismatch_ ? a_->inlineMismatch_(headerLayout) : -1;
}
#endif /* RCCL_TELEMETRY_DLOPEN */

/* The entry points of RCCL_TELEMETRY_STUBS (each returns what it returns while
 * telemetry is off) and of RCCL_TELEMETRY_DLOPEN (each calls through the loaded table). */
#if defined(RCCL_TELEMETRY_STUBS)
static inline int rcclTelemetryInit(void) {
  return RCCL_TELEMETRY_INIT_OFF;
}
static inline int rcclTelemetrySetParam(const char *name, const char *value) {
  (void)name; (void)value;
  return 0;
}
static inline int rcclTelemetryOn(void) {
  return 0;
}
static inline int rcclTelemetryFlush(void) {
  return 0;
}
static inline int rcclTelemetryRegisterDevice(int deviceId, const char *roceDevice, const char *transport) {
  (void)deviceId; (void)roceDevice; (void)transport;
  return -1;
}
static inline int rcclTelemetrySetupChannel(int devIdx, int chIdx, int numQps, int *numSlots) {
  (void)devIdx; (void)chIdx; (void)numQps;
  if (numSlots) *numSlots = 0;
  return -1;
}
static inline void rcclTelemetrySetQpRole(int devIdx, int chIdx, int qpIdx, int isDataQp) {
  (void)devIdx; (void)chIdx; (void)qpIdx; (void)isDataQp;
}
static inline void rcclTelemetryMarkChannelsUnknown(int devIdx) {
  (void)devIdx;
}
static inline struct RcclQpStats *rcclTelemetryResolveQp(int devIdx, int chIdx, int qpIdx) {
  (void)devIdx; (void)chIdx; (void)qpIdx;
  return RCCL_TELEMETRY_NULL_;
}
static inline struct RcclChannelStats *rcclTelemetryResolveChannel(int devIdx, int chIdx) {
  (void)devIdx; (void)chIdx;
  return RCCL_TELEMETRY_NULL_;
}
static inline void rcclTelemetryQpSetPeer(struct RcclQpStats *qp, uint32_t qpNum, const void *localGid, uint16_t localLid, uint32_t remoteQpNum, const void *remoteGid, uint16_t remoteLid) {
  (void)qp; (void)qpNum; (void)localGid; (void)localLid; (void)remoteQpNum; (void)remoteGid; (void)remoteLid;
}
static inline int64_t rcclTelemetryPostTs(struct RcclQpStats *qp) {
  (void)qp;
  return 0;
}
static inline void rcclTelemetryQpSendPosted(struct RcclQpStats *qp, int withImm) {
  (void)qp; (void)withImm;
}
static inline void rcclTelemetryQpRecvPosted(struct RcclQpStats *qp) {
  (void)qp;
}
static inline void rcclTelemetryQpCtsSent(struct RcclQpStats *qp, int signalled) {
  (void)qp; (void)signalled;
}
static inline void rcclTelemetryQpSlotMiss(struct RcclQpStats *qp) {
  (void)qp;
}
static inline void rcclTelemetryQpWqeComplete(struct RcclQpStats *qp, int64_t postTs) {
  (void)qp; (void)postTs;
}
static inline void rcclTelemetryQpWqeCompleteAt(struct RcclQpStats *qp, int64_t postTs, int64_t nowTs) {
  (void)qp; (void)postTs; (void)nowTs;
}
static inline int64_t rcclTelemetryPollTs(void) {
  return RCCL_TELEMETRY_TS_UNSAMPLED + 1;
}
static inline void rcclTelemetryChRequestCompleted(struct RcclChannelStats *ch) {
  (void)ch;
}
static inline void rcclTelemetryBytes(int devIdx, int isSend, uint64_t bytes) {
  (void)devIdx; (void)isSend; (void)bytes;
}
static inline void rcclTelemetryCqError(int devIdx) {
  (void)devIdx;
}
static inline void rcclTelemetryQpCqError(struct RcclQpStats *qp, int status, uint32_t vendorErr) {
  (void)qp; (void)status; (void)vendorErr;
}
static inline void rcclTelemetryAddCqPolls(int devIdx, uint64_t polls) {
  (void)devIdx; (void)polls;
}
static inline void rcclTelemetryWqeSize(int devIdx, uint64_t bytes) {
  (void)devIdx; (void)bytes;
}
static inline void rcclTelemetryWqeComplete(int devIdx, int chIdx, int qpIdx, int64_t postTs) {
  (void)devIdx; (void)chIdx; (void)qpIdx; (void)postTs;
}
static inline void rcclTelemetryWqePosted(int devIdx, int chIdx, int qpIdx, int isSend) {
  (void)devIdx; (void)chIdx; (void)qpIdx; (void)isSend;
}
static inline void rcclTelemetryRequestCompleted(int devIdx, int chIdx) {
  (void)devIdx; (void)chIdx;
}
static inline void rcclTelemetrySlotMiss(int devIdx, int chIdx, int qpIdx) {
  (void)devIdx; (void)chIdx; (void)qpIdx;
}
static inline void rcclTelemetryCtsSent(int devIdx, int chIdx, int qpIdx, int signalled) {
  (void)devIdx; (void)chIdx; (void)qpIdx; (void)signalled;
}
static inline void rcclTelemetryWriteWqe(int devIdx, int chIdx, int qpIdx, int withImm) {
  (void)devIdx; (void)chIdx; (void)qpIdx; (void)withImm;
}
static inline int64_t rcclTelemetryPostTsIdx(int devIdx, int chIdx, int qpIdx) {
  (void)devIdx; (void)chIdx; (void)qpIdx;
  return 0;
}
static inline int64_t rcclTelemetryNowToken(void) {
  return RCCL_TELEMETRY_TS_UNSAMPLED + 1;
}
static inline int rcclTelemetrySwCapture(struct RcclTelemetrySwSnapshot *out, int maxDevs) {
  (void)out; (void)maxDevs;
  return -1;
}
static inline rcclTelemetryComm_t *rcclTelemetryCommInit(uint64_t commHash, int rank, int nRanks) {
  (void)commHash; (void)rank; (void)nRanks;
  return RCCL_TELEMETRY_NULL_;
}
static inline int rcclTelemetryCommSetupChannel(rcclTelemetryComm_t *comm, int devIdx, int chIdx, int numQps, int *numSlots) {
  (void)comm; (void)devIdx; (void)chIdx; (void)numQps;
  if (numSlots) *numSlots = 0;
  return -1;
}
static inline void rcclTelemetryCommSetQpRole(rcclTelemetryComm_t *comm, int devIdx, int chIdx, int qpIdx, int isDataQp) {
  (void)comm; (void)devIdx; (void)chIdx; (void)qpIdx; (void)isDataQp;
}
static inline struct RcclQpStats *rcclTelemetryCommResolveQp(rcclTelemetryComm_t *comm, int devIdx, int chIdx, int qpIdx) {
  (void)comm; (void)devIdx; (void)chIdx; (void)qpIdx;
  return RCCL_TELEMETRY_NULL_;
}
static inline struct RcclChannelStats *rcclTelemetryCommResolveChannel(rcclTelemetryComm_t *comm, int devIdx, int chIdx) {
  (void)comm; (void)devIdx; (void)chIdx;
  return RCCL_TELEMETRY_NULL_;
}
static inline void rcclTelemetryCommFinalize(rcclTelemetryComm_t *comm) {
  (void)comm;
}
static inline int rcclTelemetryGetVersion(void) {
  return 0;
}
static inline void rcclTelemetrySetLogger(rcclTelemetryLogger_t logger) {
  (void)logger;
}
static inline const rcclTelemetryApi_t *rcclTelemetryGetApi(int version) {
  (void)version;
  return RCCL_TELEMETRY_NULL_;
}
static inline int rcclTelemetryQpSetAttrs(struct RcclQpStats *qp, const rcclTelemetryQpAttrs_t *attrs) {
  (void)qp; (void)attrs;
  return 0;
}
#elif defined(RCCL_TELEMETRY_DLOPEN)
static inline int rcclTelemetryOn(void) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->on) return a_->on();
  return 0;
}
static inline int rcclTelemetryFlush(void) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->flush) return a_->flush();
  return 0;
}
static inline int rcclTelemetryRegisterDevice(int deviceId, const char *roceDevice, const char *transport) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->registerDevice) return a_->registerDevice(deviceId, roceDevice, transport);
  return -1;
}
static inline int rcclTelemetrySetupChannel(int devIdx, int chIdx, int numQps, int *numSlots) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->setupChannel) return a_->setupChannel(devIdx, chIdx, numQps, numSlots);
  if (numSlots) *numSlots = 0;
  return -1;
}
static inline void rcclTelemetrySetQpRole(int devIdx, int chIdx, int qpIdx, int isDataQp) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->setQpRole) a_->setQpRole(devIdx, chIdx, qpIdx, isDataQp);
}
static inline void rcclTelemetryMarkChannelsUnknown(int devIdx) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->markChannelsUnknown) a_->markChannelsUnknown(devIdx);
}
static inline struct RcclQpStats *rcclTelemetryResolveQp(int devIdx, int chIdx, int qpIdx) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->resolveQp) return a_->resolveQp(devIdx, chIdx, qpIdx);
  return RCCL_TELEMETRY_NULL_;
}
static inline struct RcclChannelStats *rcclTelemetryResolveChannel(int devIdx, int chIdx) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->resolveChannel) return a_->resolveChannel(devIdx, chIdx);
  return RCCL_TELEMETRY_NULL_;
}
static inline void rcclTelemetryQpSetPeer(struct RcclQpStats *qp, uint32_t qpNum, const void *localGid, uint16_t localLid, uint32_t remoteQpNum, const void *remoteGid, uint16_t remoteLid) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->qpSetPeer) a_->qpSetPeer(qp, qpNum, localGid, localLid, remoteQpNum, remoteGid, remoteLid);
}
static inline int64_t rcclTelemetryPostTs(struct RcclQpStats *qp) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->postTs) return a_->postTs(qp);
  return 0;
}
static inline void rcclTelemetryQpSendPosted(struct RcclQpStats *qp, int withImm) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->qpSendPosted) a_->qpSendPosted(qp, withImm);
}
static inline void rcclTelemetryQpRecvPosted(struct RcclQpStats *qp) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->qpRecvPosted) a_->qpRecvPosted(qp);
}
static inline void rcclTelemetryQpCtsSent(struct RcclQpStats *qp, int signalled) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->qpCtsSent) a_->qpCtsSent(qp, signalled);
}
static inline void rcclTelemetryQpSlotMiss(struct RcclQpStats *qp) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->qpSlotMiss) a_->qpSlotMiss(qp);
}
static inline void rcclTelemetryQpWqeComplete(struct RcclQpStats *qp, int64_t postTs) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->qpWqeComplete) a_->qpWqeComplete(qp, postTs);
}
static inline void rcclTelemetryQpWqeCompleteAt(struct RcclQpStats *qp, int64_t postTs, int64_t nowTs) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->qpWqeCompleteAt) a_->qpWqeCompleteAt(qp, postTs, nowTs);
}
static inline int64_t rcclTelemetryPollTs(void) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->pollTs) return a_->pollTs();
  return RCCL_TELEMETRY_TS_UNSAMPLED + 1;
}
static inline void rcclTelemetryChRequestCompleted(struct RcclChannelStats *ch) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->chRequestCompleted) a_->chRequestCompleted(ch);
}
static inline void rcclTelemetryBytes(int devIdx, int isSend, uint64_t bytes) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->bytes) a_->bytes(devIdx, isSend, bytes);
}
static inline void rcclTelemetryCqError(int devIdx) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->cqError) a_->cqError(devIdx);
}
static inline void rcclTelemetryQpCqError(struct RcclQpStats *qp, int status, uint32_t vendorErr) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->qpCqError) a_->qpCqError(qp, status, vendorErr);
}
static inline void rcclTelemetryAddCqPolls(int devIdx, uint64_t polls) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->addCqPolls) a_->addCqPolls(devIdx, polls);
}
static inline void rcclTelemetryWqeSize(int devIdx, uint64_t bytes) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->wqeSize) a_->wqeSize(devIdx, bytes);
}
static inline void rcclTelemetryWqeComplete(int devIdx, int chIdx, int qpIdx, int64_t postTs) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->wqeComplete) a_->wqeComplete(devIdx, chIdx, qpIdx, postTs);
}
static inline void rcclTelemetryWqePosted(int devIdx, int chIdx, int qpIdx, int isSend) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->wqePosted) a_->wqePosted(devIdx, chIdx, qpIdx, isSend);
}
static inline void rcclTelemetryRequestCompleted(int devIdx, int chIdx) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->requestCompleted) a_->requestCompleted(devIdx, chIdx);
}
static inline void rcclTelemetrySlotMiss(int devIdx, int chIdx, int qpIdx) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->slotMiss) a_->slotMiss(devIdx, chIdx, qpIdx);
}
static inline void rcclTelemetryCtsSent(int devIdx, int chIdx, int qpIdx, int signalled) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->ctsSent) a_->ctsSent(devIdx, chIdx, qpIdx, signalled);
}
static inline void rcclTelemetryWriteWqe(int devIdx, int chIdx, int qpIdx, int withImm) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->writeWqe) a_->writeWqe(devIdx, chIdx, qpIdx, withImm);
}
static inline int64_t rcclTelemetryPostTsIdx(int devIdx, int chIdx, int qpIdx) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->postTsIdx) return a_->postTsIdx(devIdx, chIdx, qpIdx);
  return 0;
}
static inline int64_t rcclTelemetryNowToken(void) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->nowToken) return a_->nowToken();
  return RCCL_TELEMETRY_TS_UNSAMPLED + 1;
}
static inline int rcclTelemetrySwCapture(struct RcclTelemetrySwSnapshot *out, int maxDevs) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->swCapture) return a_->swCapture(out, maxDevs);
  return -1;
}
static inline rcclTelemetryComm_t *rcclTelemetryCommInit(uint64_t commHash, int rank, int nRanks) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->commInit) return a_->commInit(commHash, rank, nRanks);
  return RCCL_TELEMETRY_NULL_;
}
static inline int rcclTelemetryCommSetupChannel(rcclTelemetryComm_t *comm, int devIdx, int chIdx, int numQps, int *numSlots) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->commSetupChannel) return a_->commSetupChannel(comm, devIdx, chIdx, numQps, numSlots);
  if (numSlots) *numSlots = 0;
  return -1;
}
static inline void rcclTelemetryCommSetQpRole(rcclTelemetryComm_t *comm, int devIdx, int chIdx, int qpIdx, int isDataQp) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->commSetQpRole) a_->commSetQpRole(comm, devIdx, chIdx, qpIdx, isDataQp);
}
static inline struct RcclQpStats *rcclTelemetryCommResolveQp(rcclTelemetryComm_t *comm, int devIdx, int chIdx, int qpIdx) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->commResolveQp) return a_->commResolveQp(comm, devIdx, chIdx, qpIdx);
  return RCCL_TELEMETRY_NULL_;
}
static inline struct RcclChannelStats *rcclTelemetryCommResolveChannel(rcclTelemetryComm_t *comm, int devIdx, int chIdx) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->commResolveChannel) return a_->commResolveChannel(comm, devIdx, chIdx);
  return RCCL_TELEMETRY_NULL_;
}
static inline void rcclTelemetryCommFinalize(rcclTelemetryComm_t *comm) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->commFinalize) a_->commFinalize(comm);
}
static inline int rcclTelemetryGetVersion(void) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->getVersion) return a_->getVersion();
  return 0;
}
static inline int rcclTelemetryQpSetAttrs(struct RcclQpStats *qp, const rcclTelemetryQpAttrs_t *attrs) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->qpSetAttrs) return a_->qpSetAttrs(qp, attrs);
  return 0;
}
#endif

#ifdef RCCL_TELEMETRY_INLINE_HOOKS
#if defined(RCCL_TELEMETRY_DLOPEN)
static inline void rcclTelemetryLogAdd_(rcclTelemetryLog_ *h, uint64_t i) {
  const rcclTelemetryApi_t *a_ = rcclTelemetryDlApi_();
  if (a_->logAdd_) a_->logAdd_(h, i);
}
/* The library's hot block, through the loader's pointer. */
#define RCCL_TELEMETRY_HOT_ (*__atomic_load_n(&rcclTelemetryDlHot_, __ATOMIC_RELAXED))
#else
#ifdef __cplusplus
extern "C" {
#endif
extern void rcclTelemetryLogAdd_(rcclTelemetryLog_ *h, uint64_t i);
extern rcclTelemetryHot_ rcclTelemetryHotV3;
/* Says the layouts differ and keeps telemetry off (weak: a library older than the          */
/* negotiation lacks it, and then the wrappers only refuse).                                */
extern int rcclTelemetryInlineMismatch_(int headerLayout) __attribute__((weak));
#ifdef __cplusplus
}
#endif
#define RCCL_TELEMETRY_HOT_ rcclTelemetryHotV3
#endif

static inline int64_t rcclTelemetryNow_(void) {
#if defined(__x86_64__)
  if (RCCL_TELEMETRY_LD_(RCCL_TELEMETRY_HOT_.use_tsc)) {
    uint64_t t = RCCL_TELEMETRY_AS_(uint64_t, __builtin_ia32_rdtsc()) & RCCL_TELEMETRY_AS_(uint64_t, INT64_MAX);
    return t < 2 ? 2 : RCCL_TELEMETRY_AS_(int64_t, t);
  }
#endif
  return rcclTelemetryNowToken();
}

static inline uintptr_t rcclTelemetryThreadPointer_(void) {
  uintptr_t tp;
#if defined(__x86_64__)
  __asm__("movq %%fs:0, %0" : "=r"(tp));
#else
  __asm__("mrs %0, tpidr_el0" : "=r"(tp));
#endif
  return tp;
}

/* The calling thread's stripe of device devIdx, or NULL when the device is not counting. */
static inline rcclTelemetryStripe_ *rcclTelemetryStripe_of_(int devIdx, uintptr_t tp) {
  if (RCCL_TELEMETRY_AS_(unsigned, devIdx) >= RCCL_TELEMETRY_MAX_DEVS_) return RCCL_TELEMETRY_NULL_;
  rcclTelemetryStripe_ *s = __atomic_load_n(&RCCL_TELEMETRY_HOT_.stripes[devIdx], __ATOMIC_ACQUIRE);
  return s ? s + (((tp >> RCCL_TELEMETRY_STRIPE_PAGE_SHIFT_) * RCCL_TELEMETRY_STRIPE_MIX_) >> RCCL_TELEMETRY_STRIPE_SHIFT_) : s;
}

/* rcclTelemetryOn: the word the library sets at Init and clears when the final file is claimed
 * (or in a forked child), so RCCL's `if (rcclTelemetryOn())` guards cost one load, no call. */
static inline int rcclTelemetryOn_inline_(void) {
  return RCCL_TELEMETRY_LD_(RCCL_TELEMETRY_HOT_.enabled) != 0;
}
static inline int64_t rcclTelemetryPostTs_inline_(RcclQpStats *qp) {
  rcclTelemetryQp_ *q = RCCL_TELEMETRY_PTR_(rcclTelemetryQp_ *, qp);
  if (!q) return 0;
  uint64_t mask = RCCL_TELEMETRY_LD_(q->sample_mask);
  if (mask) {
    uint64_t seq = RCCL_TELEMETRY_LD_(q->post_seq);
    __atomic_store_n(&q->post_seq, seq + 1, __ATOMIC_RELAXED);
    if (seq & mask) return RCCL_TELEMETRY_TS_UNSAMPLED;
  }
  return rcclTelemetryNow_();
}
static inline void rcclTelemetryQpSendPosted_inline_(RcclQpStats *qp, int withImm) {
  rcclTelemetryQp_ *q = RCCL_TELEMETRY_PTR_(rcclTelemetryQp_ *, qp);
  if (!q) return;
  if (withImm) RCCL_TELEMETRY_ADD_(q->sent_imm, 1);
  else RCCL_TELEMETRY_ADD_(q->sent_write, 1);
}
static inline void rcclTelemetryQpRecvPosted_inline_(RcclQpStats *qp) {
  rcclTelemetryQp_ *q = RCCL_TELEMETRY_PTR_(rcclTelemetryQp_ *, qp);
  if (q) RCCL_TELEMETRY_ADD_(q->recv_wqe, 1);
}
static inline void rcclTelemetryQpCtsSent_inline_(RcclQpStats *qp, int signalled) {
  rcclTelemetryQp_ *q = RCCL_TELEMETRY_PTR_(rcclTelemetryQp_ *, qp);
  if (!q) return;
  if (signalled) RCCL_TELEMETRY_ADD_(q->cts_signalled, 1);
  else RCCL_TELEMETRY_ADD_(q->cts_unsignalled, 1);
}
static inline void rcclTelemetryQpSlotMiss_inline_(RcclQpStats *qp) {
  rcclTelemetryQp_ *q = RCCL_TELEMETRY_PTR_(rcclTelemetryQp_ *, qp);
  if (q) RCCL_TELEMETRY_ADD_(q->slot_miss, 1);
}
/* The log-scale bucket of a latency in ns below 2^61 (unclamped, up to 471): for ns >= 16, */
/* h = the highest set bit and the index is 8 * (h - 3) + (ns >> (h - 3)), so every bucket  */
/* is at most 1/8 of its lower bound wide; below 16 the index is ns itself. Computed as      */
/* 8 * h + ((ns << 3) >> h) - 24: a bsr/clz, a shift and two adds, no division.             */
static inline uint64_t rcclTelemetryLogIndexRaw_(uint64_t ns) {
  uint64_t h;
#if defined(__x86_64__)
  __asm__("bsrq %1, %0" : "=r"(h) : "r"(ns | 15u) : "cc"); /* 63 - clz without a zero-extension */
#else
  h = 63u - RCCL_TELEMETRY_AS_(uint64_t, RCCL_TELEMETRY_AS_(unsigned, __builtin_clzll(ns | 15u)));
#endif
  return h * 8u + ((ns << 3) >> h) - 24u;
}
/* The stored bucket of any latency in ns: the last one, from RCCL_TELEMETRY_LOG_LAST_NS_,    */
/* also holds everything longer.                                                              */
static inline unsigned rcclTelemetryLogIndex_(uint64_t ns) {
  return RCCL_TELEMETRY_AS_(unsigned, rcclTelemetryLogIndexRaw_(ns < RCCL_TELEMETRY_LOG_LAST_NS_ ? ns : RCCL_TELEMETRY_LOG_LAST_NS_));
}
/* Adds 1 to a counter only the calling thread writes: one add to memory on x86-64 (a single */
/* aligned 8-byte store, as atomic to readers as the relaxed store it replaces).              */
#if defined(__x86_64__)
#define RCCL_TELEMETRY_INC_(x) __asm__ __volatile__("addq $1, %0" : "+m"(x))
#else
#define RCCL_TELEMETRY_INC_(x) RCCL_TELEMETRY_ADD_(x, 1)
#endif
/* Whether the calling thread owns the histogram: its owner word against the thread pointer, */
/* compared straight from %fs:0 on x86-64 (one load and one compare).                       */
static inline int rcclTelemetryOwnsLog_(const rcclTelemetryLog_ *lh) {
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  int eq;
  __asm__("cmpq %%fs:0, %1" : "=@ccz"(eq) : "r"(RCCL_TELEMETRY_LD_(lh->owner)));
  return eq;
#else
  return RCCL_TELEMETRY_LD_(lh->owner) == rcclTelemetryThreadPointer_();
#endif
}
/* Counts bucket li of the channel histogram at address la (a slot's non-zero log_hist word): */
/* inline when the calling thread owns it, else through the library.                         */
static inline void rcclTelemetryLogRecord_(uint64_t la, uint64_t li) {
  rcclTelemetryLog_ *lh = RCCL_TELEMETRY_INT_PTR_(rcclTelemetryLog_ *, la);
  if (__builtin_expect(rcclTelemetryOwnsLog_(lh), 1)) RCCL_TELEMETRY_INC_(lh->counts[li]);
  else rcclTelemetryLogAdd_(lh, li);
}
/* The WQE latency monitor's share of a measured completion (RCCL_TELEMETRY_SLOW_NS or      */
/* NCCL_IB_WQE_LATENCY_THRESHOLD_NS set, thr its value): the sum and the 128-bit sum of      */
/* squares (the exact mean and stddev), the QP's own log-scale count (its quantiles), and,   */
/* above the threshold, the slow count and the latest slow latency and token, which the     */
/* library's background thread reads for its "WQE slow" line: no call, no clock read.       */
static inline void rcclTelemetryMonitor_(rcclTelemetryQp_ *q, uint64_t ns, uint64_t ts, uint64_t thr) {
  __extension__ typedef unsigned __int128 u128_;
  RCCL_TELEMETRY_ADD_(q->mon_sum, ns);
  /* The square's high word is 0 below 2^32 ns, and the low word's sum carries rarely: the */
  /* high word is touched only then.                                                         */
  u128_ sq = RCCL_TELEMETRY_AS_(u128_, ns) * ns;
  uint64_t lo = RCCL_TELEMETRY_LD_(q->mon_sq_lo) + RCCL_TELEMETRY_AS_(uint64_t, sq);
  uint64_t hi = RCCL_TELEMETRY_AS_(uint64_t, sq >> 64) + (lo < RCCL_TELEMETRY_AS_(uint64_t, sq) ? 1u : 0u);
  __atomic_store_n(&q->mon_sq_lo, lo, __ATOMIC_RELAXED);
  if (__builtin_expect(hi != 0, 0)) RCCL_TELEMETRY_ADD_(q->mon_sq_hi, hi);
  uint64_t ha = RCCL_TELEMETRY_LD_(q->mon_hist);
  if (__builtin_expect(ha != 0, 1)) RCCL_TELEMETRY_INC_(RCCL_TELEMETRY_INT_PTR_(uint64_t *, ha)[rcclTelemetryLogIndex_(ns)]);
  if (ns > thr) {
    RCCL_TELEMETRY_INC_(q->slow);
    __atomic_store_n(&q->slow_ns, ns, __ATOMIC_RELAXED);
    __atomic_store_n(&q->slow_post, ts, __ATOMIC_RELAXED);
  }
}
/* The latency of a sampled completion: ns since the token, its bucket in the channel's    */
/* log-scale histogram (when it records one) and in the linear histogram, min and max.     */
/* nowTs is the clock reading the completion's time is measured to (its poll's, or now). */
static inline void rcclTelemetrySampled_(rcclTelemetryQp_ *q, int64_t postTs, int64_t nowTs) {
  __extension__ typedef unsigned __int128 u128_;
  uint64_t now = RCCL_TELEMETRY_AS_(uint64_t, nowTs), ts = RCCL_TELEMETRY_AS_(uint64_t, postTs);
  uint64_t dt = now > ts ? now - ts : 0;
  /* ns = (dt * ns_mult) >> 32, saturated; one 64-bit multiply when it cannot overflow
   * (dt below 2^32 ticks, a clock of at least 1 tick per ns: every TSC, and ns tokens).
   * There ns is below 2^32, so its log-scale bucket (<= 239) needs no clamp. */
  uint64_t mult = RCCL_TELEMETRY_LD_(RCCL_TELEMETRY_HOT_.ns_mult), ns;
  uint64_t la = RCCL_TELEMETRY_LD_(q->log_hist);
  if (__builtin_expect((dt >> 32) == 0 && mult <= (RCCL_TELEMETRY_AS_(uint64_t, 1) << 32), 1)) {
    ns = (dt * mult) >> 32;
    if (__builtin_expect(la != 0, 1)) rcclTelemetryLogRecord_(la, rcclTelemetryLogIndexRaw_(ns));
  } else {
    u128_ p = RCCL_TELEMETRY_AS_(u128_, dt) * mult;
    ns = (p >> 96) ? UINT64_MAX : RCCL_TELEMETRY_AS_(uint64_t, p >> 32);
    if (la) rcclTelemetryLogRecord_(la, rcclTelemetryLogIndex_(ns));
  }
  uint64_t shift = RCCL_TELEMETRY_LD_(RCCL_TELEMETRY_HOT_.div_shift), b = ns;
  if (shift) {
    uint64_t t = RCCL_TELEMETRY_AS_(uint64_t, (RCCL_TELEMETRY_AS_(u128_, RCCL_TELEMETRY_LD_(RCCL_TELEMETRY_HOT_.div_mul)) * ns) >> 64);
    b = (t + ((ns - t) >> 1)) >> (shift - 1);
  }
  uint64_t last = RCCL_TELEMETRY_LD_(RCCL_TELEMETRY_HOT_.last_bucket);
  RCCL_TELEMETRY_ADD_(q->hist[(b < last ? b : last) & (RCCL_TELEMETRY_HIST_ - 1u)], 1);
  if (~ns > RCCL_TELEMETRY_LD_(q->lat_min_inv)) __atomic_store_n(&q->lat_min_inv, ~ns, __ATOMIC_RELAXED);
  if (ns > RCCL_TELEMETRY_LD_(q->lat_max)) __atomic_store_n(&q->lat_max, ns, __ATOMIC_RELAXED);
  uint64_t thr = RCCL_TELEMETRY_LD_(q->mon_thr);
  if (thr) rcclTelemetryMonitor_(q, ns, ts, thr);
}
/* One clock read per poll: nowTs from rcclTelemetryPollTs() after the poll (<= 1: read now). */
static inline void rcclTelemetryQpWqeCompleteAt_inline_(RcclQpStats *qp, int64_t postTs, int64_t nowTs) {
  rcclTelemetryQp_ *q = RCCL_TELEMETRY_PTR_(rcclTelemetryQp_ *, qp);
  if (!q) return;
  RCCL_TELEMETRY_ADD_(q->wqe_rcvd, 1);
  if (postTs > RCCL_TELEMETRY_TS_UNSAMPLED)
    rcclTelemetrySampled_(q, postTs, nowTs > RCCL_TELEMETRY_TS_UNSAMPLED ? nowTs : rcclTelemetryNow_());
  else if (postTs == 0) RCCL_TELEMETRY_ADD_(q->untracked, 1);
}
static inline void rcclTelemetryQpWqeComplete_inline_(RcclQpStats *qp, int64_t postTs) {
  rcclTelemetryQpWqeCompleteAt_inline_(qp, postTs, 0); /* 0: read the clock now (folds away) */
}
static inline void rcclTelemetryChRequestCompleted_inline_(RcclChannelStats *ch) {
  rcclTelemetryCh_ *c = RCCL_TELEMETRY_PTR_(rcclTelemetryCh_ *, ch);
  if (c) RCCL_TELEMETRY_ADD_(c->req_completed, 1);
}

/* Device forms: count into the thread's own stripe, or let the library sort it out. */
#define RCCL_TELEMETRY_DEV_OP_(devIdx, field, v, call)                                   \
  do {                                                                                    \
    uintptr_t tp_ = rcclTelemetryThreadPointer_();                                        \
    rcclTelemetryStripe_ *s_ = rcclTelemetryStripe_of_((devIdx), tp_);                    \
    if (!s_) break;                                                                       \
    if (__atomic_load_n(&s_->owner, __ATOMIC_RELAXED) == tp_) RCCL_TELEMETRY_ADD_(s_->own.field, (v)); \
    else call;                                                                            \
  } while (0)

static inline void rcclTelemetryBytes_inline_(int devIdx, int isSend, uint64_t bytes) {
  if (isSend) RCCL_TELEMETRY_DEV_OP_(devIdx, tx_bytes, bytes, (rcclTelemetryBytes)(devIdx, isSend, bytes));
  else RCCL_TELEMETRY_DEV_OP_(devIdx, rx_bytes, bytes, (rcclTelemetryBytes)(devIdx, isSend, bytes));
}
static inline void rcclTelemetryCqError_inline_(int devIdx) {
  RCCL_TELEMETRY_DEV_OP_(devIdx, cq_errors, 1, (rcclTelemetryCqError)(devIdx));
}
static inline void rcclTelemetryAddCqPolls_inline_(int devIdx, uint64_t polls) {
  RCCL_TELEMETRY_DEV_OP_(devIdx, cq_polls, polls, (rcclTelemetryAddCqPolls)(devIdx, polls));
}
/* The WQE-size bucket: 0 for 0 bytes, else 1 + ceil(log2(bytes)). */
static inline unsigned rcclTelemetrySizeBucket_(uint64_t bytes) {
  return bytes <= 1 ? RCCL_TELEMETRY_AS_(unsigned, bytes) : 65u - RCCL_TELEMETRY_AS_(unsigned, __builtin_clzll(bytes - 1));
}
static inline void rcclTelemetryWqeSize_inline_(int devIdx, uint64_t bytes) {
  RCCL_TELEMETRY_DEV_OP_(devIdx, sizes[rcclTelemetrySizeBucket_(bytes)], 1, (rcclTelemetryWqeSize)(devIdx, bytes));
}

/* The negotiation: the calls that start telemetry or hand out what the hooks dereference   */
/* go through the library only when its layout is this header's.                          */
static inline int rcclTelemetryLayoutOk_(void) {
  return RCCL_TELEMETRY_LD_(RCCL_TELEMETRY_HOT_.layout) == RCCL_TELEMETRY_AS_(uint64_t, RCCL_TELEMETRY_INLINE_LAYOUT);
}
static inline int rcclTelemetryRefuse_(void) {
#if defined(RCCL_TELEMETRY_DLOPEN)
  return rcclTelemetryDlInlineMismatch_(RCCL_TELEMETRY_INLINE_LAYOUT);
#else
  return rcclTelemetryInlineMismatch_ ? rcclTelemetryInlineMismatch_(RCCL_TELEMETRY_INLINE_LAYOUT) : -1;
#endif
}
static inline int rcclTelemetryInit_inline_(void) {
#if defined(RCCL_TELEMETRY_DLOPEN)
  if (!rcclTelemetryDlInitLoad_()) return RCCL_TELEMETRY_INIT_OFF; /* no library: said once */
#endif
  return rcclTelemetryLayoutOk_() ? (rcclTelemetryInit)() : rcclTelemetryRefuse_();
}
static inline int rcclTelemetryRegisterDevice_inline_(int deviceId, const char *roceDevice, const char *transport) {
  if (rcclTelemetryLayoutOk_()) return (rcclTelemetryRegisterDevice)(deviceId, roceDevice, transport);
  (void)rcclTelemetryRefuse_();
  return -1;
}
static inline RcclQpStats *rcclTelemetryResolveQp_inline_(int devIdx, int chIdx, int qpIdx) {
  if (rcclTelemetryLayoutOk_()) return (rcclTelemetryResolveQp)(devIdx, chIdx, qpIdx);
  (void)rcclTelemetryRefuse_();
  return RCCL_TELEMETRY_NULL_;
}
static inline RcclChannelStats *rcclTelemetryResolveChannel_inline_(int devIdx, int chIdx) {
  if (rcclTelemetryLayoutOk_()) return (rcclTelemetryResolveChannel)(devIdx, chIdx);
  (void)rcclTelemetryRefuse_();
  return RCCL_TELEMETRY_NULL_;
}
static inline rcclTelemetryComm_t *rcclTelemetryCommInit_inline_(uint64_t commHash, int rank, int nRanks) {
  if (rcclTelemetryLayoutOk_()) return (rcclTelemetryCommInit)(commHash, rank, nRanks);
  (void)rcclTelemetryRefuse_();
  return RCCL_TELEMETRY_NULL_;
}
static inline RcclQpStats *rcclTelemetryCommResolveQp_inline_(rcclTelemetryComm_t *comm, int devIdx, int chIdx, int qpIdx) {
  if (rcclTelemetryLayoutOk_()) return (rcclTelemetryCommResolveQp)(comm, devIdx, chIdx, qpIdx);
  (void)rcclTelemetryRefuse_();
  return RCCL_TELEMETRY_NULL_;
}
static inline RcclChannelStats *rcclTelemetryCommResolveChannel_inline_(rcclTelemetryComm_t *comm, int devIdx, int chIdx) {
  if (rcclTelemetryLayoutOk_()) return (rcclTelemetryCommResolveChannel)(comm, devIdx, chIdx);
  (void)rcclTelemetryRefuse_();
  return RCCL_TELEMETRY_NULL_;
}

/* A function that hands out a handle (or starts telemetry) has a wrapper above and one     */
/* line here.                                                                               */
#define rcclTelemetryInit() rcclTelemetryInit_inline_()
#define rcclTelemetryRegisterDevice(deviceId, roceDevice, transport) \
  rcclTelemetryRegisterDevice_inline_((deviceId), (roceDevice), (transport))
#define rcclTelemetryResolveQp(devIdx, chIdx, qpIdx) rcclTelemetryResolveQp_inline_((devIdx), (chIdx), (qpIdx))
#define rcclTelemetryResolveChannel(devIdx, chIdx) rcclTelemetryResolveChannel_inline_((devIdx), (chIdx))
#define rcclTelemetryCommInit(commHash, rank, nRanks) rcclTelemetryCommInit_inline_((commHash), (rank), (nRanks))
#define rcclTelemetryCommResolveQp(comm, devIdx, chIdx, qpIdx) \
  rcclTelemetryCommResolveQp_inline_((comm), (devIdx), (chIdx), (qpIdx))
#define rcclTelemetryCommResolveChannel(comm, devIdx, chIdx) \
  rcclTelemetryCommResolveChannel_inline_((comm), (devIdx), (chIdx))
#define rcclTelemetryOn() rcclTelemetryOn_inline_()
#define rcclTelemetryPostTs(qp) rcclTelemetryPostTs_inline_(qp)
#define rcclTelemetryQpSendPosted(qp, withImm) rcclTelemetryQpSendPosted_inline_((qp), (withImm))
#define rcclTelemetryQpRecvPosted(qp) rcclTelemetryQpRecvPosted_inline_(qp)
#define rcclTelemetryQpCtsSent(qp, signalled) rcclTelemetryQpCtsSent_inline_((qp), (signalled))
#define rcclTelemetryQpSlotMiss(qp) rcclTelemetryQpSlotMiss_inline_(qp)
#define rcclTelemetryQpWqeComplete(qp, postTs) rcclTelemetryQpWqeComplete_inline_((qp), RCCL_TELEMETRY_TOKEN_(postTs))
#define rcclTelemetryQpWqeCompleteAt(qp, postTs, nowTs) \
  rcclTelemetryQpWqeCompleteAt_inline_((qp), RCCL_TELEMETRY_TOKEN_(postTs), RCCL_TELEMETRY_TOKEN_(nowTs))
#define rcclTelemetryPollTs() rcclTelemetryNow_()
#define rcclTelemetryChRequestCompleted(ch) rcclTelemetryChRequestCompleted_inline_(ch)
#define rcclTelemetryBytes(devIdx, isSend, bytes) rcclTelemetryBytes_inline_((devIdx), (isSend), (bytes))
#define rcclTelemetryCqError(devIdx) rcclTelemetryCqError_inline_(devIdx)
#define rcclTelemetryAddCqPolls(devIdx, polls) rcclTelemetryAddCqPolls_inline_((devIdx), (polls))
#define rcclTelemetryWqeSize(devIdx, bytes) rcclTelemetryWqeSize_inline_((devIdx), (bytes))
#else
/* The functions that take tokens, called with the token converted explicitly (as above). */
#define rcclTelemetryQpWqeComplete(qp, postTs) (rcclTelemetryQpWqeComplete)((qp), RCCL_TELEMETRY_TOKEN_(postTs))
#define rcclTelemetryQpWqeCompleteAt(qp, postTs, nowTs) \
  (rcclTelemetryQpWqeCompleteAt)((qp), RCCL_TELEMETRY_TOKEN_(postTs), RCCL_TELEMETRY_TOKEN_(nowTs))
#endif /* inline hooks */
#define rcclTelemetryWqeComplete(devIdx, chIdx, qpIdx, postTs) \
  (rcclTelemetryWqeComplete)((devIdx), (chIdx), (qpIdx), RCCL_TELEMETRY_TOKEN_(postTs))
#endif /* RCCL_TELEMETRY_INLINE_H */
