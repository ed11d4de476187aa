/*
 * c_tests/preload/fake_verbs_qp.c: the fake libibverbs' QPs and SRQs: creation (qp_new, also
 * behind fake_verbs_ex.c's create_qp_ex), numbering, ibv_qp_to_qp_ex, destruction, the state
 * machine (the provider's modify_qp behind the library's ibv_modify_qp) and the controls that
 * act on a QP (fakeverbs_connect, fail_next, fail_modify). A file of its own: a QP's life
 * outside the data path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fake_verbs_internal.h"

static uint32_t g_next_qpn[2] = {0x100, 0x100}; /* per device, under g_mu */
/* fakeverbs_recycle_qps(1): a destroyed QP's memory and number go to the next QP created on
 * its device (newest first), as a provider's QP pool and number allocator may hand them out;
 * per device, under g_mu. */
static int g_recycle;
static struct fqp *g_recycled[2];

EXPORT void fakeverbs_recycle_qps(int on) {
  pthread_mutex_lock(&g_mu);
  g_recycle = on;
  pthread_mutex_unlock(&g_mu);
}

struct fqp *qp_new(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
                   struct ibv_srq *srq, int sig_all, enum ibv_qp_type type, struct ibv_qp_cap *cap) {
  int d = dev_index(ctx);
  pthread_mutex_lock(&g_mu);
  struct fqp *q = g_recycled[d];
  if (q) g_recycled[d] = q->next_free;
  pthread_mutex_unlock(&g_mu);
  uint32_t qpn = 0;
  if (q) {
    qpn = q->qpx.qp_base.qp_num;
    memset(q, 0, sizeof *q);
  } else {
    q = calloc(1, sizeof *q);
  }
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
  pthread_mutex_lock(&g_mu);
  if (qpn) {
    b->qp_num = qpn;
  } else {
    b->qp_num = g_next_qpn[d];
    /* Spread over the 24-bit space, as a provider's round-robin numbers are after long churn:
     * an odd stride visits every number once before any repeats (0 and 1 are skipped), and
     * consecutive QPs fall 4096 + 512 + 1 apart (another 256-number block, another 4 KiB of a
     * 4096-number page each time). */
    do g_next_qpn[d] = (g_next_qpn[d] + 0x1201) & 0xFFFFFF;
    while (g_next_qpn[d] < 2);
  }
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

EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp) {
  struct fqp *q = (struct fqp *)qp;
  fakeverbs_cue(FAKEVERBS_AT_QP_TO_QP_EX);
  return q->ex ? &q->qpx : NULL;
}

EXPORT int ibv_destroy_qp(struct ibv_qp *qp) {
  struct fqp *q = (struct fqp *)qp;
  free(q->rq);
  free(q->wrs);
  free(q->sges);
  pthread_mutex_lock(&g_mu);
  if (q->peer && q->peer->peer == q) q->peer->peer = NULL;
  int keep = g_recycle;
  if (keep) {
    int d = dev_index(qp->context);
    q->next_free = g_recycled[d];
    g_recycled[d] = q;
  }
  pthread_mutex_unlock(&g_mu);
  if (!keep) free(q);
  fakeverbs_cue(FAKEVERBS_AT_QP_DESTROYED); /* the QP is gone, the call not yet returned */
  return 0;
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
int f_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
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

EXPORT void fakeverbs_connect(struct ibv_qp *a, struct ibv_qp *b) {
  pthread_mutex_lock(&g_mu);
  ((struct fqp *)a)->peer = (struct fqp *)b;
  ((struct fqp *)b)->peer = (struct fqp *)a;
  pthread_mutex_unlock(&g_mu);
}

EXPORT void fakeverbs_fail_next_status(struct ibv_qp *qp, int status, uint32_t vendor_err) {
  pthread_mutex_lock(&g_mu);
  struct fqp *q = (struct fqp *)qp;
  q->fail_next = 1;
  q->fail_status = (enum ibv_wc_status)status;
  q->fail_vendor = vendor_err;
  pthread_mutex_unlock(&g_mu);
}

EXPORT void fakeverbs_fail_next(struct ibv_qp *qp) { fakeverbs_fail_next_status(qp, IBV_WC_REM_ACCESS_ERR, 0); }

EXPORT void fakeverbs_fail_modify(struct ibv_qp *qp, int err) {
  pthread_mutex_lock(&g_mu);
  ((struct fqp *)qp)->fail_modify = err;
  pthread_mutex_unlock(&g_mu);
}
