/*
 * c_tests/preload/verbs_app.c: an ibverbs program that knows nothing of telemetry, run
 * under librccl_telemetry_preload.so over the fake libibverbs (fake_verbs.c) by
 * preload/tests/interposer.rs. Built twice: linked against libibverbs (verbs_app), and
 * with -DLOAD_LIKE_NCCL (verbs_app_nccl), which links no libibverbs and takes every entry
 * point the way NCCL's and RCCL's ibvwrap do: dlopen("libibverbs.so.1") after start, then
 * dlvsym(handle, name, "IBVERBS_1.1") / dlsym. Both run the same scenarios through the same
 * function table, so their files must agree.
 *
 *   verbs_app SCENARIO [ARGS]   prints one JSON line of what it did (poll calls per device,
 *                               pids, memory), exits 0, or prints "FAIL: ..." and exits 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake_verbs.h"

static struct {
  struct ibv_device **(*get_device_list)(int *);
  void (*free_device_list)(struct ibv_device **);
  struct ibv_context *(*open_device)(struct ibv_device *);
  int (*close_device)(struct ibv_context *);
  struct ibv_pd *(*alloc_pd)(struct ibv_context *);
  int (*dealloc_pd)(struct ibv_pd *);
  struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
  int (*destroy_cq)(struct ibv_cq *);
  struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
  int (*destroy_qp)(struct ibv_qp *);
  struct ibv_srq *(*create_srq)(struct ibv_pd *, struct ibv_srq_init_attr *);
  int (*destroy_srq)(struct ibv_srq *);
  struct ibv_qp_ex *(*qp_to_qp_ex)(struct ibv_qp *);
  int (*fork_init)(void);
  void (*connect)(struct ibv_qp *, struct ibv_qp *);
  void (*fail_next)(struct ibv_qp *);
  void (*inject)(struct ibv_cq *, uint32_t);
  int (*pristine)(struct ibv_context *);
  int (*cq_pristine)(struct ibv_cq_ex *);
  int (*qpx_pristine)(struct ibv_qp_ex *);
  int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
  void (*fail_modify)(struct ibv_qp *, int);
  int (*set_gid)(struct ibv_context *, uint8_t, int, const void *);
  int (*set_lid)(struct ibv_context *, uint8_t, uint16_t);
  unsigned long (*queries)(void);
  void (*hold)(int);
  int (*wait_held)(int, int);
  void (*release)(int);
} V;

#define FAIL(...)                                                                        \
  do {                                                                                   \
    printf("FAIL: " __VA_ARGS__);                                                        \
    printf("\n");                                                                        \
    exit(1);                                                                             \
  } while (0)

#ifdef LOAD_LIKE_NCCL
static void *sym(void *h, const char *name, const char *ver) {
  void *p = ver ? dlvsym(h, name, ver) : dlsym(h, name);
  if (!p) FAIL("%s not found: %s", name, dlerror());
  return p;
}
static void load(void) {
  if (dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD)) FAIL("libibverbs is loaded before dlopen");
  void *h = dlopen("libibverbs.so.1", RTLD_NOW);
  if (!h) FAIL("dlopen libibverbs.so.1: %s", dlerror());
#define S(field, name, ver) *(void **)&V.field = sym(h, name, ver)
  S(get_device_list, "ibv_get_device_list", "IBVERBS_1.1");
  S(free_device_list, "ibv_free_device_list", "IBVERBS_1.1");
  S(open_device, "ibv_open_device", "IBVERBS_1.1");
  S(close_device, "ibv_close_device", "IBVERBS_1.1");
  S(alloc_pd, "ibv_alloc_pd", "IBVERBS_1.1");
  S(dealloc_pd, "ibv_dealloc_pd", "IBVERBS_1.1");
  S(create_cq, "ibv_create_cq", "IBVERBS_1.1");
  S(destroy_cq, "ibv_destroy_cq", "IBVERBS_1.1");
  S(create_qp, "ibv_create_qp", "IBVERBS_1.1");
  S(destroy_qp, "ibv_destroy_qp", "IBVERBS_1.1");
  S(create_srq, "ibv_create_srq", "IBVERBS_1.1");
  S(destroy_srq, "ibv_destroy_srq", "IBVERBS_1.1");
  S(qp_to_qp_ex, "ibv_qp_to_qp_ex", NULL);
  S(fork_init, "ibv_fork_init", "IBVERBS_1.0");
  S(connect, "fakeverbs_connect", NULL);
  S(fail_next, "fakeverbs_fail_next", NULL);
  S(inject, "fakeverbs_inject", NULL);
  S(pristine, "fakeverbs_pristine", NULL);
  S(cq_pristine, "fakeverbs_cq_pristine", NULL);
  S(qpx_pristine, "fakeverbs_qpx_pristine", NULL);
  S(modify_qp, "ibv_modify_qp", "IBVERBS_1.1");
  S(fail_modify, "fakeverbs_fail_modify", NULL);
  S(set_gid, "fakeverbs_set_gid", NULL);
  S(set_lid, "fakeverbs_set_lid", NULL);
  S(queries, "fakeverbs_queries", NULL);
  S(hold, "fakeverbs_hold", NULL);
  S(wait_held, "fakeverbs_wait_held", NULL);
  S(release, "fakeverbs_release", NULL);
#undef S
}
#else
static void load(void) {
  V.get_device_list = ibv_get_device_list;
  V.free_device_list = ibv_free_device_list;
  V.open_device = ibv_open_device;
  V.close_device = ibv_close_device;
  V.alloc_pd = ibv_alloc_pd;
  V.dealloc_pd = ibv_dealloc_pd;
  V.create_cq = ibv_create_cq;
  V.destroy_cq = ibv_destroy_cq;
  V.create_qp = ibv_create_qp;
  V.destroy_qp = ibv_destroy_qp;
  V.create_srq = ibv_create_srq;
  V.destroy_srq = ibv_destroy_srq;
  V.qp_to_qp_ex = ibv_qp_to_qp_ex;
  V.fork_init = ibv_fork_init;
  V.connect = fakeverbs_connect;
  V.fail_next = fakeverbs_fail_next;
  V.inject = fakeverbs_inject;
  V.pristine = fakeverbs_pristine;
  V.cq_pristine = fakeverbs_cq_pristine;
  V.qpx_pristine = fakeverbs_qpx_pristine;
  V.modify_qp = ibv_modify_qp;
  V.fail_modify = fakeverbs_fail_modify;
  V.set_gid = fakeverbs_set_gid;
  V.set_lid = fakeverbs_set_lid;
  V.queries = fakeverbs_queries;
  V.hold = fakeverbs_hold;
  V.wait_held = fakeverbs_wait_held;
  V.release = fakeverbs_release;
}
#endif

/* ---- helpers ---- */
static unsigned long g_polls[2];

