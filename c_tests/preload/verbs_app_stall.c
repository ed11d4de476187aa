/*
 * c_tests/preload/verbs_app_stall.c: verbs_app's stall scenario: QPs left with WRs
 * outstanding in each way the stall detector must tell apart. Separate because it is timed
 * (the only scenario that sleeps for the detector).
 */
#include "verbs_app.h"

/* Stall detection (the test sets RCCL_TELEMETRY_STALL_MS small), on device 0 in slot order:
 * slots 0/1 (pair p): 3 unsignalled WRs and a signalled one on p.a whose completion is not
 * polled for PAUSE ms, then drained (a stall that ends); slots 2/3 (pair q): runs of 5
 * unsignalled writes and a signalled one drained at once throughout the pause (retired by the
 * later completion: never a stall), then 2 unsignalled writes with nothing after them
 * (outstanding, never a stall); slots 4/5 (pair r): one signalled WR never polled, and r.a
 * destroyed while it is outstanding (its stall ends); slots 6/7 (pair w): a signalled WR never
 * polled (still stalled when the file is written). Then PAUSE ms more for
 * the detector to see all that. Prints the milliseconds the scenario took. */
static long ms_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}
static void post_run(struct ibv_qp *qp, int unsig, int sig) {
  struct ibv_send_wr w[8], *bad = NULL;
  struct ibv_sge s[8];
  int n = unsig + sig;
  for (int i = 0; i < n; i++) {
    set_wr(&w[i], &s[i], IBV_WR_RDMA_WRITE, 64, i >= unsig, 100 + i);
    w[i].next = i + 1 < n ? &w[i + 1] : NULL;
  }
  if (ibv_post_send(qp, w, &bad)) FAIL("post_send");
}
void sc_stall(int pause_ms) {
  long t0 = ms_now();
  struct pair p, q, r, w;
  mk_pair(&p, 0);
  mk_pair(&q, 0);
  mk_pair(&r, 0);
  mk_pair(&w, 0);
  post_run(p.a, 3, 1);
  post_run(r.a, 0, 1);
  post_run(w.a, 0, 1);
  while (ms_now() - t0 < pause_ms) {
    post_run(q.a, 5, 1);
    drain(q.cqa, 1, IBV_WC_SUCCESS);
    usleep(1000);
  }
  V.destroy_qp(r.a);
  drain(p.cqa, 1, IBV_WC_SUCCESS);
  post_run(q.a, 2, 0);
  usleep((useconds_t)pause_ms * 1000);
  char extra[64];
  snprintf(extra, sizeof extra, "\"elapsed_ms\":%ld", ms_now() - t0);
  report(extra);
}

/* Deep send queues (more entries than the detector counts one by one), on device 0:
 * slots 0/1 (pair u): u.a, depth 8192, holds 4,104 unsignalled writes with nothing after them
 * (outstanding, no completion will come: never a stall); slots 2/3 (pair v): v.a, depth 8192,
 * 4,104 unsignalled writes, one signalled write whose completion is never polled, then 8
 * unsignalled ones (a completion is due: a stall). Then PAUSE ms for the detector. */
static void post_deep(struct ibv_qp *qp, int unsig, int sig_at) {
  for (int i = 0; i < unsig;) {
    struct ibv_send_wr w[8], *bad = NULL;
    struct ibv_sge s[8];
    int k = unsig - i < 8 ? unsig - i : 8;
    for (int j = 0; j < k; j++) {
      set_wr(&w[j], &s[j], IBV_WR_RDMA_WRITE, 64, i + j == sig_at, 1000 + (uint64_t)(i + j));
      w[j].next = j + 1 < k ? &w[j + 1] : NULL;
    }
    if (ibv_post_send(qp, w, &bad)) FAIL("post_send at %d", i);
    i += k;
  }
}
void sc_stall_deep(int pause_ms) {
  long t0 = ms_now();
  struct pair u, v;
  mk_pair_depth(&u, 0, 8192);
  mk_pair_depth(&v, 0, 8192);
  post_deep(u.a, 4104, -1);
  post_deep(v.a, 4104 + 1 + 8, 4104);
  usleep((useconds_t)pause_ms * 1000);
  char extra[64];
  snprintf(extra, sizeof extra, "\"elapsed_ms\":%ld", ms_now() - t0);
  report(extra);
}
