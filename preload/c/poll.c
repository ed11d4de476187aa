/*
 * preload/c/poll.c: the completing half of the data path: ctx->ops' poll_cq (the common
 * completion counted inline, preload.h's complete_common), what every other completion does
 * to its QP (complete_rest: receives, errors, sampled latencies, the unsignalled WRs a
 * signalled completion retires from the in-order send record), and the ibv_cq_ex polling
 * functions cq_ex.c patches in (start_poll, next_poll: each completion counted like one of
 * poll_cq's). Separate because it is the completing half (post.c is the other).
 */
#include "preload.h"

/* The untracked WRs due before the oldest entry (or, with none, all published so far), on
 * the completing side; e is that entry or NULL. */
static inline struct ent *oldest(struct rqp *r, uint64_t *gap) {
  if (r->head != __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE)) {
    struct ent *e = &r->ring[r->head & (r->ring_cap - 1)];
    *gap = e->gap;
    return e;
  }
  *gap = __atomic_load_n(&r->gap_total, __ATOMIC_ACQUIRE);
  return NULL;
}

static inline int send_outstanding(struct rqp *r) {
  uint64_t g;
  return oldest(r, &g) || g != r->gap_done;
}

/* A successful send completion, on the completing side: retires the unsignalled WRs before
 * the signalled one it completes; returns that one's token (0 when none was recorded). */
static inline int64_t retire_signalled(struct rqp *r) {
  uint64_t retired = 0, h = r->head;
  int64_t tok = 0;
  for (;;) {
    uint64_t g;
    struct ent *e = oldest(r, &g);
    uint32_t done_s = GAP_S(r->gap_done);
    retired += (uint32_t)(GAP_U(g) - GAP_U(r->gap_done)); /* untracked unsignalled WRs before e */
    r->gap_done = GAP(done_s, GAP_U(g));
    if (UNLIKELY(GAP_S(g) != done_s)) { /* an untracked signalled WR is next: its completion, */
      r->gap_done = GAP(done_s + 1, GAP_U(g)); /* matched to no entry (tok 0) */
      break;
    }
    if (!e) break; /* nothing recorded: unmatched */
    uint32_t fl = LD(e->flags);
    int64_t t = e->token;
    __atomic_store_n(&r->head, ++h, __ATOMIC_RELEASE);
    if (UNLIKELY(fl & ENT_VOID)) continue;
    if (fl & ENT_SIG) {
      tok = t;
      break;
    }
    retired++;
  }
  if (retired && r->ext) ADD(r->ext->retired_unsignalled, retired);
  return tok;
}

/* What the send record knew of the WR an error completed (opcode -1, bytes -1: unknown). */
struct failed_wr {
  int op;
  int64_t bytes, token;
};

/* An error completion of the send queue, on the completing side: errors complete one WR
 * each, signalled or not: the oldest, whose entry (when it has one) says what it was (*f).
 * RCCL_TELEMETRY_TS_UNSAMPLED when a WR was outstanding, else 0. */
static inline int64_t retire_error(struct rqp *r, struct failed_wr *f) {
  for (;;) {
    uint64_t g, d = r->gap_done;
    struct ent *e = oldest(r, &g);
    if (GAP_U(g) != GAP_U(d)) r->gap_done = GAP(GAP_S(d), GAP_U(d) + 1);
    else if (GAP_S(g) != GAP_S(d)) r->gap_done = GAP(GAP_S(d) + 1, GAP_U(d));
    else if (e) {
      uint32_t fl = LD(e->flags);
      struct failed_wr w = {e->op, e->bytes, e->token};
      __atomic_store_n(&r->head, r->head + 1, __ATOMIC_RELEASE);
      if (fl & ENT_VOID) continue;
      *f = w;
    } else return 0;
    return RCCL_TELEMETRY_TS_UNSAMPLED;
  }
}

/* The rest of complete(): receives, errors, and the latency of a sampled send (all but the
 * unsampled successful send completion), inside the completing side. */
