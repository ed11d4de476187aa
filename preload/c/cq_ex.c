/*
 * preload/c/cq_ex.c: the ibv_cq_ex records (struct rcq). verbs_context's create_cq_ex asks
 * the provider for each completion's QP number and length, keeps the provider's start_poll /
 * next_poll and puts poll.c's in their place; ibv_destroy_cq lets the record go. Separate
 * because these records are the ibv_cq_ex's alone; the polling itself is poll.c's, in the
 * translation unit of poll_cq, so that both compile as they did in one file.
 */
#include "preload.h"

struct rcq *g_free_cqs; /* CQ records to reuse (under g_mu) */

struct ibv_cq_ex *w_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr) {
  struct rctx *c = ctx_of(ctx);
  if (!c) return NULL;
  if (!on() || !attr) return c->orig_create_cq_ex(ctx, attr);
  /* Attribution needs the QP number (and receive bytes the length) of each completion: ask
   * for them on a copy of the program's attributes; when the provider refuses, retry with
   * the program's own. The program reads what it asked for, either way. */
  const uint64_t want = IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_BYTE_LEN;
  struct ibv_cq_ex *cq = NULL;
  uint64_t flags = attr->wc_flags;
  if ((attr->wc_flags & want) != want) {
    struct ibv_cq_init_attr_ex a = *attr;
    a.wc_flags |= want;
    cq = c->orig_create_cq_ex(ctx, &a);
    if (cq) {
      flags = a.wc_flags;
    } else {
      diagf(1, "verbs interposer: the provider refused IBV_WC_EX_WITH_QP_NUM|BYTE_LEN (errno %d); retrying with the program's flags",
            errno);
    }
  }
  if (!cq) cq = c->orig_create_cq_ex(ctx, attr);
  if (!cq) return NULL;
  if (!(flags & IBV_WC_EX_WITH_QP_NUM) || !cq->read_qp_num || !cq->start_poll || !cq->next_poll) {
    diagf(0, "verbs interposer: an ibv_cq_ex without qp_num: its completions are not counted");
    return cq;
  }
  pthread_mutex_lock(&g_mu);
  struct rcq **page = c->cqs[(cq->handle >> 12) & (RADIX - 1)];
  if (!page) {
    page = calloc(RADIX, sizeof *page);
    if (page) __atomic_store_n(&c->cqs[(cq->handle >> 12) & (RADIX - 1)], page, __ATOMIC_RELEASE);
  }
  struct rcq *q = g_free_cqs;
  if (q) g_free_cqs = q->next_free;
  else q = calloc(1, sizeof *q);
  if (!page || !q) {
    if (q) {
      q->next_free = g_free_cqs;
      g_free_cqs = q;
    }
    pthread_mutex_unlock(&g_mu);
    diagf(0, "verbs interposer: out of memory; an ibv_cq_ex is not counted");
    return cq;
  }
  struct rcq **cell = &page[cq->handle & (RADIX - 1)];
  if (*cell) {
    ST((*cell)->cq, NULL);
    (*cell)->next_free = g_free_cqs;
    g_free_cqs = *cell;
  }
  q->c = c;
  q->dev = c->dev;
  q->have_qpn = 1;
  q->have_len = (flags & IBV_WC_EX_WITH_BYTE_LEN) && cq->read_byte_len;
  q->start_poll = cq->start_poll;
  q->next_poll = cq->next_poll;
  q->end_poll = cq->end_poll;
  q->read_qp_num = cq->read_qp_num;
  q->read_byte_len = cq->read_byte_len;
  q->read_opcode = cq->read_opcode;
  q->read_vendor_err = cq->read_vendor_err;
  q->cq = cq;
  __atomic_store_n(cell, q, __ATOMIC_RELEASE);
  cq->start_poll = cx_start_poll;
  cq->next_poll = cx_next_poll;
  pthread_mutex_unlock(&g_mu);
  return cq;
}

EXPORT int ibv_destroy_cq(struct ibv_cq *cq) {
  int (*f)(struct ibv_cq *) = real_ibv_destroy_cq();
  if (!f) return ENOSYS;
  struct rctx *c = cq && book() ? ctx_of(cq->context) : NULL;
  struct rcq *q = c ? cq_rec(c, (struct ibv_cq_ex *)cq) : NULL;
  uint32_t handle = cq ? cq->handle : 0;
  int rc = f(cq);
  if (q && rc == 0) {
    pthread_mutex_lock(&g_mu);
    struct rcq **page = c->cqs[(handle >> 12) & (RADIX - 1)];
    struct rcq **cell = page ? &page[handle & (RADIX - 1)] : NULL;
    if (cell && *cell == q) __atomic_store_n(cell, NULL, __ATOMIC_RELEASE);
    ST(q->cq, NULL);
    q->next_free = g_free_cqs;
    g_free_cqs = q;
    pthread_mutex_unlock(&g_mu);
  }
  return rc;
}
