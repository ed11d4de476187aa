/*
 * c_tests/abi/consumer.c: a program written against the C API of release 0.1.0 (the calls
 * RCCL's IB-CAST transport makes, through the inline hooks), built by `make abi-test` three
 * ways: against 0.1.0's header (c_tests/abi/0.1.0/) and this library, as a program rebuilt
 * from old sources would be; against 0.1.0's header and an ABI stub of 0.1.0's unversioned
 * library, then run with this one, as a binary built before the upgrade would be; and against
 * today's header with another inline layout number, as a program whose header does not match
 * the running library.
 *
 * Usage: consumer on    counts through every hook family and checks the library's live
 *                       totals (rcclTelemetrySwCapture) against its own tally, then Flush
 *        consumer off   telemetry must stay off: Init -1 when asked for (else 0), On 0,
 *                       no handle, no device, SwCapture -1, and the data path harmless
 * Exit 0 when everything held; one line on stdout either way.
 */
#include "rccl_telemetry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QPS 4
#define REQS 1000

static int fails;
#define CHECK(cond, ...)                            \
  do {                                              \
    if (!(cond)) {                                  \
      fails++;                                      \
      fprintf(stderr, "consumer: " __VA_ARGS__);    \
      fputc('\n', stderr);                          \
    }                                               \
  } while (0)

int main(int argc, char **argv) {
  int want_on = argc > 1 && strcmp(argv[1], "on") == 0;
  const char *enable = getenv("RCCL_TELEMETRY_ENABLE");
  int asked = enable && strcmp(enable, "1") == 0;
#ifdef RCCL_TELEMETRY_VERSION_CODE
  CHECK(rcclTelemetryGetVersion() == RCCL_TELEMETRY_VERSION_CODE, "library version %d, header %d",
        rcclTelemetryGetVersion(), RCCL_TELEMETRY_VERSION_CODE);
#endif
  int rc = rcclTelemetryInit();
  CHECK(rc == ((want_on || !asked) ? 0 : -1), "Init returned %d", rc);
  CHECK(rcclTelemetryOn() == want_on, "On() is %d", rcclTelemetryOn());
  int dev = rcclTelemetryRegisterDevice(0, "mlx5_0", "IB-CAST");
  CHECK(dev == (want_on ? 0 : -1), "RegisterDevice returned %d", dev);
  int n = 0;
  int first = rcclTelemetrySetupChannel(0, 3, QPS, &n);
  CHECK(want_on ? (first >= 0 && n == QPS) : (first == -1 && n == 0), "SetupChannel %d, %d slots", first, n);
  RcclQpStats *qp[QPS];
  for (int q = 0; q < QPS; q++) {
    rcclTelemetrySetQpRole(0, 3, first + q, 1);
    qp[q] = rcclTelemetryResolveQp(0, 3, first + q);
    CHECK((qp[q] != NULL) == want_on, "ResolveQp %d gave %p", q, (void *)qp[q]);
  }
  RcclChannelStats *ch = rcclTelemetryResolveChannel(0, 3);
  CHECK((ch != NULL) == want_on, "ResolveChannel gave %p", (void *)ch);

  /* The transport's data path: posts striped over the QPs, completions with their tokens. */
  uint64_t sent = 0, completed = 0, bytes = 0;
  for (int r = 0; r < REQS; r++) {
    int64_t ts[QPS];
    for (int q = 0; q < QPS; q++) {
      ts[q] = rcclTelemetryOn() ? rcclTelemetryPostTs(qp[q]) : 0;
      rcclTelemetryQpSendPosted(qp[q], q == QPS - 1);
      rcclTelemetryWqeSize(0, 4096);
      sent++;
    }
    rcclTelemetryQpCtsSent(qp[0], (r & 7) == 0);
    rcclTelemetryBytes(0, 1, 4 * 4096);
    bytes += 4 * 4096;
    for (int q = 0; q < QPS; q++) {
      if (rcclTelemetryOn()) rcclTelemetryQpWqeComplete(qp[q], ts[q]);
      completed++;
    }
    rcclTelemetryChRequestCompleted(ch);
    rcclTelemetryAddCqPolls(0, 1);
  }

  RcclTelemetrySwSnapshot s[2];
  int got = rcclTelemetrySwCapture(s, 2);
  if (want_on) {
    CHECK(got == 1, "SwCapture returned %d", got);
    if (got == 1) {
      CHECK(s[0].wqe_sent == sent, "wqe_sent %llu, posted %llu", (unsigned long long)s[0].wqe_sent,
            (unsigned long long)sent);
      CHECK(s[0].wqe_completed == completed, "wqe_completed %llu, completed %llu",
            (unsigned long long)s[0].wqe_completed, (unsigned long long)completed);
      CHECK(s[0].wqe_sampled == completed, "wqe_sampled %llu", (unsigned long long)s[0].wqe_sampled);
      CHECK(s[0].tx_bytes == bytes, "tx_bytes %llu, sent %llu", (unsigned long long)s[0].tx_bytes,
            (unsigned long long)bytes);
    }
    CHECK(rcclTelemetryFlush() == 0, "Flush failed");
  } else {
    CHECK(got == -1, "SwCapture returned %d", got);
    CHECK(rcclTelemetryFlush() == 0, "Flush failed");
  }
  printf("consumer: %s (%s)\n", fails ? "FAILED" : "ok", want_on ? "on" : "off");
  return fails ? 1 : 0;
}
