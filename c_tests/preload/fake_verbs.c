/*
 * c_tests/preload/fake_verbs.c: a fake libibverbs.so.1 for the interposer's host tests and
 * bench: no kernel, no NIC. Two devices (fake0, fake1) whose contexts carry a provider-style
 * ops table and struct verbs_context (create_qp_ex, create_cq_ex), QPs connected in pairs
 * by fakeverbs_connect(), and CQs whose completions are exactly what the posts imply:
 *
 * - a send WR completes at post time: a CQE on the send CQ when signalled (or when it
 *   fails); SEND, SEND_WITH_IMM and RDMA_WRITE_WITH_IMM also consume a receive of the peer
 *   (its receive queue, or its SRQ) and complete it on the peer's receive CQ with byte_len;
 * - fakeverbs_fail_next(qp) makes the QP's next send WR fail (IBV_WC_REM_ACCESS_ERR) and puts
 *   the QP in the error state: its outstanding receives flush at once, and every later WR
 *   (send or receive) completes with IBV_WC_WR_FLUSH_ERR, signalled or not;
 * - a send WR whose wr_id is FAKEVERBS_REJECT_WR_ID is refused (EINVAL, *bad_wr = it; the
 *   WRs before it were posted);
 * - fakeverbs_inject(cq, qp_num) queues a successful completion for any qp_num.
 * QP state: the exported ibv_modify_qp calls the provider's modify_qp through a table
 * private to the library (as libibverbs does: struct verbs_ex_private, not ctx->ops) and, on
 * success, sets qp->state. The provider's modify_qp checks the transition (to RESET or ERR
 * from anywhere; RESET->INIT->RTR->RTS; INIT->INIT, RTS->RTS), a port (1..2) where one is
 * named, IBV_QP_AV and IBV_QP_DEST_QPN at INIT->RTR of a connected QP and its sgid_index
 * (< 16) when is_global; a wrong one is EINVAL, and fakeverbs_fail_modify(qp, err) makes the
 * QP's next modify fail with err. Each device has 2 ports, each a GID table of 16 entries
 * (all zeros until fakeverbs_set_gid) and a LID (0 until fakeverbs_set_lid), read by
 * ibv_query_gid (the library's own, as libibverbs reads sysfs) and the provider's
 * query_port (reached through verbs_context.query_port or the exported ibv_query_port);
 * fakeverbs_queries() counts those reads.
 * Knobs (environment): FAKEVERBS_SEND_WR_CAP=n reports cap.max_send_wr = n while taking any
 * number of WRs; FAKEVERBS_WC_FLAGS_ALLOWED=mask refuses ibv_cq_ex wc_flags outside mask.
 *
 * The symbols carry libibverbs' version nodes (fake_verbs.map), so a program can dlvsym them
 * the way NCCL's ibvwrap does. Written from verbs.h and the man pages, for these tests only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_verbs.h"

#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* every QP's state */
static uint32_t g_handles = 1;

struct fcq {
  struct ibv_cq_ex cq; /* first: an ibv_cq is its prefix */
  pthread_mutex_t mu;
  struct ibv_wc *q;
  size_t cap, head, tail;
  struct ibv_wc cur;
  uint64_t wc_flags;
};

struct fsrq {
  struct ibv_srq srq;
  uint64_t posted; /* receives queued */
  uint64_t *wr_ids;
  size_t cap, head, tail;
};

struct fqp;
struct fqp {
  struct ibv_qp_ex qpx; /* first: qpx.qp_base is the ibv_qp */
  struct fcq *scq, *rcq;
  struct fsrq *srq;
  struct fqp *peer;
  int sig_all, error, fail_next, ex;
  int fail_modify; /* the error the next modify_qp returns, 0 none */
  uint8_t port;    /* from IBV_QP_PORT */
  uint64_t *rq; /* receive wr_ids, FIFO */
  size_t rcap, rhead, rtail;
  /* ibv_wr_* session */
  struct ibv_send_wr *wrs;
  struct ibv_sge *sges;
  size_t nwr, wcap;
};