__attribute__((noinline)) void complete_rest(struct rqp *r, int dev, struct ibv_cq *cq, int status, int opcode,
                                             uint32_t byte_len, uint64_t wr_id, int64_t *now, uintptr_t tp,
                                             uint32_t vendor_err) {
  int err = status != IBV_WC_SUCCESS;
  if (UNLIKELY(err)) rcclTelemetryCqError(dev);
  int recv;
  if (LIKELY(!err)) {
    recv = (opcode & IBV_WC_RECV) != 0;
  } else if (r->scq != r->rcq) {
    recv = cq == r->rcq;
  } else {
    /* One CQ for both queues, and an error's opcode is undefined: the queue that has WRs
     * outstanding; when both have, the send queue if its oldest WR has this wr_id. */
    int s = send_outstanding(r), rv = r->has_srq || LD(r->recv_out) != 0;
    if (s && rv) {
      uint64_t g;
      struct ent *e = oldest(r, &g);
      recv = !(e && g == r->gap_done && e->wr_id == wr_id);
    } else {
      recv = rv;
    }
  }
  int64_t tok;
  struct failed_wr f = {recv ? -2 : -1, -1, 0};
  if (recv) {
    tok = 0;
    if (r->has_srq) {
      tok = RCCL_TELEMETRY_TS_UNSAMPLED;
    } else {
      uint64_t o = LD(r->recv_out);
      while (o && !__atomic_compare_exchange_n(&r->recv_out, &o, o - 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      }
      if (o) tok = RCCL_TELEMETRY_TS_UNSAMPLED;
    }
  } else {
    tok = err ? retire_error(r, &f) : retire_signalled(r);
    if (tok > RCCL_TELEMETRY_TS_UNSAMPLED && *now <= RCCL_TELEMETRY_TS_UNSAMPLED) *now = rcclTelemetryPollTs();
  }
  rcclTelemetryQpWqeCompleteAt(r->slot, tok, *now > RCCL_TELEMETRY_TS_UNSAMPLED ? *now : 1);
  if (UNLIKELY(err)) {
    /* An error completion moves an RC (or XRC) QP to ERR; other types are not judged. */
    struct ibv_qp *qp = LD(r->qp);
    enum ibv_qp_type t = qp ? qp->qp_type : IBV_QPT_RC;
    int rc = t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND || t == IBV_QPT_XRC_RECV;
    rtp_cq_error(r->slot, dev, status, vendor_err, f.op, f.bytes, f.token, rc);
  }
  if (recv && !err) {
    rcclTelemetryStripe_ *st = own_stripe(dev, tp);
    if (LIKELY(st != NULL)) ADD(st->own.rx_bytes, byte_len);
    else (rcclTelemetryBytes)(dev, 0, byte_len);
  }
}

/* The counting of a poll that returned got completions (any number, any kind), after the
 * provider's call. */
static __attribute__((noinline)) int poll_counted(struct rctx *c, struct ibv_cq *cq, int got, struct ibv_wc *wc) {
  int dev = c->dev;
  uintptr_t tp = self_tp();
  rcclTelemetryStripe_ *st = own_stripe(dev, tp);
  if (LIKELY(st != NULL)) ADD(st->own.cq_polls, 1);
  else (rcclTelemetryAddCqPolls)(dev, 1);
  if (got <= 0) return got;
  struct tnode *tn = t_node;
  if (!tn && !(tn = tnode_slow())) return got;
  uint64_t out = window_enter(tn);
  int64_t now = 0;
  for (int i = 0; i < got; i++)
    complete(dev, cq, wc[i].qp_num, wc[i].status, wc[i].opcode, wc[i].byte_len, wc[i].wr_id, &now, tp, wc[i].vendor_err);
  window_exit(tn, out);
  return got;
}

/*
 * The common poll: one completion, on a QP whose completing side and device stripe the
 * calling thread owns, counted inline (complete_common, else complete_rest). Any other poll,
 * poll_counted.
 */
int w_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
  struct rctx *c = ctx_of(cq->context);
  if (UNLIKELY(!c)) return -1;
  int got = c->orig.poll_cq(cq, n, wc);
  if (UNLIKELY(!counting())) return got;
  int dev = c->dev;
  rcclTelemetryStripe_ *st = t_stripe[dev & 31];
  struct tnode *tn = t_node;
  if (UNLIKELY(got != 1) || UNLIKELY(st == NULL) || UNLIKELY(tn == NULL)) return poll_counted(c, cq, got, wc);
  uintptr_t tp = self_tp();
  uint64_t out = window_enter_fast(tn);
  struct rqp *r = qp_by_num(dev, wc->qp_num);
  if (UNLIKELY(r == NULL) || UNLIKELY(LD(r->cs.owner) != tp) || UNLIKELY(!side_enter_owned(&r->cs))) {
    window_exit(tn, out);
    return poll_counted(c, cq, got, wc);
  }
  ADD(st->own.cq_polls, 1);
  int64_t now = 0, now_rest = 0; /* two, so that only the rare path's lives in memory */
  if (UNLIKELY(!complete_common(r, wc->status, wc->opcode, &now)))
    complete_rest(r, dev, cq, wc->status, wc->opcode, wc->byte_len, wc->wr_id, &now_rest, tp, wc->vendor_err);
  side_exit(&r->cs, 0);
  window_exit(tn, out);
  return 1;
}

/* One completion of an ibv_cq_ex, counted like one of poll_cq's. */
static inline void cqx_one(struct rcq *q, struct ibv_cq_ex *cq) {
  uint32_t qpn = q->read_qp_num(cq);
  int op = q->read_opcode ? (int)q->read_opcode(cq) : 0;
  uint32_t len = (cq->status == IBV_WC_SUCCESS && q->have_len && (op & IBV_WC_RECV)) ? q->read_byte_len(cq) : 0;
  uint32_t verr = UNLIKELY(cq->status != IBV_WC_SUCCESS) && q->read_vendor_err ? q->read_vendor_err(cq) : 0;
  struct tnode *tn = t_node;
  if (UNLIKELY(!tn) && !(tn = tnode_slow())) return;
  uint64_t out = window_enter(tn);
  complete(q->dev, ibv_cq_ex_to_cq(cq), qpn, cq->status, op, len, cq->wr_id, &q->now, self_tp(), verr);
  window_exit(tn, out);
}

/* ibv_cq_ex polling: the functions create_cq_ex (cq_ex.c) puts in the provider's place. */
int cx_start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr) {
  struct rctx *c = ctx_of(cq->context);
  struct rcq *q = c ? cq_rec(c, cq) : NULL;
  if (UNLIKELY(!q)) return ENOSYS; /* cannot happen: only recorded CQs are patched */
  int rc = q->start_poll(cq, attr);
  if (LIKELY(counting())) {
    rcclTelemetryStripe_ *st = own_stripe(q->dev, self_tp());
    if (LIKELY(st != NULL)) ADD(st->own.cq_polls, 1);
    else (rcclTelemetryAddCqPolls)(q->dev, 1);
    q->now = 0;
    if (rc == 0) cqx_one(q, cq);
  }
  return rc;
}
int cx_next_poll(struct ibv_cq_ex *cq) {
  struct rctx *c = ctx_of(cq->context);
  struct rcq *q = c ? cq_rec(c, cq) : NULL;
  if (UNLIKELY(!q)) return ENOSYS;
  int rc = q->next_poll(cq);
  if (rc == 0 && LIKELY(counting())) cqx_one(q, cq);
  return rc;
}
