/*
 * bench_threads.c -- the two-thread child (`scale`): one thread alone, two threads on separate
 * channels, two threads sharing a device, in fixed wall-clock windows, reporting wall and CPU
 * time per WQE.
 */

#include "bench.h"

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

const char* const kMode[M_COUNT] = {"1t", "2t_sep", "2t_shared"};

int child_scale(int reps, int window_ms) {
  int cpus[CPU_SETSIZE];
  int ncpu = allowed_cpus(cpus, CPU_SETSIZE);
  int cpu0 = ncpu >= 2 ? cpus[0] : -1, cpu1 = ncpu >= 2 ? cpus[1] : -1;
  int pinned0 = cpu0 >= 0 ? pin_self(cpu0) : 0;

  if (rcclTelemetryInit() < 0) fprintf(stderr, "bench: rcclTelemetryInit failed\n");
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