/* The provider's entry points the library keeps to itself (libibverbs: get_ops(ctx)). */
struct verbs_ex_private {
  int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
  int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
};

struct fctx {
  struct verbs_ex_private priv;
  struct verbs_context v; /* v.context last: the ibv_context the program holds */
};

static struct ibv_device g_devs[2];
static uint32_t g_next_qpn[2] = {0x100, 0x100};

/* Per device and port (1..FAKE_PORTS): the GID table and the LID ("sysfs"). */
#define FAKE_PORTS 2
#define FAKE_GIDS 16
static union ibv_gid g_gid[2][FAKE_PORTS + 1][FAKE_GIDS];
static uint16_t g_lid[2][FAKE_PORTS + 1];
static unsigned long g_queries;

static int dev_index(struct ibv_context *ctx) { return (int)(ctx->device - g_devs); }

static void cq_push(struct fcq *c, const struct ibv_wc *wc) {
  pthread_mutex_lock(&c->mu);
  if (c->tail - c->head == c->cap) {
    size_t ncap = c->cap ? 2 * c->cap : 64;
    struct ibv_wc *n = calloc(ncap, sizeof *n);
    if (!n) abort();
    for (size_t i = c->head; i < c->tail; i++) n[i - c->head] = c->q[i % c->cap];
    free(c->q);
    c->q = n;
    c->tail -= c->head;
    c->head = 0;
    c->cap = ncap;
  }
  c->q[c->tail++ % c->cap] = *wc;
  pthread_mutex_unlock(&c->mu);
}

static int cq_pop(struct fcq *c, struct ibv_wc *wc) {
  pthread_mutex_lock(&c->mu);
  int got = c->head != c->tail;
  if (got) *wc = c->q[c->head++ % c->cap];
  pthread_mutex_unlock(&c->mu);
  return got;
}

static void wc_of(struct ibv_wc *wc, struct fqp *q, uint64_t wr_id, enum ibv_wc_status st, enum ibv_wc_opcode op,
                  uint32_t len) {
  memset(wc, 0, sizeof *wc);
  wc->wr_id = wr_id;
  wc->status = st;
  wc->opcode = op;
  wc->byte_len = len;
  wc->qp_num = q->qpx.qp_base.qp_num;
}

static void rq_push(uint64_t **a, size_t *cap, size_t *head, size_t *tail, uint64_t v) {
  if (*tail - *head == *cap) {
    size_t ncap = *cap ? 2 * *cap : 64;
    uint64_t *n = calloc(ncap, sizeof *n);
    if (!n) abort();
    for (size_t i = *head; i < *tail; i++) n[i - *head] = (*a)[i % *cap];
    free(*a);
    *a = n;
    *tail -= *head;
    *head = 0;
    *cap = ncap;
  }
  (*a)[(*tail)++ % *cap] = v;
}

/* Under g_mu: the QP enters the error state; its queued receives flush. */
static void qp_error(struct fqp *q) {
  q->error = 1;
  struct ibv_wc wc;
  while (q->rhead != q->rtail) {
    wc_of(&wc, q, q->rq[q->rhead++ % q->rcap], IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0);
    cq_push(q->rcq, &wc);
  }
}

static enum ibv_wc_opcode wc_opcode(enum ibv_wr_opcode op) {
  switch (op) {
  case IBV_WR_RDMA_WRITE:
  case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
  case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
  case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
  case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
  case IBV_WR_LOCAL_INV: return IBV_WC_LOCAL_INV;
  case IBV_WR_BIND_MW: return IBV_WC_BIND_MW;
  default: return IBV_WC_SEND;
  }
}

