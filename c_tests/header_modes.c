/*
 * header_modes.c: the entry points RCCL calls, written once against the installed header and
 * built each way a project can take it (the Makefile's dlopen block): linked with the library
 * (build/header_modes), with RCCL_TELEMETRY_STUBS and no library (build/header_modes_stubs),
 * and with RCCL_TELEMETRY_DLOPEN, not linked (build/header_modes_dlopen), which runs with the
 * library absent, present, or handing out an older or newer table.
 *
 * Usage: header_modes on|off|older|v1 [--logger] [--enable-param]
 *   on     Init starts telemetry; every call works; the live totals equal this program's tally.
 *   off    Init returns RCCL_TELEMETRY_INIT_OFF; every call is a no-op with its off result.
 *   older  the library's table ends before the communicator calls: those are no-ops (CommInit
 *          NULL, GetVersion 0), everything before them counts as in `on`.
 *   v1     the library's table is version 1, without rcclTelemetrySetParam: that call does
 *          nothing (0), everything else works as in `on`.
 * Before Init it sets RCCL_TELEMETRY_SIGNALS to 0 with rcclTelemetrySetParam, and checks after
 * Init that SIGTERM has a handler exactly when that did not take (no library, a table without
 * the entry) or the environment says otherwise; a SetParam after Init is refused (-1) where the
 * library takes parameters.
 *   --logger  a logger is set before Init; it prints each line on stdout as "logger: LEVEL: LINE".
 *   --enable-param  RCCL_TELEMETRY_ENABLE=1 is given with rcclTelemetrySetParam before Init,
 *          as RCCL passes its own parameters (the program's first call into the library).
 * Prints one line of the counts ("header_modes: counts ...") and exits 0 when every check holds.
 */