static struct ibv_context *open_dev(int idx) {
  int n = 0;
  struct ibv_device **l = V.get_device_list(&n);
  if (!l || n <= idx) FAIL("device list");
  struct ibv_context *c = V.open_device(l[idx]);
  V.free_device_list(l);
  if (!c) FAIL("open_device");
  return c;
}

static int dev_of(struct ibv_context *c) { return strcmp(c->device->name, "fake1") == 0; }

static struct ibv_qp *mk_qp_depth(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq,
                                  int sig_all, uint32_t depth) {
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof a);
  a.send_cq = scq;
  a.recv_cq = rcq;
  a.srq = srq;
  a.sq_sig_all = sig_all;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = depth;
  a.cap.max_recv_wr = 256;
  a.cap.max_send_sge = 2;
  a.cap.max_recv_sge = 1;
  struct ibv_qp *q = V.create_qp(pd, &a);
  if (!q) FAIL("create_qp");
  return q;
}
static struct ibv_qp *mk_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq, int sig_all) {
  return mk_qp_depth(pd, scq, rcq, srq, sig_all, 256);
}

static char g_buf[1 << 16];

static void set_wr(struct ibv_send_wr *w, struct ibv_sge *s, enum ibv_wr_opcode op, uint32_t len, int sig, uint64_t wr_id) {
  memset(w, 0, sizeof *w);
  s->addr = (uintptr_t)g_buf;
  s->length = len;
  s->lkey = 1;
  w->wr_id = wr_id;
  w->sg_list = s;
  w->num_sge = 1;
  w->opcode = op;
  w->send_flags = sig ? IBV_SEND_SIGNALED : 0;
}

static void post_recvs(struct ibv_qp *qp, int n, uint64_t wr_id) {
  struct ibv_recv_wr r[16], *bad = NULL;
  struct ibv_sge s[16];
  for (int i = 0; i < n; i++) {
    memset(&r[i], 0, sizeof r[i]);
    s[i].addr = (uintptr_t)g_buf;
    s[i].length = sizeof g_buf;
    s[i].lkey = 1;
    r[i].wr_id = wr_id;
    r[i].sg_list = &s[i];
    r[i].num_sge = 1;
    r[i].next = i + 1 < n ? &r[i + 1] : NULL;
  }
  if (ibv_post_recv(qp, r, &bad)) FAIL("post_recv");
}

/* Polls cq until n completions arrived (one call per completion at most 4 at a time, plus
 * the empty calls in between), checking each status against want (-1: any). */
static int drain(struct ibv_cq *cq, int n, int want_status) {
  struct ibv_wc wc[4];
  int got = 0, errs = 0;
  for (long spins = 0; got < n; spins++) {
    int k = ibv_poll_cq(cq, 4 < n - got ? 4 : n - got, wc);
    __atomic_fetch_add(&g_polls[dev_of(cq->context)], 1, __ATOMIC_RELAXED);
    if (k < 0) FAIL("poll_cq %d", k);
    for (int i = 0; i < k; i++) {
      if (want_status >= 0 && (int)wc[i].status != want_status) FAIL("status %d, want %d", wc[i].status, want_status);
      errs += wc[i].status != IBV_WC_SUCCESS;
    }
    got += k;
    if (spins > 100000000) FAIL("drain: %d of %d", got, n);
  }
  return errs;
}
static void poll_empty(struct ibv_cq *cq) {
  struct ibv_wc wc;
  int k = ibv_poll_cq(cq, 1, &wc);
  __atomic_fetch_add(&g_polls[dev_of(cq->context)], 1, __ATOMIC_RELAXED);
  if (k != 0) FAIL("expected an empty CQ, got %d", k);
}

static void report(const char *extra) {
  printf("{\"pid\":%d,\"polls\":[%lu,%lu]%s%s}\n", (int)getpid(), g_polls[0], g_polls[1], extra ? "," : "", extra ? extra : "");
  fflush(stdout);
}

