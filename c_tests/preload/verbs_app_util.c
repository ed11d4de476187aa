/*
 * c_tests/preload/verbs_app_util.c: what verbs_app's scenarios share: opening a device by
 * its index, QPs, WRs, receives, draining a CQ (counting the poll calls per device, which
 * report() prints), and a connected pair of QPs. Separate so that each scenario file holds
 * scenarios only.
 */
#include "verbs_app.h"

unsigned long g_polls[2];

struct ibv_context *open_dev(int idx) {
  int n = 0;
  struct ibv_device **l = V.get_device_list(&n);
  if (!l || n <= idx) FAIL("device list");
  struct ibv_context *c = V.open_device(l[idx]);
  V.free_device_list(l);
  if (!c) FAIL("open_device");
  return c;
}

int dev_of(struct ibv_context *c) { return strcmp(c->device->name, "fake1") == 0; }

struct ibv_qp *mk_qp_depth(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq,
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
struct ibv_qp *mk_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq, int sig_all) {
  return mk_qp_depth(pd, scq, rcq, srq, sig_all, 256);
}

char g_buf[1 << 16];

void set_wr(struct ibv_send_wr *w, struct ibv_sge *s, enum ibv_wr_opcode op, uint32_t len, int sig, uint64_t wr_id) {
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

void post_recvs(struct ibv_qp *qp, int n, uint64_t wr_id) {
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
int drain(struct ibv_cq *cq, int n, int want_status) {
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
void poll_empty(struct ibv_cq *cq) {
  struct ibv_wc wc;
  int k = ibv_poll_cq(cq, 1, &wc);
  __atomic_fetch_add(&g_polls[dev_of(cq->context)], 1, __ATOMIC_RELAXED);
  if (k != 0) FAIL("expected an empty CQ, got %d", k);
}

void report(const char *extra) {
  printf("{\"pid\":%d,\"polls\":[%lu,%lu]%s%s}\n", (int)getpid(), g_polls[0], g_polls[1], extra ? "," : "", extra ? extra : "");
  fflush(stdout);
}

void mk_pair_depth(struct pair *p, int dev, uint32_t depth) {
  p->c = open_dev(dev);
  p->pd = V.alloc_pd(p->c);
  p->cqa = V.create_cq(p->c, 1024, NULL, NULL, 0);
  p->cqb = V.create_cq(p->c, 1024, NULL, NULL, 0);
  if (!p->pd || !p->cqa || !p->cqb) FAIL("pd/cq");
  p->a = mk_qp_depth(p->pd, p->cqa, p->cqa, NULL, 0, depth);
  p->b = mk_qp(p->pd, p->cqb, p->cqb, NULL, 0);
  V.connect(p->a, p->b);
}
void mk_pair(struct pair *p, int dev) { mk_pair_depth(p, dev, 256); }
void free_pair(struct pair *p) {
  V.destroy_qp(p->a);
  V.destroy_qp(p->b);
  V.destroy_cq(p->cqa);
  V.destroy_cq(p->cqb);
  V.dealloc_pd(p->pd);
  V.close_device(p->c);
}
