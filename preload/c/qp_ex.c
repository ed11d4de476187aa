/*
 * preload/c/qp_ex.c: the ibv_qp_ex builders (ibv_wr_start ... ibv_wr_complete), patched
 * per QP into the provider's struct ibv_qp_ex when the QP is created with send ops flags or
 * the program asks ibv_qp_to_qp_ex. Each session's WRs are noted as they are built and go
 * into the send record and the counters at wr_complete. Separate because it is a second
 * posting path with its own table.
 */
#include "preload.h"

/*
 * The provider serialises a QP's sessions (its send-queue lock is held from wr_start to
 * wr_complete / wr_abort, or the program promised one thread), so the session's pending
 * list needs no lock of ours; wr_complete takes the QP's lock around the provider's call
 * and commits the pending WRs only when it succeeded.
 */
static inline struct rqp *qpx_rec(struct ibv_qp_ex *qpx) {
  struct rctx *c = ctx_of(qpx->qp_base.context);
  struct rqp *r = c ? qp_find(c->dev, qpx->qp_base.qp_num) : NULL;
  return r && r->qpx == qpx ? r : NULL;
}

/* The builders are only patched on QPs with a record, and a record outlives its QP's use. */
#define QPX_REC(qpx) struct rqp *r = qpx_rec(qpx)

static void pend_new(struct rqp *r, int op, unsigned flags) {
  if (r->npend == r->pend_cap) {
    uint32_t n = r->pend_cap ? 2 * r->pend_cap : 64;
    struct pend *p = realloc(r->pend, n * sizeof *p);
    if (!p) {
      r->pend_lost++;
      return;
    }
    r->pend = p;
    r->pend_cap = n;
  }
  struct pend *p = &r->pend[r->npend++];
  p->op = op;
  p->bytes = 0;
  p->wr_id = r->qpx ? r->qpx->wr_id : 0;
  p->signalled = r->sig_all || (flags & IBV_SEND_SIGNALED);
}
static inline void pend_bytes(struct rqp *r, uint64_t b) {
  if (r->npend) r->pend[r->npend - 1].bytes += b;
}

static void qx_wr_start(struct ibv_qp_ex *qpx) {
  QPX_REC(qpx);
  r->orig_qpx.wr_start(qpx);
  r->npend = 0;
  r->pend_lost = 0;
}
static int qx_wr_complete(struct ibv_qp_ex *qpx) {
  QPX_REC(qpx);
  if (!counting()) {
    r->npend = 0;
    return r->orig_qpx.wr_complete(qpx);
  }
  uintptr_t tp = self_tp();
  int locked = side_enter(&r->ps, tp);
  rcclTelemetryStripe_ *st = own_stripe(r->dev, tp);
  /* The session's WRs go into the record before the provider posts them, as in post_send. */
  uint64_t n = r->npend, t0 = r->tail;
  int fits = record_room(r, n);
  if (LIKELY(fits)) {
    for (uint32_t i = 0; i < r->npend; i++) record(r, t0 + i, r->pend[i].wr_id, r->pend[i].signalled, r->pend[i].op, r->pend[i].bytes);
    __atomic_store_n(&r->tail, t0 + n, __ATOMIC_RELEASE);
  }
  int rc = r->orig_qpx.wr_complete(qpx);
  uint64_t bytes = 0;
  uint32_t sig = 0, unsig = 0;
  if (rc == 0) {
    for (uint32_t i = 0; i < r->npend; i++) {
      struct pend *p = &r->pend[i];
      bytes += p->bytes;
      wqe_size(st, r->dev, p->bytes);
      count_send_op(r, p->op, 1);
      if (p->signalled) sig++;
      else unsig++;
    }
    if (UNLIKELY(!fits)) record_untracked(r, sig, unsig);
  } else if (fits) {
    record_refused(r, t0, t0 + n); /* wr_complete failed: none of the session's WRs is posted */
  }
  uint32_t lost = r->pend_lost;
  r->npend = 0;
  r->pend_lost = 0;
  side_exit(&r->ps, locked);
  if (bytes) tx_bytes(st, r->dev, bytes);
  if (lost) diagf(0, "verbs interposer: out of memory; %u WRs of a wr_complete of QP %u not counted", lost, r->qpn);
  return rc;
}
static void qx_wr_abort(struct ibv_qp_ex *qpx) {
  QPX_REC(qpx);
  r->npend = 0;
  r->orig_qpx.wr_abort(qpx);
}

#define BUILDER(name, op, params, args)                                                  \
  static void qx_##name params {                                                         \
    QPX_REC(qpx);                                                                        \
    pend_new(r, op, qpx->wr_flags);                                                      \
    r->orig_qpx.name args;                                                               \
  }
BUILDER(wr_atomic_cmp_swp, IBV_WR_ATOMIC_CMP_AND_SWP,
        (struct ibv_qp_ex * qpx, uint32_t rkey, uint64_t ra, uint64_t cmp, uint64_t swp), (qpx, rkey, ra, cmp, swp))
