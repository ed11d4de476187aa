/*
 * c_tests/preload/verbs_app_datapath.c: verbs_app's data path scenarios: WR chains of every
 * opcode family and refused ones, errors on a shared CQ, ibv_qp_ex builders with ibv_cq_ex
 * polling, threads posting to and draining shared QPs, SRQs (one receiving QP and two), and
 * more WRs outstanding than the send record holds. Separate from the lifecycle and peer
 * scenarios: these hold the counts themselves to account.
 */
#include "verbs_app.h"

/* I iterations of: 3 receives on B; a chain of 10 WRs on A (every opcode family, 9 of them
 * unsignalled, one wr_id for all), its completion drained; then a refused chain. */
static const struct {
  enum ibv_wr_opcode op;
  uint32_t len;
} CHAIN[10] = {{IBV_WR_RDMA_WRITE, 100}, {IBV_WR_RDMA_WRITE, 200},          {IBV_WR_RDMA_WRITE, 300},
               {IBV_WR_RDMA_WRITE, 400}, {IBV_WR_RDMA_WRITE_WITH_IMM, 500}, {IBV_WR_SEND, 600},
               {IBV_WR_RDMA_READ, 700},  {IBV_WR_ATOMIC_CMP_AND_SWP, 8},    {IBV_WR_ATOMIC_FETCH_AND_ADD, 8},
               {IBV_WR_SEND, 500 /* + a second SGE of 500 */}};

void chain_round(struct pair *p) {
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

void sc_chain(int iters) {
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
void sc_errors(void) {
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

/* Every error status, one pair each (a QP fails once): A posts a signalled RDMA_WRITE that
 * completes, then a chain of a signalled RDMA_WRITE of 100 + s bytes that fails with status s
 * and vendor_err 0x100 + s, an unsignalled SEND and a signalled one behind it (flushed). */
void sc_errors_all(void) {
  for (int st = 1; st <= 23; st++) {
    struct pair p;
    mk_pair(&p, 0);
    struct ibv_send_wr w[3], *bad = NULL;
    struct ibv_sge s[3];
    set_wr(&w[0], &s[0], IBV_WR_RDMA_WRITE, 64, 1, 1);
    if (ibv_post_send(p.a, w, &bad)) FAIL("post_send");
    drain(p.cqa, 1, IBV_WC_SUCCESS);
    V.fail_next_status(p.a, st, 0x100u + (uint32_t)st);
    set_wr(&w[0], &s[0], IBV_WR_RDMA_WRITE, 100 + (uint32_t)st, 1, 2);
    set_wr(&w[1], &s[1], IBV_WR_SEND, 8, 0, 3);
    set_wr(&w[2], &s[2], IBV_WR_SEND, 8, 1, 4);
    w[0].next = &w[1];
    w[1].next = &w[2];
    if (ibv_post_send(p.a, w, &bad)) FAIL("post_send");
    struct ibv_wc wc[3];
    int got = 0;
    while (got < 3) {
      int k = ibv_poll_cq(p.cqa, 3 - got, wc + got);
      __atomic_fetch_add(&g_polls[0], 1, __ATOMIC_RELAXED);
      if (k < 0) FAIL("poll_cq");
      got += k;
    }
    if ((int)wc[0].status != st || wc[0].vendor_err != 0x100u + (uint32_t)st) FAIL("status %d: got %d", st, wc[0].status);
    if (wc[1].status != IBV_WC_WR_FLUSH_ERR || wc[2].status != IBV_WC_WR_FLUSH_ERR) FAIL("status %d: no flushes", st);
    free_pair(&p);
  }
  report(NULL);
}

/* ibv_create_cq_ex (wc_flags without QP_NUM) + ibv_create_qp_ex with ibv_wr_* builders. */
void sc_ex(int iters) {
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
void sc_threads(int threads, int iters) {
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

/* Receives through an SRQ: B's receive queue is shared. */
void sc_srq(int n) {
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
void sc_srq_shared(int n) {
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
void sc_full(void) {
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
