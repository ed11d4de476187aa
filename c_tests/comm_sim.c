/*
 * comm_sim: drives librccl_telemetry's communicator contexts the way RCCL does (a context per
 * ncclComm, from ncclCommInitRank to ncclCommDestroy), through the generated header only, and
 * checks what it can see from C (SwCapture against its own tally, the handles it gets back);
 * the file's side is checked by rust_tests/comms.rs.
 *
 * Usage: comm_sim MODE [options]
 *   two        two communicators and the process-wide calls on the same (device 0, channel 0)
 *              and (device 0, channel 1): communicator A (hash 0xa11ce, rank 1 of 4) posts 3
 *              WQEs a QP, B (hash 0xb0b, rank 0 of 2) 7, the process-wide calls 11; then A is
 *              finalized: SwCapture's totals stay, B's and the process-wide channels go on.
 *   lifetimes  N communicator lifetimes (--lifetimes N, default 300) of --devices D (4) x
 *              --channels C (8) x --qps Q (8), each posting --wqes W (4) WQEs a QP (sampled
 *              completions, peers told, roles set, a request per channel), then finalized.
 *              Prints one JSON line: the RSS after lifetime 20 and after the last, and the
 *              tally per device. Fails when the RSS grew by 32 MiB or more, or when SwCapture
 *              differs from the tally.
 *   threads    --threads T (4) threads, each running --lifetimes L (2000) communicator lifetimes
 *              of 4 channels x 4 QPs on its own device (4 WQEs a QP), while the main thread
 *              reads SwCapture in a loop (each device's totals never go down) and the writer
 *              thread ticks, snapshots and rewrites the textfile (run with a short
 *              RCCL_TELEMETRY_STALL_MS, FLUSH_INTERVAL_S and a PROMETHEUS_DIR); at the end
 *              SwCapture equals the tally.
 *   stale      a finalized communicator's handles are inert: every Comm call with its handle
 *              is a no-op, a bad rank gets no context, NULL handles are no-ops; a QP handle kept
 *              past the finalization (outside the contract) still counts, and the next
 *              communicator's counts are its own (A posts 5 a QP, 2 more on the kept handle
 *              after its finalization; B posts 9 a QP).
 * Without RCCL_TELEMETRY_ENABLE=1 every mode checks that CommInit returns NULL and that the
 * same calls run harmlessly.
 * Exit status: 0 when every self-check held.
 */
#include "rccl_telemetry.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_DEVS 8

static int g_on;
static uint64_t g_sent[MAX_DEVS], g_done[MAX_DEVS];

static int fail(const char *what) {
  fprintf(stderr, "comm_sim: FAIL: %s\n", what);
  return 1;
}

