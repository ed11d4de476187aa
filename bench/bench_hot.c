/*
 * bench_hot.c -- the single-thread hot-path children: every loop timed in rotated order
 * (`hot`), the per-hook-family breakdown (`breakdown`), one clock read per poll (`pollts`)
 * and the paired log-scale histogram run (`logpair`). Each prints its samples for the driver.
 */

#include "bench.h"

/* Runs every loop n times untimed (warm-up), then `reps` times timed in an order rotated each
 * rep; t[rep * n + k] is loop k's ns per WQE in that rep. */
static void time_rotated(const LoopFn* fn, Ctx* const* ctx, int n, int reps, int nreq, double* t) {
  for (int w = 0; w < 10; w++)
    for (int k = 0; k < n; k++) fn[k](ctx[k], nreq);
  double wqes = (double)nreq * BENCH_QPS;
  for (int rep = 0; rep < reps; rep++)
    for (int i = 0; i < n; i++) {
      int k = (rep + i) % n;
      int64_t t0 = now_ns();
      fn[k](ctx[k], nreq);
      t[rep * n + k] = (double)(now_ns() - t0) / wqes;
    }
}

/*
 * One configuration of the library (fixed by the environment) against the no-hook
 * loop and the reference configured the same way, interleaved rep by rep with the
 * order rotated, so drift and order effects hit all three alike.
 */
