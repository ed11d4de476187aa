/*
 * c_tests/preload/fake_verbs_datapath.c: the fake libibverbs' data path: the CQs (create,
 * destroy, their completion queues, poll_cq), the send and receive queues (post_send,
 * post_recv, post_srq_recv) and the completions a post implies (fake_verbs.h), and
 * fakeverbs_inject. A file of its own because it is what the interposer's per-call wrappers
 * and the bench's unwrapped baseline run; the rest of the fake is set-up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fake_verbs_internal.h"

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

int cq_pop(struct fcq *c, struct ibv_wc *wc) {
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
void send_one(struct fqp *q, const struct ibv_send_wr *w) {
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
    wc_of(&wc, q, w->wr_id, q->fail_status, wc_opcode(w->opcode), 0);
    wc.vendor_err = q->fail_vendor;
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

int f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
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

int f_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
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

int f_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  struct fsrq *s = (struct fsrq *)srq;
  (void)bad;
  pthread_mutex_lock(&g_mu);
  for (struct ibv_recv_wr *w = wr; w; w = w->next) rq_push(&s->wr_ids, &s->cap, &s->head, &s->tail, w->wr_id);
  pthread_mutex_unlock(&g_mu);
  return 0;
}

int f_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
  struct fcq *c = (struct fcq *)cq;
  int i = 0;
  while (i < n && cq_pop(c, &wc[i])) i++;
  return i;
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

EXPORT void fakeverbs_inject(struct ibv_cq *cq, uint32_t qp_num) {
  struct ibv_wc wc;
  memset(&wc, 0, sizeof wc);
  wc.qp_num = qp_num;
  wc.opcode = IBV_WC_SEND;
  cq_push((struct fcq *)cq, &wc);
}