/* Under g_mu: one send WR. */
static void send_one(struct fqp *q, const struct ibv_send_wr *w) {
  struct ibv_wc wc;
  uint32_t len = 0;
  for (int i = 0; i < w->num_sge; i++) len += w->sg_list[i].length;
  int sig = q->sig_all || (w->send_flags & IBV_SEND_SIGNALED);
  if (q->error) {
    wc_of(&wc, q, w->wr_id, IBV_WC_WR_FLUSH_ERR, wc_opcode(w->opcode), 0);
    cq_push(q->scq, &wc);
    return;
  }
  if (q->fail_next) {
    q->fail_next = 0;
    wc_of(&wc, q, w->wr_id, IBV_WC_REM_ACCESS_ERR, wc_opcode(w->opcode), 0);
    cq_push(q->scq, &wc);
    qp_error(q);
    return;
  }
  int delivers = w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
                 w->opcode == IBV_WR_SEND_WITH_INV;
  struct fqp *p = q->peer;
  if (delivers && p && !p->error) {
    uint64_t rid = 0;
    int have = 0;
    if (p->srq) {
      struct fsrq *s = p->srq;
      if (s->head != s->tail) {
        rid = s->wr_ids[s->head++ % s->cap];
        have = 1;
      }
    } else if (p->rhead != p->rtail) {
      rid = p->rq[p->rhead++ % p->rcap];
      have = 1;
    }
    if (have) {
      wc_of(&wc, p, rid, IBV_WC_SUCCESS, w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV, len);
      cq_push(p->rcq, &wc);
    }
  }
  if (sig) {
    wc_of(&wc, q, w->wr_id, IBV_WC_SUCCESS, wc_opcode(w->opcode), 0);
    cq_push(q->scq, &wc);
  }
}

static int f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  struct fqp *q = (struct fqp *)qp;
  pthread_mutex_lock(&g_mu);
  for (struct ibv_send_wr *w = wr; w; w = w->next) {
    if (w->wr_id == FAKEVERBS_REJECT_WR_ID) {
      pthread_mutex_unlock(&g_mu);
      *bad = w;
      return EINVAL;
    }
    send_one(q, w);
  }
  pthread_mutex_unlock(&g_mu);
  return 0;
}

static int f_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  struct fqp *q = (struct fqp *)qp;
  (void)bad;
  pthread_mutex_lock(&g_mu);
  for (struct ibv_recv_wr *w = wr; w; w = w->next) {
    if (q->error) {
      struct ibv_wc wc;
      wc_of(&wc, q, w->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0);
      cq_push(q->rcq, &wc);
    } else {
      rq_push(&q->rq, &q->rcap, &q->rhead, &q->rtail, w->wr_id);
    }
  }
  pthread_mutex_unlock(&g_mu);
  return 0;
}

static int f_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  struct fsrq *s = (struct fsrq *)srq;
  (void)bad;
  pthread_mutex_lock(&g_mu);
  for (struct ibv_recv_wr *w = wr; w; w = w->next) rq_push(&s->wr_ids, &s->cap, &s->head, &s->tail, w->wr_id);
  pthread_mutex_unlock(&g_mu);
  return 0;
}

static int f_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
  struct fcq *c = (struct fcq *)cq;
  int i = 0;
  while (i < n && cq_pop(c, &wc[i])) i++;
  return i;
}

/* ibv_cq_ex: start/next take one completion into cur; end does nothing. */
static int fx_start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr) {
  struct fcq *c = (struct fcq *)cq;
  (void)attr;
  if (!cq_pop(c, &c->cur)) return ENOENT;
  cq->status = c->cur.status;
  cq->wr_id = c->cur.wr_id;
  return 0;
}
static int fx_next_poll(struct ibv_cq_ex *cq) { return fx_start_poll(cq, NULL); }
static void fx_end_poll(struct ibv_cq_ex *cq) { (void)cq; }
static enum ibv_wc_opcode fx_read_opcode(struct ibv_cq_ex *cq) { return ((struct fcq *)cq)->cur.opcode; }
static uint32_t fx_read_byte_len(struct ibv_cq_ex *cq) { return ((struct fcq *)cq)->cur.byte_len; }
static uint32_t fx_read_qp_num(struct ibv_cq_ex *cq) { return ((struct fcq *)cq)->cur.qp_num; }
static uint32_t fx_read_vendor_err(struct ibv_cq_ex *cq) { return ((struct fcq *)cq)->cur.vendor_err; }
static unsigned int fx_read_wc_flags(struct ibv_cq_ex *cq) { return ((struct fcq *)cq)->cur.wc_flags; }

