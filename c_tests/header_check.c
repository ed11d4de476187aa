/*
 * Compiles the generated header exactly as RCCL includes it, as C11 and as C++14/17 with
 * -Wall -Wextra -Werror -pedantic, and checks at run time that every entry point links and
 * is a safe no-op while telemetry is off (this program never enables it).
 */
#include "rccl_telemetry.h"
#include "rccl_telemetry.h" /* included twice on purpose: the guards must hold */

#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "proc_threads.h"


#ifdef __cplusplus
static_assert(RCCL_TELEMETRY_MAX_DEVS == 32, "MAX_DEVS");
static_assert(RCCL_TELEMETRY_MAX_CHANNELS == 512, "MAX_CHANNELS");
static_assert(RCCL_TELEMETRY_HISTOGRAM_SIZE == 16, "HISTOGRAM_SIZE");
static_assert(RCCL_TELEMETRY_TS_UNSAMPLED == 1, "TS_UNSAMPLED");
#else
_Static_assert(RCCL_TELEMETRY_MAX_DEVS == 32, "MAX_DEVS");
_Static_assert(RCCL_TELEMETRY_MAX_CHANNELS == 512, "MAX_CHANNELS");
_Static_assert(RCCL_TELEMETRY_HISTOGRAM_SIZE == 16, "HISTOGRAM_SIZE");
_Static_assert(RCCL_TELEMETRY_TS_UNSAMPLED == 1, "TS_UNSAMPLED");
#endif

/* The snapshot's field order is part of the ABI. */
#define OFF(f) offsetof(RcclTelemetrySwSnapshot, f)
typedef char order_check[(OFF(device_id) == 0 && OFF(tx_bytes) == 8 && OFF(rx_bytes) == 16 &&
                          OFF(num_cq_errors) == 24 && OFF(wqe_sent) == 32 && OFF(recv_wqe) == 40 &&
                          OFF(wqe_rcvd) == 48 && OFF(wqe_completed) == 56 && OFF(wqe_sampled) == 64 &&
                          OFF(wqe_completion_ns_min) == 72 && OFF(wqe_completion_ns_max) == 80 &&
                          OFF(wqe_completion_histogram) == 88 && sizeof(RcclTelemetrySwSnapshot) == 88 + 16 * 8)
                             ? 1 : -1];

/* So is the QP settings struct's: `size` first, then the fields a caller's size covers. */
#define QOFF(f) offsetof(rcclTelemetryQpAttrs_t, f)
typedef char attrs_check[(QOFF(size) == 0 && QOFF(pathMtu) == sizeof(size_t) && QOFF(trafficClass) == QOFF(pathMtu) + 4 &&
                          QOFF(serviceLevel) == QOFF(trafficClass) + 1 && QOFF(hopLimit) == QOFF(trafficClass) + 4 &&
                          QOFF(timeout) == QOFF(trafficClass) + 5 && QOFF(maxDestRdAtomic) == QOFF(trafficClass) + 10)
                             ? 1 : -1];

int main(void) {
  int fails = 0;
  int n = 5;
  RcclTelemetrySwSnapshot snap[2];
  order_check oc;
  attrs_check ac;
  (void)oc;
  (void)ac;
  int threads0 = thread_count();
  size_t heap0 = mallinfo2().uordblks;
  fails += rcclTelemetryInit() != RCCL_TELEMETRY_INIT_OFF; /* run without RCCL_TELEMETRY_ENABLE */
  fails += rcclTelemetryOn() != 0;
  fails += rcclTelemetryRegisterDevice(0, "mlx5_0", "IB-CAST") != -1;
  fails += rcclTelemetrySetupChannel(0, 0, 4, &n) != -1 || n != 0;
  rcclTelemetrySetQpRole(0, 0, 0, 1);
  rcclTelemetryMarkChannelsUnknown(0);
  RcclQpStats *qp = rcclTelemetryResolveQp(0, 0, 0);
  RcclChannelStats *ch = rcclTelemetryResolveChannel(0, 0);
  fails += qp != NULL || ch != NULL;
  int64_t ts = rcclTelemetryPostTs(qp);
  fails += ts != 0;
  rcclTelemetryQpSendPosted(qp, 1);
  rcclTelemetryQpRecvPosted(qp);
  rcclTelemetryQpCtsSent(qp, 0);
  rcclTelemetryQpSlotMiss(qp);
  rcclTelemetryQpWqeComplete(qp, ts);
  rcclTelemetryChRequestCompleted(ch);
  rcclTelemetryBytes(0, 1, 4096);
  rcclTelemetryCqError(0);
  rcclTelemetryAddCqPolls(0, 3);
  rcclTelemetryWqeSize(0, 4096);
  rcclTelemetryWqeComplete(0, 0, 0, ts);
  rcclTelemetryWqePosted(0, 0, 0, 1);
  rcclTelemetryRequestCompleted(0, 0);
  rcclTelemetrySlotMiss(0, 0, 0);
  rcclTelemetryCtsSent(0, 0, 0, 1);
  rcclTelemetryWriteWqe(0, 0, 0, 0);
  { unsigned char gid[16] = {0xfe, 0x80}; rcclTelemetryQpSetPeer(qp, 17, gid, 0, 18, gid, 0); }
  {
    rcclTelemetryQpAttrs_t a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.trafficClass = 106;
    fails += rcclTelemetryQpSetAttrs(qp, &a) != 0;
    a.size = sizeof a.size; /* below the first field: refused even while off */
    fails += rcclTelemetryQpSetAttrs(qp, &a) != RCCL_TELEMETRY_QP_ATTRS_BAD_SIZE;
    fails += (rcclTelemetryQpSetAttrs)(NULL, NULL) != RCCL_TELEMETRY_QP_ATTRS_BAD_SIZE;
  }
  fails += rcclTelemetryPostTsIdx(0, 0, 0) != 0;
  fails += rcclTelemetrySwCapture(snap, 2) != -1;
  fails += rcclTelemetryFlush() != 0;
  /* The functions themselves, not only the inline guards, take NULL. */
  fails += (rcclTelemetryPostTs)(NULL) != 0;
  (rcclTelemetryQpSendPosted)(NULL, 0);
  (rcclTelemetryQpWqeComplete)(NULL, 5);
  (rcclTelemetryChRequestCompleted)(NULL);
  (rcclTelemetryQpSetPeer)(NULL, 1, NULL, 0, 2, NULL, 0);
  (rcclTelemetryBytes)(-1, 0, 1);
#ifdef RCCL_TELEMETRY_INLINE_HOOKS
  /* Disabled: no device publishes a stripe table, so the inline device forms do nothing. */
  for (int d = 0; d < RCCL_TELEMETRY_MAX_DEVS; d++) fails += rcclTelemetryHotV3.stripes[d] != NULL;
#endif
  /* Disabled: no thread, and nothing kept on the heap beyond a few bytes. */
  size_t heap1 = mallinfo2().uordblks;
  if (thread_count() != threads0) { fails++; fprintf(stderr, "header_check: a thread was started\n"); }
  if (heap1 > heap0 + 256) { fails++; fprintf(stderr, "header_check: %zu bytes kept on the heap\n", heap1 - heap0); }
  printf("header_check: %s\n", fails ? "FAILED" : "ok");
  return fails != 0;
}