struct pair {
  struct ibv_context *c;
  struct ibv_pd *pd;
  struct ibv_cq *cqa, *cqb;
  struct ibv_qp *a, *b;
};
static void mk_pair(struct pair *p, int dev) {
  p->c = open_dev(dev);
  p->pd = V.alloc_pd(p->c);
  p->cqa = V.create_cq(p->c, 1024, NULL, NULL, 0);
  p->cqb = V.create_cq(p->c, 1024, NULL, NULL, 0);
  if (!p->pd || !p->cqa || !p->cqb) FAIL("pd/cq");
  p->a = mk_qp(p->pd, p->cqa, p->cqa, NULL, 0);
  p->b = mk_qp(p->pd, p->cqb, p->cqb, NULL, 0);
  V.connect(p->a, p->b);
}
static void free_pair(struct pair *p) {
  V.destroy_qp(p->a);
  V.destroy_qp(p->b);
  V.destroy_cq(p->cqa);
  V.destroy_cq(p->cqb);
  V.dealloc_pd(p->pd);
  V.close_device(p->c);
}

/* ---- scenarios ---- */

/* I iterations of: 3 receives on B; a chain of 10 WRs on A (every opcode family, 9 of them
 * unsignalled, one wr_id for all), its completion drained; then a refused chain. */
static const struct {
  enum ibv_wr_opcode op;
  uint32_t len;
} CHAIN[10] = {{IBV_WR_RDMA_WRITE, 100}, {IBV_WR_RDMA_WRITE, 200},          {IBV_WR_RDMA_WRITE, 300},
               {IBV_WR_RDMA_WRITE, 400}, {IBV_WR_RDMA_WRITE_WITH_IMM, 500}, {IBV_WR_SEND, 600},
               {IBV_WR_RDMA_READ, 700},  {IBV_WR_ATOMIC_CMP_AND_SWP, 8},    {IBV_WR_ATOMIC_FETCH_AND_ADD, 8},
               {IBV_WR_SEND, 500 /* + a second SGE of 500 */}};

static void chain_round(struct pair *p) {
  struct ibv_send_wr w[10], *bad = NULL;
  struct ibv_sge s[11];
  post_recvs(p->b, 3, 7);
  for (int i = 0; i < 10; i++) {
    set_wr(&w[i], &s[i], CHAIN[i].op, CHAIN[i].len, i == 9, 42);
    w[i].next = i < 9 ? &w[i + 1] : NULL;
  }
  s[10] = s[9];
  w[9].num_sge = 2; /* s[9], s[10] are adjacent */
  if (ibv_post_send(p->a, w, &bad)) FAIL("post_send");
  drain(p->cqa, 1, IBV_WC_SUCCESS);
  drain(p->cqb, 3, IBV_WC_SUCCESS);
}

static void sc_chain(int iters) {
  struct pair p;
  mk_pair(&p, 0);
  int pristine = V.pristine(p.c);
  for (int i = 0; i < iters; i++) chain_round(&p);
  poll_empty(p.cqa);
  poll_empty(p.cqb);
  /* A chain the provider refuses at its second WR: the first is posted, the rest not. */
  struct ibv_send_wr w[3], *bad = NULL;
  struct ibv_sge s[3];
  for (int i = 0; i < 3; i++) {
    set_wr(&w[i], &s[i], IBV_WR_RDMA_WRITE, 64, 0, i == 1 ? FAKEVERBS_REJECT_WR_ID : 42);
    w[i].next = i < 2 ? &w[i + 1] : NULL;
  }
  int rc = ibv_post_send(p.a, w, &bad);
  if (rc != EINVAL || bad != &w[1]) FAIL("refused chain: rc %d, bad %p (want %p)", rc, (void *)bad, (void *)&w[1]);
  /* A single signalled WR the provider refuses: counted by nothing (the preload counts the
   * common post before the provider's call and must take it all back). */
  set_wr(&w[1], &s[1], IBV_WR_RDMA_WRITE, 64, 1, FAKEVERBS_REJECT_WR_ID);
  w[1].next = NULL;
  bad = NULL;
  rc = ibv_post_send(p.a, &w[1], &bad);
  if (rc != EINVAL || bad != &w[1]) FAIL("refused WR: rc %d, bad %p (want %p)", rc, (void *)bad, (void *)&w[1]);
  set_wr(&w[0], &s[0], IBV_WR_RDMA_WRITE, 64, 1, 42);
  if (ibv_post_send(p.a, w, &bad)) FAIL("post_send");
  drain(p.cqa, 1, IBV_WC_SUCCESS);
  /* An unsignalled write and a signalled one: the second's completion retires the first only
   * if the refused WR left no entry behind in the preload's record. */
  set_wr(&w[0], &s[0], IBV_WR_RDMA_WRITE, 64, 0, 43);
  set_wr(&w[1], &s[1], IBV_WR_RDMA_WRITE, 64, 1, 44);
  if (ibv_post_send(p.a, &w[0], &bad) || ibv_post_send(p.a, &w[1], &bad)) FAIL("post_send");
  drain(p.cqa, 1, IBV_WC_SUCCESS);
  free_pair(&p);
  char extra[64];
  snprintf(extra, sizeof extra, "\"pristine\":%d", pristine);
  report(extra);
}