static struct fcq *cq_new(struct ibv_context *ctx, int cqe, void *cq_context) {
  struct fcq *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  pthread_mutex_init(&c->mu, NULL);
  c->cq.context = ctx;
  c->cq.cq_context = cq_context;
  c->cq.cqe = cqe;
  c->cq.handle = __atomic_fetch_add(&g_handles, 1, __ATOMIC_RELAXED);
  return c;
}

static struct ibv_cq_ex *f_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr) {
  const char *allowed = getenv("FAKEVERBS_WC_FLAGS_ALLOWED");
  if (allowed && *allowed && (attr->wc_flags & ~strtoull(allowed, NULL, 0))) {
    errno = EOPNOTSUPP;
    return NULL;
  }
  struct fcq *c = cq_new(ctx, (int)attr->cqe, attr->cq_context);
  if (!c) return NULL;
  c->wc_flags = attr->wc_flags;
  c->cq.start_poll = fx_start_poll;
  c->cq.next_poll = fx_next_poll;
  c->cq.end_poll = fx_end_poll;
  c->cq.read_opcode = fx_read_opcode;
  c->cq.read_vendor_err = fx_read_vendor_err;
  c->cq.read_wc_flags = fx_read_wc_flags;
  if (attr->wc_flags & IBV_WC_EX_WITH_BYTE_LEN) c->cq.read_byte_len = fx_read_byte_len;
  if (attr->wc_flags & IBV_WC_EX_WITH_QP_NUM) c->cq.read_qp_num = fx_read_qp_num;
  return &c->cq;
}

EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_comp_channel *ch,
                                    int vec) {
  (void)ch;
  (void)vec;
  struct fcq *c = cq_new(ctx, cqe, cq_context);
  return c ? (struct ibv_cq *)&c->cq : NULL;
}

EXPORT int ibv_destroy_cq(struct ibv_cq *cq) {
  struct fcq *c = (struct fcq *)cq;
  free(c->q);
  pthread_mutex_destroy(&c->mu);
  free(c);
  return 0;
}

