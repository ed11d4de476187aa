/*
 * c_tests/preload/verbs_app_lifecycle.c: verbs_app's lifecycle scenarios: fork (with a QP in
 * use, and inside the interposer's global lock), a QP record reused while a poller may hold
 * it, device close racing an open, QP churn under a poller, close and reopen, many QPs one
 * at a time (memory), telemetry off (the provider's own tables), and dlsym(RTLD_NEXT /
 * RTLD_DEFAULT). Separate because these are about objects coming and going, not counts.
 */
#include "verbs_app.h"

/* fork with a QP in use: the child posts and polls on the parent's QP and exits. */
void sc_fork(int with_fork_init) {
  if (with_fork_init && V.fork_init()) FAIL("fork_init");
  struct pair p;
  mk_pair(&p, 0);
  chain_round(&p);
  pid_t pid = fork();
  if (pid < 0) FAIL("fork");
  if (pid == 0) {
    chain_round(&p);
    struct pair q;
    mk_pair(&q, 1); /* a device opened in the child */
    chain_round(&q);
    exit(0);
  }
  int st;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) FAIL("child status %d", st);
  chain_round(&p);
  free_pair(&p);
  report(NULL);
}

/* fork while another thread is inside the interposer's global lock: thread T creates an
 * ibv_qp_ex QP, whose record the interposer fills under that lock, calling the provider's
 * ibv_qp_to_qp_ex, where the fake holds T on cue. The child, forked meanwhile, destroys its
 * copies of the QPs and CQs and closes the device (every wrapper that takes the lock): it
 * must exit, not hang (an alarm turns a hang into a failure). Then T goes on. Under the
 * preload with telemetry on only (without it nothing calls ibv_qp_to_qp_ex there). */
static void *create_qp_ex_thread(void *arg) {
  struct pair *p = arg;
  struct ibv_qp_init_attr_ex qa;
  memset(&qa, 0, sizeof qa);
  qa.send_cq = qa.recv_cq = p->cqa;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = 64;
  qa.pd = p->pd;
  qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  qa.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
  return ibv_create_qp_ex(p->c, &qa);
}
void sc_fork_locked(void) {
  struct pair p;
  mk_pair(&p, 0);
  chain_round(&p);
  V.hold(FAKEVERBS_AT_QP_TO_QP_EX);
  pthread_t t;
  if (pthread_create(&t, NULL, create_qp_ex_thread, &p)) FAIL("pthread_create");
  if (V.wait_held(FAKEVERBS_AT_QP_TO_QP_EX, 60)) FAIL("the interposer never called ibv_qp_to_qp_ex (not preloaded?)");
  pid_t pid = fork();
  if (pid < 0) FAIL("fork");
  if (pid == 0) {
    alarm(10); /* a hang becomes SIGALRM (the calls themselves take microseconds) */
    int bad = V.destroy_qp(p.a) || V.destroy_qp(p.b) || V.destroy_cq(p.cqa) || V.destroy_cq(p.cqb) ||
              V.dealloc_pd(p.pd) || V.close_device(p.c);
    _exit(bad ? 3 : 0);
  }
  int st;
  if (waitpid(pid, &st, 0) != pid) FAIL("waitpid");
  if (WIFSIGNALED(st)) FAIL("the child hung in a destroy or close (signal %d)", WTERMSIG(st));
  if (!WIFEXITED(st) || WEXITSTATUS(st)) FAIL("child status %d", st);
  V.release(FAKEVERBS_AT_QP_TO_QP_EX);
  void *q = NULL;
  pthread_join(t, &q);
  if (!q) FAIL("create_qp_ex");
  chain_round(&p);
  if (V.destroy_qp(q)) FAIL("destroy_qp");
  free_pair(&p);
  report(NULL);
}

/* A destroyed QP's record and a thread still inside it (docs/preload.md, "Threading and lifecycle"):
 * a poller stopped, on the fake's cue, inside the last completion of QP X (only the
 * interposer's test build, librccl_telemetry_preload_hooks.so, reaches that cue); X destroyed;
 * Y created with a deeper send queue (4096); the poller resumes; Y then posts and completes
 * n signalled writes one at a time. Both QPs' counts must be exact. */
