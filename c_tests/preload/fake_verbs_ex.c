/*
 * c_tests/preload/fake_verbs_ex.c: the fake libibverbs' extended interfaces: ibv_cq_ex (a
 * CQ from verbs_context.create_cq_ex, polled by start/next/end_poll and read_*) and
 * ibv_qp_ex (a QP from create_qp_ex with send ops flags, whose ibv_wr_* builders collect WRs
 * that wr_complete posts through the data path's send_one), and the pristine checks of both.
 * A file of its own: the second way in to the same queues, with its own tests.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fake_verbs_internal.h"

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

struct ibv_cq_ex *f_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr) {
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
struct ibv_qp *f_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a) {
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

EXPORT int fakeverbs_cq_pristine(struct ibv_cq_ex *cq) { return cq->start_poll == fx_start_poll && cq->next_poll == fx_next_poll; }

EXPORT int fakeverbs_qpx_pristine(struct ibv_qp_ex *x) {
  return x->wr_start == fx_wr_start && x->wr_complete == fx_wr_complete && x->wr_send == fx_send && x->wr_set_sge == fx_set_sge;
}