/* Errors on a QP whose send and receive queues share one CQ. */
static void sc_errors(void) {
  struct pair p;
  mk_pair(&p, 0);
  struct ibv_send_wr w[4], *bad = NULL;
  struct ibv_sge s[4];
  post_recvs(p.a, 2, 1); /* outstanding on A when it fails: flushed */
  for (int i = 0; i < 5; i++) {
    set_wr(&w[0], &s[0], IBV_WR_RDMA_WRITE, 32, 1, 9);
    if (ibv_post_send(p.a, w, &bad)) FAIL("post_send");
  }
  drain(p.cqa, 5, IBV_WC_SUCCESS);
  V.fail_next(p.a);
  for (int i = 0; i < 4; i++) {
    set_wr(&w[i], &s[i], IBV_WR_RDMA_WRITE, 32, i == 3, 10 + (uint64_t)i);
    w[i].next = i < 3 ? &w[i + 1] : NULL;
  }
  if (ibv_post_send(p.a, w, &bad)) FAIL("post_send");
  /* 1 error + 2 flushed receives + 3 flushed sends */
  if (drain(p.cqa, 6, -1) != 6) FAIL("expected 6 error completions");
  post_recvs(p.a, 1, 3);
  set_wr(&w[0], &s[0], IBV_WR_RDMA_WRITE, 32, 0, 11);
  if (ibv_post_send(p.a, w, &bad)) FAIL("post_send");
  if (drain(p.cqa, 2, IBV_WC_WR_FLUSH_ERR) != 2) FAIL("expected 2 flushes");
  V.inject(p.cqb, 0xABCDE); /* a completion for a QP nobody created */
  drain(p.cqb, 1, IBV_WC_SUCCESS);
  free_pair(&p);
  report(NULL);
}

/* ibv_create_cq_ex (wc_flags without QP_NUM) + ibv_create_qp_ex with ibv_wr_* builders. */
static void sc_ex(int iters) {
  struct ibv_context *c = open_dev(0);
  struct ibv_pd *pd = V.alloc_pd(c);
  struct ibv_cq_init_attr_ex ca;
  memset(&ca, 0, sizeof ca);
  ca.cqe = 256;
  ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN;
  struct ibv_cq_ex *cqa = ibv_create_cq_ex(c, &ca), *cqb = ibv_create_cq_ex(c, &ca);
  if (!cqa || !cqb) FAIL("create_cq_ex: %s", strerror(errno));
  if (ca.wc_flags != IBV_WC_EX_WITH_BYTE_LEN) FAIL("the program's attributes changed");
  struct ibv_qp_init_attr_ex qa;
  memset(&qa, 0, sizeof qa);
  qa.send_cq = qa.recv_cq = ibv_cq_ex_to_cq(cqa);
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = 64;
  qa.pd = pd;
  qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  qa.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND;
  struct ibv_qp *a = ibv_create_qp_ex(c, &qa);
  if (!a) FAIL("create_qp_ex");
  struct ibv_qp *b = mk_qp(pd, ibv_cq_ex_to_cq(cqb), ibv_cq_ex_to_cq(cqb), NULL, 0);
  V.connect(a, b);
  struct ibv_qp_ex *x = V.qp_to_qp_ex(a);
  if (!x) FAIL("qp_to_qp_ex");
  struct ibv_sge sl[2] = {{(uintptr_t)g_buf, 100, 1}, {(uintptr_t)g_buf, 28, 1}};
  for (int it = 0; it < iters; it++) {
    post_recvs(b, 1, 5);
    ibv_wr_start(x);
    for (int i = 0; i < 3; i++) {
      x->wr_id = 5;
      x->wr_flags = 0;
      ibv_wr_rdma_write(x, 1, (uintptr_t)g_buf);
      ibv_wr_set_sge(x, 1, (uintptr_t)g_buf, 64);
    }
    x->wr_id = 5;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(x);
    ibv_wr_set_sge_list(x, 2, sl);
    if (ibv_wr_complete(x)) FAIL("wr_complete");
    /* an aborted session posts nothing */
    ibv_wr_start(x);
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x, 1, 0);
    ibv_wr_set_inline_data(x, g_buf, 16);
    ibv_wr_abort(x);
    /* one completion per start/end pair (the way the e2e test polls rxe), then an empty one */
    struct ibv_cq_ex *cqs[2] = {cqa, cqb};
    for (int k = 0; k < 2; k++) {
      struct ibv_poll_cq_attr pa = {0};
      int rc;
      while ((rc = ibv_start_poll(cqs[k], &pa)) == ENOENT) g_polls[0]++;
      g_polls[0]++;
      if (rc) FAIL("start_poll %d", rc);
      if (cqs[k]->status != IBV_WC_SUCCESS) FAIL("status");
      if (k == 1 && ibv_wc_read_byte_len(cqs[k]) != 128) FAIL("byte_len %u", ibv_wc_read_byte_len(cqs[k]));
      if (ibv_next_poll(cqs[k]) != ENOENT) FAIL("next_poll");
      ibv_end_poll(cqs[k]);
    }
  }
  printf("{\"cq_pristine\":%d,\"qpx_pristine\":%d}\n", V.cq_pristine(cqa), V.qpx_pristine(x));
  V.destroy_qp(a);
  V.destroy_qp(b);
  V.destroy_cq(ibv_cq_ex_to_cq(cqa));
  V.destroy_cq(ibv_cq_ex_to_cq(cqb));
  V.dealloc_pd(pd);
  V.close_device(c);
  report(NULL);
}

