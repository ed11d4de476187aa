/*
 * bench/preload_bench.c: the cost of librccl_telemetry_preload.so per WQE, over the fake
 * libibverbs (c_tests/preload/fake_verbs.c), so no NIC is needed.
 *
 * The measured loop is a verbs program's: post one signalled 64-byte RDMA_WRITE, poll its
 * completion (ibv_post_send + ibv_poll_cq, both through ctx->ops). The parent runs the same
 * loop in child processes: without the preload (the baseline), with it and telemetry off
 * (nothing is wrapped: the child checks that the provider's ops are untouched), on with every
 * completion timed (N=1) and 1 in 16 (N=16), and with 2 threads (one QP pair each, one
 * device), in 15 interleaved rounds. It prints ns per WQE, the median over rounds of the
 * difference to the same round's baseline (with its quartiles) and the ratio, and the cost of
 * the clock reads an N=1 WQE makes (two: post and poll).
 *
 *   preload_bench PRELOAD_SO [--quick]
 * Exit status: 0 when every child ran and the child with telemetry off found the provider's
 * ops untouched; never a judgement of time.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "../c_tests/preload/fake_verbs.h"

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

struct pair {
  struct ibv_context *c;
  struct ibv_cq *cq;
  struct ibv_qp *a, *b;
};

static struct ibv_context *g_ctx;
static struct ibv_pd *g_pd;
static long g_iters;
static int g_reps;
static char g_buf[64];

static void mk(struct pair *p) {
  p->c = g_ctx;
  p->cq = ibv_create_cq(g_ctx, 256, NULL, NULL, 0);
  struct ibv_cq *cqb = ibv_create_cq(g_ctx, 256, NULL, NULL, 0);
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof a);
  a.send_cq = a.recv_cq = p->cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = 256;
  p->a = ibv_create_qp(g_pd, &a);
  a.send_cq = a.recv_cq = cqb;
  p->b = ibv_create_qp(g_pd, &a);
  if (!p->cq || !cqb || !p->a || !p->b) {
    fprintf(stderr, "preload_bench: setup failed\n");
    exit(1);
  }
  fakeverbs_connect(p->a, p->b);
}

/* The loop; returns ns per WQE (the best of g_reps). */
static double loop(struct pair *p) {
  struct ibv_sge s = {(uintptr_t)g_buf, sizeof g_buf, 1};
  struct ibv_send_wr w, *bad;
  memset(&w, 0, sizeof w);
  w.sg_list = &s;
  w.num_sge = 1;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.send_flags = IBV_SEND_SIGNALED;
  struct ibv_wc wc;
  double best = 1e30;
  for (int r = 0; r < g_reps; r++) {
    double t0 = now_ns();
    for (long i = 0; i < g_iters; i++) {
      w.wr_id = (uint64_t)i;
      if (ibv_post_send(p->a, &w, &bad)) exit(2);
      while (ibv_poll_cq(p->cq, 1, &wc) != 1) {
      }
    }
    double ns = (now_ns() - t0) / (double)g_iters;
    if (ns < best) best = ns;
  }
  return best;
}

static double g_thr_ns[2];
static void *thr(void *arg) {
  long k = (long)arg;
  struct pair p;
  mk(&p);
  g_thr_ns[k] = loop(&p);
  return NULL;
}

static int child(int threads) {
  int n = 0;
  struct ibv_device **l = ibv_get_device_list(&n);
  g_ctx = l && n ? ibv_open_device(l[0]) : NULL;
  if (!g_ctx) return 1;
  ibv_free_device_list(l);
  g_pd = ibv_alloc_pd(g_ctx);
  double ns;
  if (threads == 1) {
    struct pair p;
    mk(&p);
    ns = loop(&p);
  } else {
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, thr, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    ns = (g_thr_ns[0] + g_thr_ns[1]) / 2;
  }
  /* clock reads, for the N=1 budget */
  double t0 = now_ns();
  uint64_t acc = 0;
  for (int i = 0; i < 1000000; i++) acc += __rdtsc();
  double tsc = (now_ns() - t0) / 1e6;
  t0 = now_ns();
  struct timespec ts;
  for (int i = 0; i < 1000000; i++) {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    acc += (uint64_t)ts.tv_nsec;
  }
  double cg = (now_ns() - t0) / 1e6;
  printf("%.3f %d %.3f %.3f %llu\n", ns, fakeverbs_pristine(g_ctx), tsc, cg, (unsigned long long)(acc & 1));
  return 0;
}

#define NMODES 6
#define ROUNDS 15

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
/* The q-quantile of v[0..n) (linear between the two nearest ranks); v is left sorted. */
static double quantile(double *v, int n, double q) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  double pos = q * (n - 1);
  int lo = (int)pos;
  return lo + 1 < n ? v[lo] + (pos - lo) * (v[lo + 1] - v[lo]) : v[lo];
}

struct mode {
  const char *name;
  int preload, enable, sample, threads;
  double ns;
  int pristine;
  double tsc, cg;
};