/* ibv_qp_ex builders: WRs collected between wr_start and wr_complete, posted by complete. */
static struct ibv_send_wr *fx_new_wr(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op) {
  struct fqp *q = (struct fqp *)qpx;
  if (q->nwr == q->wcap) {
    size_t n = q->wcap ? 2 * q->wcap : 16;
    struct ibv_send_wr *w = realloc(q->wrs, n * sizeof *w);
    struct ibv_sge *s = realloc(q->sges, n * sizeof *s);
    if (!w || !s) abort();
    q->wrs = w;
    q->sges = s;
    q->wcap = n;
  }
  struct ibv_send_wr *w = &q->wrs[q->nwr++];
  memset(w, 0, sizeof *w);
  memset(&q->sges[q->nwr - 1], 0, sizeof q->sges[0]);
  w->wr_id = qpx->wr_id;
  w->send_flags = qpx->wr_flags;
  w->opcode = op;
  return w;
}
static void fx_len(struct ibv_qp_ex *qpx, uint32_t len) {
  struct fqp *q = (struct fqp *)qpx;
  if (!q->nwr) return;
  q->sges[q->nwr - 1].length += len;
  q->wrs[q->nwr - 1].num_sge = 1;
}
static void fx_wr_start(struct ibv_qp_ex *qpx) { ((struct fqp *)qpx)->nwr = 0; }
static int fx_wr_complete(struct ibv_qp_ex *qpx) {
  struct fqp *q = (struct fqp *)qpx;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < q->nwr; i++) {
    q->wrs[i].sg_list = &q->sges[i];
    send_one(q, &q->wrs[i]);
  }
  pthread_mutex_unlock(&g_mu);
  q->nwr = 0;
  return 0;
}
static void fx_wr_abort(struct ibv_qp_ex *qpx) { ((struct fqp *)qpx)->nwr = 0; }
static void fx_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t ra) {
  (void)rkey;
  (void)ra;
  fx_new_wr(qpx, IBV_WR_RDMA_WRITE);
}
static void fx_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t ra, __be32 imm) {
  (void)rkey;
  (void)ra;
  (void)imm;
  fx_new_wr(qpx, IBV_WR_RDMA_WRITE_WITH_IMM);
}
static void fx_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t ra) {
  (void)rkey;
  (void)ra;
  fx_new_wr(qpx, IBV_WR_RDMA_READ);
}
static void fx_send(struct ibv_qp_ex *qpx) { fx_new_wr(qpx, IBV_WR_SEND); }
static void fx_send_imm(struct ibv_qp_ex *qpx, __be32 imm) {
  (void)imm;
  fx_new_wr(qpx, IBV_WR_SEND_WITH_IMM);
}
static void fx_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t ra, uint64_t add) {
  (void)rkey;
  (void)ra;
  (void)add;
  fx_new_wr(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD);
}
static void fx_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t ra, uint64_t c, uint64_t s) {
  (void)rkey;
  (void)ra;
  (void)c;
  (void)s;
  fx_new_wr(qpx, IBV_WR_ATOMIC_CMP_AND_SWP);
}
static void fx_local_inv(struct ibv_qp_ex *qpx, uint32_t rkey) {
  (void)rkey;
  fx_new_wr(qpx, IBV_WR_LOCAL_INV);
}
static void fx_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t len) {
  (void)lkey;
  (void)addr;
  fx_len(qpx, len);
}
static void fx_set_sge_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_sge *sg) {
  for (size_t i = 0; i < n; i++) fx_len(qpx, sg[i].length);
}
static void fx_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t len) {
  (void)addr;
  fx_len(qpx, (uint32_t)len);
}
static void fx_set_inline_data_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_data_buf *b) {
  for (size_t i = 0; i < n; i++) fx_len(qpx, (uint32_t)b[i].length);
}

static struct fqp *qp_new(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
                          struct ibv_srq *srq, int sig_all, enum ibv_qp_type type, struct ibv_qp_cap *cap) {
  struct fqp *q = calloc(1, sizeof *q);
  if (!q) return NULL;
  struct ibv_qp *b = &q->qpx.qp_base;
  b->context = ctx;
  b->pd = pd;
  b->send_cq = scq;
  b->recv_cq = rcq;
  b->srq = srq;
  b->qp_type = type;
  b->state = IBV_QPS_RESET;
  b->handle = __atomic_fetch_add(&g_handles, 1, __ATOMIC_RELAXED);
  int d = dev_index(ctx);
  pthread_mutex_lock(&g_mu);
  b->qp_num = g_next_qpn[d]++;
  pthread_mutex_unlock(&g_mu);
  q->scq = (struct fcq *)scq;
  q->rcq = (struct fcq *)rcq;
  q->srq = (struct fsrq *)srq;
  q->sig_all = sig_all;
  const char *c = getenv("FAKEVERBS_SEND_WR_CAP");
  if (c) cap->max_send_wr = (uint32_t)strtoul(c, NULL, 0);
  return q;
}

EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a) {
  struct fqp *q = qp_new(pd->context, pd, a->send_cq, a->recv_cq, a->srq, a->sq_sig_all, a->qp_type, &a->cap);
  return q ? &q->qpx.qp_base : NULL;
}