/* Resident set size in KiB (/proc/self/statm), 0 when unreadable. */
static long rss_kib(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Posts `n` WRITE_WITH_IMM WQEs on a QP handle and completes them (sampled tokens). */
static void drive(RcclQpStats *qp, int dev, int n) {
  for (int i = 0; i < n; i++) {
    int64_t ts = rcclTelemetryPostTs(qp);
    rcclTelemetryQpSendPosted(qp, 1);
    rcclTelemetryQpWqeComplete(qp, ts);
    if (qp) {
      g_sent[dev]++;
      g_done[dev]++;
    }
  }
}

/* SwCapture must equal the tally on every device registered (the first `devs`). */
static int check_capture(int devs) {
  RcclTelemetrySwSnapshot s[MAX_DEVS];
  memset(s, 0, sizeof s);
  if (!g_on) return rcclTelemetrySwCapture(s, devs) == -1 ? 0 : fail("SwCapture while disabled");
  if (rcclTelemetrySwCapture(s, devs) != devs) return fail("SwCapture count");
  for (int d = 0; d < devs; d++) {
    if (s[d].wqe_sent != g_sent[d] || s[d].wqe_completed != g_done[d] || s[d].wqe_sampled != g_done[d]) {
      fprintf(stderr, "comm_sim: device %d: SwCapture sent %llu completed %llu sampled %llu, tally %llu %llu\n", d,
              (unsigned long long)s[d].wqe_sent, (unsigned long long)s[d].wqe_completed,
              (unsigned long long)s[d].wqe_sampled, (unsigned long long)g_sent[d], (unsigned long long)g_done[d]);
      return fail("SwCapture differs from the tally");
    }
  }
  return 0;
}

/* Sets up `qps` QPs on a communicator's (dev, ch) and resolves them; the handles go to `out`. */
static int setup(rcclTelemetryComm_t *comm, int dev, int ch, int qps, RcclQpStats **out) {
  int n = -5;
  int first = rcclTelemetryCommSetupChannel(comm, dev, ch, qps, &n);
  if (g_on ? (first != 0 || n != qps) : (first != -1 || n != 0)) return fail("CommSetupChannel");
  for (int q = 0; q < qps; q++) {
    rcclTelemetryCommSetQpRole(comm, dev, ch, q, q + 1 < qps);
    out[q] = rcclTelemetryCommResolveQp(comm, dev, ch, q);
    if ((out[q] != NULL) != g_on) return fail("CommResolveQp");
  }
  if (rcclTelemetryCommResolveQp(comm, dev, ch, qps) != NULL) return fail("CommResolveQp past the slots");
  if ((rcclTelemetryCommResolveChannel(comm, dev, ch) != NULL) != g_on) return fail("CommResolveChannel");
  return 0;
}

static int register_devices(int devs) {
  for (int d = 0; d < devs; d++) {
    char name[16];
    snprintf(name, sizeof name, "mlx5_%d", d);
    if (rcclTelemetryRegisterDevice(d, name, "IB-CAST") != (g_on ? d : -1)) return fail("RegisterDevice");
  }
  return 0;
}

static int mode_two(void) {
  if (register_devices(1)) return 1;
  rcclTelemetryComm_t *a = rcclTelemetryCommInit(0xa11ceull, 1, 4);
  rcclTelemetryComm_t *b = rcclTelemetryCommInit(0xb0bull, 0, 2);
  if ((a != NULL) != g_on || (b != NULL) != g_on || (g_on && a == b)) return fail("CommInit");
  RcclQpStats *qa[2][2], *qb[2][2], *qd[2][2];
  for (int ch = 0; ch < 2; ch++) {
    if (setup(a, 0, ch, 2, qa[ch]) || setup(b, 0, ch, 2, qb[ch])) return 1;
    int n = 0;
    if (rcclTelemetrySetupChannel(0, ch, 2, &n) != (g_on ? 0 : -1)) return fail("SetupChannel");
    for (int q = 0; q < 2; q++) qd[ch][q] = rcclTelemetryResolveQp(0, ch, q);
    for (int q = 0; q < 2; q++)
      if (g_on && (qa[ch][q] == qb[ch][q] || qa[ch][q] == qd[ch][q] || qb[ch][q] == qd[ch][q]))
        return fail("two communicators share a slot");
  }
  for (int ch = 0; ch < 2; ch++) {
    for (int q = 0; q < 2; q++) {
      drive(qa[ch][q], 0, 3);
      drive(qb[ch][q], 0, 7);
      drive(qd[ch][q], 0, 11);
    }
    rcclTelemetryChRequestCompleted(rcclTelemetryCommResolveChannel(a, 0, ch));
  }
  if (check_capture(1)) return 1;
  rcclTelemetryCommFinalize(a);
  if (check_capture(1)) return 1;  /* A's counts stay in the totals */
  for (int ch = 0; ch < 2; ch++)
    for (int q = 0; q < 2; q++) drive(qb[ch][q], 0, 1);
  if (check_capture(1)) return 1;
  if (rcclTelemetryFlush() != 0) return fail("Flush");
  printf("comm_sim: two: ok (%s)\n", g_on ? "enabled" : "disabled");
  return 0;
}

static long arg(int argc, char **argv, const char *name, long dflt) {
  for (int i = 2; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0) return strtol(argv[i + 1], NULL, 10);
  return dflt;
}

static int mode_lifetimes(int argc, char **argv) {
  int lifetimes = (int)arg(argc, argv, "--lifetimes", 300), devs = (int)arg(argc, argv, "--devices", 4);
  int chans = (int)arg(argc, argv, "--channels", 8), qps = (int)arg(argc, argv, "--qps", 8);
  int wqes = (int)arg(argc, argv, "--wqes", 4);
  if (devs < 1 || devs > MAX_DEVS || chans < 1 || qps < 1 || qps > 64 || lifetimes < 21) return fail("arguments");
  if (register_devices(devs)) return 1;
  long rss20 = 0;
  RcclQpStats *h[64];
  uint8_t lgid[16] = {0}, rgid[16] = {0};
  lgid[10] = lgid[11] = rgid[10] = rgid[11] = 0xff;
  lgid[12] = rgid[12] = 10;
  for (int life = 1; life <= lifetimes; life++) {
    /* A world of 8 ranks: each lifetime is a new communicator (a new hash), as a test binary
     * or an elastic restart makes them. */
    rcclTelemetryComm_t *comm = rcclTelemetryCommInit(0x5eed0000ull + (uint64_t)life, 3, 8);
    if ((comm != NULL) != g_on) return fail("CommInit");
    for (int d = 0; d < devs; d++) {
      for (int c = 0; c < chans; c++) {
        if (setup(comm, d, c, qps, h)) return 1;
        for (int q = 0; q < qps; q++) {
          lgid[15] = (uint8_t)(d + 1);
          rgid[13] = (uint8_t)(1 + (c + q) % 3); /* three remote NICs a device */
          rgid[15] = (uint8_t)(d + 1);
          rcclTelemetryQpSetPeer(h[q], (uint32_t)(0x1000 + q), lgid, 0, (uint32_t)(0x2000 + q), rgid, 0);
          drive(h[q], d, wqes);
        }
        rcclTelemetryChRequestCompleted(rcclTelemetryCommResolveChannel(comm, d, c));
      }
    }
    rcclTelemetryCommFinalize(comm);
    if (life == 20) rss20 = rss_kib();
  }
  long rss_end = rss_kib();
  if (check_capture(devs)) return 1;
  printf("{\"rss_kib\": [%ld, %ld], \"devices\": [", rss20, rss_end);
  for (int d = 0; d < devs; d++)
    printf("%s{\"wqe_sent\": %llu, \"wqe_completed\": %llu}", d ? ", " : "", (unsigned long long)g_sent[d],
           (unsigned long long)g_done[d]);
  printf("]}\n");
  fflush(stdout);
  if (rss20 > 0 && rss_end - rss20 >= 32 * 1024) return fail("RSS grew by 32 MiB or more over the lifetimes");
  if (rcclTelemetryFlush() != 0) return fail("Flush");
  return 0;
}

struct worker {
  pthread_t tid;
  int dev, lifetimes, failed;
};

static int g_done_threads;

static void *lifetimes_thread(void *arg) {
  struct worker *w = arg;
  RcclQpStats *h[4];
  for (int life = 0; life < w->lifetimes && !w->failed; life++) {
    rcclTelemetryComm_t *comm = rcclTelemetryCommInit(((uint64_t)w->dev << 32) | (uint64_t)life, w->dev, 8);
    for (int c = 0; c < 4 && !w->failed; c++) {
      if (setup(comm, w->dev, c, 4, h)) w->failed = 1;
      for (int q = 0; q < 4 && !w->failed; q++) drive(h[q], w->dev, 4);
    }
    rcclTelemetryCommFinalize(comm);
  }
  __atomic_add_fetch(&g_done_threads, 1, __ATOMIC_RELEASE);
  return NULL;
}

static int mode_threads(int argc, char **argv) {
  int threads = (int)arg(argc, argv, "--threads", 4), lifetimes = (int)arg(argc, argv, "--lifetimes", 2000);
  if (threads < 1 || threads > MAX_DEVS || lifetimes < 1) return fail("arguments");
  if (register_devices(threads)) return 1;
  struct worker w[MAX_DEVS];
  for (int t = 0; t < threads; t++) {
    w[t].dev = t;
    w[t].lifetimes = lifetimes;
    w[t].failed = 0;
    if (pthread_create(&w[t].tid, NULL, lifetimes_thread, &w[t]) != 0) return fail("pthread_create");
  }
  /* The tally is the threads' own (each thread has its device): only the totals' monotony is
   * checked while they run. */
  uint64_t last[MAX_DEVS] = {0};
  long reads = 0;
  while (__atomic_load_n(&g_done_threads, __ATOMIC_ACQUIRE) < threads) {
    RcclTelemetrySwSnapshot s[MAX_DEVS];
    if (g_on) {
      if (rcclTelemetrySwCapture(s, threads) != threads) return fail("SwCapture count");
      for (int d = 0; d < threads; d++) {
        if (s[d].wqe_sent < last[d]) return fail("a device's total went down while communicators came and went");
        last[d] = s[d].wqe_sent;
      }
    }
    reads++;
  }
  for (int t = 0; t < threads; t++) {
    pthread_join(w[t].tid, NULL);
    if (w[t].failed) return fail("a thread's setup");
  }
  if (check_capture(threads)) return 1;
  if (rcclTelemetryFlush() != 0) return fail("Flush");
  printf("comm_sim: threads: ok (%d threads x %d lifetimes, %ld captures meanwhile)\n", threads, lifetimes, reads);
  return 0;
}

static int mode_stale(void) {
  if (register_devices(1)) return 1;
  if (rcclTelemetryCommInit(1, 4, 4) != NULL || rcclTelemetryCommInit(1, -1, 4) != NULL ||
      rcclTelemetryCommInit(1, 0, 0) != NULL)
    return fail("CommInit with a rank outside 0..nRanks-1");
  /* NULL handles: no-ops. */
  int n = 7;
  if (rcclTelemetryCommSetupChannel(NULL, 0, 0, 2, &n) != -1 || n != 0) return fail("CommSetupChannel(NULL)");
  if (rcclTelemetryCommResolveQp(NULL, 0, 0, 0) != NULL || rcclTelemetryCommResolveChannel(NULL, 0, 0) != NULL)
    return fail("Resolve with NULL");
  rcclTelemetryCommSetQpRole(NULL, 0, 0, 0, 1);
  rcclTelemetryCommFinalize(NULL);

  rcclTelemetryComm_t *a = rcclTelemetryCommInit(0xaaaull, 0, 2);
  RcclQpStats *qa[2], *qb[2];
  if (setup(a, 0, 0, 2, qa)) return 1;
  for (int q = 0; q < 2; q++) drive(qa[q], 0, 5);
  rcclTelemetryCommFinalize(a);
  /* Every call with the finalized handle is a no-op. */
  n = 7;
  if (rcclTelemetryCommSetupChannel(a, 0, 0, 2, &n) != -1 || n != 0) return fail("CommSetupChannel after Finalize");
  if (rcclTelemetryCommResolveQp(a, 0, 0, 0) != NULL) return fail("CommResolveQp after Finalize");
  if (rcclTelemetryCommResolveChannel(a, 0, 0) != NULL) return fail("CommResolveChannel after Finalize");
  rcclTelemetryCommSetQpRole(a, 0, 0, 0, 0);
  rcclTelemetryCommFinalize(a);
  /* A QP handle kept past the finalization, outside the contract: its counts are A's. */
  drive(qa[1], 0, 2);
  rcclTelemetryComm_t *b = rcclTelemetryCommInit(0xbbbull, 1, 2);
  if (setup(b, 0, 0, 2, qb)) return 1;
  if (g_on && (qb[0] == qa[0] || qb[1] == qa[1])) return fail("a slot written after its finalization was handed out");
  for (int q = 0; q < 2; q++) drive(qb[q], 0, 9);
  if (check_capture(1)) return 1;
  if (rcclTelemetryFlush() != 0) return fail("Flush");
  /* After the final write every Comm call is inert too. */
  if (rcclTelemetryCommInit(2, 0, 1) != NULL) return fail("CommInit after the final write");
  rcclTelemetryCommFinalize(b);
  printf("comm_sim: stale: ok (%s)\n", g_on ? "enabled" : "disabled");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: comm_sim two|lifetimes|stale|threads [options]\n");
    return 2;
  }
  if (rcclTelemetryInit() < 0) return fail("Init");
  g_on = rcclTelemetryOn();
  if (strcmp(argv[1], "two") == 0) return mode_two();
  if (strcmp(argv[1], "lifetimes") == 0) return mode_lifetimes(argc, argv);
  if (strcmp(argv[1], "stale") == 0) return mode_stale();
  if (strcmp(argv[1], "threads") == 0) return mode_threads(argc, argv);
  fprintf(stderr, "comm_sim: unknown mode %s\n", argv[1]);
  return 2;
}
