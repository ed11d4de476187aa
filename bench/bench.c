/*
 * bench.c -- hot-path, scaling, flush, snapshot, memory and exit-time benchmark for
 * librccl_telemetry, against an inline C reference of RCCL's in-tree design
 * (reference_telemetry.h) measured in the same run.
 *
 * The library is used exactly as RCCL would use it: through the installed
 * rccl_telemetry.h, linked against the installed shared object. Enablement and
 * the sampling interval are read once by rcclTelemetryInit, so the driver (this
 * program without --child) re-executes itself once per configuration with the
 * environment set for it, collects every sample the children print, and writes
 * the table and bench/results.json.
 *
 * Timing is clock_gettime(CLOCK_MONOTONIC) around whole batches; no RDTSC.
 * Benchmarks print figures; nothing here asserts on time.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <rccl_telemetry.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define BENCH_HAVE_CALLGRIND 1
#endif
#endif
#ifndef BENCH_HAVE_CALLGRIND
#define BENCH_HAVE_CALLGRIND 0
#define CALLGRIND_ZERO_STATS ((void)0)
#define CALLGRIND_DUMP_STATS_AT(name) ((void)(name))
#endif

#include "fake_provider.h"
#include "reference_telemetry.h"

/* ------------------------------------------------------------------ loop shape */

#define BENCH_QPS 4        /* WQEs per request, one per data QP */
#define BENCH_INFLIGHT 16  /* request slots */
#define BENCH_LAG 8        /* requests outstanding: a WQE completes 8 requests after it was posted */
#define BENCH_NSIZES 8     /* request sizes cycled through */

typedef struct Req {
  int64_t ts[BENCH_QPS];
  uint32_t pending;
} Req;

typedef struct Ctx {
  int dev, ch;
  /* library handles (NULL when the library is disabled) */
  RcclQpStats* lqp[BENCH_QPS];
  RcclQpStats* lcts;
  RcclChannelStats* lch;
  /* reference handles (NULL when the reference is disabled) */
  RefQpStats* rqp[BENCH_QPS];
  RefQpStats* rcts;
  RefChannelStats* rch;
  uint64_t seq;
  uint64_t polls; /* RCCL's comm->telCqPollCount: poll calls counted behind the guard */
  uint64_t sink;
  uint64_t errors;
  uint64_t remote_base, local_base;
  uint32_t lkey, rkey;
  uint32_t sizes[BENCH_NSIZES];
  Req reqs[BENCH_INFLIGHT];
  FakeCq cq;
  FakeQp qp[BENCH_QPS];
} __attribute__((aligned(64))) Ctx;

/* Hook sets: N_ none, L_ the library through its installed header, R_ the reference (inline),
 * LA_ the library's latency family with one clock read per poll (PollTs + QpWqeCompleteAt). */
#define N_ON(c) 1
#define N_POLLED(c) ((void)0)
#define N_POLLTS(c) ((int64_t)0)
#define N_POSTTS(c, j) ((int64_t)0)
#define N_SEND(c, j, imm) ((void)0)
#define N_SIZE(c, b) ((void)0)
#define N_COMPLETE(c, j, ts, now) ((void)(j))
#define N_CTS(c, s) ((void)0)
#define N_BYTES(c, b) ((void)0)
#define N_REQDONE(c) ((void)0)

#define L_ON(c) rcclTelemetryOn()
#define L_POLLED(c) ((c)->polls++)
#define L_POLLTS(c) ((int64_t)0)
#define L_POSTTS(c, j) rcclTelemetryPostTs((c)->lqp[j])
#define L_SEND(c, j, imm) rcclTelemetryQpSendPosted((c)->lqp[j], (imm))
#define L_SIZE(c, b) rcclTelemetryWqeSize((c)->dev, (b))
#define L_COMPLETE(c, j, ts, now) rcclTelemetryQpWqeComplete((c)->lqp[j], (ts))
#define L_CTS(c, s) rcclTelemetryQpCtsSent((c)->lcts, (s))
#define L_BYTES(c, b) rcclTelemetryBytes((c)->dev, 1, (b))
#define L_REQDONE(c) rcclTelemetryChRequestCompleted((c)->lch)

#define LA_POSTTS(c, j) rcclTelemetryPostTs((c)->lqp[j])
#define LA_POLLTS(c) ((int64_t)0)
#define LA_COMPLETE(c, j, ts, now)                                                   \
  do {                                                                               \
    int64_t ts_ = (ts);                                                              \
    if (ts_ > RCCL_TELEMETRY_TS_UNSAMPLED && (now) == 0) (now) = rcclTelemetryPollTs(); \
    rcclTelemetryQpWqeCompleteAt((c)->lqp[j], ts_, (now));                           \
  } while (0)

#define R_ON(c) refTelemetryEnabled
#define R_POLLED(c) ((c)->polls++)
#define R_POLLTS(c) ((int64_t)0)
#define R_POSTTS(c, j) refPostTs((c)->rqp[j])
#define R_SEND(c, j, imm) refQpSendPosted((c)->rqp[j], (imm))
#define R_SIZE(c, b) refWqeSize((c)->dev, (b))
#define R_COMPLETE(c, j, ts, now) refQpWqeComplete((c)->rqp[j], (ts))
#define R_CTS(c, s) refQpCtsSent((c)->rcts, (s))
#define R_BYTES(c, b) refBytes((c)->dev, 1, (b))
#define R_REQDONE(c) refChRequestCompleted((c)->rch)

/*
 * Each loop picks a hook set (N, L or R) per hook family: FAM_LAT = PostTs + QpWqeComplete
 * (the latency family; the completion hook needs the token), FAM_SEND = QpSendPosted,
 * FAM_SIZE = WqeSize, FAM_REQ = Bytes + QpCtsSent + ChRequestCompleted (once per request),
 * FAM_GUARD = RCCL's rcclTelemetryOn() guards (per request before PostTs, per completion, per
 * poll call, with the poll counter they protect). The whole mix, as RCCL calls it: */
#define LOOP_NAME loop_none
#define FAM_LAT N
#define FAM_SEND N
#define FAM_SIZE N
#define FAM_REQ N
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_lib
#define FAM_LAT L
#define FAM_SEND L
#define FAM_SIZE L
#define FAM_REQ L
#define FAM_GUARD L
#include "bench_loop.h"
#define LOOP_NAME loop_ref
#define FAM_LAT R
#define FAM_SEND R
#define FAM_SIZE R
#define FAM_REQ R
#define FAM_GUARD R
#include "bench_loop.h"

/* One family at a time, for the per-hook breakdown. */
#define LOOP_NAME loop_lib_lat
#define FAM_LAT L
#define FAM_SEND N
#define FAM_SIZE N
#define FAM_REQ N
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_lib_send
#define FAM_LAT N
#define FAM_SEND L
#define FAM_SIZE N
#define FAM_REQ N
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_lib_size
#define FAM_LAT N
#define FAM_SEND N
#define FAM_SIZE L
#define FAM_REQ N
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_lib_req
#define FAM_LAT N
#define FAM_SEND N
#define FAM_SIZE N
#define FAM_REQ L
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_ref_lat
#define FAM_LAT R
#define FAM_SEND N
#define FAM_SIZE N
#define FAM_REQ N
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_ref_send
#define FAM_LAT N
#define FAM_SEND R
#define FAM_SIZE N
#define FAM_REQ N
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_ref_size
#define FAM_LAT N
#define FAM_SEND N
#define FAM_SIZE R
#define FAM_REQ N
#define FAM_GUARD N
#include "bench_loop.h"
#define LOOP_NAME loop_ref_req
#define FAM_LAT N
#define FAM_SEND N
#define FAM_SIZE N
#define FAM_REQ R
#define FAM_GUARD N
#include "bench_loop.h"
/* The guards alone: the loads and branches RCCL's call sites add around the hooks. */
#define LOOP_NAME loop_lib_guard
#define FAM_LAT N
#define FAM_SEND N
#define FAM_SIZE N
#define FAM_REQ N
#define FAM_GUARD L
#include "bench_loop.h"
#define LOOP_NAME loop_ref_guard
#define FAM_LAT N
#define FAM_SEND N
#define FAM_SIZE N
#define FAM_REQ N
#define FAM_GUARD R
#include "bench_loop.h"
/* The whole library mix with one clock read per poll (PollTs + QpWqeCompleteAt). */
#define LOOP_NAME loop_lib_at
#define FAM_LAT LA
#define FAM_SEND L
#define FAM_SIZE L
#define FAM_REQ L
#define FAM_GUARD L
#include "bench_loop.h"

typedef void (*LoopFn)(Ctx*, int);
enum { V_NONE, V_LIB, V_REF, V_COUNT };
static const char* const kVariant[V_COUNT] = {"none", "lib", "ref"};
static const LoopFn kLoop[V_COUNT] = {loop_none, loop_lib, loop_ref};

/* ------------------------------------------------------------------ small utils */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char* what) {
  fprintf(stderr, "bench: %s: %s\n", what, strerror(errno));
  exit(2);
}

/* CPUs this process may run on, in order. */
static int allowed_cpus(int* out, int max) {
  cpu_set_t set;
  int n = 0;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  for (int i = 0; i < CPU_SETSIZE && n < max; i++)
    if (CPU_ISSET(i, &set)) out[n++] = i;
  return n;
}

static int pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

static long rss_bytes(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  long size = 0, res = 0;
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &size, &res) != 2) res = -1;
  fclose(f);
  return res < 0 ? -1 : res * sysconf(_SC_PAGESIZE);
}