static void *poll_one(void *cq) {
  struct ibv_wc wc;
  int k;
  while ((k = ibv_poll_cq(cq, 1, &wc)) == 0) {
  }
  return (void *)(intptr_t)(k == 1 && wc.status == IBV_WC_SUCCESS);
}
void sc_reuse(int n) {
  alarm(60); /* a hang (a poller spinning on a record that changed under it) becomes SIGALRM */
  struct ibv_context *c = open_dev(0);
  struct ibv_pd *pd = V.alloc_pd(c);
  struct ibv_cq *cq = V.create_cq(c, 4096, NULL, NULL, 0);
  if (!pd || !cq) FAIL("pd/cq");
  struct ibv_qp *x = mk_qp(pd, cq, cq, NULL, 0);
  struct ibv_send_wr w, *bad = NULL;
  struct ibv_sge sg;
  set_wr(&w, &sg, IBV_WR_RDMA_WRITE, 64, 1, 1);
  if (ibv_post_send(x, &w, &bad)) FAIL("post_send X");
  V.hold(FAKEVERBS_AT_COMPLETION);
  pthread_t t;
  if (pthread_create(&t, NULL, poll_one, cq)) FAIL("pthread_create");
  if (V.wait_held(FAKEVERBS_AT_COMPLETION, 60)) FAIL("no completion reached the cue (not the hooks build?)");
  uint32_t xn = x->qp_num;
  if (V.destroy_qp(x)) FAIL("destroy_qp X");
  struct ibv_qp *y = mk_qp_depth(pd, cq, cq, NULL, 0, 4096);
  V.release(FAKEVERBS_AT_COMPLETION);
  void *ok = NULL;
  pthread_join(t, &ok);
  if (!ok) FAIL("the poller's completion");
  for (int i = 0; i < n; i++) {
    set_wr(&w, &sg, IBV_WR_RDMA_WRITE, 64, 1, 2);
    if (ibv_post_send(y, &w, &bad)) FAIL("post_send Y");
    drain(cq, 1, IBV_WC_SUCCESS);
  }
  char extra[64];
  snprintf(extra, sizeof extra, "\"x\":%u,\"y\":%u", xn, y->qp_num);
  V.destroy_qp(y);
  V.destroy_cq(cq);
  V.dealloc_pd(pd);
  V.close_device(c);
  report(extra);
}

/* A context closed by one thread and a device opened by another that gets the closed
 * context's address (the fake recycles context memory): thread C closes device 0's context
 * and is held, on the fake's cue, inside the provider's close after the context is freed;
 * thread O opens device 1 meanwhile, makes a pair and runs a chain round. O's context must be
 * counted as device 1's from the start, and C's close must not take O's QPs with it. O is
 * given up to 2 s before C is let go (the interposer makes O's open wait for the close). */
static int g_reopened;
static void *close_ctx(void *c) { return (void *)(intptr_t)V.close_device(c); }
static void *open_and_run(void *arg) {
  struct pair *p = arg;
  mk_pair(p, 1);
  chain_round(p);
  __atomic_store_n(&g_reopened, 1, __ATOMIC_RELEASE);
  return NULL;
}
void sc_reopen_race(void) {
  alarm(60);
  struct pair a;
  mk_pair(&a, 0);
  chain_round(&a);
  struct ibv_context *ca = a.c;
  V.destroy_qp(a.a);
  V.destroy_qp(a.b);
  V.destroy_cq(a.cqa);
  V.destroy_cq(a.cqb);
  V.dealloc_pd(a.pd);
  V.hold(FAKEVERBS_AT_CLOSED);
  pthread_t tc, to;
  if (pthread_create(&tc, NULL, close_ctx, ca)) FAIL("pthread_create");
  if (V.wait_held(FAKEVERBS_AT_CLOSED, 60)) FAIL("the close never reached the cue");
  struct pair b;
  if (pthread_create(&to, NULL, open_and_run, &b)) FAIL("pthread_create");
  for (int i = 0; i < 200 && !__atomic_load_n(&g_reopened, __ATOMIC_ACQUIRE); i++) usleep(10000);
  V.release(FAKEVERBS_AT_CLOSED);
  void *rc = NULL;
  pthread_join(tc, &rc);
  if (rc) FAIL("close_device: %d", (int)(intptr_t)rc);
  pthread_join(to, NULL);
  if (b.c != ca) FAIL("the new context did not get the closed one's address");
  chain_round(&b);
  free_pair(&b);
  report(NULL);
}

