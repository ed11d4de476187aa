/*
 * bench_callgrind.c -- instructions per WQE: the `profile` child runs every loop once with a
 * callgrind dump per loop, and the driver side runs it under valgrind (when there) and reads
 * the dumps back.
 */

#include "bench.h"

/*
 * Every loop once (`--child profile NREQ`, configuration from the environment), for callgrind
 * and perf. Under callgrind each loop's instruction count is dumped separately (client
 * requests; no-ops when not under valgrind), so the driver can report instructions per WQE:
 * exact, and unlike time not moved by other load on the machine.
 */
int child_profile(int nreq) {
  if (rcclTelemetryInit() < 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
  if (loop_lib_dl_init() < 0) fprintf(stderr, "bench: rcclTelemetryInit through the loader failed\n");
  refTelemetryInit(env_enabled(), env_int("RCCL_TELEMETRY_LATENCY_SAMPLE", 1), 5, 30000);
  lib_register(0);
  refTelemetryRegisterDevice(0);
  enum { NP = V_COUNT + 2 * FAMILIES + 2 };
  LoopFn fn[NP];
  char name[NP][32];
  for (int v = 0; v < V_COUNT; v++) {
    fn[v] = kLoop[v];
    snprintf(name[v], sizeof name[v], "%s", kVariant[v]);
  }
  for (int f = 0; f < FAMILIES; f++) {
    fn[V_COUNT + f] = kLibFamily[f];
    snprintf(name[V_COUNT + f], sizeof name[0], "lib.%s", kFamily[f]);
    fn[V_COUNT + FAMILIES + f] = kRefFamily[f];
    snprintf(name[V_COUNT + FAMILIES + f], sizeof name[0], "ref.%s", kFamily[f]);
  }
  fn[NP - 2] = loop_lib_at;
  snprintf(name[NP - 2], sizeof name[0], "lib_at");
  fn[NP - 1] = loop_lib_dl;
  snprintf(name[NP - 1], sizeof name[0], "lib_dl");
  uint64_t sink = 0;
  for (int k = 0; k < NP; k++) {
    Ctx* c = ctx_new(0, k);
    ctx_attach_lib(c);
    ctx_attach_ref(c);
    fn[k](c, BENCH_LAG + 2); /* first-use paths (shard allocation, page faults) out of the count */
    CALLGRIND_ZERO_STATS;
    fn[k](c, nreq);
    CALLGRIND_DUMP_STATS_AT(name[k]);
    sink += c->sink;
  }
  printf("M sink %llu\n", (unsigned long long)(sink & 0xffff));
  return 0;
}

/* Is `prog` an executable on PATH? */
static int on_path(const char* prog) {
  const char* path = getenv("PATH");
  char buf[4096];
  while (path && *path) {
    size_t n = strcspn(path, ":");
    snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, prog);
    if (access(buf, X_OK) == 0) return 1;
    path += n + (path[n] == ':');
  }
  return 0;
}

/*
 * Instructions per WQE of every loop under callgrind, for one configuration. Each loop's
 * count comes from its own client-request dump (`desc: Trigger: Client Request: NAME` and
 * `totals: N` in the dump file). Returns 0 when valgrind or its header is missing.
 */
int measure_instructions(const char* cfg, const char* const* env, int nreq) {
  if (!BENCH_HAVE_CALLGRIND || !on_path("valgrind")) return 0;
  char outfile[512], nreq_s[16];
  snprintf(outfile, sizeof outfile, "--callgrind-out-file=%s/cg.%s.%%p", g_outdir, cfg);
  snprintf(nreq_s, sizeof nreq_s, "%d", nreq);
  g_wrapper[0] = "valgrind";
  g_wrapper[1] = "--tool=callgrind";
  g_wrapper[2] = outfile;
  g_wrapper[3] = "--compress-strings=no"; /* every dump names its objects in full */
  g_wrapper[4] = NULL;
  const char* args[] = {"profile", nreq_s, NULL};
  run_child(env, args);
  g_wrapper[0] = NULL;
  int found = 0;
  char prefix[64];
  snprintf(prefix, sizeof prefix, "cg.%s.", cfg);
  DIR* d = opendir(g_outdir);
  if (!d) return 0;
  struct dirent* e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    char path[1024], line[512], name[64] = "";
    double totals = NAN;
    int lib_object = 0; /* did any instruction of librccl_telemetry run in this loop? */
    snprintf(path, sizeof path, "%s/%s", g_outdir, e->d_name);
    FILE* f = fopen(path, "r");
    if (f) {
      while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "desc: Trigger: Client Request: %63s", name) == 1) continue;
        if (strncmp(line, "totals:", 7) == 0) totals = atof(line + 7);
        if ((strncmp(line, "ob=", 3) == 0 || strncmp(line, "cob=", 4) == 0) && strstr(line, "librccl_telemetry"))
          lib_object = 1;
      }
      fclose(f);
    }
    unlink(path);
    if (name[0] && isfinite(totals)) {
      char key[128];
      snprintf(key, sizeof key, "instr.%s.%s", name, cfg);
      add_sample(key, totals / ((double)nreq * BENCH_QPS));
      snprintf(key, sizeof key, "libcalled.%s.%s", name, cfg);
      add_sample(key, lib_object);
      found++;
    }
  }
  closedir(d);
  return found;
}
