/*
 * bench_machine.c -- what the run was on: CPU, kernel, host, memory, load before and after,
 * the library measured, and the cost of a clock read.
 */

#include "bench.h"

void read_loadavg(double* l) {
  l[0] = l[1] = l[2] = NAN;
  FILE* f = fopen("/proc/loadavg", "r");
  if (!f) return;
  if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3) l[0] = l[1] = l[2] = NAN;
  fclose(f);
}

void machine_info(Machine* m) {
  memset(m, 0, sizeof *m);
  snprintf(m->cpu, sizeof m->cpu, "unknown");
  FILE* f = fopen("/proc/cpuinfo", "r");
  char line[512];
  if (f) {
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "model name", 10) == 0) {
        char* p = strchr(line, ':');
        if (p) {
          p++;
          while (*p == ' ') p++;
          p[strcspn(p, "\n")] = 0;
          snprintf(m->cpu, sizeof m->cpu, "%s", p);
        }
        break;
      }
    fclose(f);
  }
  f = fopen("/proc/meminfo", "r");
  if (f) {
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "MemTotal: %ld kB", &m->mem_total_kb) == 1) break;
    fclose(f);
  }
  struct utsname u;
  if (uname(&u) == 0) snprintf(m->kernel, sizeof m->kernel, "%s %s %s", u.sysname, u.release, u.machine);
  gethostname(m->host, sizeof m->host - 1);
  m->online_cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
  int cpus[CPU_SETSIZE];
  m->allowed_cpus = allowed_cpus(cpus, CPU_SETSIZE);
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(m->started, sizeof m->started, "%Y-%m-%dT%H:%M:%SZ", &tm);
  Dl_info info;
  snprintf(m->library, sizeof m->library, "unknown");
  if (dladdr((void*)rcclTelemetryInit, &info) && info.dli_fname)
    snprintf(m->library, sizeof m->library, "%s", info.dli_fname);
  const char* rev = getenv("BENCH_LIB_REV");
  snprintf(m->library_rev, sizeof m->library_rev, "%s", rev && *rev ? rev : "unknown");
  read_loadavg(m->load_start);
}

/* What one clock read costs here: the floor under any per-WQE latency measurement. */
double clock_read_ns(clockid_t id) {
  double best = INFINITY;
  struct timespec ts;
  for (int r = 0; r < 5; r++) {
    int64_t t0 = now_ns();
    for (int i = 0; i < 200000; i++) clock_gettime(id, &ts);
    double per = (double)(now_ns() - t0) / 200000.0;
    if (per < best) best = per;
  }
  return best;
}

#if defined(__x86_64__)
double rdtsc_read_ns(void) {
  double best = INFINITY;
  volatile uint64_t sink = 0;
  for (int r = 0; r < 5; r++) {
    int64_t t0 = now_ns();
    for (int i = 0; i < 200000; i++) sink += __rdtsc();
    double per = (double)(now_ns() - t0) / 200000.0;
    if (per < best) best = per;
  }
  (void)sink;
  return best;
}
#else
double rdtsc_read_ns(void) { return NAN; }
#endif
