/*
 * wqe_monitor.c: the WQE latency monitor (NCCL_IB_WQE_LATENCY_THRESHOLD_NS, RCCL_TELEMETRY_SLOW_NS)
 * against a known distribution: its counts and keys in the file, and its three lines through a
 * logger with NCCL's signature.
 *
 * Run with RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_CLOCK=monotonic (tokens are ns, so every
 * latency is the one constructed), RCCL_TELEMETRY_STALL_MS=100 and RCCL_TELEMETRY_OUTPUT_DIR set,
 * and one argument:
 *   on        NCCL_IB_WQE_LATENCY_THRESHOLD_NS=100000 set: QP 0 completes 200 WRs of 20 us and
 *             50 of 1 ms (50 slow), QP 1 ten of 5 us (none slow) and then posts one WR that
 *             never completes (a stall). Expects a "WQE slow" line for QP 0, a "WQE stall (no
 *             CQE)" line for QP 1, and at rcclTelemetryFlush one "WQE latency summary" per QP;
 *             in the file the threshold, num_wqe_slow 50 and 0, num_stalls 1, the exact mean and
 *             the p50 and p99 of QP 0 (20 us and 1 ms).
 *   noreport  the same with NCCL_IB_WQE_LATENCY_REPORT=0: the same keys, no summary line.
 *   off       no threshold: no monitor line, no num_wqe_slow, no monitor statistics, and
 *             slow_threshold_ns 0.
 * Lines are waited for (the background thread says them at its ticks), up to 20 s.
 * Prints "wqe_monitor: ok" and exits 0 on success.
 */
#define _DEFAULT_SOURCE
#include "rccl_telemetry.h"

#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef enum { NCCL_LOG_NONE = 0, NCCL_LOG_VERSION = 1, NCCL_LOG_WARN = 2, NCCL_LOG_INFO = 3 } ncclDebugLogLevel;
#define NCCL_NET 0x10

#define MAX_LINES 256
static char lines[MAX_LINES][2048];
static int nlines;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void ncclDebugLog(ncclDebugLogLevel level, unsigned long flags, const char *filefunc, int line, const char *fmt,
                         ...) {
  (void)filefunc;
  (void)line;
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!strstr(msg, "NET/IB-CAST: WQE")) return;
  pthread_mutex_lock(&lock);
  /* Upstream's lines are INFO lines of the NET subsystem. */
  if (nlines < MAX_LINES && level == NCCL_LOG_INFO && flags == NCCL_NET) snprintf(lines[nlines++], sizeof lines[0], "%s", msg);
  pthread_mutex_unlock(&lock);
}

static int fail(const char *what) {
  fprintf(stderr, "wqe_monitor: FAIL: %s\n", what);
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nlines; i++) fprintf(stderr, "  line: %s\n", lines[i]);
  pthread_mutex_unlock(&lock);
  return 1;
}

/* How many logged lines contain every one of the (NULL-terminated) strings. */
static int count_lines(const char *a, const char *b, const char *c) {
  int n = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nlines; i++)
    if (strstr(lines[i], a) && (!b || strstr(lines[i], b)) && (!c || strstr(lines[i], c))) n++;
  pthread_mutex_unlock(&lock);
  return n;
}

/* Waits up to 20 s for such a line (the writer thread says them at its ticks). */
static int wait_line(const char *a, const char *b, const char *c) {
  for (int i = 0; i < 2000; i++) {
    if (count_lines(a, b, c) > 0) return 1;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

/* The rank file of this process, whitespace removed, or NULL. */
static char *read_file(void) {
  const char *dir = getenv("RCCL_TELEMETRY_OUTPUT_DIR");
  char suffix[64], path[4096];
  snprintf(suffix, sizeof suffix, "_%d.json", (int)getpid());
  DIR *d = dir ? opendir(dir) : NULL;
  if (!d) return NULL;
  struct dirent *e;
  path[0] = 0;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name), k = strlen(suffix);
    if (strncmp(e->d_name, "rccl_telemetry_", 15) == 0 && n > k && strcmp(e->d_name + n - k, suffix) == 0) {
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      break;
    }
  }
  closedir(d);
  FILE *f = path[0] ? fopen(path, "r") : NULL;
  if (!f) return NULL;
  size_t cap = 1 << 20, len = 0;
  char *buf = malloc(cap);
  int ch;
  while (buf && (ch = fgetc(f)) != EOF)
    if (ch != ' ' && ch != '\n' && len + 1 < cap) buf[len++] = (char)ch;
  fclose(f);
  if (buf) buf[len] = 0;
  return buf;
}

