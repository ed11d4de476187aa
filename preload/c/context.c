/*
 * preload/c/context.c: the ops patching per context. ibv_open_device, once telemetry is on,
 * gives the context a device number of the engine and an entry in g_ctx, keeps the
 * provider's ctx->ops and verbs_context create_qp_ex / create_cq_ex and puts the wrappers in
 * their place (post.c, poll.c, qp_table.c, cq_ex.c); ibv_close_device lets go of the QP and
 * CQ records the program left. Separate because it is the one place tables are patched.
 */
#include "preload.h"

struct rctx g_ctx[MAX_CTX];
int g_nctx;

/* The device's position in ibv_get_device_list. */
static int device_index(struct ibv_device *dev) {
  struct ibv_device **(*get)(int *) = real_ibv_get_device_list();
  void (*put)(struct ibv_device **) = real_ibv_free_device_list();
  if (!get || !put) return -1;
  int n = 0, idx = -1;
  struct ibv_device **l = get(&n);
  if (!l) return -1;
  for (int i = 0; i < n && idx < 0; i++)
    if (l[i] == dev) idx = i;
  for (int i = 0; i < n && idx < 0; i++)
    if (strcmp(l[i]->name, dev->name) == 0) idx = i;
  put(l);
  return idx;
}

EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device) {
  struct ibv_context *(*f)(struct ibv_device *) = real_ibv_open_device();
  if (!f) {
    errno = ENOSYS;
    return NULL;
  }
  struct ibv_context *ctx = f(device);
  if (!ctx || !start()) return ctx;
  int idx = device_index(device);
  int dev = idx >= 0 ? rtp_register_device(idx, device->name) : -1;
  if (dev < 0) {
    diagf(0, "verbs interposer: device %s (index %d) not counted", device->name, idx);
    return ctx;
  }
  pthread_mutex_lock(&g_mu);
  struct rctx *c = NULL;
  for (int i = 0; i < g_nctx && !c; i++)
    if (!g_ctx[i].ctx) c = &g_ctx[i];
  if (!c && g_nctx < MAX_CTX) c = &g_ctx[g_nctx];
  if (!c) {
    pthread_mutex_unlock(&g_mu);
    diagf(0, "verbs interposer: more than %d contexts open; %s not counted", MAX_CTX, device->name);
    return ctx;
  }
  c->dev = dev;
  c->orig = ctx->ops;
  c->orig_create_qp_ex = NULL;
  c->orig_create_cq_ex = NULL;
  if (ctx->ops.post_send) ctx->ops.post_send = w_post_send;
  if (ctx->ops.post_recv) ctx->ops.post_recv = w_post_recv;
  if (ctx->ops.post_srq_recv) ctx->ops.post_srq_recv = w_post_srq_recv;
  if (ctx->ops.poll_cq) ctx->ops.poll_cq = w_poll_cq;
  struct verbs_context *v = verbs_get_ctx_op(ctx, create_qp_ex);
  if (v) {
    c->orig_create_qp_ex = v->create_qp_ex;
    v->create_qp_ex = w_create_qp_ex;
  }
  v = verbs_get_ctx_op(ctx, create_cq_ex);
  if (v) {
    c->orig_create_cq_ex = v->create_cq_ex;
    v->create_cq_ex = w_create_cq_ex;
  }
  __atomic_store_n(&c->ctx, ctx, __ATOMIC_RELEASE);
  if (c == &g_ctx[g_nctx]) __atomic_store_n(&g_nctx, g_nctx + 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g_mu);
  diagf(1, "verbs interposer: %s opened as device %d", device->name, dev);
  return ctx;
}

EXPORT int ibv_close_device(struct ibv_context *ctx) {
  int (*f)(struct ibv_context *) = real_ibv_close_device();
  if (!f) return ENOSYS;
  struct rctx *c = ctx && book() ? ctx_of(ctx) : NULL;
  if (!c) return f(ctx);
  /* g_mu is held across the provider's close: a device opened meanwhile by another thread
   * can get this context's address as soon as the provider frees it, and must not find this
   * entry still holding it (its QPs would be counted on this device, then freed with it);
   * its open waits here until the entry is free. */
  pthread_mutex_lock(&g_mu);
  int rc = f(ctx);
  if (rc != 0) {
    pthread_mutex_unlock(&g_mu);
    return rc;
  }
  {
    /* QPs the program did not destroy go with their context. */
    for (uint32_t p = 0; p < QTOP; p++) {
      struct qleaf *l = g_qpn[c->dev & 31][p]; /* an unlinked leaf stays readable until reclaimed */
      for (int i = 0; l && i < QLEAF; i++)
        if (l->cell[i] && l->cell[i]->c == c) free_qp_locked(l->cell[i]);
    }
    reclaim_locked();
    for (int p = 0; p < RADIX; p++) {
      struct rcq **page = c->cqs[p];
      for (int i = 0; page && i < RADIX; i++)
        if (page[i]) {
          ST(page[i]->cq, NULL);
          page[i]->next_free = g_free_cqs;
          g_free_cqs = page[i];
          __atomic_store_n(&page[i], NULL, __ATOMIC_RELEASE);
        }
    }
    __atomic_store_n(&c->ctx, NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_mu);
  }
  return rc;
}