/* QP churn under a progress thread: the main thread creates a QP on a shared CQ, posts one
 * signalled write and destroys the QP at once, n times; another thread polls the CQ until
 * it has all n completions, each of a QP that may be gone (and its record on the way to a new
 * QP) by then. Every completion counts once: on its QP, or as of an unknown QP. */
static int g_churn_n;
static void *churn_poller(void *cq) {
  struct ibv_wc wc[8];
  for (int got = 0; got < g_churn_n;) {
    int k = ibv_poll_cq(cq, 8, wc);
    if (k < 0) FAIL("poll_cq");
    for (int i = 0; i < k; i++)
      if (wc[i].status != IBV_WC_SUCCESS) FAIL("status %d", wc[i].status);
    got += k;
  }
  return NULL;
}
void sc_churn(int n) {
  alarm(120);
  struct ibv_context *c = open_dev(0);
  struct ibv_pd *pd = V.alloc_pd(c);
  struct ibv_cq *cq = V.create_cq(c, 1 << 16, NULL, NULL, 0);
  if (!pd || !cq) FAIL("pd/cq");
  g_churn_n = n;
  pthread_t t;
  if (pthread_create(&t, NULL, churn_poller, cq)) FAIL("pthread_create");
  for (int i = 0; i < n; i++) {
    struct ibv_qp *q = mk_qp_depth(pd, cq, cq, NULL, 0, i % 2 ? 64 : 4096);
    struct ibv_send_wr w, *bad = NULL;
    struct ibv_sge sg;
    set_wr(&w, &sg, IBV_WR_RDMA_WRITE, 8, 1, 1);
    if (ibv_post_send(q, &w, &bad)) FAIL("post_send");
    if (V.destroy_qp(q)) FAIL("destroy_qp");
  }
  pthread_join(t, NULL);
  V.destroy_cq(cq);
  V.dealloc_pd(pd);
  V.close_device(c);
  report(NULL);
}

/* Close and reopen a device; device ids follow ibv_get_device_list, not the opening order. */
void sc_reopen(void) {
  struct pair p1;
  mk_pair(&p1, 1);
  chain_round(&p1);
  free_pair(&p1);
  struct pair p0;
  mk_pair(&p0, 0);
  chain_round(&p0);
  free_pair(&p0);
  mk_pair(&p1, 1);
  chain_round(&p1);
  chain_round(&p1);
  free_pair(&p1);
  report(NULL);
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld", &v) == 1) break;
  if (f) fclose(f);
  return v;
}

/* n QPs created and destroyed, one at a time, each posting one signalled write. */
void sc_qploop(int n) {
  struct pair p;
  mk_pair(&p, 0);
  long rss_mid = 0, rss_start = rss_kib();
  for (int i = 0; i < n; i++) {
    struct ibv_qp *q = mk_qp(p.pd, p.cqa, p.cqa, NULL, 0);
    struct ibv_send_wr w, *bad = NULL;
    struct ibv_sge s;
    set_wr(&w, &s, IBV_WR_RDMA_WRITE, 8, 1, 1);
    if (ibv_post_send(q, &w, &bad)) FAIL("post_send");
    drain(p.cqa, 1, IBV_WC_SUCCESS);
    if (V.destroy_qp(q)) FAIL("destroy_qp");
    if (i == n / 5) rss_mid = rss_kib();
  }
  char extra[128];
  snprintf(extra, sizeof extra, "\"rss_start_kib\":%ld,\"rss_mid_kib\":%ld,\"rss_end_kib\":%ld", rss_start, rss_mid,
           rss_kib());
  free_pair(&p);
  report(extra);
}

