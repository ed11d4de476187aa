/*
 * preload/c/post.c: the posting wrappers of ctx->ops: post_send (the common post of one WR
 * by the thread that owns the QP's posting side counted before the provider's call, anything
 * else after it, both into the in-order send record first), post_recv and post_srq_recv;
 * and the slow way to a thread's own device stripe. Separate because it is the posting half
 * of the data path (poll.c is the other).
 */
#include "preload.h"

__thread rcclTelemetryStripe_ *t_stripe[32] __attribute__((tls_model("initial-exec")));
__attribute__((noinline)) rcclTelemetryStripe_ *own_stripe_slow(int dev, uintptr_t tp) {
  rcclTelemetryStripe_ *s = rcclTelemetryStripe_of_(dev, tp);
  if (!s || LD(s->owner) != tp) return NULL;
  t_stripe[dev] = s;
  return s;
}

static inline int signalled_wr(const struct rqp *r, const struct ibv_send_wr *w) {
  return r->sig_all || (w->send_flags & IBV_SEND_SIGNALED);
}

/* Any post but the common one (see w_post_send), inside the QP's posting side (entered
 * already; locked as side_enter said): a chain, a record without room, a shared side, a
 * thread without its own device stripe. Counted after the provider's call, for the WRs it
 * took. */
static __attribute__((noinline)) int post_general(struct rqp *r, struct ibv_qp *qp, struct ibv_send_wr *wr,
                                                  struct ibv_send_wr **bad, int locked, uintptr_t tp) {
  int dev = r->dev;
  rcclTelemetryStripe_ *st = own_stripe(dev, tp);
  uint64_t t0 = r->tail;
  /* The chain goes into the record before the provider sees it (see the record above). */
  uint64_t n = 0;
  for (struct ibv_send_wr *w = wr; w; w = w->next) n++;
  int fits = record_room(r, n);
  if (LIKELY(fits)) {
    uint64_t t = t0;
    for (struct ibv_send_wr *w = wr; w; w = w->next) record(r, t++, w->wr_id, signalled_wr(r, w), w->opcode, wr_bytes(w));
    __atomic_store_n(&r->tail, t, __ATOMIC_RELEASE);
  }
  struct ibv_send_wr *badwr = NULL;
  int rc = r->c->orig.post_send(qp, wr, &badwr);
  uint64_t bytes = 0, k = 0;
  uint32_t sig = 0, unsig = 0;
  for (struct ibv_send_wr *w = wr; w && !(rc && w == badwr); w = w->next, k++) {
    uint64_t b = wr_bytes(w);
    bytes += b;
    wqe_size(st, dev, b);
    count_send_op(r, w->opcode, 1);
    if (UNLIKELY(!fits)) {
      if (signalled_wr(r, w)) sig++;
      else unsig++;
    }
  }
  if (UNLIKELY(!fits)) record_untracked(r, sig, unsig);
  else if (UNLIKELY(k < n)) record_refused(r, t0 + k, t0 + n);
  side_exit(&r->ps, locked);
  if (bytes) tx_bytes(st, dev, bytes);
  if (bad) *bad = badwr;
  return rc;
}

/* The common post refused by the provider (its one WR, the newest entry of the record):
 * what was counted for it before the call is taken back. */
static __attribute__((noinline)) void post_refused(struct rqp *r, const struct ibv_send_wr *wr) {
  rcclTelemetryStripe_ *st = t_stripe[r->dev & 31];
  uint64_t b = wr_bytes(wr), t = r->tail - 1;
  ADD(st->own.sizes[rcclTelemetrySizeBucket_(b)], (uint64_t)-1);
  ADD(st->own.tx_bytes, -b);
  count_send_op(r, wr->opcode, (uint64_t)-1);
  record_refused(r, t, t + 1);
}

/* Every post but the common one (see w_post_send): an uncounted QP, telemetry off, a side
 * this thread does not own, a chain, a full record, a thread without its device stripe. */
