/*
 * bench_flush.c -- the cold-path children: Flush and the snapshot capture over devs x chs x
 * qps populated slots (`flush`, with the memory they take), and the time exit takes to write
 * the final file (`exit`).
 */

#include "bench.h"

/* Register devs x chs x qps slots and put a little traffic on every one. BENCH_PEERS=1 first
 * tells every QP a peer (rcclTelemetryQpSetPeer): QP i of a channel talks to remote NIC i % 2
 * (a ring's two neighbours); BENCH_PEERS=16: to NIC i % 16 (more peers than a channel's cap). */
static uint64_t populate(int devs, int chs, int qps) {
  uint64_t slots = 0;
  const int peers = env_int("BENCH_PEERS", 0);
  for (int d = 0; d < devs; d++) {
    lib_register(d);
    for (int c = 0; c < chs; c++) {
      int granted = 0;
      int first = rcclTelemetrySetupChannel(d, c, qps, &granted);
      if (first < 0) continue;
      RcclChannelStats* ch = rcclTelemetryResolveChannel(d, c);
      for (int i = 0; i < granted; i++) {
        int q = first + i;
        rcclTelemetrySetQpRole(d, c, q, i != granted - 1);
        RcclQpStats* h = rcclTelemetryResolveQp(d, c, q);
        if (peers > 0) {
          unsigned char lg[16] = {0}, rg[16] = {0};
          lg[10] = rg[10] = 0xff;
          lg[11] = rg[11] = 0xff;
          lg[12] = 10, lg[14] = 1, lg[15] = (unsigned char)(d + 1);
          rg[12] = 10, rg[13] = (unsigned char)(i % peers + 1), rg[15] = (unsigned char)(d + 1);
          rcclTelemetryQpSetPeer(h, (uint32_t)(0x100 + c * qps + i), lg, 0, (uint32_t)(0x200 + c * qps + i), rg, 0);
        }
        int64_t ts[3];
        for (int k = 0; k < 3; k++) {
          ts[k] = rcclTelemetryPostTs(h);
          rcclTelemetryQpSendPosted(h, k == 2);
          rcclTelemetryWqeSize(d, 65536u << k);
        }
        rcclTelemetryQpRecvPosted(h);
        rcclTelemetryQpCtsSent(h, i & 1);
        for (int k = 0; k < 3; k++) rcclTelemetryQpWqeComplete(h, ts[k]);
        slots++;
      }
      rcclTelemetryChRequestCompleted(ch);
      rcclTelemetryBytes(d, 1, 1u << 20);
      rcclTelemetryBytes(d, 0, 1u << 19);
    }
  }
  return slots;
}

static void telemetry_path(char* buf, size_t len) {
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  const char* dir = getenv("RCCL_TELEMETRY_OUTPUT_DIR");
  snprintf(buf, len, "%s/rccl_telemetry_%s_%u_%d.json", dir && *dir ? dir : "/tmp", host,
           (unsigned)getuid(), (int)getpid());
}

int child_flush(const char* tag, int devs, int chs, int qps, int capture_reps) {
  struct mallinfo2 m0 = mallinfo2();
  long rss0 = rss_bytes();
  int64_t t0 = now_ns();
  if (rcclTelemetryInit() < 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
  uint64_t slots = populate(devs, chs, qps);
  int64_t t1 = now_ns();
  long rss1 = rss_bytes();
  struct mallinfo2 m1 = mallinfo2();
  printf("M %s.slots %llu\n", tag, (unsigned long long)slots);
  printf("S %s.setup_ms %.3f\n", tag, (double)(t1 - t0) / 1e6);
  if (slots) {
    printf("S %s.rss_per_slot %.2f\n", tag, (double)(rss1 - rss0) / (double)slots);
    double heap = (double)((m1.uordblks + m1.hblkhd) - (m0.uordblks + m0.hblkhd));
    printf("S %s.heap_per_slot %.2f\n", tag, heap / (double)slots);
  }

  RcclTelemetrySwSnapshot snaps[RCCL_TELEMETRY_MAX_DEVS];
  for (int r = 0; r < capture_reps; r++) {
    int64_t a = now_ns();
    int n = rcclTelemetrySwCapture(snaps, RCCL_TELEMETRY_MAX_DEVS);
    int64_t b = now_ns();
    printf("S %s.swcapture_us %.3f\n", tag, (double)(b - a) / 1e3);
    if (r == 0) printf("M %s.swcapture_entries %d\n", tag, n);
  }

  char path[1024];
  telemetry_path(path, sizeof path);
  struct rusage ru0, ru1;
  /* Flush's peak memory: the resident high-water mark is reset to the current RSS (clear_refs
   * 5) just before the call and read back after it; -1 when the kernel offers neither. */
  const int hwm_reset = reset_rss_peak() == 0;
  long rss_flush0 = rss_bytes();
  getrusage(RUSAGE_SELF, &ru0);
  int64_t a = now_ns();
  int rc = rcclTelemetryFlush();
  int64_t b = now_ns();
  getrusage(RUSAGE_SELF, &ru1);
  long hwm = hwm_reset ? rss_peak_bytes() : -1;
  printf("S %s.flush_ms %.3f\n", tag, (double)(b - a) / 1e6);
  if (hwm >= 0 && rss_flush0 >= 0) printf("S %s.flush_peak_mb %.3f\n", tag, (double)(hwm - rss_flush0) / 1e6);
  /* CPU time (user + system) of the Flush: what it costs when the machine is shared */
  double cpu0 = (double)(ru0.ru_utime.tv_sec + ru0.ru_stime.tv_sec) * 1e3 + (double)(ru0.ru_utime.tv_usec + ru0.ru_stime.tv_usec) / 1e3;
  double cpu1 = (double)(ru1.ru_utime.tv_sec + ru1.ru_stime.tv_sec) * 1e3 + (double)(ru1.ru_utime.tv_usec + ru1.ru_stime.tv_usec) / 1e3;
  printf("S %s.flush_cpu_ms %.3f\n", tag, cpu1 - cpu0);
  printf("M %s.flush_rc %d\n", tag, rc);
  struct stat st;
  if (stat(path, &st) == 0) {
    printf("S %s.file_bytes %lld\n", tag, (long long)st.st_size);
    unlink(path);
  } else {
    fprintf(stderr, "bench: no telemetry file at %s after Flush\n", path);
  }
  fflush(stdout);
  return 0;
}

/* Populate, print the time, and leave: the library's exit handler does the rest. */
int child_exit(int devs, int chs, int qps) {
  if (rcclTelemetryInit() < 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
  populate(devs, chs, qps);
  printf("T %lld\n", (long long)now_ns());
  fflush(stdout);
  return 0;
}
