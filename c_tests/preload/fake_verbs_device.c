/*
 * c_tests/preload/fake_verbs_device.c: the fake libibverbs' devices and contexts: the device
 * list (fake0, fake1), ibv_open_device/ibv_close_device (the provider's ops table and
 * verbs_context, the library's private table), PDs, the ports' GID tables and LIDs
 * (ibv_query_gid, query_port) and the controls that set or check them. A file of its own:
 * what a program opens before any QP, and the state every other file shares (g_mu, g_devs).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fake_verbs_internal.h"

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* every QP's state */
uint32_t g_handles = 1;
struct ibv_device g_devs[2];

/* Per device and port (1..FAKE_PORTS): the GID table and the LID ("sysfs"). */
static union ibv_gid g_gid[2][FAKE_PORTS + 1][FAKE_GIDS];
static uint16_t g_lid[2][FAKE_PORTS + 1];
static unsigned long g_queries;

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

/* A closed context's memory goes to the next open (as an allocator may do), so that a
 * context reopened by another thread can get the address of one just closed. */
static struct fctx *g_free_ctx;

EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev) {
  pthread_mutex_lock(&g_mu);
  struct fctx *c = g_free_ctx;
  if (c) g_free_ctx = *(struct fctx **)c;
  pthread_mutex_unlock(&g_mu);
  if (c) memset(c, 0, sizeof *c);
  else c = calloc(1, sizeof *c);
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
  pthread_mutex_lock(&g_mu);
  *(struct fctx **)c = g_free_ctx;
  g_free_ctx = c;
  pthread_mutex_unlock(&g_mu);
  fakeverbs_cue(FAKEVERBS_AT_CLOSED); /* the context is gone, the call not yet returned */
  return 0;
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

EXPORT int fakeverbs_pristine(struct ibv_context *ctx) {
  struct verbs_context *v = (struct verbs_context *)((char *)ctx - offsetof(struct verbs_context, context));
  return ctx->ops.post_send == f_post_send && ctx->ops.post_recv == f_post_recv && ctx->ops.post_srq_recv == f_post_srq_recv &&
         ctx->ops.poll_cq == f_poll_cq && v->create_qp_ex == f_create_qp_ex && v->create_cq_ex == f_create_cq_ex;
}

/* The provider's own ops, as ibv_open_device installs them before any interposer patches a
 * context (the bench's in-process unwrapped loop calls these). */
EXPORT void fakeverbs_provider_ops(struct ibv_context_ops *ops) { *ops = g_ops; }