static int run(struct mode *m, const char *so, const char *self, const char *outdir) {
  int fd[2];
  if (pipe(fd)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    if (m->preload) setenv("LD_PRELOAD", so, 1);
    else unsetenv("LD_PRELOAD");
    if (m->enable) setenv("RCCL_TELEMETRY_ENABLE", "1", 1);
    else unsetenv("RCCL_TELEMETRY_ENABLE");
    char s[16];
    snprintf(s, sizeof s, "%d", m->sample);
    setenv("RCCL_TELEMETRY_LATENCY_SAMPLE", s, 1);
    setenv("RCCL_TELEMETRY_OUTPUT_DIR", outdir, 1);
    setenv("RCCL_TELEMETRY_SIGNALS", "0", 1);
    char it[32], reps[16], th[8];
    snprintf(it, sizeof it, "%ld", g_iters);
    snprintf(reps, sizeof reps, "%d", g_reps);
    snprintf(th, sizeof th, "%d", m->threads);
    execl(self, self, "--child", it, reps, th, (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  char buf[256] = {0};
  FILE *f = fdopen(fd[0], "r");
  unsigned long long dummy;
  int ok = f && fgets(buf, sizeof buf, f) && sscanf(buf, "%lf %d %lf %lf %llu", &m->ns, &m->pristine, &m->tsc, &m->cg, &dummy) == 5;
  if (f) fclose(f);
  int st;
  waitpid(pid, &st, 0);
  return ok && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "--child")) {
    g_iters = atol(argv[2]);
    g_reps = atoi(argv[3]);
    return child(atoi(argv[4]));
  }
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: preload_bench PRELOAD_SO [--quick]\n");
    return 2;
  }
  int quick = argc > 2 && !strcmp(argv[2], "--quick");
  g_iters = quick ? 20000 : 500000;
  g_reps = quick ? 2 : 5;
  int rounds = quick ? 1 : ROUNDS;
  char outdir[] = "/tmp/preload_bench.XXXXXX";
  if (!mkdtemp(outdir)) return 1;
  char self[4096];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  if (k <= 0) return 1;
  self[k] = 0;
  struct mode modes[NMODES] = {
      {"unwrapped (no preload)", 0, 0, 1, 1, 0, 0, 0, 0},
      {"preload, telemetry off", 1, 0, 1, 1, 0, 0, 0, 0},
      {"preload, on, N=1", 1, 1, 1, 1, 0, 0, 0, 0},
      {"preload, on, N=16", 1, 1, 16, 1, 0, 0, 0, 0},
      {"unwrapped, 2 threads", 0, 0, 1, 2, 0, 0, 0, 0},
      {"preload, on, N=16, 2 threads", 1, 1, 16, 2, 0, 0, 0, 0},
  };
  int n = NMODES, bad = 0, pristine_off = 1;
  /* Interleaved rounds: every round runs each mode once, and a mode's figure is the median
   * over rounds of its difference to the same round's unwrapped loop (the machine's load
   * drifts between rounds much more than within one). */
  static double ns[NMODES][ROUNDS], diff[NMODES][ROUNDS], tsc[ROUNDS], cg[ROUNDS];
  int got = 0;
  for (int round = 0; round < rounds; round++) {
    int ok = 1;
    for (int i = 0; i < n; i++) {
      if (run(&modes[i], argv[1], self, outdir)) {
        fprintf(stderr, "preload_bench: mode \"%s\" failed\n", modes[i].name);
        bad = 1;
        ok = 0;
        continue;
      }
      if (i == 1 && !modes[i].pristine) pristine_off = 0; /* off must leave the ops alone */
    }
    if (!ok) continue;
    for (int i = 0; i < n; i++) {
      ns[i][got] = modes[i].ns;
      diff[i][got] = modes[i].ns - modes[modes[i].threads == 2 ? 4 : 0].ns;
    }
    tsc[got] = modes[0].tsc;
    cg[got] = modes[0].cg;
    got++;
  }
  if (!pristine_off) bad = 1;
  if (!got) return 1;
  printf("librccl_telemetry_preload.so: post 1 signalled RDMA_WRITE + poll its completion, fake provider\n");
  printf("(%ld WQEs x %d reps per child, best rep; %d interleaved rounds: medians, [p25 .. p75] of the\n"
         "per-round differences to the same round's unwrapped loop; ns per WQE)\n\n",
         g_iters, g_reps, got);
  printf("%-30s %8s %14s %18s %6s %s\n", "mode", "ns/WQE", "vs unwrapped", "[p25 .. p75]", "ratio", "ops");
  double med[NMODES], dmed[NMODES];
  for (int i = 0; i < n; i++) {
    med[i] = quantile(ns[i], got, 0.5);
    dmed[i] = quantile(diff[i], got, 0.5);
    double base = med[modes[i].threads == 2 ? 4 : 0];
    printf("%-30s %8.1f %+14.1f   [%+6.1f .. %+6.1f] %6.2f %s\n", modes[i].name, med[i], dmed[i],
           quantile(diff[i], got, 0.25), quantile(diff[i], got, 0.75), med[i] / base,
           modes[i].pristine ? "provider's" : "wrapped");
  }
  double t = quantile(tsc, got, 0.5), c = quantile(cg, got, 0.5);
  printf("\nclock reads (this machine): rdtsc %.1f ns, clock_gettime %.1f ns; an N=1 WQE reads it twice\n", t, c);
  printf("targets: off = provider's ops (0 added%s); N=16 <= 15 ns over unwrapped (%+.1f); N=1 <= 2 clock reads + 15 ns"
         " (%+.1f vs %.1f)\n",
         pristine_off ? ": ops untouched" : ": OPS WRAPPED", dmed[3], dmed[2], 2 * t + 15);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", outdir);
  if (system(cmd)) bad = 1;
  return bad;
}
