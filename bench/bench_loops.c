/*
 * bench_loops.c -- the hook sets (none, library, reference) and the stand-in transport loop
 * (bench_loop.h) instantiated once per mix of hook families: loop_none, loop_lib, loop_ref,
 * one loop per family for the breakdown, the guards alone, and the library with one clock
 * read per poll. Each loop is noinline and called through a LoopFn pointer.
 */

#include "bench.h"

/* Hook sets: N_ none, L_ the library through its installed header, R_ the reference (inline),
 * LA_ the library's latency family with one clock read per poll (PollTs + QpWqeCompleteAt). */
#define N_ON(c) 1
#define N_POLLED(c) ((void)0)
#define N_POLLTS(c) ((int64_t)0)
#define N_POSTTS(c, j) ((int64_t)0)
#define N_SEND(c, j, imm) ((void)0)
#define N_SIZE(c, b) ((void)0)
#define N_COMPLETE(c, j, ts, now) ((void)(j))
#define N_CTS(c, s) ((void)0)
#define N_BYTES(c, b) ((void)0)
#define N_REQDONE(c) ((void)0)

#define L_ON(c) rcclTelemetryOn()
#define L_POLLED(c) ((c)->polls++)
#define L_POLLTS(c) ((int64_t)0)
#define L_POSTTS(c, j) rcclTelemetryPostTs((c)->lqp[j])
#define L_SEND(c, j, imm) rcclTelemetryQpSendPosted((c)->lqp[j], (imm))
#define L_SIZE(c, b) rcclTelemetryWqeSize((c)->dev, (b))
#define L_COMPLETE(c, j, ts, now) rcclTelemetryQpWqeComplete((c)->lqp[j], (ts))
#define L_CTS(c, s) rcclTelemetryQpCtsSent((c)->lcts, (s))
#define L_BYTES(c, b) rcclTelemetryBytes((c)->dev, 1, (b))
#define L_REQDONE(c) rcclTelemetryChRequestCompleted((c)->lch)

#define LA_POSTTS(c, j) rcclTelemetryPostTs((c)->lqp[j])
#define LA_POLLTS(c) ((int64_t)0)
#define LA_COMPLETE(c, j, ts, now)                                                   \
  do {                                                                               \
    int64_t ts_ = (ts);                                                              \
    if (ts_ > RCCL_TELEMETRY_TS_UNSAMPLED && (now) == 0) (now) = rcclTelemetryPollTs(); \
    rcclTelemetryQpWqeCompleteAt((c)->lqp[j], ts_, (now));                           \
  } while (0)

#define R_ON(c) refTelemetryEnabled
#define R_POLLED(c) ((c)->polls++)
#define R_POLLTS(c) ((int64_t)0)
#define R_POSTTS(c, j) refPostTs((c)->rqp[j])
#define R_SEND(c, j, imm) refQpSendPosted((c)->rqp[j], (imm))
#define R_SIZE(c, b) refWqeSize((c)->dev, (b))
#define R_COMPLETE(c, j, ts, now) refQpWqeComplete((c)->rqp[j], (ts))
#define R_CTS(c, s) refQpCtsSent((c)->rcts, (s))
#define R_BYTES(c, b) refBytes((c)->dev, 1, (b))
#define R_REQDONE(c) refChRequestCompleted((c)->rch)

#ifdef BENCH_LOOPS_DLOPEN
/* bench_loop_dlopen.c: the whole library mix alone, through the header's loader, for the
 * row "dlopen - linked"; its Init loads the library (already loaded: the same one). */
#define LOOP_NAME loop_lib_dl
#define FAM_LAT L
#define FAM_SEND L
#define FAM_SIZE L
#define FAM_REQ L
#define FAM_GUARD L
#include "bench_loop.h"
int loop_lib_dl_init(void) { return rcclTelemetryInit(); }
#elif defined(BENCH_LOOPS_PREV)
/* bench_loop_prev.c: the whole library mix alone, compiled against the previous release's
 * header (inline hooks that take their layout on trust) for the negotiation's cost row. */
#define LOOP_NAME loop_lib_prev
#define FAM_LAT L
#define FAM_SEND L
#define FAM_SIZE L
#define FAM_REQ L
#define FAM_GUARD L
#include "bench_loop.h"
#else
/*
 * Each loop picks a hook set (N, L or R) per hook family: FAM_LAT = PostTs + QpWqeComplete
 * (the latency family; the completion hook needs the token), FAM_SEND = QpSendPosted,
 * FAM_SIZE = WqeSize, FAM_REQ = Bytes + QpCtsSent + ChRequestCompleted (once per request),
 * FAM_GUARD = RCCL's rcclTelemetryOn() guards (per request before PostTs, per completion, per
 * poll call, with the poll counter they protect). The whole mix, as RCCL calls it: */
#define LOOP_NAME loop_none
#define FAM_LAT N
#define FAM_SEND N
#define FAM_SIZE N
#define FAM_REQ N
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_lib
#define FAM_LAT L
#define FAM_SEND L
#define FAM_SIZE L
#define FAM_REQ L
#define FAM_GUARD L
#include "bench_loop.h"
#define LOOP_NAME loop_ref
#define FAM_LAT R
#define FAM_SEND R
#define FAM_SIZE R
#define FAM_REQ R
#define FAM_GUARD R
#include "bench_loop.h"

/* One family at a time, for the per-hook breakdown. */
#define LOOP_NAME loop_lib_lat
#define FAM_LAT L
#define FAM_SEND N
#define FAM_SIZE N
#define FAM_REQ N
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_lib_send
#define FAM_LAT N
#define FAM_SEND L
#define FAM_SIZE N
#define FAM_REQ N
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_lib_size
#define FAM_LAT N
#define FAM_SEND N
#define FAM_SIZE L
#define FAM_REQ N
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_lib_req
#define FAM_LAT N
#define FAM_SEND N
#define FAM_SIZE N
#define FAM_REQ L
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_ref_lat
#define FAM_LAT R
#define FAM_SEND N
#define FAM_SIZE N
#define FAM_REQ N
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_ref_send
#define FAM_LAT N
#define FAM_SEND R
#define FAM_SIZE N
#define FAM_REQ N
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_ref_size
#define FAM_LAT N
#define FAM_SEND N
#define FAM_SIZE R
#define FAM_REQ N
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_ref_req
#define FAM_LAT N
#define FAM_SEND N
#define FAM_SIZE N
#define FAM_REQ R
#define FAM_GUARD N
#include "bench_loop.h"
/* The guards alone: the loads and branches RCCL's call sites add around the hooks. */
#define LOOP_NAME loop_lib_guard
#define FAM_LAT N
#define FAM_SEND N
#define FAM_SIZE N
#define FAM_REQ N
#define FAM_GUARD L
#include "bench_loop.h"
#define LOOP_NAME loop_ref_guard
#define FAM_LAT N
#define FAM_SEND N
#define FAM_SIZE N
#define FAM_REQ N
#define FAM_GUARD R
#include "bench_loop.h"
/* The whole library mix with one clock read per poll (PollTs + QpWqeCompleteAt). */
#define LOOP_NAME loop_lib_at
#define FAM_LAT LA
#define FAM_SEND L
#define FAM_SIZE L
#define FAM_REQ L
#define FAM_GUARD L
#include "bench_loop.h"

const char* const kVariant[V_COUNT] = {"none", "lib", "ref"};
const LoopFn kLoop[V_COUNT] = {loop_none, loop_lib, loop_ref};
#endif