/* Telemetry off: every table is the provider's own. */
void sc_disabled(void) {
  struct pair p;
  mk_pair(&p, 0);
  struct ibv_cq_init_attr_ex ca;
  memset(&ca, 0, sizeof ca);
  ca.cqe = 16;
  struct ibv_cq_ex *cq = ibv_create_cq_ex(p.c, &ca);
  struct ibv_qp_init_attr_ex qa;
  memset(&qa, 0, sizeof qa);
  qa.send_cq = qa.recv_cq = p.cqa;
  qa.qp_type = IBV_QPT_RC;
  qa.pd = p.pd;
  qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  qa.send_ops_flags = IBV_QP_EX_WITH_SEND;
  struct ibv_qp *q = ibv_create_qp_ex(p.c, &qa);
  if (!cq || !q) FAIL("ex objects");
  int pristine = V.pristine(p.c) && V.cq_pristine(cq) && V.qpx_pristine(V.qp_to_qp_ex(q));
  chain_round(&p);
  V.destroy_qp(q);
  V.destroy_cq(ibv_cq_ex_to_cq(cq));
  free_pair(&p);
  char extra[64];
  snprintf(extra, sizeof extra, "\"pristine\":%d", pristine);
  report(extra);
}

/* dlsym(RTLD_NEXT) and dlsym(RTLD_DEFAULT) keep their meaning under the interposer's dlsym:
 * relative to this program, so both find the first definition after it (the interposer's
 * ibv_open_device when preloaded), not the one after the interposer (libibverbs'). */
void sc_dlnext(void) {
  void *next = dlsym(RTLD_NEXT, "ibv_open_device"), *dflt = dlsym(RTLD_DEFAULT, "ibv_open_device");
  Dl_info di;
  const char *from = next && dladdr(next, &di) && di.dli_fname ? di.dli_fname : "?";
  const char *b = strrchr(from, '/');
  char extra[256];
  snprintf(extra, sizeof extra, "\"next_is_default\":%d,\"next_from\":\"%s\"", next && next == dflt, b ? b + 1 : from);
  report(extra);
}

/* A QP created while another thread destroys one that had the same ibv_qp address and QPN
 * (the fake recycles both, as a provider's pool may): the destroying thread is held inside
 * the provider's destroy (the QP gone, the call not yet returned) while the main thread
 * creates Y, which gets X's address and number; then the destroy returns. Y is a QP of its
 * own: X's one signalled write counted on X, Y's three on Y, none on a QP the file does not
 * know. */
static void *destroy_qp_thread(void *qp) { return (void *)(intptr_t)V.destroy_qp(qp); }
static void signalled_writes(struct ibv_qp *qp, struct ibv_cq *cq, int n) {
  for (int i = 0; i < n; i++) {
    struct ibv_send_wr w, *bad = NULL;
    struct ibv_sge s;
    set_wr(&w, &s, IBV_WR_RDMA_WRITE, 64, 1, 7 + (uint64_t)i);
    if (ibv_post_send(qp, &w, &bad)) FAIL("post_send");
  }
  drain(cq, n, IBV_WC_SUCCESS);
}
void sc_destroy_race(void) {
  alarm(60);
  struct pair p;
  mk_pair(&p, 0);
  struct ibv_qp *x = p.a;
  uint32_t xn = x->qp_num;
  signalled_writes(x, p.cqa, 1);
  V.recycle_qps(1);
  V.hold(FAKEVERBS_AT_QP_DESTROYED);
  pthread_t t;
  if (pthread_create(&t, NULL, destroy_qp_thread, x)) FAIL("pthread_create");
  if (V.wait_held(FAKEVERBS_AT_QP_DESTROYED, 60)) FAIL("the destroy never reached the cue");
  struct ibv_qp *y = mk_qp(p.pd, p.cqa, p.cqa, NULL, 0);
  int same = y == x && y->qp_num == xn;
  V.release(FAKEVERBS_AT_QP_DESTROYED);
  void *rc = NULL;
  pthread_join(t, &rc);
  V.recycle_qps(0);
  if (rc) FAIL("destroy_qp: %d", (int)(intptr_t)rc);
  if (!same) FAIL("the new QP did not get the destroyed one's address and number");
  V.connect(y, p.b);
  signalled_writes(y, p.cqa, 3);
  p.a = y;
  free_pair(&p);
  report(NULL);
}