static int occurrences(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  int on = strcmp(argv[1], "off") != 0, report = strcmp(argv[1], "on") == 0;
  if (on) setenv("NCCL_IB_WQE_LATENCY_THRESHOLD_NS", "100000", 1);
  else unsetenv("NCCL_IB_WQE_LATENCY_THRESHOLD_NS");
  unsetenv("RCCL_TELEMETRY_SLOW_NS");
  if (!report) setenv("NCCL_IB_WQE_LATENCY_REPORT", "0", 1);
  rcclTelemetrySetLogger((rcclTelemetryLogger_t)ncclDebugLog);
  if (rcclTelemetryInit() != 0 || !rcclTelemetryOn()) return fail("telemetry is not on: run with RCCL_TELEMETRY_ENABLE=1");
  int slots = 0;
  if (rcclTelemetryRegisterDevice(0, "rdma0", "IB-CAST") != 0) return fail("RegisterDevice");
  if (rcclTelemetrySetupChannel(0, 0, 2, &slots) < 0 || slots != 2) return fail("SetupChannel");
  RcclQpStats *qp0 = rcclTelemetryResolveQp(0, 0, 0), *qp1 = rcclTelemetryResolveQp(0, 0, 1);
  if (!qp0 || !qp1) return fail("ResolveQp");
  const unsigned char local[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  const unsigned char remote[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
  rcclTelemetryQpSetPeer(qp0, 4660, local, 0, 77, remote, 0);
  rcclTelemetryQpSetPeer(qp1, 4661, local, 0, 78, remote, 0);

  /* QP 0: 200 x 20 us and 50 x 1 ms, interleaved; QP 1: 10 x 5 us. */
  int64_t now = rcclTelemetryPollTs();
  for (int i = 0; i < 250; i++) {
    rcclTelemetryQpSendPosted(qp0, 1);
    rcclTelemetryQpWqeCompleteAt(qp0, now - (i % 5 == 4 ? 1000000 : 20000), now);
  }
  for (int i = 0; i < 10; i++) {
    rcclTelemetryQpSendPosted(qp1, 1);
    rcclTelemetryQpWqeCompleteAt(qp1, now - 5000, now);
  }
  /* QP 1 posts one more WR whose completion never comes. */
  rcclTelemetryQpSendPosted(qp1, 1);

  if (on) {
    if (!wait_line("NET/IB-CAST: WQE slow: peer=10.0.0.2 | local: qpn=4660 dev=rdma0", "remote: qpn=77",
                   "| thr=100000ns delta=1000000ns mean=216000ns"))
      return fail("no WQE slow line for QP 0");
    if (!wait_line("p50=20000ns p90=1000000ns p99=1000000ns p99.9=1000000ns max=1000000ns count=250 | t_post=", NULL, NULL))
      return fail("the WQE slow line's statistics");
    if (!wait_line("NET/IB-CAST: WQE stall (no CQE): peer=10.0.0.2 | local: qpn=4661", "stall_thr=100000000ns",
                   "inflight=1"))
      return fail("no WQE stall line for QP 1");
    if (count_lines("WQE slow", "qpn=4661", NULL)) return fail("a WQE slow line for QP 1, which had none slow");
  } else {
    struct timespec ts = {0, 600 * 1000 * 1000};
    nanosleep(&ts, NULL); /* a tick or more: the stall is declared, and still no monitor line */
  }
  if (rcclTelemetryFlush() != 0) return fail("Flush");

  int summaries = count_lines("NET/IB-CAST: WQE latency summary [", NULL, NULL);
  if (report) {
    if (summaries != 2) return fail("not one summary per QP at Flush");
    if (!count_lines("NET/IB-CAST: WQE latency summary [send peer=10.0.0.2 dev=rdma0 qpn=4660 port=0]: n=250 slow=50 "
                     "thr=100000ns | post-to-poll ns: mean=216000 std=",
                     " p50=20000 p90=1000000 p99=1000000 p99.9=1000000 max=1000000", NULL))
      return fail("QP 0's summary");
    if (!count_lines("[send peer=10.0.0.2 dev=rdma0 qpn=4661 port=0]: n=10 slow=0 thr=100000ns", "mean=5000 std=0 p50=5000",
                     NULL))
      return fail("QP 1's summary");
  } else if (summaries != 0) {
    return fail("a summary line with the report off or the monitor off");
  }
  if (!on && count_lines("NET/IB-CAST: WQE", NULL, NULL)) return fail("a monitor line with the monitor off");

  char *f = read_file();
  if (!f) return fail("the rank file cannot be read");
  int ok = 1;
  if (on) {
    ok &= occurrences(f, "\"slow_threshold_ns\":100000") == 1;
    /* QP 0, its channel and its device: 50; QP 1: 0. */
    ok &= occurrences(f, "\"num_wqe_slow\":50") == 3 && occurrences(f, "\"num_wqe_slow\":0") == 1;
    ok &= occurrences(f, "\"wqe_completion_ns_mean\":216000.0") == 1;
    ok &= occurrences(f, "\"wqe_completion_ns_p50\":20000,\"wqe_completion_ns_p90\":1000000,"
                         "\"wqe_completion_ns_p99\":1000000,\"wqe_completion_ns_p999\":1000000") == 1;
    ok &= occurrences(f, "\"wqe_completion_ns_mean\":5000.0,\"wqe_completion_ns_stddev\":0.0,\"wqe_completion_ns_p50\":5000") == 1;
  } else {
    ok &= occurrences(f, "\"slow_threshold_ns\":0") == 1 && occurrences(f, "num_wqe_slow") == 0;
    ok &= occurrences(f, "wqe_completion_ns_mean") == 0 && occurrences(f, "wqe_completion_ns_p50") == 0;
  }
  /* Stall detection: QP 1's one episode, in the QP, the channel and the device. */
  ok &= occurrences(f, "\"num_stalls\":1") == 3 && occurrences(f, "\"num_stalls\":0") == 1;
  ok &= occurrences(f, "\"port\":null,\"local_lid\":null") == 2;
  free(f);
  if (!ok) return fail("the file's keys");
  printf("wqe_monitor: ok\n");
  return 0;
}
