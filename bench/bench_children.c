/*
 * bench_children.c -- running one child: fork/exec of this program with the child's
 * environment, parsing the sample lines it prints into series, its exit status and time.
 */

#include "bench.h"

const char* g_self;
char g_outdir[256];
int64_t g_child_t; /* the "T" line of the last child */
const char* g_wrapper[8]; /* argv prefix for the next children (valgrind), or empty */

/*
 * Run `self --child args...` with RCCL_TELEMETRY_* replaced by `env` ("K=V" entries),
 * feed its S/M lines into the series, return the time it was reaped.
 */
int64_t run_child(const char* const* env, const char* const* args) {
  int fds[2];
  if (pipe(fds) != 0) die("pipe");
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    static const char* const vars[] = {"RCCL_TELEMETRY_ENABLE", "RCCL_TELEMETRY_LATENCY_SAMPLE",
                                       "RCCL_TELEMETRY_SAMPLE_MS", "RCCL_TELEMETRY_HW_COUNTERS",
                                       "RCCL_TELEMETRY_HISTOGRAM_BUCKETS",
                                       "RCCL_TELEMETRY_HISTOGRAM_INTERVAL_NS", "RCCL_TELEMETRY_DEBUG",
                                       "RCCL_TELEMETRY_LOG_HISTOGRAM"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
    setenv("RCCL_TELEMETRY_OUTPUT_DIR", g_outdir, 1);
    for (int i = 0; env[i]; i++) putenv((char*)env[i]);
    const char* argv[24];
    int k = 0;
    for (int i = 0; g_wrapper[i] && k < 12; i++) argv[k++] = g_wrapper[i];
    argv[k++] = g_self;
    argv[k++] = "--child";
    for (int i = 0; args[i] && k < 23; i++) argv[k++] = args[i];
    argv[k] = NULL;
    if (g_wrapper[0]) {
      int devnull = open("/dev/null", O_WRONLY);
      if (devnull >= 0) dup2(devnull, 2); /* valgrind's own chatter */
      execvp(argv[0], (char* const*)argv);
    } else {
      execv(g_self, (char* const*)argv);
    }
    fprintf(stderr, "bench: exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  int before[sizeof g_series / sizeof g_series[0]];
  int nbefore = g_nseries;
  for (int i = 0; i < nbefore; i++) before[i] = g_series[i].n;
  FILE* in = fdopen(fds[0], "r");
  if (!in) die("fdopen");
  char line[512];
  while (fgets(line, sizeof line, in)) {
    char kind, key[128];
    double v;
    if (sscanf(line, "%c %127s %lf", &kind, key, &v) == 3 && (kind == 'S' || kind == 'M'))
      add_sample(key, v);
    else if (sscanf(line, "T %lf", &v) == 1)
      g_child_t = (int64_t)v;
  }
  fclose(in);
  /* per-child medians ("cm.<key>") of every series this child added several samples to:
     a process has its own code and data placement, so the spread across children is the
     honest spread of a figure, and the median across children its robust value */
  int nafter = g_nseries;
  for (int i = 0; i < nafter; i++) {
    int from = i < nbefore ? before[i] : 0;
    int cnt = g_series[i].n - from;
    if (cnt < 5 || strncmp(g_series[i].key, "cm.", 3) == 0) continue;
    double* v = malloc(sizeof(double) * (size_t)cnt);
    if (!v) die("malloc");
    memcpy(v, g_series[i].v + from, sizeof(double) * (size_t)cnt);
    qsort(v, (size_t)cnt, sizeof(double), cmp_double);
    char key[96];
    snprintf(key, sizeof key, "cm.%.79s", g_series[i].key);
    add_sample(key, quantile(v, cnt, 0.5));
    free(v);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) die("waitpid");
  int64_t reaped = now_ns();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "bench: child");
    for (int i = 0; args[i]; i++) fprintf(stderr, " %s", args[i]);
    fprintf(stderr, " ended with status 0x%x\n", status);
    add_sample("child_failures", 1);
  }
  return reaped;
}