BUILDER(wr_atomic_fetch_add, IBV_WR_ATOMIC_FETCH_AND_ADD, (struct ibv_qp_ex * qpx, uint32_t rkey, uint64_t ra, uint64_t add),
        (qpx, rkey, ra, add))
BUILDER(wr_bind_mw, IBV_WR_BIND_MW,
        (struct ibv_qp_ex * qpx, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *bi), (qpx, mw, rkey, bi))
BUILDER(wr_local_inv, IBV_WR_LOCAL_INV, (struct ibv_qp_ex * qpx, uint32_t rkey), (qpx, rkey))
BUILDER(wr_rdma_read, IBV_WR_RDMA_READ, (struct ibv_qp_ex * qpx, uint32_t rkey, uint64_t ra), (qpx, rkey, ra))
BUILDER(wr_rdma_write, IBV_WR_RDMA_WRITE, (struct ibv_qp_ex * qpx, uint32_t rkey, uint64_t ra), (qpx, rkey, ra))
BUILDER(wr_rdma_write_imm, IBV_WR_RDMA_WRITE_WITH_IMM, (struct ibv_qp_ex * qpx, uint32_t rkey, uint64_t ra, __be32 imm),
        (qpx, rkey, ra, imm))
BUILDER(wr_send, IBV_WR_SEND, (struct ibv_qp_ex * qpx), (qpx))
BUILDER(wr_send_imm, IBV_WR_SEND_WITH_IMM, (struct ibv_qp_ex * qpx, __be32 imm), (qpx, imm))
BUILDER(wr_send_inv, IBV_WR_SEND_WITH_INV, (struct ibv_qp_ex * qpx, uint32_t rkey), (qpx, rkey))
BUILDER(wr_send_tso, IBV_WR_TSO, (struct ibv_qp_ex * qpx, void *hdr, uint16_t hsz, uint16_t mss), (qpx, hdr, hsz, mss))
BUILDER(wr_atomic_write, IBV_WR_ATOMIC_WRITE, (struct ibv_qp_ex * qpx, uint32_t rkey, uint64_t ra, const void *d),
        (qpx, rkey, ra, d))

static void qx_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t len) {
  QPX_REC(qpx);
  pend_bytes(r, len);
  r->orig_qpx.wr_set_sge(qpx, lkey, addr, len);
}
static void qx_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_sge *sg) {
  QPX_REC(qpx);
  uint64_t b = 0;
  for (size_t i = 0; i < n; i++) b += sg[i].length;
  pend_bytes(r, b);
  r->orig_qpx.wr_set_sge_list(qpx, n, sg);
}
static void qx_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t len) {
  QPX_REC(qpx);
  pend_bytes(r, len);
  r->orig_qpx.wr_set_inline_data(qpx, addr, len);
}
static void qx_wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_data_buf *bl) {
  QPX_REC(qpx);
  uint64_t b = 0;
  for (size_t i = 0; i < n; i++) b += bl[i].length;
  pend_bytes(r, b);
  r->orig_qpx.wr_set_inline_data_list(qpx, n, bl);
}

void patch_qpx(struct rqp *r, struct ibv_qp_ex *qpx) {
  if (r->qpx == qpx) return;
  r->orig_qpx = *qpx;
  /* Each entry is replaced only when the provider has one (a NULL builder stays NULL). */
#define P(name)                                                                          \
  if (qpx->name) qpx->name = qx_##name
  P(wr_atomic_cmp_swp);
  P(wr_atomic_fetch_add);
  P(wr_bind_mw);
  P(wr_local_inv);
  P(wr_rdma_read);
  P(wr_rdma_write);
  P(wr_rdma_write_imm);
  P(wr_send);
  P(wr_send_imm);
  P(wr_send_inv);
  P(wr_send_tso);
  P(wr_atomic_write);
  P(wr_set_sge);
  P(wr_set_sge_list);
  P(wr_set_inline_data);
  P(wr_set_inline_data_list);
  /* A session is bracketed by all three or by none. */
  if (qpx->wr_start && qpx->wr_complete && qpx->wr_abort) {
    P(wr_start);
    P(wr_complete);
    P(wr_abort);
  }
#undef P
  __atomic_store_n(&r->qpx, qpx, __ATOMIC_RELEASE);
}

EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp) {
  struct ibv_qp_ex *(*f)(struct ibv_qp *) = real_ibv_qp_to_qp_ex();
  if (!f) return NULL;
  struct ibv_qp_ex *qpx = f(qp);
  if (qpx && on()) {
    struct rqp *r = qp_rec(qp);
    if (r && r->qpx != qpx) {
      pthread_mutex_lock(&g_mu);
      if (r->qp == qp) patch_qpx(r, qpx);
      pthread_mutex_unlock(&g_mu);
    }
  }
  return qpx;
}