static struct ibv_qp *f_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a) {
  struct fqp *q = qp_new(ctx, a->pd, a->send_cq, a->recv_cq, a->srq, a->sq_sig_all, a->qp_type, &a->cap);
  if (!q) return NULL;
  if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
    struct ibv_qp_ex *x = &q->qpx;
    q->ex = 1;
    x->wr_start = fx_wr_start;
    x->wr_complete = fx_wr_complete;
    x->wr_abort = fx_wr_abort;
    x->wr_rdma_write = fx_rdma_write;
    x->wr_rdma_write_imm = fx_rdma_write_imm;
    x->wr_rdma_read = fx_rdma_read;
    x->wr_send = fx_send;
    x->wr_send_imm = fx_send_imm;
    x->wr_atomic_fetch_add = fx_atomic_fetch_add;
    x->wr_atomic_cmp_swp = fx_atomic_cmp_swp;
    x->wr_local_inv = fx_local_inv;
    x->wr_set_sge = fx_set_sge;
    x->wr_set_sge_list = fx_set_sge_list;
    x->wr_set_inline_data = fx_set_inline_data;
    x->wr_set_inline_data_list = fx_set_inline_data_list;
  }
  return &q->qpx.qp_base;
}

EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp) {
  struct fqp *q = (struct fqp *)qp;
  return q->ex ? &q->qpx : NULL;
}

EXPORT int ibv_destroy_qp(struct ibv_qp *qp) {
  struct fqp *q = (struct fqp *)qp;
  pthread_mutex_lock(&g_mu);
  if (q->peer && q->peer->peer == q) q->peer->peer = NULL;
  pthread_mutex_unlock(&g_mu);
  free(q->rq);
  free(q->wrs);
  free(q->sges);
  free(q);
  return 0;
}

static struct fctx *fctx_of(struct ibv_context *ctx) {
  return (struct fctx *)((char *)ctx - offsetof(struct fctx, v) - offsetof(struct verbs_context, context));
}

static int transition_ok(enum ibv_qp_state cur, enum ibv_qp_state nxt) {
  if (nxt == IBV_QPS_RESET || nxt == IBV_QPS_ERR) return 1;
  switch (cur) {
  case IBV_QPS_RESET: return nxt == IBV_QPS_INIT;
  case IBV_QPS_INIT: return nxt == IBV_QPS_INIT || nxt == IBV_QPS_RTR;
  case IBV_QPS_RTR: return nxt == IBV_QPS_RTS;
  case IBV_QPS_RTS: return nxt == IBV_QPS_RTS;
  default: return 0;
  }
}

/* The provider's modify_qp: checks, remembers the port; the library sets qp->state. */
static int f_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
  struct fqp *q = (struct fqp *)qp;
  int err = 0;
  pthread_mutex_lock(&g_mu);
  enum ibv_qp_state cur = (mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state : qp->state;
  enum ibv_qp_state nxt = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
  int connected = qp->qp_type == IBV_QPT_RC || qp->qp_type == IBV_QPT_UC || qp->qp_type == IBV_QPT_XRC_SEND ||
                  qp->qp_type == IBV_QPT_XRC_RECV;
  if (q->fail_modify) {
    err = q->fail_modify;
    q->fail_modify = 0;
  } else if (!transition_ok(cur, nxt)) {
    err = EINVAL;
  } else if ((mask & IBV_QP_PORT) && (attr->port_num < 1 || attr->port_num > FAKE_PORTS)) {
    err = EINVAL;
  } else if (cur == IBV_QPS_RESET && nxt == IBV_QPS_INIT && !(mask & IBV_QP_PORT) && qp->qp_type != IBV_QPT_RAW_PACKET) {
    err = EINVAL;
  } else if (cur == IBV_QPS_INIT && nxt == IBV_QPS_RTR && connected) {
    if ((mask & (IBV_QP_AV | IBV_QP_DEST_QPN)) != (IBV_QP_AV | IBV_QP_DEST_QPN)) err = EINVAL;
    else if (attr->ah_attr.port_num > FAKE_PORTS) err = EINVAL;
    else if (attr->ah_attr.is_global && attr->ah_attr.grh.sgid_index >= FAKE_GIDS) err = EINVAL;
  }
  if (!err && (mask & IBV_QP_PORT)) q->port = attr->port_num;
  pthread_mutex_unlock(&g_mu);
  return err;
}