static __attribute__((noinline)) int post_slow(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  struct rqp *r = qp_cached(qp);
  if (UNLIKELY(!r)) { /* a QP this file does not count (created before, or beyond the slots) */
    struct rctx *c = ctx_of(qp->context);
    return c ? c->orig.post_send(qp, wr, bad) : ENOSYS;
  }
  if (UNLIKELY(!rcclTelemetryOn())) return r->c->orig.post_send(qp, wr, bad);
  uintptr_t tp = self_tp();
  return post_general(r, qp, wr, bad, side_enter(&r->ps, tp), tp);
}

/*
 * The common post: one WR on a cached QP, by the thread that owns the QP's posting side and
 * its device stripe, with room in the record. It is counted before the provider's call, so
 * that only the record and the WR live across it, and taken back if the provider refuses
 * the WR; bad goes to the provider as the program passed it. Anything else, post_slow.
 */
int w_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  struct rqp *r = LD(g_qpc[qpc_slot(qp)]);
  if (UNLIKELY(r == NULL) || UNLIKELY(__atomic_load_n(&r->qp, __ATOMIC_ACQUIRE) != qp)) return post_slow(qp, wr, bad);
  int (*post)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **) = r->c->orig.post_send;
  if (UNLIKELY(!rcclTelemetryOn())) return post(qp, wr, bad);
  rcclTelemetryStripe_ *st = t_stripe[r->dev & 31];
  if (UNLIKELY(LD(r->ps.owner) != self_tp()) || UNLIKELY(wr == NULL) || UNLIKELY(wr->next != NULL) ||
      UNLIKELY(st == NULL))
    return post_slow(qp, wr, bad);
  if (UNLIKELY(!side_enter_owned(&r->ps))) return post_slow(qp, wr, bad);
  uint64_t t0 = r->tail;
  if (UNLIKELY(!record_room(r, 1))) {
    side_exit(&r->ps, 0);
    return post_slow(qp, wr, bad);
  }
  uint64_t b = wr_bytes(wr);
  record(r, t0, wr->wr_id, signalled_wr(r, wr), wr->opcode, b);
  __atomic_store_n(&r->tail, t0 + 1, __ATOMIC_RELEASE);
  wqe_size(st, r->dev, b); /* st is not NULL here: the stores only */
  tx_bytes(st, r->dev, b);
  count_send_op(r, wr->opcode, 1);
  int rc = post(qp, wr, bad);
  if (UNLIKELY(rc != 0)) post_refused(r, wr);
  side_exit(&r->ps, 0);
  return rc;
}

int w_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  struct rctx *c = ctx_of(qp->context);
  if (UNLIKELY(!c)) return ENOSYS;
  struct ibv_recv_wr *badwr = NULL;
  int rc = c->orig.post_recv(qp, wr, &badwr);
  struct rqp *r;
  if (LIKELY(counting()) && (r = qp_cached(qp)) != NULL) {
    uint64_t n = 0;
    for (struct ibv_recv_wr *w = wr; w && !(rc && w == badwr); w = w->next) n++;
    /* After the provider's post: a completion can overtake this count, which only means a
     * receive that completes first counts unmatched when recv_out is 0 (see complete_rest()). */
    if (n) {
      XADD(r->recv_out, n);
      if (r->slot) XADD(((rcclTelemetryQp_ *)(void *)r->slot)->recv_wqe, n);
    }
  }
  if (bad) *bad = badwr;
  return rc;
}

int w_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  struct rctx *c = ctx_of(srq->context);
  if (UNLIKELY(!c)) return ENOSYS;
  struct ibv_recv_wr *badwr = NULL;
  int rc = c->orig.post_srq_recv(srq, wr, &badwr);
  if (LIKELY(counting())) {
    uint64_t n = 0;
    for (struct ibv_recv_wr *w = wr; w && !(rc && w == badwr); w = w->next) n++;
    if (n) rtp_srq_recv(c->dev, n);
  }
  if (bad) *bad = badwr;
  return rc;
}
