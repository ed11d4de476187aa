/*
 * complete_at.c: rcclTelemetryQpWqeCompleteAt (one clock read per poll) against the per-WQE
 * rcclTelemetryQpWqeComplete, with constructed tokens.
 *
 * Run with RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_CLOCK=monotonic (tokens are then ns, so every
 * bucket is known exactly), the default 5 buckets of 30000 ns. Device 0 takes the inline
 * CompleteAt (the header's, when inline hooks are on), device 1 the exported function, both
 * for deltas on and beside every bucket edge; their histograms, min and max must equal the
 * expected ones exactly. Device 2 takes mid-bucket deltas through the per-WQE form (and one
 * through CompleteAt with nowTs 0, which reads the clock itself): the same buckets, since a
 * few microseconds of real time cannot move a mid-bucket delta across an edge.
 * Prints "complete_at: ok" and exits 0 on success.
 */
#include "rccl_telemetry.h"

#include <stdio.h>
#include <string.h>

#define NE 11
#define NM 6
static const int64_t edges[NE] = {0, 1, 29999, 30000, 30001, 59999, 60000, 119999, 120000, 120001, 1000000000};
static const int64_t mids[NM] = {15000, 45000, 75000, 105000, 135000, 5000000};

static int bucket(int64_t d) { return d / 30000 > 4 ? 4 : (int)(d / 30000); }

static int fail(const char *what, int dev) {
  fprintf(stderr, "complete_at: FAIL: %s (device %d)\n", what, dev);
  return 1;
}

int main(void) {
  if (rcclTelemetryInit() != 0 || !rcclTelemetryOn()) return fail("telemetry is not on: run with RCCL_TELEMETRY_ENABLE=1", -1);
  RcclQpStats *qp[3];
  for (int d = 0; d < 3; d++) {
    char name[8];
    int slots = 0;
    snprintf(name, sizeof name, "dev%d", d);
    if (rcclTelemetryRegisterDevice(d, name, "IB-CAST") != d) return fail("RegisterDevice", d);
    if (rcclTelemetrySetupChannel(d, 0, 1, &slots) < 0 || slots != 1) return fail("SetupChannel", d);
    qp[d] = rcclTelemetryResolveQp(d, 0, 0);
    if (!qp[d]) return fail("ResolveQp", d);
  }

  uint64_t want[2][5], got;
  memset(want, 0, sizeof want);
  int64_t now = rcclTelemetryPollTs(), later = rcclTelemetryPollTs();
  if (now <= RCCL_TELEMETRY_TS_UNSAMPLED || later < now) return fail("PollTs is no clock reading", -1);
  for (int i = 0; i < NE + NM; i++) {
    int64_t delta = i < NE ? edges[i] : mids[i - NE];
    rcclTelemetryQpWqeCompleteAt(qp[0], now - delta, now);
    (rcclTelemetryQpWqeCompleteAt)(qp[1], now - delta, now);
    want[0][bucket(delta)]++;
  }
  for (int i = 0; i < NM; i++) {
    rcclTelemetryQpWqeComplete(qp[2], rcclTelemetryPollTs() - mids[i]);
    want[1][bucket(mids[i])]++;
  }
  rcclTelemetryQpWqeCompleteAt(qp[2], rcclTelemetryPollTs() - mids[0], 0);
  want[1][bucket(mids[0])]++;
  /* Unsampled and unmatched tokens count as completions and nothing else, in either form. */
  rcclTelemetryQpWqeCompleteAt(qp[0], RCCL_TELEMETRY_TS_UNSAMPLED, now);
  rcclTelemetryQpWqeCompleteAt(qp[1], 0, now);

  RcclTelemetrySwSnapshot s[3];
  memset(s, 0, sizeof s);
  if (rcclTelemetrySwCapture(s, 3) != 3) return fail("SwCapture", -1);
  for (int d = 0; d < 3; d++) {
    const uint64_t *w = want[d == 2];
    uint64_t total = 0;
    for (int b = 0; b < 5; b++) {
      got = s[d].wqe_completion_histogram[b];
      if (got != w[b]) {
        fprintf(stderr, "complete_at: bucket %d: %llu, expected %llu\n", b, (unsigned long long)got, (unsigned long long)w[b]);
        return fail("histogram", d);
      }
      total += w[b];
    }
    uint64_t rcvd = total + (d < 2 ? 1 : 0);
    if (s[d].wqe_rcvd != rcvd) return fail("wqe_rcvd", d);
    if (s[d].wqe_completed != total + (d == 0 ? 1 : 0)) return fail("wqe_completed", d);
  }
  for (int d = 0; d < 2; d++)
    if (s[d].wqe_completion_ns_min != 0 || s[d].wqe_completion_ns_max != 1000000000) return fail("min/max", d);
  if (s[2].wqe_completion_ns_min < 15000 || s[2].wqe_completion_ns_max < 5000000) return fail("min/max", 2);
  printf("complete_at: ok (%s)\n",
#ifdef RCCL_TELEMETRY_INLINE_HOOKS
         "inline hooks"
#else
         "called hooks"
#endif
  );
  return 0;
}