static Ctx* ctx_new(int dev, int ch) {
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
static void ctx_attach_lib(Ctx* c) {
  int granted = 0;
  int first = rcclTelemetrySetupChannel(c->dev, c->ch, BENCH_QPS + 1, &granted);
  if (first < 0 || granted < BENCH_QPS + 1) return; /* disabled: handles stay NULL */
  for (int j = 0; j <= BENCH_QPS; j++) rcclTelemetrySetQpRole(c->dev, c->ch, first + j, j < BENCH_QPS);
  for (int j = 0; j < BENCH_QPS; j++) c->lqp[j] = rcclTelemetryResolveQp(c->dev, c->ch, first + j);
  c->lcts = rcclTelemetryResolveQp(c->dev, c->ch, first + BENCH_QPS);
  c->lch = rcclTelemetryResolveChannel(c->dev, c->ch);
}

static void ctx_attach_ref(Ctx* c) {
  RefQpStats* q = refTelemetrySetupChannel(c->dev, c->ch, BENCH_QPS + 1);
  if (!q) return;
  for (int j = 0; j < BENCH_QPS; j++) c->rqp[j] = &q[j];
  c->rcts = &q[BENCH_QPS];
  c->rcts->is_data_qp = 0;
  c->rch = refTelemetryResolveChannel(c->dev, c->ch);
}

static void lib_register(int dev) {
  char name[32];
  snprintf(name, sizeof name, "bench_mlx5_%d", dev);
  rcclTelemetryRegisterDevice(dev, name, kTransport);
}

static int env_int(const char* name, int dflt) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

static int env_enabled(void) {
  const char* v = getenv("RCCL_TELEMETRY_ENABLE");
  return v && strcmp(v, "1") == 0;
}

/* Library telemetry counted by SwCapture for one device (sum over entries with that id). */
static int lib_capture(int dev, RcclTelemetrySwSnapshot* out) {
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

/* ------------------------------------------------------------------ child: hot path */

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
static int child_hot(const char* cfg, int reps, int nreq) {
  int cpus[CPU_SETSIZE];
  int ncpu = allowed_cpus(cpus, CPU_SETSIZE);
  int here = sched_getcpu();
  int pinned = (ncpu > 0 && here >= 0) ? pin_self(here) : 0;
  printf("M pinned.hot %d\n", pinned);

  if (rcclTelemetryInit() != 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
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

#define FAMILIES 5
static const char* const kFamily[FAMILIES] = {"lat", "send", "size", "req", "guard"};
static const char* const kFamilyLabel[FAMILIES] = {"PostTs + QpWqeComplete", "QpSendPosted", "WqeSize",
                                                   "Bytes + QpCtsSent + ChReqCompleted",
                                                   "rcclTelemetryOn() guards, poll count"};
static const LoopFn kLibFamily[FAMILIES] = {loop_lib_lat, loop_lib_send, loop_lib_size, loop_lib_req,
                                            loop_lib_guard};
static const LoopFn kRefFamily[FAMILIES] = {loop_ref_lat, loop_ref_send, loop_ref_size, loop_ref_req,
                                            loop_ref_guard};

/*
 * Which hook costs what: the no-hook loop against loops that carry one hook family each,
 * library and reference, interleaved like child_hot. Families are not exactly additive
 * (they share the loop's slack), but they show where the time goes.
 */
static int child_breakdown(const char* cfg, int reps, int nreq) {
  int here = sched_getcpu();
  if (here >= 0) pin_self(here);
  if (rcclTelemetryInit() != 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
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
enum { PT_NONE, PT_LIB, PT_AT, PT_COUNT };
static int child_pollts(const char* cfg, int reps, int nreq) {
  int here = sched_getcpu();
  if (here >= 0) pin_self(here);
  if (rcclTelemetryInit() != 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
  int enabled = env_enabled();
  refTelemetryInit(0, 1, 5, 30000);
  lib_register(0);
  lib_register(1);
  LoopFn fn[PT_COUNT] = {loop_none, loop_lib, loop_lib_at};
  Ctx* ctx[PT_COUNT];
  ctx[PT_NONE] = ctx_new(0, 0);
  ctx[PT_LIB] = ctx_new(0, 1);
  ctx[PT_AT] = ctx_new(1, 0);
  ctx_attach_lib(ctx[PT_LIB]);
  ctx_attach_lib(ctx[PT_AT]);
  double* all = malloc(sizeof(double) * PT_COUNT * (size_t)(reps > 0 ? reps : 1));
  if (!all) die("malloc");
  time_rotated(fn, ctx, PT_COUNT, reps, nreq, all);
  for (int rep = 0; rep < reps; rep++) {
    const double* t = all + rep * PT_COUNT;
    printf("S pt.over.lib.%s %.4f\n", cfg, t[PT_LIB] - t[PT_NONE]);
    printf("S pt.over.at.%s %.4f\n", cfg, t[PT_AT] - t[PT_NONE]);
    printf("S pt.at_minus_lib.%s %.4f\n", cfg, t[PT_AT] - t[PT_LIB]);
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
  printf("M sink %llu\n", (unsigned long long)((ctx[PT_LIB]->sink + ctx[PT_AT]->sink) & 0xffff));
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
static int child_logpair(const char* cfg, int reps, int nreq, int swap) {
  int here = sched_getcpu();
  if (here >= 0) pin_self(here);
  if (rcclTelemetryInit() != 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
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

/* ------------------------------------------------------------------ child: 2 threads */

typedef struct Worker {
  pthread_t tid;
  int cpu;
  int pinned;
  Ctx* job;     /* NULL: sit this window out */
  LoopFn fn;
  uint64_t reqs; /* requests done in the window */
  int64_t cpu_ns; /* CPU time this thread spent on them */
} Worker;

static int64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static pthread_barrier_t g_start, g_end;
static atomic_int g_stop;
static atomic_int g_quit;
#define SCALE_CHUNK 16 /* requests between looks at the stop flag */

static void* worker_main(void* arg) {
  Worker* w = arg;
  if (w->cpu >= 0) w->pinned = pin_self(w->cpu);
  for (;;) {
    pthread_barrier_wait(&g_start);
    if (atomic_load(&g_quit)) break;
    uint64_t n = 0;
    int64_t c0 = thread_cpu_ns();
    if (w->job)
      while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        w->fn(w->job, SCALE_CHUNK);
        n += SCALE_CHUNK;
      }
    w->cpu_ns = thread_cpu_ns() - c0;
    w->reqs = n;
    pthread_barrier_wait(&g_end);
  }
  return NULL;
}

/*
 * One window: thread 0 (this one) runs job0; the helper runs job1 (or idles).
 * *wall: WQEs per second of wall time, both threads together.
 * *cpu:  sum over threads of WQEs per second of that thread's own CPU time, i.e. the
 *        throughput had each thread had its core to itself. On a machine shared with
 *        other work this separates what the threads do to each other (shared cache
 *        lines, which slow a thread while it runs) from time other processes took.
 */
static void window(Worker* helper, Ctx* job0, Ctx* job1, LoopFn fn, int64_t window_ns, double* wall,
                   double* cpu) {
  helper->job = job1;
  helper->fn = fn;
  atomic_store(&g_stop, 0);
  pthread_barrier_wait(&g_start);
  int64_t t0 = now_ns(), t1;
  int64_t c0 = thread_cpu_ns();
  uint64_t n = 0;
  for (;;) {
    fn(job0, SCALE_CHUNK);
    n += SCALE_CHUNK;
    t1 = now_ns();
    if (t1 - t0 >= window_ns) break;
  }
  atomic_store(&g_stop, 1);
  int64_t c1 = thread_cpu_ns();
  pthread_barrier_wait(&g_end);
  *wall = (double)(n + helper->reqs) * BENCH_QPS * 1e9 / (double)(t1 - t0);
  *cpu = (double)n * BENCH_QPS * 1e9 / (double)(c1 - c0);
  if (job1 && helper->cpu_ns > 0) *cpu += (double)helper->reqs * BENCH_QPS * 1e9 / (double)helper->cpu_ns;
}

enum { M_ONE, M_SEP, M_SHARED, M_COUNT };
static const char* const kMode[M_COUNT] = {"1t", "2t_sep", "2t_shared"};

static int child_scale(int reps, int window_ms) {
  int cpus[CPU_SETSIZE];
  int ncpu = allowed_cpus(cpus, CPU_SETSIZE);
  int cpu0 = ncpu >= 2 ? cpus[0] : -1, cpu1 = ncpu >= 2 ? cpus[1] : -1;
  int pinned0 = cpu0 >= 0 ? pin_self(cpu0) : 0;

  if (rcclTelemetryInit() != 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
  int enabled = env_enabled();
  refTelemetryInit(enabled, env_int("RCCL_TELEMETRY_LATENCY_SAMPLE", 1), 5, 30000);
  for (int d = 0; d < 2; d++) {
    lib_register(d);
    refTelemetryRegisterDevice(d);
  }
  /* per variant: A = (dev 0, ch 0), B = (dev 1, ch 0), C = (dev 0, ch 1) */
  Ctx* A[V_COUNT];
  Ctx* B[V_COUNT];
  Ctx* C[V_COUNT];
  for (int v = 0; v < V_COUNT; v++) {
    A[v] = ctx_new(0, 2 * v);
    B[v] = ctx_new(1, 2 * v);
    C[v] = ctx_new(0, 2 * v + 1);
    if (v == V_LIB) {
      ctx_attach_lib(A[v]);
      ctx_attach_lib(B[v]);
      ctx_attach_lib(C[v]);
    } else if (v == V_REF) {
      ctx_attach_ref(A[v]);
      ctx_attach_ref(B[v]);
      ctx_attach_ref(C[v]);
    }
  }

  Worker helper = {.cpu = cpu1};
  pthread_barrier_init(&g_start, NULL, 2);
  pthread_barrier_init(&g_end, NULL, 2);
  if (pthread_create(&helper.tid, NULL, worker_main, &helper) != 0) die("pthread_create");

  int64_t wns = (int64_t)window_ms * 1000000;
  double tp[V_COUNT][M_COUNT], tc[V_COUNT][M_COUNT];
  for (int v = 0; v < V_COUNT; v++) window(&helper, A[v], B[v], kLoop[v], wns / 4, &tp[v][0], &tc[v][0]);
  for (int rep = 0; rep < reps; rep++) {
    for (int mk = 0; mk < M_COUNT; mk++) {
      int m = (rep + mk) % M_COUNT;
      for (int vk = 0; vk < V_COUNT; vk++) {
        int v = (rep + vk) % V_COUNT;
        Ctx* j1 = m == M_ONE ? NULL : m == M_SEP ? B[v] : C[v];
        window(&helper, A[v], j1, kLoop[v], wns, &tp[v][m], &tc[v][m]);
      }
    }
    for (int v = 0; v < V_COUNT; v++) {
      for (int m = 0; m < M_COUNT; m++) {
        printf("S tput.%s.%s %.0f\n", kVariant[v], kMode[m], tp[v][m]);
        printf("S tputcpu.%s.%s %.0f\n", kVariant[v], kMode[m], tc[v][m]);
      }
      printf("S scale.%s.2t_sep %.4f\n", kVariant[v], tp[v][M_SEP] / tp[v][M_ONE]);
      printf("S scale.%s.2t_shared %.4f\n", kVariant[v], tp[v][M_SHARED] / tp[v][M_ONE]);
      printf("S scalecpu.%s.2t_sep %.4f\n", kVariant[v], tc[v][M_SEP] / tc[v][M_ONE]);
      printf("S scalecpu.%s.2t_shared %.4f\n", kVariant[v], tc[v][M_SHARED] / tc[v][M_ONE]);
    }
  }
  atomic_store(&g_quit, 1);
  pthread_barrier_wait(&g_start);
  pthread_join(helper.tid, NULL);
  printf("M pinned.scale %d\n", pinned0 && helper.pinned);
  printf("M scale.cpus %d\n", ncpu);
  /* counts under concurrency: what both threads posted on the shared device must all be there */
  RcclTelemetrySwSnapshot s0, s1;
  lib_capture(0, &s0);
  lib_capture(1, &s1);
  uint64_t posted = (A[V_LIB]->seq + B[V_LIB]->seq + C[V_LIB]->seq) * BENCH_QPS;
  printf("M check.scale.posted %llu\n", (unsigned long long)(enabled ? posted : 0));
  printf("M check.scale.wqe_sent %llu\n", (unsigned long long)(s0.wqe_sent + s1.wqe_sent));
  fflush(stdout);
  return 0;
}

/* ------------------------------------------------------------------ child: flush, exit */

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

static int child_flush(const char* tag, int devs, int chs, int qps, int capture_reps) {
  struct mallinfo2 m0 = mallinfo2();
  long rss0 = rss_bytes();
  int64_t t0 = now_ns();
  if (rcclTelemetryInit() != 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
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
  getrusage(RUSAGE_SELF, &ru0);
  int64_t a = now_ns();
  int rc = rcclTelemetryFlush();
  int64_t b = now_ns();
  getrusage(RUSAGE_SELF, &ru1);
  printf("S %s.flush_ms %.3f\n", tag, (double)(b - a) / 1e6);
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
static int child_exit(int devs, int chs, int qps) {
  if (rcclTelemetryInit() != 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
  populate(devs, chs, qps);
  printf("T %lld\n", (long long)now_ns());
  fflush(stdout);
  return 0;
}

/*
 * Every loop once (`--child profile NREQ`, configuration from the environment), for callgrind
 * and perf. Under callgrind each loop's instruction count is dumped separately (client
 * requests; no-ops when not under valgrind), so the driver can report instructions per WQE:
 * exact, and unlike time not moved by other load on the machine.
 */
static int child_profile(int nreq) {
  if (rcclTelemetryInit() != 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
  refTelemetryInit(env_enabled(), env_int("RCCL_TELEMETRY_LATENCY_SAMPLE", 1), 5, 30000);
  lib_register(0);
  refTelemetryRegisterDevice(0);
  enum { NP = V_COUNT + 2 * FAMILIES + 1 };
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
  fn[NP - 1] = loop_lib_at;
  snprintf(name[NP - 1], sizeof name[0], "lib_at");
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

/* ------------------------------------------------------------------ driver: samples */

typedef struct Series {
  char key[80];
  double* v;
  int n, cap;
} Series;

static Series g_series[512];
static int g_nseries;

static Series* series(const char* key) {
  for (int i = 0; i < g_nseries; i++)
    if (strcmp(g_series[i].key, key) == 0) return &g_series[i];
  if (g_nseries == (int)(sizeof g_series / sizeof g_series[0])) {
    fprintf(stderr, "bench: too many series\n");
    exit(2);
  }
  Series* s = &g_series[g_nseries++];
  snprintf(s->key, sizeof s->key, "%s", key);
  return s;
}

static void add_sample(const char* key, double v) {
  Series* s = series(key);
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 64;
    s->v = realloc(s->v, sizeof(double) * (size_t)s->cap);
    if (!s->v) die("realloc");
  }
  s->v[s->n++] = v;
}

typedef struct Stats {
  int n;
  double median, p25, p75, min, max;
} Stats;

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double quantile(const double* sorted, int n, double q) {
  double pos = q * (n - 1);
  int lo = (int)floor(pos), hi = (int)ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

static Stats stats(const char* key) {
  Stats st = {0, NAN, NAN, NAN, NAN, NAN};
  for (int i = 0; i < g_nseries; i++) {
    Series* s = &g_series[i];
    if (strcmp(s->key, key) != 0 || s->n == 0) continue;
    double* v = malloc(sizeof(double) * (size_t)s->n);
    if (!v) die("malloc");
    memcpy(v, s->v, sizeof(double) * (size_t)s->n);
    qsort(v, (size_t)s->n, sizeof(double), cmp_double);
    st.n = s->n;
    st.median = quantile(v, s->n, 0.5);
    st.p25 = quantile(v, s->n, 0.25);
    st.p75 = quantile(v, s->n, 0.75);
    st.min = v[0];
    st.max = v[s->n - 1];
    free(v);
  }
  return st;
}

static double last(const char* key) {
  for (int i = 0; i < g_nseries; i++)
    if (strcmp(g_series[i].key, key) == 0 && g_series[i].n) return g_series[i].v[g_series[i].n - 1];
  return NAN;
}

static double sum(const char* key) {
  double t = 0;
  for (int i = 0; i < g_nseries; i++)
    if (strcmp(g_series[i].key, key) == 0)
      for (int k = 0; k < g_series[i].n; k++) t += g_series[i].v[k];
  return t;
}

/* ------------------------------------------------------------------ driver: children */

static const char* g_self;
static char g_outdir[256];
static int64_t g_child_t; /* the "T" line of the last child */
static const char* g_wrapper[8]; /* argv prefix for the next children (valgrind), or empty */

/*
 * Run `self --child args...` with RCCL_TELEMETRY_* replaced by `env` ("K=V" entries),
 * feed its S/M lines into the series, return the time it was reaped.
 */
static int64_t run_child(const char* const* env, const char* const* args) {
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

/* ------------------------------------------------------------------ driver: JSON */

typedef struct Json {
  FILE* f;
  int depth;
  int first[16];
} Json;

static void j_sep(Json* j, const char* key) {
  if (j->depth > 0) {
    if (!j->first[j->depth]) fputc(',', j->f);
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
  }
  j->first[j->depth] = 0;
  if (key) fprintf(j->f, "\"%s\": ", key);
}

static void j_open(Json* j, const char* key, char brace) {
  j_sep(j, key);
  fputc(brace, j->f);
  j->first[++j->depth] = 1;
}

static void j_close(Json* j, char brace) {
  int empty = j->first[j->depth];
  j->depth--;
  if (!empty) {
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
  }
  fputc(brace, j->f);
  if (j->depth == 0) fputc('\n', j->f);
}

static void j_num(Json* j, const char* key, double v) {
  j_sep(j, key);
  if (isfinite(v))
    fprintf(j->f, "%.6g", v);
  else
    fputs("null", j->f);
}

static void j_bool(Json* j, const char* key, int v) {
  j_sep(j, key);
  fputs(v < 0 ? "null" : v ? "true" : "false", j->f);
}

static void j_str(Json* j, const char* key, const char* s) {
  j_sep(j, key);
  fputc('"', j->f);
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(j->f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(j->f, "\\u%04x", ch);
    else
      fputc(ch, j->f);
  }
  fputc('"', j->f);
}

static void j_stats(Json* j, const char* key, Stats s) {
  j_open(j, key, '{');
  j_num(j, "median", s.median);
  j_num(j, "p25", s.p25);
  j_num(j, "p75", s.p75);
  j_num(j, "min", s.min);
  j_num(j, "max", s.max);
  j_num(j, "n", s.n);
  j_close(j, '}');
}

/* ------------------------------------------------------------------ driver: machine */

typedef struct Machine {
  char cpu[256];
  char kernel[256];
  char host[256];
  char started[64];
  char library[1024];
  char library_rev[64];
  int online_cpus, allowed_cpus;
  long mem_total_kb;
  double load_start[3], load_end[3];
  double clock_monotonic_ns, rdtsc_ns;
} Machine;

static void read_loadavg(double* l) {
  l[0] = l[1] = l[2] = NAN;
  FILE* f = fopen("/proc/loadavg", "r");
  if (!f) return;
  if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3) l[0] = l[1] = l[2] = NAN;
  fclose(f);
}

static void machine_info(Machine* m) {
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
static double clock_read_ns(clockid_t id) {
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
static double rdtsc_read_ns(void) {
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
static double rdtsc_read_ns(void) { return NAN; }
#endif

/* ------------------------------------------------------------------ driver: report */

typedef struct Target {
  const char* name;
  const char* rule;
  double limit;
  int at_most; /* 1: measured <= limit; 0: measured >= limit (or < for times) */
  double measured;
  int met;
} Target;

/* callgrind instructions per WQE of loop `name` in configuration cfg, minus the no-hook loop if `over` */
static double instr_over(const char* name, const char* cfg, int over) {
  char k[96], kn[96];
  snprintf(k, sizeof k, "instr.%s.%s", name, cfg);
  snprintf(kn, sizeof kn, "instr.none.%s", cfg);
  return last(k) - (over ? last(kn) : 0);
}

/* median over children of each child's median */
static double child_median(const char* key) {
  char k[96];
  snprintf(k, sizeof k, "cm.%s", key);
  return stats(k).median;
}

/* ratio of the child medians; undefined (NaN, "null" in JSON) when the reference costs
   less than 0.5 ns/WQE, i.e. when both are within noise of zero (the disabled case) */
static double ratio_of_medians(const char* num, const char* den) {
  double a = child_median(num), b = child_median(den);
  return (isfinite(a) && isfinite(b) && b >= 0.5) ? a / b : NAN;
}

/* per-child ratio lib/ref of median overheads (same process, same minute): its spread */
static void per_child_ratio(const char* cfg) {
  char kl[64], kr[64], kq[64];
  snprintf(kl, sizeof kl, "cm.over.lib.%s", cfg);
  snprintf(kr, sizeof kr, "cm.over.ref.%s", cfg);
  snprintf(kq, sizeof kq, "ratio.%s", cfg);
  Series* l = series(kl);
  Series* r = series(kr);
  for (int i = 0; i < l->n && i < r->n; i++)
    if (r->v[i] >= 0.5) add_sample(kq, l->v[i] / r->v[i]);
}

static void print_stats_row(const char* label, Stats s, const char* unit) {
  printf("  %-44s %10.3f %-3s [%.3f .. %.3f]  min %.3f max %.3f  n=%d\n", label, s.median, unit, s.p25, s.p75,
         s.min, s.max, s.n);
}

/* a hot-path figure: median of the children's medians, their range, and the pooled quartiles */
static void print_hot_row(const char* label, const char* key) {
  char k[96];
  snprintf(k, sizeof k, "cm.%s", key);
  Stats c = stats(k), p = stats(key);
  printf("  %-26s %8.3f ns  children [%.3f .. %.3f] n=%d   all reps p25..p75 [%.3f .. %.3f] n=%d\n", label,
         c.median, c.min, c.max, c.n, p.p25, p.p75, p.n);
}

/* print_hot_row for the library and the reference in each of the 3 configurations, from the
   series `what`.lib.<cfg> and `what`.ref.<cfg> */
static const char* const kCfgLabel[3] = {"disabled", "enabled N=1", "enabled N=16"};
static void print_lib_ref_rows(const char* what, const char* const cfgs[3]) {
  for (int c = 0; c < 3; c++) {
    char k[64], label[96];
    snprintf(k, sizeof k, "%s.lib.%s", what, cfgs[c]);
    snprintf(label, sizeof label, "library   %s", kCfgLabel[c]);
    print_hot_row(label, k);
    snprintf(k, sizeof k, "%s.ref.%s", what, cfgs[c]);
    snprintf(label, sizeof label, "reference %s", kCfgLabel[c]);
    print_hot_row(label, k);
  }
}

static void j_stats(Json* j, const char* key, Stats s);

static void j_hot(Json* j, const char* name, const char* key) {
  char k[96];
  snprintf(k, sizeof k, "cm.%s", key);
  j_open(j, name, '{');
  j_stats(j, "per_child_medians", stats(k));
  j_stats(j, "all_reps", stats(key));
  j_close(j, '}');
}

/* The one-clock-read-per-poll rows: the library mix with QpWqeComplete and with
   PollTs + QpWqeCompleteAt, ns per WQE above the no-hook loop, and their paired difference. */
static void print_pollts_rows(const char* const cfgs[3]) {
  printf("\nOne clock read per poll (4 completions per poll), library mix with guards, ns per WQE above the\n"
         "no-hook loop: QpWqeComplete (a clock read per sampled completion) vs PollTs once per poll +\n"
         "QpWqeCompleteAt, and At minus per-WQE paired batch by batch (negative = At cheaper):\n");
  for (int c = 0; c < 3; c++) {
    char k[64], label[96];
    snprintf(k, sizeof k, "pt.over.lib.%s", cfgs[c]);
    snprintf(label, sizeof label, "Complete      %s", kCfgLabel[c]);
    print_hot_row(label, k);
    snprintf(k, sizeof k, "pt.over.at.%s", cfgs[c]);
    snprintf(label, sizeof label, "PollTs+At     %s", kCfgLabel[c]);
    print_hot_row(label, k);
    snprintf(k, sizeof k, "pt.at_minus_lib.%s", cfgs[c]);
    snprintf(label, sizeof label, "At - Complete %s", kCfgLabel[c]);
    print_hot_row(label, k);
  }
}

static void j_pollts(Json* j, const char* const cfgs[3]) {
  j_open(j, "one_clock_read_per_poll_ns_per_wqe", '{');
  j_str(j, "what",
        "library mix with RCCL's guards; completions drained 4 per poll; QpWqeComplete vs PollTs once per "
        "poll that returned completions + QpWqeCompleteAt; overheads above the no-hook loop of the same child");
  for (int c = 0; c < 3; c++) {
    char k[64];
    j_open(j, cfgs[c], '{');
    snprintf(k, sizeof k, "pt.over.lib.%s", cfgs[c]);
    j_hot(j, "per_wqe_complete_overhead", k);
    snprintf(k, sizeof k, "pt.over.at.%s", cfgs[c]);
    j_hot(j, "pollts_complete_at_overhead", k);
    snprintf(k, sizeof k, "pt.at_minus_lib.%s", cfgs[c]);
    j_hot(j, "at_minus_per_wqe", k);
    j_close(j, '}');
  }
  j_close(j, '}');
}

static int child_main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* mode = argv[2];
  if (strcmp(mode, "hot") == 0 && argc >= 6) return child_hot(argv[3], atoi(argv[4]), atoi(argv[5]));
  if (strcmp(mode, "breakdown") == 0 && argc >= 6)
    return child_breakdown(argv[3], atoi(argv[4]), atoi(argv[5]));
  if (strcmp(mode, "pollts") == 0 && argc >= 6) return child_pollts(argv[3], atoi(argv[4]), atoi(argv[5]));
  if (strcmp(mode, "logpair") == 0 && argc >= 7)
    return child_logpair(argv[3], atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
  if (strcmp(mode, "scale") == 0 && argc >= 5) return child_scale(atoi(argv[3]), atoi(argv[4]));
  if (strcmp(mode, "flush") == 0 && argc >= 8)
    return child_flush(argv[3], atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), atoi(argv[7]));
  if (strcmp(mode, "exit") == 0 && argc >= 6) return child_exit(atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
  if (strcmp(mode, "profile") == 0 && argc >= 4) return child_profile(atoi(argv[3]));
  fprintf(stderr, "bench: unknown child mode %s\n", mode);
  return 2;
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
static int measure_instructions(const char* cfg, const char* const* env, int nreq) {
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

/* Remove the files the children left in the scratch directory, then the directory. */
static void clean_outdir(void) {
  DIR* d = opendir(g_outdir);
  if (d) {
    struct dirent* e;
    char path[512];
    while ((e = readdir(d)))
      if (strncmp(e->d_name, "rccl_telemetry_", 15) == 0 || strncmp(e->d_name, "cg.", 3) == 0) {
        snprintf(path, sizeof path, "%s/%s", g_outdir, e->d_name);
        unlink(path);
      }
    closedir(d);
  }
  if (rmdir(g_outdir) != 0) fprintf(stderr, "bench: could not remove %s: %s\n", g_outdir, strerror(errno));
}

static void usage(void) {
  fprintf(stderr,
          "usage: bench [--json PATH] [--quick]\n"
          "  --json PATH  write every figure to PATH (default: none)\n"
          "  --quick      a few reps only (smoke test; figures are noisy)\n"
          "Environment: RCCL_TELEMETRY_* is set by the bench per child; anything set outside is ignored.\n"
          "Exit status: 0 when the hooks counted every posted and completed WQE and no child failed;\n"
          "1 otherwise. Time targets never change the exit status.\n");
}

/* ------------------------------------------------------------------ log-scale histogram (issue 14) */

/*
 * What the log-scale completion histogram costs, in the same run as the main table: the same
 * hot-path and breakdown children at N=1 and N=16 with RCCL_TELEMETRY_LOG_HISTOGRAM=0 (the
 * seed's linear histogram alone: the figures before the log-scale one), one of each per round
 * beside the default children (both histograms), and Flush/memory children at both sizes.
 * The added cost per sampled completion is read from the PostTs + QpWqeComplete family at N=1,
 * where every completion is sampled; each round's pair of children gives one paired delta.
 */
static const char* const kLogCfg[2] = {"n1_nolog", "n16_nolog"};
static const char* const kLogWith[2] = {"n1", "n16"};
static const char* const kLogEnv[2][4] = {
    {"RCCL_TELEMETRY_ENABLE=1", "RCCL_TELEMETRY_LATENCY_SAMPLE=1", "RCCL_TELEMETRY_LOG_HISTOGRAM=0", NULL},
    {"RCCL_TELEMETRY_ENABLE=1", "RCCL_TELEMETRY_LATENCY_SAMPLE=16", "RCCL_TELEMETRY_LOG_HISTOGRAM=0", NULL}};

static const char* const kLogWithEnv[2][3] = {{"RCCL_TELEMETRY_ENABLE=1", "RCCL_TELEMETRY_LATENCY_SAMPLE=1", NULL},
                                              {"RCCL_TELEMETRY_ENABLE=1", "RCCL_TELEMETRY_LATENCY_SAMPLE=16", NULL}};

static void loghist_round(int r, const char* reps_s, const char* nreq_s, const char* breps_s) {
  for (int k = 0; k < 2; k++) {
    int c = (r + k) % 2;
    const char* a[] = {"hot", kLogCfg[c], reps_s, nreq_s, NULL};
    run_child(kLogEnv[c], a);
    const char* b[] = {"breakdown", kLogCfg[c], breps_s, nreq_s, NULL};
    run_child(kLogEnv[c], b);
    /* both in one process (child_logpair); alternate rounds swap the two channels' roles */
    const char* lp[] = {"logpair", kLogWith[c], breps_s, nreq_s, (r & 1) ? "1" : "0", NULL};
    run_child(kLogWithEnv[c], lp);
  }
}

static void loghist_flush_children(int quick) {
  const char* env[] = {"RCCL_TELEMETRY_ENABLE=1", "RCCL_TELEMETRY_LOG_HISTOGRAM=0", NULL};
  for (int r = 0; r < (quick ? 1 : 2); r++) {
    const char* a[] = {"flush", "small_nolog", "8", "64", "16", "1", NULL};
    run_child(env, a);
  }
  const char* b[] = {"flush", "big_nolog", "32", "512", "16", "1", NULL};
  run_child(env, b);
}

/* cm.<with> - cm.<without>, child by child (the i-th child of each ran in the same round) */
static Stats paired_delta(const char* with, const char* without, const char* out) {
  char kw[64], kn[64];
  snprintf(kw, sizeof kw, "cm.%.50s", with);
  snprintf(kn, sizeof kn, "cm.%.50s", without);
  Series* w = series(kw);
  Series* n = series(kn);
  for (int i = 0; i < w->n && i < n->n; i++) add_sample(out, w->v[i] - n->v[i]);
  return stats(out);
}

typedef struct LogFig {
  double with_mix, without_mix, with_lat, without_lat;
  Stats d_mix, d_lat;
  double per_sampled; /* added ns per sampled completion, separate children */
  /* the latency family paired batch by batch in one process (child_logpair) */
  double ip_with, ip_without;
  Stats ip_child, ip_all; /* added ns per WQE: the children's medians, and every pair */
  double ip_per_sampled;
  /* the same over the children that ran at the machine's normal speed (their no-hook loop
   * within 10% of the fastest child's): this VM has speed phases of seconds that slow every
   * loop, and every added cost with it, by up to 2-3x */
  double ip_normal, ip_normal_per_sampled;
  int ip_normal_n;
} LogFig;

static LogFig loghist_figures(int c) {
  static LogFig cache[2];
  static int done[2];
  if (done[c]) return cache[c];
  LogFig f;
  char a[64], b[64], o[64];
  snprintf(a, sizeof a, "over.lib.%s", kLogWith[c]);
  snprintf(b, sizeof b, "over.lib.%s", kLogCfg[c]);
  snprintf(o, sizeof o, "logdelta.mix.%s", kLogWith[c]);
  f.with_mix = child_median(a);
  f.without_mix = child_median(b);
  f.d_mix = paired_delta(a, b, o);
  snprintf(a, sizeof a, "brk.lib.lat.%s", kLogWith[c]);
  snprintf(b, sizeof b, "brk.lib.lat.%s", kLogCfg[c]);
  snprintf(o, sizeof o, "logdelta.lat.%s", kLogWith[c]);
  f.with_lat = child_median(a);
  f.without_lat = child_median(b);
  f.d_lat = paired_delta(a, b, o);
  f.per_sampled = f.d_lat.median * (c == 0 ? 1 : 16);
  snprintf(a, sizeof a, "lp.with.%s", kLogWith[c]);
  f.ip_with = child_median(a);
  snprintf(a, sizeof a, "lp.without.%s", kLogWith[c]);
  f.ip_without = child_median(a);
  snprintf(a, sizeof a, "lp.added.%s", kLogWith[c]);
  snprintf(b, sizeof b, "cm.lp.added.%s", kLogWith[c]);
  f.ip_child = stats(b);
  f.ip_all = stats(a);
  f.ip_per_sampled = f.ip_child.median * (c == 0 ? 1 : 16);
  snprintf(a, sizeof a, "cm.lp.none.%s", kLogWith[c]);
  Series* sn = series(a);
  Series* sa = series(b);
  double lo = INFINITY;
  for (int i = 0; i < sn->n; i++)
    if (sn->v[i] < lo) lo = sn->v[i];
  double* sel = malloc(sizeof(double) * (size_t)(sa->n > 0 ? sa->n : 1));
  if (!sel) die("malloc");
  f.ip_normal_n = 0;
  for (int i = 0; i < sa->n && i < sn->n; i++)
    if (sn->v[i] <= 1.1 * lo) sel[f.ip_normal_n++] = sa->v[i];
  if (f.ip_normal_n) qsort(sel, (size_t)f.ip_normal_n, sizeof(double), cmp_double);
  f.ip_normal = f.ip_normal_n ? quantile(sel, f.ip_normal_n, 0.5) : NAN;
  f.ip_normal_per_sampled = f.ip_normal * (c == 0 ? 1 : 16);
  free(sel);
  done[c] = 1;
  cache[c] = f;
  return f;
}

static void loghist_print(void) {
  printf("\nLog-scale completion histogram: both histograms (the default) against the seed's alone\n"
         "(RCCL_TELEMETRY_LOG_HISTOGRAM=0), same run. ns per WQE above the no-hook loop, median of child\n"
         "medians; 'added' is the median of per-round paired differences [quartiles]:\n");
  printf("  %-34s %8s %9s %8s %-22s %s\n", "", "both", "seed only", "added", "", "added per sampled completion");
  for (int c = 0; c < 2; c++) {
    LogFig f = loghist_figures(c);
    const char* n = c == 0 ? "N=1 " : "N=16";
    printf("  %s full hook mix                  %8.2f %9.2f %+8.2f [%+.2f .. %+.2f]\n", n, f.with_mix, f.without_mix,
           f.d_mix.median, f.d_mix.p25, f.d_mix.p75);
    printf("  %s PostTs + QpWqeComplete         %8.2f %9.2f %+8.2f [%+.2f .. %+.2f]  %+.2f ns%s\n", n, f.with_lat,
           f.without_lat, f.d_lat.median, f.d_lat.p25, f.d_lat.p75, f.per_sampled,
           c == 0 ? " (every completion sampled)" : " (x16: 1 in 16 sampled; noise x16 too)");
  }
  printf("  the same family paired batch by batch in one process (child_logpair: a channel whose slots record\n"
         "  the log-scale histogram and one whose slots do not, as with RCCL_TELEMETRY_LOG_HISTOGRAM=0):\n");
  for (int c = 0; c < 2; c++) {
    LogFig f = loghist_figures(c);
    printf("  %s PostTs + QpWqeComplete, 1 process %8.2f %9.2f %+8.2f children [%+.2f .. %+.2f], all pairs [%+.2f .. "
           "%+.2f]  %+.2f ns\n",
           c == 0 ? "N=1 " : "N=16", f.ip_with, f.ip_without, f.ip_child.median, f.ip_child.min, f.ip_child.max,
           f.ip_all.p25, f.ip_all.p75, f.ip_per_sampled);
  }
  for (int c = 0; c < 2; c++) {
    LogFig f = loghist_figures(c);
    printf("  %s the children at normal speed (no-hook loop within 10%% of the fastest): %+.2f (%d of %d)  %+.2f ns\n",
           c == 0 ? "N=1 " : "N=16", f.ip_normal, f.ip_normal_n, f.ip_child.n, f.ip_normal_per_sampled);
  }
  LogFig f1 = loghist_figures(0);
  printf("  target: added cost per sampled completion <= 1 ns (N=1, PostTs + QpWqeComplete, paired in one\n"
         "  process, normal-speed children): %.2f ns, %s (all children: %.2f ns; separate children: %.2f ns)\n",
         f1.ip_normal_per_sampled,
         !isfinite(f1.ip_normal_per_sampled) ? "NOT MEASURED" : f1.ip_normal_per_sampled <= 1.0 ? "met" : "MISSED",
         f1.ip_per_sampled, f1.per_sampled);
  const char* sz[2][2] = {{"small", "small_nolog"}, {"big", "big_nolog"}};
  const char* names[2] = {"8x64x16", "32x512x16"};
  for (int s = 0; s < 2; s++) {
    char a[64], b[64], c[64], d[64];
    snprintf(a, sizeof a, "%s.flush_ms", sz[s][0]);
    snprintf(b, sizeof b, "%s.flush_ms", sz[s][1]);
    snprintf(c, sizeof c, "%s.rss_per_slot", sz[s][0]);
    snprintf(d, sizeof d, "%s.rss_per_slot", sz[s][1]);
    printf("  Flush %-9s both %8.2f ms, seed only %8.2f ms; RSS per QP slot both %7.1f B, seed only %7.1f B\n",
           names[s], stats(a).median, stats(b).median, stats(c).median, stats(d).median);
  }
}

static void loghist_json(Json* j) {
  j_open(j, "log_histogram", '{');
  for (int c = 0; c < 2; c++) {
    LogFig f = loghist_figures(c);
    j_open(j, c == 0 ? "enabled_n1" : "enabled_n16", '{');
    j_num(j, "mix_both_ns_per_wqe", f.with_mix);
    j_num(j, "mix_seed_only_ns_per_wqe", f.without_mix);
    j_stats(j, "mix_added_ns_per_wqe_paired", f.d_mix);
    j_num(j, "lat_both_ns_per_wqe", f.with_lat);
    j_num(j, "lat_seed_only_ns_per_wqe", f.without_lat);
    j_stats(j, "lat_added_ns_per_wqe_paired", f.d_lat);
    j_num(j, "added_ns_per_sampled_completion", f.per_sampled);
    j_open(j, "one_process", '{');
    j_num(j, "lat_both_ns_per_wqe", f.ip_with);
    j_num(j, "lat_seed_only_ns_per_wqe", f.ip_without);
    j_stats(j, "lat_added_ns_per_wqe_child_medians", f.ip_child);
    j_stats(j, "lat_added_ns_per_wqe_all_pairs", f.ip_all);
    j_num(j, "added_ns_per_sampled_completion", f.ip_per_sampled);
    j_num(j, "normal_speed_children", f.ip_normal_n);
    j_num(j, "normal_speed_added_ns_per_sampled_completion", f.ip_normal_per_sampled);
    j_close(j, '}');
    j_close(j, '}');
  }
  LogFig f1 = loghist_figures(0);
  j_num(j, "target_added_ns_per_sampled_completion", 1.0);
  j_str(j, "target_measured_by", "enabled_n1.one_process.normal_speed_added_ns_per_sampled_completion");
  j_bool(j, "target_met", isfinite(f1.ip_normal_per_sampled) && f1.ip_normal_per_sampled <= 1.0);
  const char* sz[4] = {"small", "small_nolog", "big", "big_nolog"};
  for (int s = 0; s < 4; s++) {
    char k[64], name[64];
    j_open(j, sz[s], '{');
    snprintf(k, sizeof k, "%s.flush_ms", sz[s]);
    snprintf(name, sizeof name, "flush_ms");
    j_stats(j, name, stats(k));
    snprintf(k, sizeof k, "%s.rss_per_slot", sz[s]);
    j_stats(j, "rss_bytes_per_qp_slot", stats(k));
    snprintf(k, sizeof k, "%s.file_bytes", sz[s]);
    j_stats(j, "file_bytes", stats(k));
    j_close(j, '}');
  }
  j_close(j, '}');
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "--child") == 0) return child_main(argc, argv);

  const char* json_path = NULL;
  int quick = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
      json_path = argv[++i];
    else if (strcmp(argv[i], "--quick") == 0)
      quick = 1;
    else {
      usage();
      return 2;
    }
  }
  static char self[4096];
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sl <= 0) die("readlink /proc/self/exe");
  self[sl] = 0;
  g_self = self;
  snprintf(g_outdir, sizeof g_outdir, "/tmp/rccl-telemetry-bench-XXXXXX");
  if (!mkdtemp(g_outdir)) die("mkdtemp");

  Machine mach;
  machine_info(&mach);
  mach.clock_monotonic_ns = clock_read_ns(CLOCK_MONOTONIC);
  mach.rdtsc_ns = rdtsc_read_ns();
  int64_t bench_t0 = now_ns();

  /* sizes of the run */
  const int rounds = quick ? 1 : 21;
  const int hot_reps = quick ? 50 : 800;
  const int hot_nreq = 512; /* 2048 WQEs per timed batch: short, so the paired batches are close in time */
  const int scale_reps = quick ? 1 : 6;
  const int window_ms = quick ? 20 : 40;
  const char* cfgs[3] = {"off", "n1", "n16"};
  const char* cfg_env[3][3] = {{NULL}, {"RCCL_TELEMETRY_ENABLE=1", "RCCL_TELEMETRY_LATENCY_SAMPLE=1", NULL},
                               {"RCCL_TELEMETRY_ENABLE=1", "RCCL_TELEMETRY_LATENCY_SAMPLE=16", NULL}};
  const int brk_reps = quick ? 20 : 250;
  char reps_s[16], nreq_s[16], sreps_s[16], win_s[16], breps_s[16];
  snprintf(breps_s, sizeof breps_s, "%d", brk_reps);
  snprintf(reps_s, sizeof reps_s, "%d", hot_reps);
  snprintf(nreq_s, sizeof nreq_s, "%d", hot_nreq);
  snprintf(sreps_s, sizeof sreps_s, "%d", scale_reps);
  snprintf(win_s, sizeof win_s, "%d", window_ms);

  fprintf(stderr, "bench: %d rounds of hot-path and 2-thread children ...\n", rounds);
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < 3; k++) {
      int c = (r + k) % 3;
      const char* args[] = {"hot", cfgs[c], reps_s, nreq_s, NULL};
      run_child(cfg_env[c], args);
    }
    for (int k = 0; k < 3; k++) {
      int c = (r + k) % 3;
      const char* bargs[] = {"breakdown", cfgs[c], breps_s, nreq_s, NULL};
      run_child(cfg_env[c], bargs);
    }
    for (int k = 0; k < 3; k++) {
      int c = (r + k) % 3;
      const char* pargs[] = {"pollts", cfgs[c], breps_s, nreq_s, NULL};
      run_child(cfg_env[c], pargs);
    }
    const char* args[] = {"scale", sreps_s, win_s, NULL};
    run_child(cfg_env[1], args);
    loghist_round(r, reps_s, nreq_s, breps_s);
  }

  fprintf(stderr, "bench: flush, snapshot, memory and exit-time children ...\n");
  const char* env_on[] = {"RCCL_TELEMETRY_ENABLE=1", NULL};
  const char* env_off[] = {NULL};
  const int flush_small_reps = quick ? 1 : 3, flush_big_reps = quick ? 1 : 2;
  for (int r = 0; r < flush_small_reps; r++) {
    const char* a[] = {"flush", "small", "8", "64", "16", "20", NULL};
    run_child(env_on, a);
  }
  for (int r = 0; r < flush_big_reps; r++) {
    const char* a[] = {"flush", "big", "32", "512", "16", "5", NULL};
    run_child(env_on, a);
  }
  loghist_flush_children(quick);
  {
    /* Every QP told its peer: the per-peer histograms' Flush and memory cost. */
    const char* env_p2[] = {"RCCL_TELEMETRY_ENABLE=1", "BENCH_PEERS=2", NULL};
    const char* env_p16[] = {"RCCL_TELEMETRY_ENABLE=1", "BENCH_PEERS=16", NULL};
    for (int r = 0; r < flush_small_reps; r++) {
      const char* a[] = {"flush", "small_peers2", "8", "64", "16", "1", NULL};
      run_child(env_p2, a);
      const char* b[] = {"flush", "small_peers16", "8", "64", "16", "1", NULL};
      run_child(env_p16, b);
    }
    for (int r = 0; r < flush_big_reps; r++) {
      const char* a[] = {"flush", "big_peers2", "32", "512", "16", "1", NULL};
      run_child(env_p2, a);
      const char* b[] = {"flush", "big_peers16", "32", "512", "16", "1", NULL};
      run_child(env_p16, b);
    }
  }
  const int exit_small_reps = quick ? 1 : 5, exit_big_reps = quick ? 1 : 2;
  for (int r = 0; r < exit_small_reps; r++) {
    const char* a[] = {"exit", "8", "64", "16", NULL};
    int64_t reaped = run_child(env_on, a);
    add_sample("exit.small.enabled_ms", (double)(reaped - g_child_t) / 1e6);
    reaped = run_child(env_off, a);
    add_sample("exit.small.disabled_ms", (double)(reaped - g_child_t) / 1e6);
  }
  for (int r = 0; r < exit_big_reps; r++) {
    const char* a[] = {"exit", "32", "512", "16", NULL};
    int64_t reaped = run_child(env_on, a);
    add_sample("exit.big.enabled_ms", (double)(reaped - g_child_t) / 1e6);
    reaped = run_child(env_off, a);
    add_sample("exit.big.disabled_ms", (double)(reaped - g_child_t) / 1e6);
  }
  const int instr_nreq = 5000;
  int have_instr = 0;
  fprintf(stderr, "bench: instruction counts under callgrind ...\n");
  for (int c = 0; c < 3; c++) have_instr += measure_instructions(cfgs[c], cfg_env[c], instr_nreq) > 0;
  if (!have_instr) fprintf(stderr, "bench: valgrind not found; no instruction counts\n");
  double bench_s = (double)(now_ns() - bench_t0) / 1e9;
  read_loadavg(mach.load_end);

  /* leftovers: telemetry files from the hot children's exit handlers */
  clean_outdir();

  /* ---------------- derived figures */
  for (int c = 0; c < 3; c++) per_child_ratio(cfgs[c]);
  double ratio_n1 = ratio_of_medians("over.lib.n1", "over.ref.n1");
  double ratio_n16 = ratio_of_medians("over.lib.n16", "over.ref.n16");
  double ratio_off = ratio_of_medians("over.lib.off", "over.ref.off");
  double over_lib_off = child_median("over.lib.off");
  Stats scale_lib_sep = stats("scalecpu.lib.2t_sep");
  Stats flush_small = stats("small.flush_ms"), flush_big = stats("big.flush_ms");
  Stats ex_se = stats("exit.small.enabled_ms"), ex_sd = stats("exit.small.disabled_ms");
  Stats ex_be = stats("exit.big.enabled_ms"), ex_bd = stats("exit.big.disabled_ms");
  double exit_added_small = ex_se.median - ex_sd.median;
  double exit_added_big = ex_be.median - ex_bd.median;

  Target targets[] = {
      {"enabled_n1_ratio", "library overhead / reference overhead, enabled N=1", 0.40, 1, ratio_n1, 0},
      {"enabled_n16_ratio", "library overhead / reference overhead, enabled N=16", 0.30, 1, ratio_n16, 0},
      {"disabled_overhead_ns", "library disabled, ns per WQE above the no-hook loop", 0.5, 1,
       over_lib_off, 0},
      /* what the 0.5 ns target is for: telemetry off makes no call into the library (callgrind:
         1 when any library object code ran in the disabled loop; not measured without valgrind) */
      {"disabled_library_calls", "library disabled: did the loop run any library code (callgrind, 0 = no)", 0, 1,
       last("libcalled.lib.off"), 0},
      {"two_thread_scaling", "2 threads on QPs of separate devices / 1 thread, enabled N=1, per-thread CPU-time throughput", 1.8, 0,
       scale_lib_sep.median, 0},
      {"flush_8x64x16_ms", "Flush of 8 devices x 64 channels x 16 QPs, ms", 100, 1, flush_small.median, 0},
      {"flush_32x512x16_ms", "Flush of 32 devices x 512 channels x 16 QPs, ms", 2000, 1, flush_big.median, 0},
  };
  const int ntargets = (int)(sizeof targets / sizeof targets[0]);
  for (int i = 0; i < ntargets; i++) {
    double m = targets[i].measured;
    targets[i].met = !isfinite(m) ? -1 : targets[i].at_most ? m <= targets[i].limit : m >= targets[i].limit;
  }

  /* sanity: did the hooks count what was posted? */
  int counts_ok = 1;
  const char* pairs[][2] = {{"check.lib.n1.posted", "check.lib.n1.wqe_sent"},
                            {"check.lib.n16.posted", "check.lib.n16.wqe_sent"},
                            {"check.lib.n1.completed", "check.lib.n1.wqe_completed"},
                            {"check.lib.n16.completed", "check.lib.n16.wqe_completed"},
                            {"check.lib.off.posted", "check.lib.off.wqe_sent"},
                            {"check.ref.n1.posted", "check.ref.n1.wqe_sent"},
                            {"check.lib.off.polls_expected", "check.lib.off.polls"},
                            {"check.lib.n1.polls_expected", "check.lib.n1.polls"},
                            {"check.at.n1.posted", "check.at.n1.wqe_sent"},
                            {"check.at.n1.completed", "check.at.n1.wqe_completed"},
                            {"check.at.n1.completed", "check.at.n1.wqe_sampled"},
                            {"check.at.n16.completed", "check.at.n16.wqe_completed"},
                            {"check.at.off.posted", "check.at.off.wqe_sent"},
                            {"check.scale.posted", "check.scale.wqe_sent"}};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
    if (sum(pairs[i][0]) != sum(pairs[i][1])) {
      counts_ok = 0;
      fprintf(stderr, "bench: count mismatch: %s = %.0f but %s = %.0f\n", pairs[i][0], sum(pairs[i][0]),
              pairs[i][1], sum(pairs[i][1]));
    }
  double sampled_frac_n16 = sum("check.lib.n16.wqe_sampled") / sum("check.lib.n16.wqe_completed");

  /* ---------------- table */
  printf("\nrccl-telemetry bench  (%s, %d CPUs, %s)\n", mach.cpu, mach.online_cpus, mach.kernel);
  printf("library: %s (rev %s)\n", mach.library, mach.library_rev);
  printf("load average at start %.2f, at end %.2f; run took %.1f s\n", mach.load_start[0], mach.load_end[0],
         bench_s);
  printf("one clock_gettime(CLOCK_MONOTONIC) %.1f ns, one rdtsc %.1f ns\n\n", mach.clock_monotonic_ns,
         mach.rdtsc_ns);
  printf("Hot path, ns per WQE (hook mix per WQE: PostTs, QpSendPosted, WqeSize, QpWqeComplete; per 4-WQE\n"
         "request: Bytes, QpCtsSent, ChRequestCompleted; RCCL's rcclTelemetryOn() guards: one per request\n"
         "before its PostTs calls, one per completion, one per poll call). Median over child processes of\n"
         "each child's median, the range of the child medians, and the quartiles of all timed batches pooled:\n");
  print_hot_row("no hooks (loop alone)", "hot.none");
  print_lib_ref_rows("hot", cfgs);
  printf("\nOverhead = ns per WQE above the no-hook loop, paired batch by batch:\n");
  print_lib_ref_rows("over", cfgs);
  printf("\nRatio library overhead / reference overhead (of the medians above; per-child ratio range):\n");
  double ratios[3] = {ratio_off, ratio_n1, ratio_n16};
  for (int c = 0; c < 3; c++) {
    char k[64];
    snprintf(k, sizeof k, "ratio.%s", cfgs[c]);
    Stats s = stats(k);
    if (!isfinite(ratios[c]))
      printf("  %-26s      n/a    (reference overhead within noise of zero)\n", kCfgLabel[c]);
    else
      printf("  %-26s %8.3fx    per child: median %.3f [%.3f .. %.3f] n=%d\n", kCfgLabel[c], ratios[c],
             s.median, s.min, s.max, s.n);
  }
  printf("\nPer-hook breakdown: ns per WQE above the no-hook loop with one hook family alone\n"
         "(median over children of child medians; per-request hooks are spread over its 4 WQEs):\n");
  printf("  %-36s %9s %9s %9s %9s %9s %9s\n", "family", "lib off", "ref off", "lib N=1", "ref N=1", "lib N=16",
         "ref N=16");
  for (int f = 0; f < FAMILIES; f++) {
    printf("  %-36s", kFamilyLabel[f]);
    for (int c = 0; c < 3; c++)
      for (int w = 0; w < 2; w++) {
        char k[64];
        snprintf(k, sizeof k, "brk.%s.%s.%s", w ? "ref" : "lib", kFamily[f], cfgs[c]);
        printf(" %9.2f", child_median(k));
      }
    printf("\n");
  }
  print_pollts_rows(cfgs);
  if (have_instr) {
    printf("\nInstructions per WQE under callgrind (exact; unaffected by machine load):\n");
    printf("  %-36s %9s %9s %9s\n", "", "disabled", "N=1", "N=16");
    const char* rows[][2] = {{"none", "no-hook loop (absolute)"}, {"lib", "library, above no-hook loop"},
                             {"ref", "reference, above no-hook loop"}};
    for (int r = 0; r < 3; r++) {
      printf("  %-36s", rows[r][1]);
      for (int c = 0; c < 3; c++) printf(" %9.1f", instr_over(rows[r][0], cfgs[c], r > 0));
      printf("\n");
    }
    printf("  %-36s", "ratio library / reference");
    for (int c = 0; c < 3; c++) printf(" %8.3fx", instr_over("lib", cfgs[c], 1) / instr_over("ref", cfgs[c], 1));
    printf("\n");
    for (int f = 0; f < FAMILIES; f++) {
      char ln[64], rn[64];
      snprintf(ln, sizeof ln, "lib.%s", kFamily[f]);
      snprintf(rn, sizeof rn, "ref.%s", kFamily[f]);
      printf("  %-36s", kFamilyLabel[f]);
      for (int c = 0; c < 3; c++) printf("  %5.1f/%-5.1f", instr_over(ln, cfgs[c], 1), instr_over(rn, cfgs[c], 1));
      printf("   (library/reference)\n");
    }
    printf("  %-36s", "library, PollTs + QpWqeCompleteAt");
    for (int c = 0; c < 3; c++) printf(" %9.1f", instr_over("lib_at", cfgs[c], 1));
    printf("\n");
    printf("  library code executed in the disabled loop: %s\n",
           last("libcalled.lib.off") > 0 ? "YES (a call into the library)" : "no (no call into the library)");
  }
  printf("\nThroughput, million WQEs/s (enabled N=1): wall clock | per-thread CPU time (see README)\n");
  for (int v = 0; v < V_COUNT; v++)
    for (int m = 0; m < M_COUNT; m++) {
      char k[64], kc[64], label[96];
      snprintf(k, sizeof k, "tput.%s.%s", kVariant[v], kMode[m]);
      snprintf(kc, sizeof kc, "tputcpu.%s.%s", kVariant[v], kMode[m]);
      Stats s = stats(k), sc = stats(kc);
      snprintf(label, sizeof label, "%-4s %s", kVariant[v], kMode[m]);
      printf("  %-44s %8.2f [%.2f .. %.2f] | %8.2f [%.2f .. %.2f]\n", label, s.median / 1e6, s.p25 / 1e6,
             s.p75 / 1e6, sc.median / 1e6, sc.p25 / 1e6, sc.p75 / 1e6);
    }
  printf("Scaling, 2 threads / 1 thread (paired per window set):\n");
  for (int v = 0; v < V_COUNT; v++) {
    for (int m = M_SEP; m < M_COUNT; m++) {
      char k[64], kc[64], label[96];
      snprintf(k, sizeof k, "scale.%s.%s", kVariant[v], kMode[m]);
      snprintf(kc, sizeof kc, "scalecpu.%s.%s", kVariant[v], kMode[m]);
      Stats s = stats(k), sc = stats(kc);
      snprintf(label, sizeof label, "%-4s %s", kVariant[v],
               m == M_SEP ? "2 threads, separate devices" : "2 threads, one device");
      printf("  %-44s %8.3fx [%.3f .. %.3f] | %8.3fx [%.3f .. %.3f]\n", label, s.median, s.p25, s.p75, sc.median,
             sc.p25, sc.p75);
    }
  }
  loghist_print();
  printf("\nFlush, snapshot, memory, exit:\n");
  print_stats_row("Flush 8x64x16 (8192 QP slots)", flush_small, "ms");
  print_stats_row("Flush 32x512x16 (262144 QP slots)", flush_big, "ms");
  print_stats_row("Flush 8x64x16, every QP told 1 of 2 peers", stats("small_peers2.flush_ms"), "ms");
  print_stats_row("Flush 8x64x16, every QP told 1 of 16 peers", stats("small_peers16.flush_ms"), "ms");
  print_stats_row("Flush 32x512x16, every QP told 1 of 2 peers", stats("big_peers2.flush_ms"), "ms");
  print_stats_row("Flush 32x512x16, every QP told 1 of 16 peers", stats("big_peers16.flush_ms"), "ms");
  print_stats_row("RSS per QP slot (32x512x16, 2 peers)", stats("big_peers2.rss_per_slot"), "B");
  print_stats_row("RSS per QP slot (32x512x16, 16 peers)", stats("big_peers16.rss_per_slot"), "B");
  print_stats_row("JSON file 8x64x16", stats("small.file_bytes"), "B");
  print_stats_row("JSON file 32x512x16", stats("big.file_bytes"), "B");
  print_stats_row("SwCapture 8x64x16", stats("small.swcapture_us"), "us");
  print_stats_row("SwCapture 32x512x16", stats("big.swcapture_us"), "us");
  print_stats_row("setup 8x64x16 (Init+Register+Setup+traffic)", stats("small.setup_ms"), "ms");
  print_stats_row("setup 32x512x16", stats("big.setup_ms"), "ms");
  print_stats_row("RSS per QP slot (32x512x16)", stats("big.rss_per_slot"), "B");
  print_stats_row("heap per QP slot (32x512x16, mallinfo2)", stats("big.heap_per_slot"), "B");
  print_stats_row("RSS per QP slot (8x64x16)", stats("small.rss_per_slot"), "B");
  print_stats_row("exit 8x64x16 enabled (last line -> reaped)", ex_se, "ms");
  print_stats_row("exit 8x64x16 disabled", ex_sd, "ms");
  print_stats_row("exit 32x512x16 enabled", ex_be, "ms");
  print_stats_row("exit 32x512x16 disabled", ex_bd, "ms");
  printf("  %-44s %10.3f ms\n", "time added to exit, 8x64x16", exit_added_small);
  printf("  %-44s %10.3f ms\n", "time added to exit, 32x512x16", exit_added_big);
  printf("  %-44s %10zu B\n", "reference: bytes per QP slot (sizeof)", sizeof(RefQpStats));
  printf("\nTargets:\n");
  for (int i = 0; i < ntargets; i++)
    printf("  %-22s %-4s %-8g measured %-10.4g %s\n", targets[i].name, targets[i].at_most ? "<=" : ">=",
           targets[i].limit, targets[i].measured,
           targets[i].met < 0 ? "NOT MEASURED" : targets[i].met ? "met" : "MISSED");
  printf("\ncounts check (hooks counted every posted/completed WQE): %s; N=16 sampled fraction %.4f\n",
         counts_ok ? "ok" : "MISMATCH", sampled_frac_n16);
  if (sum("child_failures") > 0) printf("WARNING: %.0f child process(es) failed\n", sum("child_failures"));

  /* ---------------- JSON */
  if (json_path) {
    FILE* f = fopen(json_path, "w");
    if (!f) {
      fprintf(stderr, "bench: cannot write %s: %s\n", json_path, strerror(errno));
      return 1;
    }
    Json j = {.f = f};
    j_open(&j, NULL, '{');
    j_str(&j, "schema", "rccl-telemetry-bench/1");
    j_open(&j, "machine", '{');
    j_str(&j, "cpu", mach.cpu);
    j_num(&j, "online_cpus", mach.online_cpus);
    j_num(&j, "allowed_cpus", mach.allowed_cpus);
    j_num(&j, "mem_total_kb", (double)mach.mem_total_kb);
    j_str(&j, "kernel", mach.kernel);
    j_str(&j, "host", mach.host);
    j_str(&j, "compiler", "gcc " __VERSION__);
    j_str(&j, "started_utc", mach.started);
    j_num(&j, "loadavg_start", mach.load_start[0]);
    j_num(&j, "loadavg_end", mach.load_end[0]);
    j_num(&j, "run_seconds", bench_s);
    j_num(&j, "clock_gettime_monotonic_ns", mach.clock_monotonic_ns);
    j_num(&j, "rdtsc_ns", mach.rdtsc_ns);
    j_str(&j, "library", mach.library);
    j_str(&j, "library_rev", mach.library_rev);
    j_bool(&j, "hot_thread_pinned", (int)last("pinned.hot"));
    j_bool(&j, "scale_threads_pinned", (int)last("pinned.scale"));
    j_close(&j, '}');
    j_open(&j, "config", '{');
    j_num(&j, "rounds", rounds);
    j_num(&j, "reps_per_child", hot_reps);
    j_num(&j, "wqes_per_timed_batch", hot_nreq * BENCH_QPS);
    j_num(&j, "scale_window_ms", window_ms);
    j_str(&j, "hook_mix",
          "per WQE: PostTs, QpSendPosted, WqeSize, QpWqeComplete; per 4-WQE request: Bytes, QpCtsSent, "
          "ChRequestCompleted; rcclTelemetryOn() guards as RCCL's call sites have them: one per request "
          "before its PostTs calls, one per completion drained, one per poll call (with the poll count)");
    j_num(&j, "histogram_buckets", 5);
    j_num(&j, "histogram_interval_ns", 30000);
    j_bool(&j, "quick", quick);
    j_close(&j, '}');

    j_open(&j, "hot_path_ns_per_wqe", '{');
    j_hot(&j, "no_hooks", "hot.none");
    for (int c = 0; c < 3; c++) {
      char k[64], name[64];
      j_open(&j, cfgs[c], '{');
      snprintf(k, sizeof k, "hot.lib.%s", cfgs[c]);
      j_hot(&j, "library", k);
      snprintf(k, sizeof k, "hot.ref.%s", cfgs[c]);
      j_hot(&j, "reference", k);
      snprintf(k, sizeof k, "over.lib.%s", cfgs[c]);
      j_hot(&j, "library_overhead", k);
      snprintf(k, sizeof k, "over.ref.%s", cfgs[c]);
      j_hot(&j, "reference_overhead", k);
      j_num(&j, "ratio_library_to_reference_overhead", ratios[c]);
      snprintf(name, sizeof name, "ratio.%s", cfgs[c]);
      j_stats(&j, "per_child_ratio", stats(name));
      j_close(&j, '}');
    }
    j_close(&j, '}');

    j_open(&j, "breakdown_ns_per_wqe", '{');
    for (int c = 0; c < 3; c++) {
      j_open(&j, cfgs[c], '{');
      for (int f = 0; f < FAMILIES; f++) {
        j_open(&j, kFamily[f], '{');
        j_str(&j, "hooks", kFamilyLabel[f]);
        char k[64];
        snprintf(k, sizeof k, "brk.lib.%s.%s", kFamily[f], cfgs[c]);
        j_hot(&j, "library", k);
        snprintf(k, sizeof k, "brk.ref.%s.%s", kFamily[f], cfgs[c]);
        j_hot(&j, "reference", k);
        j_close(&j, '}');
      }
      j_close(&j, '}');
    }
    j_close(&j, '}');

    j_pollts(&j, cfgs);

    j_open(&j, "instructions_per_wqe", '{');
    j_bool(&j, "measured", have_instr > 0);
    if (have_instr) {
      j_num(&j, "requests_per_loop", instr_nreq);
      for (int c = 0; c < 3; c++) {
        j_open(&j, cfgs[c], '{');
        j_num(&j, "no_hooks", instr_over("none", cfgs[c], 0));
        j_num(&j, "library_above_no_hooks", instr_over("lib", cfgs[c], 1));
        j_num(&j, "reference_above_no_hooks", instr_over("ref", cfgs[c], 1));
        j_num(&j, "ratio", instr_over("lib", cfgs[c], 1) / instr_over("ref", cfgs[c], 1));
        j_num(&j, "library_pollts_complete_at_above_no_hooks", instr_over("lib_at", cfgs[c], 1));
        char k[64];
        snprintf(k, sizeof k, "libcalled.lib.%s", cfgs[c]);
        j_bool(&j, "library_code_ran_in_library_loop", last(k) > 0);
        for (int f = 0; f < FAMILIES; f++) {
          char ln[64], rn[64];
          snprintf(ln, sizeof ln, "lib.%s", kFamily[f]);
          snprintf(rn, sizeof rn, "ref.%s", kFamily[f]);
          j_open(&j, kFamily[f], '{');
          j_num(&j, "library", instr_over(ln, cfgs[c], 1));
          j_num(&j, "reference", instr_over(rn, cfgs[c], 1));
          j_close(&j, '}');
        }
        j_close(&j, '}');
      }
    }
    j_close(&j, '}');

    j_open(&j, "scaling_enabled_n1", '{');
    for (int v = 0; v < V_COUNT; v++) {
      j_open(&j, kVariant[v], '{');
      for (int m = 0; m < M_COUNT; m++) {
        char k[64], name[64];
        snprintf(k, sizeof k, "tput.%s.%s", kVariant[v], kMode[m]);
        snprintf(name, sizeof name, "wall_wqe_per_s_%s", kMode[m]);
        j_stats(&j, name, stats(k));
        snprintf(k, sizeof k, "tputcpu.%s.%s", kVariant[v], kMode[m]);
        snprintf(name, sizeof name, "cputime_wqe_per_s_%s", kMode[m]);
        j_stats(&j, name, stats(k));
      }
      char k[64];
      snprintf(k, sizeof k, "scale.%s.2t_sep", kVariant[v]);
      j_stats(&j, "wall_scaling_2t_separate_devices", stats(k));
      snprintf(k, sizeof k, "scale.%s.2t_shared", kVariant[v]);
      j_stats(&j, "wall_scaling_2t_one_device", stats(k));
      snprintf(k, sizeof k, "scalecpu.%s.2t_sep", kVariant[v]);
      j_stats(&j, "cputime_scaling_2t_separate_devices", stats(k));
      snprintf(k, sizeof k, "scalecpu.%s.2t_shared", kVariant[v]);
      j_stats(&j, "cputime_scaling_2t_one_device", stats(k));
      j_close(&j, '}');
    }
    j_close(&j, '}');

    const char* sizes[2] = {"small", "big"};
    const char* size_names[2] = {"8x64x16", "32x512x16"};
    j_open(&j, "flush", '{');
    for (int s = 0; s < 2; s++) {
      char k[64];
      j_open(&j, size_names[s], '{');
      snprintf(k, sizeof k, "%s.slots", sizes[s]);
      j_num(&j, "qp_slots", last(k));
      snprintf(k, sizeof k, "%s.flush_ms", sizes[s]);
      j_stats(&j, "flush_ms", stats(k));
      snprintf(k, sizeof k, "%s.file_bytes", sizes[s]);
      j_stats(&j, "file_bytes", stats(k));
      snprintf(k, sizeof k, "%s.swcapture_us", sizes[s]);
      j_stats(&j, "swcapture_us", stats(k));
      snprintf(k, sizeof k, "%s.setup_ms", sizes[s]);
      j_stats(&j, "setup_ms", stats(k));
      snprintf(k, sizeof k, "%s.rss_per_slot", sizes[s]);
      j_stats(&j, "rss_bytes_per_qp_slot", stats(k));
      snprintf(k, sizeof k, "%s.heap_per_slot", sizes[s]);
      j_stats(&j, "heap_bytes_per_qp_slot", stats(k));
      j_close(&j, '}');
    }
    j_num(&j, "reference_bytes_per_qp_slot", (double)sizeof(RefQpStats));
    j_close(&j, '}');
    /* every QP told its peer (rcclTelemetryQpSetPeer): 2 or 16 remote NICs per channel */
    j_open(&j, "flush_peers", '{');
    const char* ptags[4] = {"small_peers2", "small_peers16", "big_peers2", "big_peers16"};
    for (int s = 0; s < 4; s++) {
      char k[64];
      j_open(&j, ptags[s], '{');
      snprintf(k, sizeof k, "%s.flush_ms", ptags[s]);
      j_stats(&j, "flush_ms", stats(k));
      snprintf(k, sizeof k, "%s.file_bytes", ptags[s]);
      j_stats(&j, "file_bytes", stats(k));
      snprintf(k, sizeof k, "%s.setup_ms", ptags[s]);
      j_stats(&j, "setup_ms", stats(k));
      snprintf(k, sizeof k, "%s.rss_per_slot", ptags[s]);
      j_stats(&j, "rss_bytes_per_qp_slot", stats(k));
      j_close(&j, '}');
    }
    j_close(&j, '}');

    loghist_json(&j);
    j_open(&j, "exit_ms", '{');
    j_stats(&j, "8x64x16_enabled", ex_se);
    j_stats(&j, "8x64x16_disabled", ex_sd);
    j_num(&j, "8x64x16_added", exit_added_small);
    j_stats(&j, "32x512x16_enabled", ex_be);
    j_stats(&j, "32x512x16_disabled", ex_bd);
    j_num(&j, "32x512x16_added", exit_added_big);
    j_close(&j, '}');

    j_open(&j, "targets", '[');
    for (int i = 0; i < ntargets; i++) {
      j_open(&j, NULL, '{');
      j_str(&j, "name", targets[i].name);
      j_str(&j, "rule", targets[i].rule);
      j_str(&j, "comparison", targets[i].at_most ? "<=" : ">=");
      j_num(&j, "limit", targets[i].limit);
      j_num(&j, "measured", targets[i].measured);
      j_bool(&j, "met", targets[i].met);
      j_close(&j, '}');
    }
    j_close(&j, ']');
    j_open(&j, "checks", '{');
    j_bool(&j, "counts_match", counts_ok);
    j_num(&j, "n16_sampled_fraction", sampled_frac_n16);
    j_num(&j, "child_failures", sum("child_failures"));
    j_close(&j, '}');
    j_close(&j, '}');
    if (fclose(f) != 0) {
      fprintf(stderr, "bench: writing %s failed\n", json_path);
      return 1;
    }
    printf("\nwrote %s\n", json_path);
  }
  /* Exit status reports correctness only (hooks counted what was posted, no child failed,
     the sampled fraction at N=16 is 1/16), never whether a time target was met. */
  int sampled_ok = sampled_frac_n16 > 0.05 && sampled_frac_n16 < 0.075;
  if (!counts_ok || !sampled_ok || sum("child_failures") > 0) {
    fprintf(stderr, "bench: FAILED: counts %s, N=16 sampled fraction %.4f, %.0f failed children\n",
            counts_ok ? "ok" : "mismatch", sampled_frac_n16, sum("child_failures"));
    return 1;
  }
  return 0;
}