int child_hot(const char* cfg, int reps, int nreq) {
  int cpus[CPU_SETSIZE];
  int ncpu = allowed_cpus(cpus, CPU_SETSIZE);
  int here = sched_getcpu();
  int pinned = (ncpu > 0 && here >= 0) ? pin_self(here) : 0;
  printf("M pinned.hot %d\n", pinned);

  if (rcclTelemetryInit() < 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
  int enabled = env_enabled();
  int n = env_int("RCCL_TELEMETRY_LATENCY_SAMPLE", 1);
  refTelemetryInit(enabled, n, 5, 30000);
  lib_register(0);
  refTelemetryRegisterDevice(0);

  Ctx* ctx[V_COUNT];
  for (int v = 0; v < V_COUNT; v++) ctx[v] = ctx_new(0, v);
  ctx_attach_lib(ctx[V_LIB]);
  ctx_attach_ref(ctx[V_REF]);
  if (enabled && (!ctx[V_LIB]->lqp[0] || !ctx[V_REF]->rqp[0]))
    fprintf(stderr, "bench: enabled but a handle is NULL (lib %p, ref %p)\n",
            (void*)ctx[V_LIB]->lqp[0], (void*)ctx[V_REF]->rqp[0]);

  double* all = malloc(sizeof(double) * V_COUNT * (size_t)(reps > 0 ? reps : 1));
  if (!all) die("malloc");
  time_rotated(kLoop, ctx, V_COUNT, reps, nreq, all);
  for (int rep = 0; rep < reps; rep++) {
    const double* t = all + rep * V_COUNT;
    printf("S hot.none %.4f\n", t[V_NONE]);
    printf("S hot.lib.%s %.4f\n", cfg, t[V_LIB]);
    printf("S hot.ref.%s %.4f\n", cfg, t[V_REF]);
    printf("S over.lib.%s %.4f\n", cfg, t[V_LIB] - t[V_NONE]);
    printf("S over.ref.%s %.4f\n", cfg, t[V_REF] - t[V_NONE]);
  }
  free(all);

  /* the loop really counted: what the library and the reference saw vs what was posted */
  uint64_t posted_lib = ctx[V_LIB]->seq * BENCH_QPS;
  /* before posting request s the loop drains down to BENCH_LAG requests outstanding,
     so after S requests 4 * (S - BENCH_LAG - 1) WQEs have completed */
  uint64_t completed_lib = (ctx[V_LIB]->seq - BENCH_LAG - 1) * BENCH_QPS;
  RcclTelemetrySwSnapshot s;
  lib_capture(0, &s);
  printf("M check.lib.%s.posted %llu\n", cfg, (unsigned long long)(enabled ? posted_lib : 0));
  printf("M check.lib.%s.wqe_sent %llu\n", cfg, (unsigned long long)s.wqe_sent);
  printf("M check.lib.%s.completed %llu\n", cfg, (unsigned long long)(enabled ? completed_lib : 0));
  printf("M check.lib.%s.wqe_completed %llu\n", cfg, (unsigned long long)s.wqe_completed);
  printf("M check.lib.%s.wqe_sampled %llu\n", cfg, (unsigned long long)s.wqe_sampled);
  uint64_t posted_ref = ctx[V_REF]->seq * BENCH_QPS;
  printf("M check.ref.%s.posted %llu\n", cfg, (unsigned long long)(enabled ? posted_ref : 0));
  printf("M check.ref.%s.wqe_sent %llu\n", cfg, (unsigned long long)refTelemetryTotalWqeSent());
  printf("M check.ref.%s.wqe_sampled %llu\n", cfg, (unsigned long long)refTelemetryTotalSampled());
  /* the guards: every poll call counted when on, none when off */
  printf("M check.lib.%s.polls_expected %llu\n", cfg, (unsigned long long)(enabled ? ctx[V_LIB]->seq : 0));
  printf("M check.lib.%s.polls %llu\n", cfg, (unsigned long long)ctx[V_LIB]->polls);
  uint64_t sink = 0;
  for (int v = 0; v < V_COUNT; v++) sink += ctx[v]->sink;
  printf("M sink %llu\n", (unsigned long long)(sink & 0xffff));
  fflush(stdout);
  return 0;
}

/* ------------------------------------------------------------------ child: per-hook breakdown */

const char* const kFamily[FAMILIES] = {"lat", "send", "size", "req", "guard"};
const char* const kFamilyLabel[FAMILIES] = {"PostTs + QpWqeComplete", "QpSendPosted", "WqeSize",
                                                   "Bytes + QpCtsSent + ChReqCompleted",
                                                   "rcclTelemetryOn() guards, poll count"};
const LoopFn kLibFamily[FAMILIES] = {loop_lib_lat, loop_lib_send, loop_lib_size, loop_lib_req,
                                            loop_lib_guard};
const LoopFn kRefFamily[FAMILIES] = {loop_ref_lat, loop_ref_send, loop_ref_size, loop_ref_req,
                                            loop_ref_guard};

/*
 * Which hook costs what: the no-hook loop against loops that carry one hook family each,
 * library and reference, interleaved like child_hot. Families are not exactly additive
 * (they share the loop's slack), but they show where the time goes.
 */
int child_breakdown(const char* cfg, int reps, int nreq) {
  int here = sched_getcpu();
  if (here >= 0) pin_self(here);
  if (rcclTelemetryInit() < 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
  int enabled = env_enabled();
  refTelemetryInit(enabled, env_int("RCCL_TELEMETRY_LATENCY_SAMPLE", 1), 5, 30000);
  lib_register(0);
  refTelemetryRegisterDevice(0);
  enum { NV = 1 + 2 * FAMILIES };
  LoopFn fn[NV];
  Ctx* ctx[NV];
  fn[0] = loop_none;
  for (int f = 0; f < FAMILIES; f++) {
    fn[1 + f] = kLibFamily[f];
    fn[1 + FAMILIES + f] = kRefFamily[f];
  }
  for (int k = 0; k < NV; k++) {
    ctx[k] = ctx_new(0, k);
    ctx_attach_lib(ctx[k]);
    ctx_attach_ref(ctx[k]);
  }
  double* all = malloc(sizeof(double) * NV * (size_t)(reps > 0 ? reps : 1));
  if (!all) die("malloc");
  time_rotated(fn, ctx, NV, reps, nreq, all);
  for (int rep = 0; rep < reps; rep++) {
    const double* t = all + rep * NV;
    for (int f = 0; f < FAMILIES; f++) {
      printf("S brk.lib.%s.%s %.4f\n", kFamily[f], cfg, t[1 + f] - t[0]);
      printf("S brk.ref.%s.%s %.4f\n", kFamily[f], cfg, t[1 + FAMILIES + f] - t[0]);
    }
  }
  free(all);
  fflush(stdout);
  return 0;
}

/* ------------------------------------------------------------------ child: one clock read per poll */

/*
 * The whole library mix (guards included) with its per-WQE completion (QpWqeComplete, a clock
 * read per sampled completion) against the same mix with one PollTs per poll that returned
 * completions and QpWqeCompleteAt per completion (the loop drains 4 per poll), beside the
 * no-hook loop, interleaved like child_hot. The two library loops count on separate devices
 * so each one's counts can be checked on its own.
 */
enum { PT_NONE, PT_LIB, PT_AT, PT_PREV, PT_DL, PT_COUNT };
int child_pollts(const char* cfg, int reps, int nreq) {
  int here = sched_getcpu();
  if (here >= 0) pin_self(here);
  if (rcclTelemetryInit() < 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
  if (loop_lib_dl_init() < 0) fprintf(stderr, "bench: rcclTelemetryInit through the loader failed\n");
  int enabled = env_enabled();
  refTelemetryInit(0, 1, 5, 30000);
  lib_register(0);
  lib_register(1);
  LoopFn fn[PT_COUNT] = {loop_none, loop_lib, loop_lib_at, loop_lib_prev, loop_lib_dl};
  Ctx* ctx[PT_COUNT];
  ctx[PT_NONE] = ctx_new(0, 0);
  ctx[PT_LIB] = ctx_new(0, 1);
  ctx[PT_AT] = ctx_new(1, 0);
  ctx[PT_PREV] = ctx_new(0, 2);
  ctx[PT_DL] = ctx_new(0, 3);
  ctx_attach_lib(ctx[PT_LIB]);
  ctx_attach_lib(ctx[PT_AT]);
  ctx_attach_lib(ctx[PT_PREV]);
  ctx_attach_lib(ctx[PT_DL]);
  double* all = malloc(sizeof(double) * PT_COUNT * (size_t)(reps > 0 ? reps : 1));
  if (!all) die("malloc");
  time_rotated(fn, ctx, PT_COUNT, reps, nreq, all);
  for (int rep = 0; rep < reps; rep++) {
    const double* t = all + rep * PT_COUNT;
    printf("S pt.over.lib.%s %.4f\n", cfg, t[PT_LIB] - t[PT_NONE]);
    printf("S pt.over.at.%s %.4f\n", cfg, t[PT_AT] - t[PT_NONE]);
    printf("S pt.at_minus_lib.%s %.4f\n", cfg, t[PT_AT] - t[PT_LIB]);
    printf("S pt.lib_minus_prev.%s %.4f\n", cfg, t[PT_LIB] - t[PT_PREV]);
    printf("S pt.dl_minus_lib.%s %.4f\n", cfg, t[PT_DL] - t[PT_LIB]);
  }
  free(all);
  RcclTelemetrySwSnapshot s;
  lib_capture(1, &s);
  uint64_t seq = ctx[PT_AT]->seq;
  printf("M check.at.%s.posted %llu\n", cfg, (unsigned long long)(enabled ? seq * BENCH_QPS : 0));
  printf("M check.at.%s.wqe_sent %llu\n", cfg, (unsigned long long)s.wqe_sent);
  printf("M check.at.%s.completed %llu\n", cfg,
         (unsigned long long)(enabled ? (seq - BENCH_LAG - 1) * BENCH_QPS : 0));
  printf("M check.at.%s.wqe_completed %llu\n", cfg, (unsigned long long)s.wqe_completed);
  printf("M check.at.%s.wqe_sampled %llu\n", cfg, (unsigned long long)s.wqe_sampled);
  printf("M sink %llu\n", (unsigned long long)((ctx[PT_LIB]->sink + ctx[PT_AT]->sink + ctx[PT_PREV]->sink + ctx[PT_DL]->sink) & 0xffff));
  fflush(stdout);
  return 0;
}

/* ------------------------------------------------------------------ child: log-scale histogram, paired in-process */

/*
 * The log-scale histogram's cost per sampled completion, paired batch by batch in one process:
 * the latency family (PostTs + QpWqeComplete) on a channel whose QP slots record into its
 * log-scale histogram against the same loop on a channel whose slots do not, beside the no-hook
 * loop, interleaved like child_hot. The second channel's slots get their histogram address
 * cleared, which is what RCCL_TELEMETRY_LOG_HISTOGRAM=0 leaves in every slot,
 * so the hot path runs exactly the seed-only code there. `swap` (0/1) picks which of the two
 * channels loses its histogram, so the drivers' alternate rounds cancel placement effects.
 * Separate children (the loghist_* rows) compare the configurations as a user sets them, but a
 * child lands in either of this VM's speed phases, which moves its figures by more than 1 ns;
 * batches 2048 WQEs apart in one process share the phase.
 */
enum { LP_NONE, LP_WITH, LP_WITHOUT, LP_COUNT };
int child_logpair(const char* cfg, int reps, int nreq, int swap) {
  int here = sched_getcpu();
  if (here >= 0) pin_self(here);
  if (rcclTelemetryInit() < 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
  refTelemetryInit(0, 1, 5, 30000);
  lib_register(0);
  LoopFn fn[LP_COUNT] = {loop_none, loop_lib_lat, loop_lib_lat};
  Ctx* ctx[LP_COUNT];
  ctx[LP_NONE] = ctx_new(0, 0);
  ctx[LP_WITH] = ctx_new(0, 1 + (swap & 1));
  ctx[LP_WITHOUT] = ctx_new(0, 2 - (swap & 1));
  ctx_attach_lib(ctx[LP_WITH]);
  ctx_attach_lib(ctx[LP_WITHOUT]);
  int cleared = 0, recording = 1;
#ifdef RCCL_TELEMETRY_INLINE_HOOKS
  for (int j = 0; j < BENCH_QPS; j++) {
    rcclTelemetryQp_* w = (rcclTelemetryQp_*)(void*)ctx[LP_WITH]->lqp[j];
    rcclTelemetryQp_* o = (rcclTelemetryQp_*)(void*)ctx[LP_WITHOUT]->lqp[j];
    if (!w || !o) continue;
    recording &= __atomic_load_n(&w->log_hist, __ATOMIC_RELAXED) != 0;
    __atomic_store_n(&o->log_hist, 0, __ATOMIC_RELAXED);
    cleared++;
  }
#endif
  /* without the inline hooks (or telemetry off) there is nothing to pair: print no samples */
  if (cleared != BENCH_QPS || !recording) reps = 0;
  double* all = malloc(sizeof(double) * LP_COUNT * (size_t)(reps > 0 ? reps : 1));
  if (!all) die("malloc");
  time_rotated(fn, ctx, LP_COUNT, reps, nreq, all);
  for (int rep = 0; rep < reps; rep++) {
    const double* t = all + rep * LP_COUNT;
    printf("S lp.with.%s %.4f\n", cfg, t[LP_WITH] - t[LP_NONE]);
    printf("S lp.without.%s %.4f\n", cfg, t[LP_WITHOUT] - t[LP_NONE]);
    printf("S lp.added.%s %.4f\n", cfg, t[LP_WITH] - t[LP_WITHOUT]);
    printf("S lp.none.%s %.4f\n", cfg, t[LP_NONE]); /* the no-hook loop: the child's speed */
  }
  free(all);
  printf("M sink %llu\n", (unsigned long long)((ctx[LP_WITH]->sink + ctx[LP_WITHOUT]->sink) & 0xffff));
  fflush(stdout);
  return 0;
}
