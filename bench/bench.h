/*
 * bench.h -- what the files of the benchmark share: the includes, the loop's shape and
 * context (Ctx), the loops (bench_loops.c), the driver's types (series statistics, the JSON
 * writer, the machine, the targets) and every function one file calls in another, grouped by
 * the file that defines it.
 *
 * The benchmark (one binary, bench/build/bench) measures librccl_telemetry exactly as RCCL
 * would use it: through the installed rccl_telemetry.h, linked against the installed shared
 * object, against an inline C reference of RCCL's in-tree design (reference_telemetry.h) in
 * the same run. Timing is clock_gettime(CLOCK_MONOTONIC) around whole batches; no RDTSC.
 * Benchmarks print figures; nothing here asserts on time.
 */
#ifndef BENCH_H
#define BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
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

typedef void (*LoopFn)(Ctx*, int);
enum { V_NONE, V_LIB, V_REF, V_COUNT };
#define FAMILIES 5

/* bench_loops.c */
void loop_none(Ctx* c, int nreq);
void loop_lib(Ctx* c, int nreq);
void loop_ref(Ctx* c, int nreq);
void loop_lib_lat(Ctx* c, int nreq);
void loop_lib_send(Ctx* c, int nreq);
void loop_lib_size(Ctx* c, int nreq);
void loop_lib_req(Ctx* c, int nreq);
void loop_ref_lat(Ctx* c, int nreq);
void loop_ref_send(Ctx* c, int nreq);
void loop_ref_size(Ctx* c, int nreq);
void loop_ref_req(Ctx* c, int nreq);
void loop_lib_guard(Ctx* c, int nreq);
void loop_ref_guard(Ctx* c, int nreq);
void loop_lib_at(Ctx* c, int nreq);
void loop_lib_prev(Ctx* c, int nreq); /* loop_lib against the previous release's header */
/* bench_loop_dlopen.c */
void loop_lib_dl(Ctx* c, int nreq); /* loop_lib through the header's loader (RCCL_TELEMETRY_DLOPEN) */
int loop_lib_dl_init(void);          /* the loader's rcclTelemetryInit */
extern const char* const kVariant[V_COUNT];
extern const LoopFn kLoop[V_COUNT];

enum { M_ONE, M_SEP, M_SHARED, M_COUNT };

typedef struct Series {
  char key[80];
  double* v;
  int n, cap;
} Series;

typedef struct Stats {
  int n;
  double median, p25, p75, min, max;
} Stats;

typedef struct Json {
  FILE* f;
  int depth;
  int first[16];
} Json;

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

typedef struct Target {
  const char* name;
  const char* rule;
  double limit;
  int at_most; /* 1: measured <= limit; 0: measured >= limit (or < for times) */
  double measured;
  int met;
} Target;


/* bench_callgrind.c */
int child_profile(int nreq);
int measure_instructions(const char* cfg, const char* const* env, int nreq);

/* bench_children.c */
extern const char* g_self;
extern char g_outdir[256];
extern int64_t g_child_t; /* the "T" line of the last child */
extern const char* g_wrapper[8]; /* argv prefix for the next children (valgrind), or empty */
int64_t run_child(const char* const* env, const char* const* args);

/* bench_flush.c */
int child_flush(const char* tag, int devs, int chs, int qps, int capture_reps);
int child_exit(int devs, int chs, int qps);

/* bench_hot.c */
int child_hot(const char* cfg, int reps, int nreq);
extern const char* const kFamily[FAMILIES];
extern const char* const kFamilyLabel[FAMILIES];
extern const LoopFn kLibFamily[FAMILIES];
extern const LoopFn kRefFamily[FAMILIES];
int child_breakdown(const char* cfg, int reps, int nreq);
int child_pollts(const char* cfg, int reps, int nreq);
int child_logpair(const char* cfg, int reps, int nreq, int swap);

/* bench_json.c */
void j_open(Json* j, const char* key, char brace);
void j_close(Json* j, char brace);
void j_num(Json* j, const char* key, double v);
void j_bool(Json* j, const char* key, int v);
void j_str(Json* j, const char* key, const char* s);
void j_stats(Json* j, const char* key, Stats s);

/* bench_monitor.c */
void monitor_round(int r, const char* breps_s, const char* nreq_s);
void monitor_print(void);
void monitor_json(Json* j);

/* bench_loghist.c */
void loghist_round(int r, const char* reps_s, const char* nreq_s, const char* breps_s);
void loghist_flush_children(int quick);
void loghist_print(void);
void loghist_json(Json* j);

/* bench_machine.c */
void read_loadavg(double* l);
void machine_info(Machine* m);
double clock_read_ns(clockid_t id);
double rdtsc_read_ns(void);

/* bench_report.c */
double instr_over(const char* name, const char* cfg, int over);
double child_median(const char* key);
double ratio_of_medians(const char* num, const char* den);
void per_child_ratio(const char* cfg);
void print_stats_row(const char* label, Stats s, const char* unit);
void print_hot_row(const char* label, const char* key);
extern const char* const kCfgLabel[3];
void print_lib_ref_rows(const char* what, const char* const cfgs[3]);
void j_hot(Json* j, const char* name, const char* key);
void print_pollts_rows(const char* const cfgs[3]);
void j_pollts(Json* j, const char* const cfgs[3]);

/* bench_stats.c */
/* Named series a run can have: each hook, mode and round kind of every row, with room to grow. */
#define BENCH_MAX_SERIES 2048
extern Series g_series[BENCH_MAX_SERIES];
extern int g_nseries;
Series* series(const char* key);
void add_sample(const char* key, double v);
int cmp_double(const void* a, const void* b);
double quantile(const double* sorted, int n, double q);
Stats stats(const char* key);
double last(const char* key);
double sum(const char* key);

/* bench_threads.c */
extern const char* const kMode[M_COUNT];
int child_scale(int reps, int window_ms);

/* bench_util.c */
int64_t now_ns(void);
void die(const char* what);
int allowed_cpus(int* out, int max);
int pin_self(int cpu);
long rss_bytes(void);
int reset_rss_peak(void);
long rss_peak_bytes(void);
Ctx* ctx_new(int dev, int ch);
void ctx_attach_lib(Ctx* c);
void ctx_attach_ref(Ctx* c);
void lib_register(int dev);
int env_int(const char* name, int dflt);
int env_enabled(void);
int lib_capture(int dev, RcclTelemetrySwSnapshot* out);

#endif /* BENCH_H */