static int f_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr) {
  int d = dev_index(ctx);
  __atomic_fetch_add(&g_queries, 1, __ATOMIC_RELAXED);
  if (port < 1 || port > FAKE_PORTS) return EINVAL;
  memset(attr, 0, sizeof *attr);
  attr->state = IBV_PORT_ACTIVE;
  attr->max_mtu = attr->active_mtu = IBV_MTU_1024;
  attr->gid_tbl_len = FAKE_GIDS;
  attr->lid = g_lid[d][port];
  attr->link_layer = g_lid[d][port] ? IBV_LINK_LAYER_INFINIBAND : IBV_LINK_LAYER_ETHERNET;
  return 0;
}

/* verbs_context.query_port, the library's: as much of the provider's answer as fits. */
static int lib_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr, size_t len) {
  struct ibv_port_attr a;
  int rc = fctx_of(ctx)->priv.query_port(ctx, port, &a);
  if (!rc) memcpy(attr, &a, len < sizeof a ? len : sizeof a);
  return rc;
}

/* The exported one takes the old, shorter structure (verbs.h makes the name a macro). */
#undef ibv_query_port
struct _compat_ibv_port_attr;
EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr) {
  return lib_query_port(ctx, port, (struct ibv_port_attr *)(void *)attr, offsetof(struct ibv_port_attr, flags) + 1);
}

EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid) {
  int d = dev_index(ctx);
  __atomic_fetch_add(&g_queries, 1, __ATOMIC_RELAXED);
  if (port < 1 || port > FAKE_PORTS || index < 0 || index >= FAKE_GIDS) {
    errno = EINVAL;
    return -1;
  }
  pthread_mutex_lock(&g_mu);
  *gid = g_gid[d][port][index];
  pthread_mutex_unlock(&g_mu);
  return 0;
}

EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
  int rc = fctx_of(qp->context)->priv.modify_qp(qp, attr, mask);
  if (rc) return rc;
  if (mask & IBV_QP_STATE) qp->state = attr->qp_state;
  return 0;
}

EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a) {
  (void)a;
  struct fsrq *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->srq.context = pd->context;
  s->srq.pd = pd;
  s->srq.handle = __atomic_fetch_add(&g_handles, 1, __ATOMIC_RELAXED);
  return &s->srq;
}

EXPORT int ibv_destroy_srq(struct ibv_srq *srq) {
  struct fsrq *s = (struct fsrq *)srq;
  free(s->wr_ids);
  free(s);
  return 0;
}

EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx) {
  struct ibv_pd *pd = calloc(1, sizeof *pd);
  if (pd) pd->context = ctx;
  return pd;
}

EXPORT int ibv_dealloc_pd(struct ibv_pd *pd) {
  free(pd);
  return 0;
}

EXPORT int ibv_fork_init(void) { return 0; }

EXPORT struct ibv_device **ibv_get_device_list(int *num) {
  struct ibv_device **l = calloc(3, sizeof *l);
  if (!l) return NULL;
  for (int i = 0; i < 2; i++) {
    if (!g_devs[i].name[0]) {
      strcpy(g_devs[i].name, i ? "fake1" : "fake0");
      strcpy(g_devs[i].dev_name, i ? "uverbs1" : "uverbs0");
      g_devs[i].node_type = IBV_NODE_CA;
      g_devs[i].transport_type = IBV_TRANSPORT_IB;
    }
    l[i] = &g_devs[i];
  }
  if (num) *num = 2;
  return l;
}

EXPORT void ibv_free_device_list(struct ibv_device **l) { free(l); }

EXPORT const char *ibv_get_device_name(struct ibv_device *d) { return d->name; }

static const struct ibv_context_ops g_ops = {
    .poll_cq = f_poll_cq,
    .post_send = f_post_send,
    .post_recv = f_post_recv,
    .post_srq_recv = f_post_srq_recv,
};

EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev) {
  struct fctx *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->priv.modify_qp = f_modify_qp;
  c->priv.query_port = f_query_port;
  c->v.priv = &c->priv;
  c->v.sz = sizeof c->v;
  c->v.create_qp_ex = f_create_qp_ex;
  c->v.create_cq_ex = f_create_cq_ex;
  c->v.query_port = lib_query_port;
  c->v.context.device = dev;
  c->v.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
  c->v.context.ops = g_ops;
  c->v.context.num_comp_vectors = 1;
  pthread_mutex_init(&c->v.context.mutex, NULL);
  return &c->v.context;
}

EXPORT int ibv_close_device(struct ibv_context *ctx) {
  struct fctx *c = fctx_of(ctx);
  pthread_mutex_destroy(&ctx->mutex);
  free(c);
  return 0;
}

/* ---- test controls ---- */

EXPORT void fakeverbs_connect(struct ibv_qp *a, struct ibv_qp *b) {
  pthread_mutex_lock(&g_mu);
  ((struct fqp *)a)->peer = (struct fqp *)b;
  ((struct fqp *)b)->peer = (struct fqp *)a;
  pthread_mutex_unlock(&g_mu);
}

EXPORT void fakeverbs_fail_next(struct ibv_qp *qp) {
  pthread_mutex_lock(&g_mu);
  ((struct fqp *)qp)->fail_next = 1;
  pthread_mutex_unlock(&g_mu);
}

EXPORT void fakeverbs_fail_modify(struct ibv_qp *qp, int err) {
  pthread_mutex_lock(&g_mu);
  ((struct fqp *)qp)->fail_modify = err;
  pthread_mutex_unlock(&g_mu);
}

EXPORT int fakeverbs_set_gid(struct ibv_context *ctx, uint8_t port, int index, const void *gid16) {
  if (port < 1 || port > FAKE_PORTS || index < 0 || index >= FAKE_GIDS) return EINVAL;
  pthread_mutex_lock(&g_mu);
  memcpy(g_gid[dev_index(ctx)][port][index].raw, gid16, 16);
  pthread_mutex_unlock(&g_mu);
  return 0;
}

EXPORT int fakeverbs_set_lid(struct ibv_context *ctx, uint8_t port, uint16_t lid) {
  if (port < 1 || port > FAKE_PORTS) return EINVAL;
  g_lid[dev_index(ctx)][port] = lid;
  return 0;
}

EXPORT unsigned long fakeverbs_queries(void) { return __atomic_load_n(&g_queries, __ATOMIC_RELAXED); }

EXPORT void fakeverbs_inject(struct ibv_cq *cq, uint32_t qp_num) {
  struct ibv_wc wc;
  memset(&wc, 0, sizeof wc);
  wc.qp_num = qp_num;
  wc.opcode = IBV_WC_SEND;
  cq_push((struct fcq *)cq, &wc);
}

EXPORT int fakeverbs_pristine(struct ibv_context *ctx) {
  struct verbs_context *v = (struct verbs_context *)((char *)ctx - offsetof(struct verbs_context, context));
  return ctx->ops.post_send == f_post_send && ctx->ops.post_recv == f_post_recv && ctx->ops.post_srq_recv == f_post_srq_recv &&
         ctx->ops.poll_cq == f_poll_cq && v->create_qp_ex == f_create_qp_ex && v->create_cq_ex == f_create_cq_ex;
}

/* The provider's own ops, as ibv_open_device installs them before any interposer patches a
 * context (the bench's in-process unwrapped loop calls these). */
EXPORT void fakeverbs_provider_ops(struct ibv_context_ops *ops) { *ops = g_ops; }

EXPORT int fakeverbs_cq_pristine(struct ibv_cq_ex *cq) { return cq->start_poll == fx_start_poll && cq->next_poll == fx_next_poll; }

EXPORT int fakeverbs_qpx_pristine(struct ibv_qp_ex *x) {
  return x->wr_start == fx_wr_start && x->wr_complete == fx_wr_complete && x->wr_send == fx_send && x->wr_set_sge == fx_set_sge;
}
