/*
 * bench_util.c -- what every child shares: the clock, CPU pinning, RSS, the loop context
 * (Ctx) and its library / reference handles, the library's device registration and
 * snapshot, the environment helpers.
 */

#include "bench.h"

int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void die(const char* what) {
  fprintf(stderr, "bench: %s: %s\n", what, strerror(errno));
  exit(2);
}

/* CPUs this process may run on, in order. */
int allowed_cpus(int* out, int max) {
  cpu_set_t set;
  int n = 0;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  for (int i = 0; i < CPU_SETSIZE && n < max; i++)
    if (CPU_ISSET(i, &set)) out[n++] = i;
  return n;
}

int pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

long rss_bytes(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &size, &res) != 2) res = -1;
  fclose(f);
  return res < 0 ? -1 : res * sysconf(_SC_PAGESIZE);
}

/* Resets the process's resident high-water mark (VmHWM) to its current RSS. 0 on success. */
int reset_rss_peak(void) {
  int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int ok = write(fd, "5", 1) == 1;
  close(fd);
  return ok ? 0 : -1;
}

/* VmHWM of /proc/self/status in bytes, -1 when it cannot be read. */
long rss_peak_bytes(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

Ctx* ctx_new(int dev, int ch) {
  /* page-aligned, so every variant's rings sit at the same offsets within a page */
  Ctx* c = aligned_alloc(4096, (sizeof(Ctx) + 4095) & ~(size_t)4095);
  if (!c) die("aligned_alloc");
  memset(c, 0, sizeof *c);
  c->dev = dev;
  c->ch = ch;
  c->remote_base = 0x7f0000000000ull + ((uint64_t)dev << 32) + ((uint64_t)ch << 24);
  c->local_base = 0x7e0000000000ull + ((uint64_t)dev << 32) + ((uint64_t)ch << 24);
  c->lkey = 0x1000u + (uint32_t)ch;
  c->rkey = 0x2000u + (uint32_t)ch;
  fake_cq_init(&c->cq, BENCH_LAG * BENCH_QPS);
  for (int j = 0; j < BENCH_QPS; j++) fake_qp_init(&c->qp[j], (uint32_t)(0x100 * dev + 8 * ch + j), &c->cq);
  /* request sizes around the 192K-256K range the seed singles out */
  static const uint32_t sizes[BENCH_NSIZES] = {262144, 196608, 131072, 65536,
                                               262144, 229376, 163840, 98304};
  memcpy(c->sizes, sizes, sizeof sizes);
  return c;
}

static const char* const kTransport = "IB-CAST";

/* Library slots for (dev, ch): BENCH_QPS data QPs and one CTS QP. */
void ctx_attach_lib(Ctx* c) {
  int granted = 0;
  int first = rcclTelemetrySetupChannel(c->dev, c->ch, BENCH_QPS + 1, &granted);
  if (first < 0 || granted < BENCH_QPS + 1) return; /* disabled: handles stay NULL */
  for (int j = 0; j <= BENCH_QPS; j++) rcclTelemetrySetQpRole(c->dev, c->ch, first + j, j < BENCH_QPS);
  for (int j = 0; j < BENCH_QPS; j++) c->lqp[j] = rcclTelemetryResolveQp(c->dev, c->ch, first + j);
  c->lcts = rcclTelemetryResolveQp(c->dev, c->ch, first + BENCH_QPS);
  c->lch = rcclTelemetryResolveChannel(c->dev, c->ch);
}

void ctx_attach_ref(Ctx* c) {
  RefQpStats* q = refTelemetrySetupChannel(c->dev, c->ch, BENCH_QPS + 1);
  if (!q) return;
  for (int j = 0; j < BENCH_QPS; j++) c->rqp[j] = &q[j];
  c->rcts = &q[BENCH_QPS];
  c->rcts->is_data_qp = 0;
  c->rch = refTelemetryResolveChannel(c->dev, c->ch);
}

void lib_register(int dev) {
  char name[32];
  snprintf(name, sizeof name, "bench_mlx5_%d", dev);
  rcclTelemetryRegisterDevice(dev, name, kTransport);
}

int env_int(const char* name, int dflt) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

int env_enabled(void) {
  const char* v = getenv("RCCL_TELEMETRY_ENABLE");
  return v && strcmp(v, "1") == 0;
}

/* Library telemetry counted by SwCapture for one device (sum over entries with that id). */
int lib_capture(int dev, RcclTelemetrySwSnapshot* out) {
  RcclTelemetrySwSnapshot snaps[RCCL_TELEMETRY_MAX_DEVS];
  int n = rcclTelemetrySwCapture(snaps, RCCL_TELEMETRY_MAX_DEVS);
  for (int i = 0; i < n; i++)
    if (snaps[i].device_id == dev) {
      *out = snaps[i];
      return 1;
    }
  memset(out, 0, sizeof *out);
  return 0;
}
