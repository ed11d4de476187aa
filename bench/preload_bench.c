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
 * Separate processes of one binary land in different speed phases of this kind of VM, which
 * move a loop by more than the figures to be measured. So every round also runs, at N=1 and
 * N=16, a child that pairs the two loops in one process (--child pair): batches of 2048 WQEs
 * alternately through the preload's wrappers and straight into the provider's own functions
 * (what the context's ops hold without the preload), on the same QP; the targets are judged
 * on those paired differences, and on the clock reads timed in the same children.
 *
 * With COUNTERCLOCK_SO (the same interposer built with RTP_BENCH_COUNTER_CLOCK: a counter for
 * a clock), each round also pairs it at N=1: what an N=1 WQE costs without its clock reads,
 * and so what the clock reads cost in this loop (the two differ by nothing else).
 *
 *   preload_bench PRELOAD_SO [COUNTERCLOCK_SO] [--quick]
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
#include <math.h>
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

/* Opens the first device into g_ctx, with a protection domain in g_pd; 0 on success. */
static int open_first_device(void) {
  int n = 0;
  struct ibv_device **l = ibv_get_device_list(&n);
  g_ctx = l && n ? ibv_open_device(l[0]) : NULL;
  if (l) ibv_free_device_list(l);
  if (!g_ctx) return 1;
  g_pd = ibv_alloc_pd(g_ctx);
  return g_pd ? 0 : 1;
}

/* The provider's own functions, for the paired child's direct batches (see batch()). */
static struct ibv_context_ops g_direct;

/* n WQEs of the measured loop on p, through the context's ops (ibv_post_send and ibv_poll_cq,
 * so the preload's wrappers when it is on) or, direct, straight into the provider's own
 * functions. Both load the function through two pointers, as ibv_post_send/ibv_poll_cq do
 * through qp->context->ops. Returns ns per WQE. */
static inline __attribute__((always_inline)) double wqes(struct pair *p, long n, int direct) {
  struct ibv_sge s = {(uintptr_t)g_buf, sizeof g_buf, 1};
  struct ibv_send_wr w, *bad;
  memset(&w, 0, sizeof w);
  w.sg_list = &s;
  w.num_sge = 1;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.send_flags = IBV_SEND_SIGNALED;
  struct ibv_wc wc;
  struct ibv_context_ops *volatile ops = &g_direct;
  double t0 = now_ns();
  for (long i = 0; i < n; i++) {
    w.wr_id = (uint64_t)i;
    if (direct ? ops->post_send(p->a, &w, &bad) : ibv_post_send(p->a, &w, &bad)) exit(2);
    while ((direct ? ops->poll_cq(p->cq, 1, &wc) : ibv_poll_cq(p->cq, 1, &wc)) != 1) {
    }
  }
  return (now_ns() - t0) / (double)n;
}

/* The loop; returns ns per WQE (the best of g_reps). */
static double loop(struct pair *p) {
  double best = 1e30;
  for (int r = 0; r < g_reps; r++) {
    double ns = wqes(p, g_iters, 0);
    if (ns < best) best = ns;
  }
  return best;
}

/* The in-process pairing: batches of PAIR_BATCH WQEs, alternately through the context's ops
 * (the preload's wrappers) and straight into the provider's own functions (what the ops hold
 * without the preload), on the same QP and CQ. Every batch drains its completions, so the
 * preload never sees the direct batches' WRs. */
#define PAIR_BATCH 2048
static double batch(struct pair *p, int direct) {
  return direct ? wqes(p, PAIR_BATCH, 1) : wqes(p, PAIR_BATCH, 0);
}

/* rdtsc's cost here, ns per read (the N=1 budget counts two per WQE). */
static volatile uint64_t g_tsc_sink; /* keeps the reads' sum, so that none is dropped */
static double tsc_ns(void) {
  double t0 = now_ns();
  uint64_t acc = 0;
  for (int i = 0; i < 1000000; i++) acc += __rdtsc();
  double ns = (now_ns() - t0) / 1e6;
  g_tsc_sink = acc;
  return ns;
}

/* --child pair PAIRS: prints the median and quartiles of (wrapped - direct) over PAIRS pairs
 * of batches (the order alternating pair by pair), the direct loop's median, rdtsc's cost
 * and whether the context's ops are the provider's. */
static int cmp_d(const void *a, const void *b);
static double quantile(double *v, int n, double q);
static int child_pair(int pairs) {
  if (open_first_device()) return 1;
  fakeverbs_provider_ops(&g_direct);
  struct pair p;
  mk(&p);
  double *d = malloc(sizeof *d * (size_t)pairs), *base = malloc(sizeof *base * (size_t)pairs);
  if (!d || !base) return 1;
  batch(&p, 0); /* warm both loops up */
  batch(&p, 1);
  for (int i = 0; i < pairs; i++) {
    double a, b;
    if (i & 1) {
      b = batch(&p, 1);
      a = batch(&p, 0);
    } else {
      a = batch(&p, 0);
      b = batch(&p, 1);
    }
    d[i] = a - b;
    base[i] = b;
  }
  double tsc = tsc_ns();
  printf("%.3f %.3f %.3f %.3f %.3f %d\n", quantile(d, pairs, 0.5), quantile(d, pairs, 0.25), quantile(d, pairs, 0.75),
         quantile(base, pairs, 0.5), tsc, fakeverbs_pristine(g_ctx));
  free(d);
  free(base);
  return 0;
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
  if (open_first_device()) return 1;
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
  double tsc = tsc_ns();
  uint64_t acc = 0;
  double t0 = now_ns();
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

/* Runs this program again as a child: preloaded with so (NULL: nothing), telemetry on or
 * off, sampling 1 in sample, the output in outdir, with args after argv[0]; its first line of
 * output goes into line. 0 when it printed one and exited 0. */
static int spawn(const char *self, const char *so, int enable, int sample, const char *outdir, char *const *args,
                 char *line, int len) {
  int fd[2];
  if (pipe(fd)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    if (so) setenv("LD_PRELOAD", so, 1);
    else unsetenv("LD_PRELOAD");
    if (enable) setenv("RCCL_TELEMETRY_ENABLE", "1", 1);
    else unsetenv("RCCL_TELEMETRY_ENABLE");
    char s[16];
    snprintf(s, sizeof s, "%d", sample);
    setenv("RCCL_TELEMETRY_LATENCY_SAMPLE", s, 1);
    setenv("RCCL_TELEMETRY_OUTPUT_DIR", outdir, 1);
    setenv("RCCL_TELEMETRY_SIGNALS", "0", 1);
    execv(self, args);
    _exit(127);
  }
  close(fd[1]);
  FILE *f = fdopen(fd[0], "r");
  int ok = f && fgets(line, len, f);
  if (f) fclose(f);
  else close(fd[0]);
  int st;
  waitpid(pid, &st, 0);
  return ok && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int run(struct mode *m, const char *so, const char *self, const char *outdir) {
  char it[32], reps[16], th[8], buf[256];
  snprintf(it, sizeof it, "%ld", g_iters);
  snprintf(reps, sizeof reps, "%d", g_reps);
  snprintf(th, sizeof th, "%d", m->threads);
  char *args[] = {(char *)self, "--child", it, reps, th, NULL};
  if (spawn(self, m->preload ? so : NULL, m->enable, m->sample, outdir, args, buf, sizeof buf)) return -1;
  unsigned long long dummy;
  return sscanf(buf, "%lf %d %lf %lf %llu", &m->ns, &m->pristine, &m->tsc, &m->cg, &dummy) == 5 ? 0 : -1;
}

/* One --child pair run at sampling 1 in sample: its median difference, its unwrapped speed
 * and rdtsc's cost; -1 when it failed or found the ops unwrapped (then it paired nothing). */
static int run_pair(int sample, const char *so, const char *self, const char *outdir, int pairs, double *diff,
                    double *base, double *tsc) {
  char p[16], buf[256];
  snprintf(p, sizeof p, "%d", pairs);
  char *args[] = {(char *)self, "--child", "pair", p, NULL};
  if (spawn(self, so, 1, sample, outdir, args, buf, sizeof buf)) return -1;
  double q1, q3;
  int pristine = 1;
  return sscanf(buf, "%lf %lf %lf %lf %lf %d", diff, &q1, &q3, base, tsc, &pristine) == 6 && !pristine ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--child") && !strcmp(argv[2], "pair")) return child_pair(atoi(argv[3]));
  if (argc == 5 && !strcmp(argv[1], "--child")) {
    g_iters = atol(argv[2]);
    g_reps = atoi(argv[3]);
    return child(atoi(argv[4]));
  }
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: preload_bench PRELOAD_SO [COUNTERCLOCK_SO] [--quick]\n");
    return 2;
  }
  int quick = !strcmp(argv[argc - 1], "--quick");
  const char *ccso = argc > 2 && strcmp(argv[2], "--quick") ? argv[2] : NULL;
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
  /* The in-process pairing, one child per round at N=1 and at N=16. */
  static double pd1[ROUNDS], pd16[ROUNDS], pb1[ROUNDS], pb16[ROUNDS], pt1[ROUNDS], ptsc[2 * ROUNDS];
  static double pdc[ROUNDS], pbc[ROUNDS]; /* N=1 with the counter clock */
  int pairs = quick ? 20 : 250, npair = 0, ntsc = 0;
  int got = 0;
  for (int round = 0; round < rounds; round++) {
    double d1, d16, dc = 0, b1, b16, bc = 0, t1, t16, tc;
    if (run_pair(1, argv[1], self, outdir, pairs, &d1, &b1, &t1) ||
        run_pair(16, argv[1], self, outdir, pairs, &d16, &b16, &t16) ||
        (ccso && run_pair(1, ccso, self, outdir, pairs, &dc, &bc, &tc))) {
      fprintf(stderr, "preload_bench: a paired child failed\n");
      bad = 1;
    } else {
      pdc[npair] = dc;
      pbc[npair] = bc;
      pd1[npair] = d1;
      pb1[npair] = b1;
      pt1[npair] = t1;
      pb16[npair] = b16;
      pd16[npair++] = d16;
      ptsc[ntsc++] = t1;
      ptsc[ntsc++] = t16;
    }
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
  printf("separate children: N=16 %+.1f ns over unwrapped; N=1 %+.1f vs 2 clock reads + 15 ns = %.1f\n", dmed[3], dmed[2],
         2 * t + 15);
  if (!npair) return 1;
  printf("\nin one process (--child pair): %d pairs of %d-WQE batches per child, alternately through the preload\n"
         "and straight into the provider; a child's figure is the median of its paired differences (ns per WQE)\n",
         pairs, PAIR_BATCH);
  /* This VM has speed phases of seconds in which every loop (the provider's alone too) runs
   * up to 2-3x slower; a child of a fraction of a second sits in one. The figure at the
   * machine's normal speed: the children whose own unwrapped batches ran within 10% of the
   * fastest child's (of any series, so that the series compare at one speed). */
  double fast[3][ROUNDS], fast_tsc[ROUNDS];
  int nfast[3] = {0, 0, 0}, nk = ccso ? 3 : 2;
  double *ds[3] = {pd1, pd16, pdc}, *bs[3] = {pb1, pb16, pbc};
  const char *tag[3] = {"N=1 ", "N=16", "N=1, counter clock"};
  double lo = 1e30; /* the fastest child's unwrapped batches, over every series */
  for (int k = 0; k < nk; k++)
    for (int i = 0; i < npair; i++)
      if (bs[k][i] < lo) lo = bs[k][i];
  for (int k = 0; k < nk; k++) {
    double *d = ds[k], *b = bs[k];
    printf("%s per round (diff/unwrapped):", tag[k]);
    for (int i = 0; i < npair; i++) {
      printf(" %+.1f/%.0f", d[i], b[i]);
      if (b[i] <= 1.1 * lo) {
        if (!k) fast_tsc[nfast[k]] = pt1[i];
        fast[k][nfast[k]++] = d[i];
      }
    }
    printf("\n");
  }
  double pt = quantile(ptsc, ntsc, 0.5);
  printf("%-36s %10s %18s %22s\n", "mode", "all rounds", "[p25 .. p75]", "normal-speed rounds");
  double pf[3];
  const char *name[3] = {"preload, on, N=1, paired", "preload, on, N=16, paired", "N=1, counter for a clock, paired"};
  for (int k = 0; k < nk; k++) {
    double *d = ds[k];
    pf[k] = nfast[k] ? quantile(fast[k], nfast[k], 0.5) : NAN;
    double all = quantile(d, npair, 0.5);
    printf("%-36s %+10.1f   [%+6.1f .. %+6.1f] %+12.1f (%d of %d)\n", name[k], all, quantile(d, npair, 0.25),
           quantile(d, npair, 0.75), pf[k], nfast[k], npair);
  }
  double ft = nfast[0] ? quantile(fast_tsc, nfast[0], 0.5) : pt;
  printf("rdtsc in the same children: %.1f ns (all), %.1f ns (the normal-speed N=1 rounds)\n", pt, ft);
  printf("targets (paired, normal-speed rounds): off = provider's ops (0 added%s); N=16 <= 15 ns over unwrapped (%+.1f);"
         " N=1 <= 2 clock reads + 15 ns:\n",
         pristine_off ? ": ops untouched" : ": OPS WRAPPED", pf[1]);
  printf("  clock reads at rdtsc's own rate (2 x %.1f ns): %+.1f vs %.1f\n", ft, pf[0], 2 * ft + 15);
  if (ccso)
    printf("  clock reads at their cost in this loop (N=1 minus N=1 with a counter for a clock, %.1f ns): %+.1f vs %.1f\n",
           pf[0] - pf[2], pf[0], pf[0] - pf[2] + 15);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", outdir);
  if (system(cmd)) bad = 1;
  return bad;
}