#define _POSIX_C_SOURCE 200809L
#include "rccl_telemetry.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int fails;
#define CHECK(c)                                                                  \
  do {                                                                            \
    if (!(c)) {                                                                   \
      fprintf(stderr, "header_modes: FAIL at line %d: %s\n", __LINE__, #c);       \
      fails++;                                                                    \
    }                                                                             \
  } while (0)

static void logger(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  (void)flags;
  (void)file;
  (void)line;
  va_start(ap, fmt);
  printf("logger: %d: ", level);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
}

int main(int argc, char **argv) {
  const char *expect = argc > 1 ? argv[1] : "on";
  const int on = strcmp(expect, "off") != 0, comms = strcmp(expect, "on") == 0 || strcmp(expect, "v1") == 0;
  const int params = strcmp(expect, "on") == 0;
  int enable_param = 0;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--logger") == 0) rcclTelemetrySetLogger(logger);
    if (strcmp(argv[i], "--enable-param") == 0) enable_param = 1;
  }
  if (enable_param) CHECK(rcclTelemetrySetParam("RCCL_TELEMETRY_ENABLE", "1") == 0);

  /* RCCL's defaults before Init: no signal handlers, unless the environment asks for them. */
  CHECK(rcclTelemetrySetParam("RCCL_TELEMETRY_SIGNALS", "0") == 0);

  CHECK(rcclTelemetryOn() == 0 && (rcclTelemetryOn)() == 0);
  CHECK(rcclTelemetryInit() == (on ? RCCL_TELEMETRY_INIT_STARTED : RCCL_TELEMETRY_INIT_OFF));
  CHECK(rcclTelemetryInit() == (on ? RCCL_TELEMETRY_INIT_STARTED : RCCL_TELEMETRY_INIT_OFF));
  CHECK(rcclTelemetryOn() == on && (rcclTelemetryOn)() == on);
  {
    const char *env = getenv("RCCL_TELEMETRY_SIGNALS");
    const int handled = on && (env ? strcmp(env, "0") != 0 : !params);
    struct sigaction sa;
    CHECK(sigaction(SIGTERM, NULL, &sa) == 0);
    CHECK((sa.sa_handler != SIG_DFL) == handled);
    /* After Init the configuration is fixed. */
    const int late = rcclTelemetrySetParam("RCCL_TELEMETRY_SIGNALS", "1");
    CHECK(!on || late == (params ? -1 : 0));
    CHECK(sigaction(SIGTERM, NULL, &sa) == 0 && (sa.sa_handler != SIG_DFL) == handled);
  }
  CHECK(rcclTelemetryGetVersion() == (comms ? RCCL_TELEMETRY_VERSION_CODE : 0));

  CHECK(rcclTelemetryRegisterDevice(0, "mlx5_0", "IB-CAST") == (on ? 0 : -1));
  int n = 7;
  CHECK(rcclTelemetrySetupChannel(0, 1, 2, &n) == (on ? 0 : -1) && n == (on ? 2 : 0));
  RcclQpStats *qp[2];
  for (int q = 0; q < 2; q++) {
    rcclTelemetrySetQpRole(0, 1, q, 1);
    qp[q] = rcclTelemetryResolveQp(0, 1, q);
    CHECK((qp[q] != NULL) == on);
  }
  RcclChannelStats *ch = rcclTelemetryResolveChannel(0, 1);
  CHECK((ch != NULL) == on);
  rcclTelemetryMarkChannelsUnknown(5);

  rcclTelemetryComm_t *comm = rcclTelemetryCommInit(0x5eedull, 0, 1);
  CHECK((comm != NULL) == comms);
  n = 7;
  CHECK(rcclTelemetryCommSetupChannel(comm, 0, 1, 1, &n) == (comms ? 0 : -1) && n == (comms ? 1 : 0));
  rcclTelemetryCommSetQpRole(comm, 0, 1, 0, 1);
  RcclQpStats *cqp = rcclTelemetryCommResolveQp(comm, 0, 1, 0);
  RcclChannelStats *cch = rcclTelemetryCommResolveChannel(comm, 0, 1);
  CHECK((cqp != NULL) == comms && (cch != NULL) == comms);

  unsigned char gid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  rcclTelemetryQpSetPeer(qp[0], 0x111, gid, 0, 0x222, gid, 0);

  uint64_t sent = 0, recv = 0, rcvd = 0, tx = 0, errors = 0;
  for (int r = 0; r < 1000; r++) {
    RcclQpStats *h = r % 4 == 3 ? cqp : qp[r % 2];
    int64_t ts = rcclTelemetryOn() ? rcclTelemetryPostTs(h) : 0;
    rcclTelemetryQpSendPosted(h, r % 3 == 0);
    rcclTelemetryWqeSize(0, 4096);
    rcclTelemetryBytes(0, 1, 4096);
    rcclTelemetryQpRecvPosted(h);
    if (rcclTelemetryOn()) {
      int64_t now = rcclTelemetryPollTs();
      if (r % 2) rcclTelemetryQpWqeCompleteAt(h, ts, now);
      else rcclTelemetryQpWqeComplete(h, ts);
    }
    rcclTelemetryQpCtsSent(h, r % 8 == 0);
    if (r % 16 == 0) rcclTelemetryQpSlotMiss(h);
    rcclTelemetryChRequestCompleted(h == cqp ? cch : ch);
    if (on) tx += 4096;
    if (h) sent++, recv++, rcvd++;
  }
  /* The index forms, on QP slot 1 of (0, 1). */
  rcclTelemetryWqePosted(0, 1, 1, 1);
  rcclTelemetryWriteWqe(0, 1, 1, 0);
  rcclTelemetryWqeComplete(0, 1, 1, rcclTelemetryPostTsIdx(0, 1, 1));
  rcclTelemetryRequestCompleted(0, 1);
  rcclTelemetrySlotMiss(0, 1, 1);
  rcclTelemetryCtsSent(0, 1, 1, 0);
  CHECK(rcclTelemetryNowToken() > 1);
  if (on) sent++, rcvd++;
  rcclTelemetryCqError(0);
  rcclTelemetryQpCqError(qp[1], 12, 0x81);
  if (on) errors += 2;
  rcclTelemetryAddCqPolls(0, 5);
  rcclTelemetryCommFinalize(comm);

  RcclTelemetrySwSnapshot s;
  memset(&s, 0, sizeof s);
  CHECK(rcclTelemetrySwCapture(&s, 1) == (on ? 1 : -1));
  uint64_t hist = 0;
  for (int b = 0; b < RCCL_TELEMETRY_HISTOGRAM_SIZE; b++) hist += s.wqe_completion_histogram[b];
  if (on) {
    CHECK(s.device_id == 0);
    CHECK(s.wqe_sent == sent && s.recv_wqe == recv && s.wqe_rcvd == rcvd && s.wqe_completed == rcvd);
    CHECK(s.tx_bytes == tx && s.rx_bytes == 0 && s.num_cq_errors == errors && hist == rcvd);
  }
  printf("header_modes: counts wqe_sent %" PRIu64 " recv_wqe %" PRIu64 " wqe_rcvd %" PRIu64 " wqe_completed %" PRIu64
         " tx_bytes %" PRIu64 " num_cq_errors %" PRIu64 " histogram %" PRIu64 "\n",
         s.wqe_sent, s.recv_wqe, s.wqe_rcvd, s.wqe_completed, s.tx_bytes, s.num_cq_errors, hist);
  CHECK(rcclTelemetryFlush() == 0);
  CHECK(rcclTelemetryOn() == 0);
  printf("header_modes: %s (%s)\n", fails ? "FAILED" : "ok", expect);
  return fails != 0;
}
