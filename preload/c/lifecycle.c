/*
 * preload/c/lifecycle.c: the interposer's life: the constructor (RCCL_TELEMETRY_ENABLE read
 * once, by the engine's rule: off, nothing is ever touched), the decision to count at the
 * first device opened (the engine started, its layout checked, membarrier registered, the
 * stall walk handed to the engine, the fork handler), and a forked child's turn to inert. Also the state those
 * decide and the diagnostics' printf. Separate because it runs once, not per object.
 */
#include "preload.h"

#include <stdarg.h>

#ifdef RTP_BENCH_COUNTER_CLOCK
uint64_t rtp_bench_clock;
#endif

/* ------------------------------------------------------------------------------------ */
/* State                                                                                */

/* What each is: preload.h. */
int g_state;
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
int g_forked;
size_t g_idx_sent_off;
int g_fast;

void diagf(int debug_only, const char *fmt, ...) {
  char b[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  rtp_diag(debug_only, b);
}

/* ------------------------------------------------------------------------------------ */
/* Start-up                                                                             */

/* The engine says whether RCCL_TELEMETRY_ENABLE asks for telemetry (its one rule,
 * src/config.rs): rtp_enabled only reads the environment, so it is safe this early. */
__attribute__((constructor)) static void rtp_ctor(void) {
  find_real_dl();
  if (rtp_enabled() != 1) __atomic_store_n(&g_state, -1, __ATOMIC_RELEASE);
}

/* pthread_atfork's child handler (the forking thread, alone in the child): inert from here,
 * with a fresh g_mu should anything still reach it. */
static void in_forked_child(void) {
  ST(g_forked, 1);
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&g_mu, &fresh, sizeof fresh);
}

/* Whether to count: decided at the first device opened (so a process that never opens one
 * starts no engine and writes no file), then the engine's own word (0 in a forked child and
 * once the final file is claimed). */
int start(void) {
  int s = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
  if (s == 0) {
    pthread_mutex_lock(&g_mu);
    s = g_state;
    if (s == 0) {
      uint64_t l[8];
      s = -1;
      if (rtp_init() != 1) {
        /* the engine said why (or telemetry is simply off) */
      } else if /* l[7] is needed; l[0..6] a belt: rtp_qpext is generated from QpExt (engine.h),
                 * so only a header and an archive of different builds can disagree */ (rtp_ext_layout(l, 8) != 8 || l[0] != sizeof(rtp_qpext) ||
                 l[1] != offsetof(rtp_qpext, send_wqe) || l[2] != offsetof(rtp_qpext, read_wqe) ||
                 l[3] != offsetof(rtp_qpext, atomic_wqe) || l[4] != offsetof(rtp_qpext, other_wqe) ||
                 l[5] != offsetof(rtp_qpext, retired_unsignalled) || l[6] != offsetof(rtp_qpext, track_full)) {
        rtp_diag(0, "verbs interposer: engine layout mismatch; nothing is counted");
      } else {
        g_idx_sent_off = (size_t)l[7];
        long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        g_fast = q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                 syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
        if (!g_fast) rtp_diag(1, "verbs interposer: no expedited membarrier; every QP takes a lock per post and completion");
        rtp_stall_walker(stall_walk);
        g_tnode_key_ok = pthread_key_create(&g_tnode_key, tnode_release) == 0;
        if (pthread_atfork(NULL, NULL, in_forked_child) != 0)
          rtp_diag(1, "verbs interposer: no fork handler; a child forked while a QP is being created may hang in destroy");
        s = 1;
      }
      __atomic_store_n(&g_state, s, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_mu);
  }
  return s == 1 && !LD(g_forked) && rcclTelemetryOn();
}