/* T threads post to one QP (and T more to a second) and any thread drains any completion. */
static struct pair g_tp;
static int g_iters, g_threads;
static long g_drained, g_want;
static void *thr(void *arg) {
  struct ibv_qp *qp = (long)arg & 1 ? g_tp.b : g_tp.a;
  struct ibv_send_wr w[4], *bad = NULL;
  struct ibv_sge s[4];
  for (int it = 0; it < g_iters; it++) {
    for (int i = 0; i < 4; i++) {
      set_wr(&w[i], &s[i], IBV_WR_RDMA_WRITE, 16, i == 3, 1);
      w[i].next = i < 3 ? &w[i + 1] : NULL;
    }
    if (ibv_post_send(qp, w, &bad)) FAIL("post_send");
    struct ibv_wc wc[2];
    struct ibv_cq *cq = it & 1 ? g_tp.cqb : g_tp.cqa;
    int k = ibv_poll_cq(cq, 2, wc);
    __atomic_fetch_add(&g_polls[0], 1, __ATOMIC_RELAXED);
    if (k > 0) __atomic_fetch_add(&g_drained, k, __ATOMIC_RELAXED);
  }
  while (__atomic_load_n(&g_drained, __ATOMIC_RELAXED) < g_want) {
    struct ibv_wc wc[2];
    for (int k = 0; k < 2; k++) {
      int n = ibv_poll_cq(k ? g_tp.cqb : g_tp.cqa, 2, wc);
      __atomic_fetch_add(&g_polls[0], 1, __ATOMIC_RELAXED);
      if (n > 0) __atomic_fetch_add(&g_drained, n, __ATOMIC_RELAXED);
    }
  }
  return NULL;
}
static void sc_threads(int threads, int iters) {
  mk_pair(&g_tp, 0);
  g_iters = iters;
  g_threads = threads;
  g_want = 2L * threads * iters;
  pthread_t t[64];
  for (long i = 0; i < 2 * threads; i++) pthread_create(&t[i], NULL, thr, (void *)i);
  for (int i = 0; i < 2 * threads; i++) pthread_join(t[i], NULL);
  free_pair(&g_tp);
  report(NULL);
}

/* fork with a QP in use: the child posts and polls on the parent's QP and exits. */
static void sc_fork(int with_fork_init) {
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
static void sc_fork_locked(void) {
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
static void sc_reuse(int n) {
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
static void sc_reopen_race(void) {
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
static void sc_churn(int n) {
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
static void sc_reopen(void) {
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
static void sc_qploop(int n) {
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

/* Receives through an SRQ: B's receive queue is shared. */
static void sc_srq(int n) {
  struct ibv_context *c = open_dev(0);
  struct ibv_pd *pd = V.alloc_pd(c);
  struct ibv_cq *cqa = V.create_cq(c, 64, NULL, NULL, 0), *cqb = V.create_cq(c, 64, NULL, NULL, 0);
  struct ibv_srq_init_attr sa;
  memset(&sa, 0, sizeof sa);
  sa.attr.max_wr = 64;
  struct ibv_srq *srq = V.create_srq(pd, &sa);
  if (!srq) FAIL("create_srq");
  struct ibv_qp *a = mk_qp(pd, cqa, cqa, NULL, 1), *b = mk_qp(pd, cqb, cqb, srq, 0);
  V.connect(a, b);
  for (int i = 0; i < n; i++) {
    struct ibv_recv_wr r, *rbad = NULL;
    struct ibv_sge rs = {(uintptr_t)g_buf, 4096, 1};
    memset(&r, 0, sizeof r);
    r.sg_list = &rs;
    r.num_sge = 1;
    if (ibv_post_srq_recv(srq, &r, &rbad)) FAIL("post_srq_recv");
    struct ibv_send_wr w, *bad = NULL;
    struct ibv_sge s;
    set_wr(&w, &s, IBV_WR_SEND, 256, 0 /* sq_sig_all */, 3);
    if (ibv_post_send(a, &w, &bad)) FAIL("post_send");
    drain(cqa, 1, IBV_WC_SUCCESS);
    drain(cqb, 1, IBV_WC_SUCCESS);
  }
  V.destroy_qp(a);
  V.destroy_qp(b);
  V.destroy_srq(srq);
  V.destroy_cq(cqa);
  V.destroy_cq(cqb);
  V.dealloc_pd(pd);
  V.close_device(c);
  report(NULL);
}

/* One SRQ shared by two receiving QPs, B1 and B2, fed by A1 and A2: n receives posted up
 * front, then n SENDs, every third from A2: each B's receive completions are of WRs posted
 * in between the other's, in no order of its own. */
static void sc_srq_shared(int n) {
  struct ibv_context *c = open_dev(0);
  struct ibv_pd *pd = V.alloc_pd(c);
  struct ibv_cq *cqa = V.create_cq(c, 4096, NULL, NULL, 0), *cqb = V.create_cq(c, 4096, NULL, NULL, 0);
  struct ibv_srq_init_attr sa;
  memset(&sa, 0, sizeof sa);
  sa.attr.max_wr = 4096;
  struct ibv_srq *srq = V.create_srq(pd, &sa);
  if (!srq) FAIL("create_srq");
  struct ibv_qp *a1 = mk_qp(pd, cqa, cqa, NULL, 1), *a2 = mk_qp(pd, cqa, cqa, NULL, 1);
  struct ibv_qp *b1 = mk_qp(pd, cqb, cqb, srq, 0), *b2 = mk_qp(pd, cqb, cqb, srq, 0);
  V.connect(a1, b1);
  V.connect(a2, b2);
  for (int i = 0; i < n; i++) {
    struct ibv_recv_wr r, *rbad = NULL;
    struct ibv_sge rs = {(uintptr_t)g_buf, 4096, 1};
    memset(&r, 0, sizeof r);
    r.wr_id = (uint64_t)i;
    r.sg_list = &rs;
    r.num_sge = 1;
    if (ibv_post_srq_recv(srq, &r, &rbad)) FAIL("post_srq_recv");
  }
  for (int i = 0; i < n; i++) {
    struct ibv_send_wr w, *bad = NULL;
    struct ibv_sge sg;
    set_wr(&w, &sg, IBV_WR_SEND, 128, 0, 5);
    if (ibv_post_send(i % 3 == 0 ? a2 : a1, &w, &bad)) FAIL("post_send");
  }
  drain(cqa, n, IBV_WC_SUCCESS);
  drain(cqb, n, IBV_WC_SUCCESS);
  V.destroy_qp(a1);
  V.destroy_qp(a2);
  V.destroy_qp(b1);
  V.destroy_qp(b2);
  V.destroy_srq(srq);
  V.destroy_cq(cqa);
  V.destroy_cq(cqb);
  V.dealloc_pd(pd);
  V.close_device(c);
  report(NULL);
}

/* More WRs outstanding than the send queue's reported depth: 100 unsignalled + 1 signalled,
 * then one more signalled (run with FAKEVERBS_SEND_WR_CAP=1: a record of 64). */
static void sc_full(void) {
  struct pair p;
  mk_pair(&p, 0);
  struct ibv_send_wr w, *bad = NULL;
  struct ibv_sge s;
  for (int i = 0; i <= 100; i++) {
    set_wr(&w, &s, IBV_WR_RDMA_WRITE, 8, i == 100, 1);
    if (ibv_post_send(p.a, &w, &bad)) FAIL("post_send");
  }
  drain(p.cqa, 1, IBV_WC_SUCCESS);
  set_wr(&w, &s, IBV_WR_RDMA_WRITE, 8, 1, 1);
  if (ibv_post_send(p.a, &w, &bad)) FAIL("post_send");
  drain(p.cqa, 1, IBV_WC_SUCCESS);
  free_pair(&p);
  report(NULL);
}

/* Telemetry off: every table is the provider's own. */
static void sc_disabled(void) {
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
static void sc_dlnext(void) {
  void *next = dlsym(RTLD_NEXT, "ibv_open_device"), *dflt = dlsym(RTLD_DEFAULT, "ibv_open_device");
  Dl_info di;
  const char *from = next && dladdr(next, &di) && di.dli_fname ? di.dli_fname : "?";
  const char *b = strrchr(from, '/');
  char extra[256];
  snprintf(extra, sizeof extra, "\"next_is_default\":%d,\"next_from\":\"%s\"", next && next == dflt, b ? b + 1 : from);
  report(extra);
}

/* ---- peers: QPs taken through ibv_modify_qp the way RC/UC/UD programs do ---- */

/* The GIDs, LIDs and remote QP numbers below are what preload/tests/interposer.rs expects
 * (peers_* tests): keep both in step. */
static const uint8_t GID_LL_LOCAL[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x01};
static const uint8_t GID_V4_LOCAL[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 10, 1};
static const uint8_t GID_V6_LOCAL[16] = {0xfd, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1};

static int g_modify_bad; /* modify calls whose result, attr or state differed from the expected */

/* One ibv_modify_qp, checked: its return code, that attr came back byte for byte as passed,
 * and the QP's state after (the new one on success, the old one on failure). */
static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, int want_rc) {
  struct ibv_qp_attr copy = *a;
  enum ibv_qp_state before = qp->state;
  int saved_errno = errno = 12345;
  int rc = V.modify_qp(qp, a, mask);
  int ok = rc == want_rc && memcmp(&copy, a, sizeof copy) == 0 && errno == saved_errno &&
           qp->state == (rc == 0 && (mask & IBV_QP_STATE) ? a->qp_state : before);
  if (!ok) {
    fprintf(stderr, "modify qp %u mask 0x%x: rc %d (want %d), state %d, errno %d\n", qp->qp_num, mask, rc, want_rc,
            qp->state, errno);
    g_modify_bad++;
  }
}

static void to_init(struct ibv_qp *qp, uint8_t port) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = port;
  a.pkey_index = 0;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (qp->qp_type == IBV_QPT_UD) {
    a.qkey = 0x11111111;
    mask |= IBV_QP_QKEY;
  } else {
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    mask |= IBV_QP_ACCESS_FLAGS;
  }
  modify(qp, &a, mask, 0);
}

/* INIT -> RTR towards remote QP rqpn: over a GRH (sgid_index >= 0, dgid) or LID-only (dlid).
 * ah_port 0 leaves the address vector's port to the one INIT named. */
static void to_rtr(struct ibv_qp *qp, uint32_t rqpn, int sgid_index, const uint8_t *dgid, uint16_t dlid, uint8_t ah_port,
                   int want_rc) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = rqpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.dlid = dlid;
  a.ah_attr.port_num = ah_port;
  if (sgid_index >= 0) {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.sgid_index = (uint8_t)sgid_index;
    a.ah_attr.grh.hop_limit = 64;
    memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
  }
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (qp->qp_type == IBV_QPT_RC) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  modify(qp, &a, mask, want_rc);
}

static void to_rts(struct ibv_qp *qp) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (qp->qp_type == IBV_QPT_RC) {
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  modify(qp, &a, mask, 0);
}

static void to_state(struct ibv_qp *qp, enum ibv_qp_state st) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = st;
  modify(qp, &a, IBV_QP_STATE, 0);
}

static struct ibv_qp *mk_typed_qp(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t) {
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof a);
  a.send_cq = a.recv_cq = cq;
  a.qp_type = t;
  a.cap.max_send_wr = 64;
  a.cap.max_recv_wr = 64;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  struct ibv_qp *q = V.create_qp(pd, &a);
  if (!q) FAIL("create_qp type %d", t);
  return q;
}

/*
 * fake0, RoCE-like (port 1: GID 0 link-local, GID 1 IPv4-mapped, GID 3 IPv6; no LID):
 *   A  RC  INIT, RTR to 0x2001 over GID 0, RTS; then RESET, INIT, RTR to 0x2005, RTS
 *          (the later peer replaces the first); 5 signalled writes to B, completed
 *   B  RC  INIT, RTR to 0x2002 over GID 1 (IPv4-mapped), the AV naming no port; no RTS
 *   C  RC  (ibv_create_qp_ex) INIT, RTR to 0x2003 over GID 3, RTS
 *   D  UD  INIT, RTR, RTS: no peer
 *   E  RC  INIT; an RTR the provider fails (ETIMEDOUT), one it refuses (sgid_index 99:
 *          EINVAL), and an RTS from INIT (EINVAL): no peer
 *   F  UC  INIT, RTR to 0x2004 over GID 0, RTS
 * fake1, InfiniBand LID-only (port 1: LID 7):
 *   G  RC  INIT, RTR to 0x3001 at LID 0x11 without a GRH, RTS
 * Prints the QP numbers in creation order per device, and the fake's GID/port reads.
 */
static void sc_peers(void) {
  static const uint8_t rgid1[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x02};
  static const uint8_t rgid5[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x05};
  static const uint8_t rgid2[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 10, 2};
  static const uint8_t rgid3[16] = {0xfd, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2};
  static const uint8_t rgid4[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x04};
  struct ibv_context *c0 = open_dev(0), *c1 = open_dev(1);
  if (V.set_gid(c0, 1, 0, GID_LL_LOCAL) || V.set_gid(c0, 1, 1, GID_V4_LOCAL) || V.set_gid(c0, 1, 3, GID_V6_LOCAL) ||
      V.set_lid(c1, 1, 7))
    FAIL("fake GID/LID set-up");
  struct ibv_pd *pd0 = V.alloc_pd(c0), *pd1 = V.alloc_pd(c1);
  struct ibv_cq *cq0 = V.create_cq(c0, 256, NULL, NULL, 0), *cq1 = V.create_cq(c1, 64, NULL, NULL, 0);
  if (!pd0 || !pd1 || !cq0 || !cq1) FAIL("pd/cq");

  struct ibv_qp *a = mk_typed_qp(pd0, cq0, IBV_QPT_RC), *b = mk_typed_qp(pd0, cq0, IBV_QPT_RC);
  struct ibv_qp_init_attr_ex xa;
  memset(&xa, 0, sizeof xa);
  xa.send_cq = xa.recv_cq = cq0;
  xa.qp_type = IBV_QPT_RC;
  xa.cap.max_send_wr = 64;
  xa.pd = pd0;
  /* With IBV_QP_INIT_ATTR_PD alone, verbs.h's ibv_create_qp_ex calls ibv_create_qp. */
  xa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  xa.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
  struct ibv_qp *cx = ibv_create_qp_ex(c0, &xa);
  if (!cx) FAIL("create_qp_ex");
  struct ibv_qp *d = mk_typed_qp(pd0, cq0, IBV_QPT_UD), *e = mk_typed_qp(pd0, cq0, IBV_QPT_RC),
                *f = mk_typed_qp(pd0, cq0, IBV_QPT_UC);
  struct ibv_qp *g = mk_typed_qp(pd1, cq1, IBV_QPT_RC);

  to_init(a, 1);
  to_rtr(a, 0x2001, 0, rgid1, 0, 1, 0);
  to_rts(a);
  to_state(a, IBV_QPS_RESET);
  to_init(a, 1);
  to_rtr(a, 0x2005, 0, rgid5, 0, 1, 0);
  to_rts(a);

  to_init(b, 1);
  to_rtr(b, 0x2002, 1, rgid2, 0, 0, 0);

  to_init(cx, 1);
  to_rtr(cx, 0x2003, 3, rgid3, 0, 1, 0);
  to_rts(cx);

  to_init(d, 1);
  to_state(d, IBV_QPS_RTR);
  {
    struct ibv_qp_attr at;
    memset(&at, 0, sizeof at);
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = 0;
    modify(d, &at, IBV_QP_STATE | IBV_QP_SQ_PSN, 0);
  }

  to_init(e, 1);
  V.fail_modify(e, ETIMEDOUT);
  to_rtr(e, 0x2006, 0, rgid1, 0, 1, ETIMEDOUT);
  to_rtr(e, 0x2007, 99, rgid1, 0, 1, EINVAL);
  {
    struct ibv_qp_attr at;
    memset(&at, 0, sizeof at);
    at.qp_state = IBV_QPS_RTS;
    modify(e, &at, IBV_QP_STATE, EINVAL);
  }

  to_init(f, 1);
  to_rtr(f, 0x2004, 0, rgid4, 0, 1, 0);
  to_rts(f);

  to_init(g, 1);
  to_rtr(g, 0x3001, -1, NULL, 0x11, 1, 0);
  to_rts(g);

  /* Traffic on A (towards its second peer): 5 signalled writes, completed. */
  V.connect(a, b);
  for (int i = 0; i < 5; i++) {
    struct ibv_send_wr w, *bad = NULL;
    struct ibv_sge sg;
    set_wr(&w, &sg, IBV_WR_RDMA_WRITE, 4096, 1, (uint64_t)i);
    if (ibv_post_send(a, &w, &bad)) FAIL("post_send");
    drain(cq0, 1, IBV_WC_SUCCESS);
  }
  if (g_modify_bad) FAIL("%d modify calls went wrong (stderr)", g_modify_bad);

  /* Whose ibv_modify_qp the program called. */
  Dl_info di;
  const char *from = dladdr(*(void **)&V.modify_qp, &di) && di.dli_fname ? di.dli_fname : "?";
  const char *base = strrchr(from, '/');
  char extra[512];
  snprintf(extra, sizeof extra, "\"qpn0\":[%u,%u,%u,%u,%u,%u],\"qpn1\":[%u],\"queries\":%lu,\"modify_from\":\"%s\"", a->qp_num,
           b->qp_num, cx->qp_num, d->qp_num, e->qp_num, f->qp_num, g->qp_num, V.queries(), base ? base + 1 : from);
  struct ibv_qp *all[] = {a, b, cx, d, e, f, g};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) V.destroy_qp(all[i]);
  V.destroy_cq(cq0);
  V.destroy_cq(cq1);
  V.dealloc_pd(pd0);
  V.dealloc_pd(pd1);
  V.close_device(c0);
  V.close_device(c1);
  report(extra);
}

/*
 * peers-wide: one device connected to N (default 12) remote NICs, one RC QP each, more than
 * the engine's per-channel cap for hook channels (8): the interposer's one channel per device
 * is the whole NIC, so each remote NIC keeps a histogram of its own. QP i goes to remote QPN
 * 0x4000 + i at GID fe80::5054:ff:fe12:3410 + i and completes i + 1 signalled writes (its
 * partner, for the fake's traffic, is the next QP).
 */
static void sc_peers_wide(int n) {
  if (n < 1 || n > 64) FAIL("peers-wide: 1..64 QPs");
  struct ibv_context *c0 = open_dev(0);
  if (V.set_gid(c0, 1, 0, GID_LL_LOCAL)) FAIL("fake GID set-up");
  struct ibv_pd *pd = V.alloc_pd(c0);
  struct ibv_cq *cq = V.create_cq(c0, 256, NULL, NULL, 0);
  if (!pd || !cq) FAIL("pd/cq");
  struct ibv_qp *q[64];
  for (int i = 0; i < n; i++) {
    uint8_t rgid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, (uint8_t)(0x10 + i)};
    q[i] = mk_typed_qp(pd, cq, IBV_QPT_RC);
    to_init(q[i], 1);
    to_rtr(q[i], 0x4000u + (uint32_t)i, 0, rgid, 0, 1, 0);
    to_rts(q[i]);
  }
  for (int i = 0; i < n; i++) V.connect(q[i], q[(i + 1) % n]);
  for (int i = 0; i < n; i++)
    for (int k = 0; k <= i; k++) {
      struct ibv_send_wr w, *bad = NULL;
      struct ibv_sge sg;
      set_wr(&w, &sg, IBV_WR_RDMA_WRITE, 256, 1, (uint64_t)k);
      if (ibv_post_send(q[i], &w, &bad)) FAIL("post_send");
      drain(cq, 1, IBV_WC_SUCCESS);
    }
  if (g_modify_bad) FAIL("%d modify calls went wrong (stderr)", g_modify_bad);
  for (int i = 0; i < n; i++) V.destroy_qp(q[i]);
  V.destroy_cq(cq);
  V.dealloc_pd(pd);
  V.close_device(c0);
  report(NULL);
}

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
static void sc_stall(int pause_ms) {
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

int main(int argc, char **argv) {
  if (argc < 2) FAIL("usage: verbs_app chain|errors|ex|threads|fork|fork-locked|reuse|reopen|reopen-race|churn|qploop|srq|srq-shared|full|disabled|dlnext|peers|peers-wide|stall [N]");
  load();
  const char *s = argv[1];
  int n = argc > 2 ? atoi(argv[2]) : 100;
  if (!strcmp(s, "chain")) sc_chain(n);
  else if (!strcmp(s, "errors")) sc_errors();
  else if (!strcmp(s, "ex")) sc_ex(n);
  else if (!strcmp(s, "threads")) sc_threads(argc > 3 ? atoi(argv[3]) : 4, n);
  else if (!strcmp(s, "fork")) sc_fork(n);
  else if (!strcmp(s, "fork-locked")) sc_fork_locked();
  else if (!strcmp(s, "reuse")) sc_reuse(argc > 2 ? n : 10);
  else if (!strcmp(s, "reopen")) sc_reopen();
  else if (!strcmp(s, "churn")) sc_churn(n);
  else if (!strcmp(s, "reopen-race")) sc_reopen_race();
  else if (!strcmp(s, "qploop")) sc_qploop(n);
  else if (!strcmp(s, "srq")) sc_srq(n);
  else if (!strcmp(s, "srq-shared")) sc_srq_shared(n);
  else if (!strcmp(s, "full")) sc_full();
  else if (!strcmp(s, "disabled")) sc_disabled();
  else if (!strcmp(s, "dlnext")) sc_dlnext();
  else if (!strcmp(s, "peers")) sc_peers();
  else if (!strcmp(s, "peers-wide")) sc_peers_wide(argc > 2 ? atoi(argv[2]) : 12);
  else if (!strcmp(s, "stall")) sc_stall(n);
  else FAIL("unknown scenario %s", s);
  return 0;
}
