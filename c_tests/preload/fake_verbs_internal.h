/*
 * c_tests/preload/fake_verbs_internal.h: what the files of the fake libibverbs.so.1
 * (fake_verbs_*.c) share: its objects (CQ, SRQ, QP, context), its global state and the
 * functions one file installs or calls for another. The behaviour is described in
 * fake_verbs.h; the controls a test calls are declared there.
 * Everything here is hidden (only fake_verbs.map's names are exported), so a call from one
 * file to another is a direct call, as it was when the fake was one file.
 */
#ifndef FAKE_VERBS_INTERNAL_H
#define FAKE_VERBS_INTERNAL_H
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fake_verbs.h"

#define EXPORT __attribute__((visibility("default")))

#pragma GCC visibility push(hidden)

extern pthread_mutex_t g_mu; /* every QP's state (fake_verbs_device.c) */
extern uint32_t g_handles;   /* the next CQ/QP/SRQ handle */
extern struct ibv_device g_devs[2];

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
  struct fqp *next_free; /* fakeverbs_recycle_qps: the device's recycled QPs */
  int sig_all, error, fail_next, ex;
  int fail_modify; /* the error the next modify_qp returns, 0 none */
  enum ibv_wc_status fail_status; /* the status (and vendor_err) of the failing WR */
  uint32_t fail_vendor;
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

/* Per device: 2 ports (1..FAKE_PORTS), each a GID table of FAKE_GIDS entries. */
#define FAKE_PORTS 2
#define FAKE_GIDS 16

static inline int dev_index(struct ibv_context *ctx) { return (int)(ctx->device - g_devs); }

static inline struct fctx *fctx_of(struct ibv_context *ctx) {
  return (struct fctx *)((char *)ctx - offsetof(struct fctx, v) - offsetof(struct verbs_context, context));
}

/* A new CQ, for ibv_create_cq (fake_verbs_datapath.c) and create_cq_ex (fake_verbs_ex.c). */
static inline struct fcq *cq_new(struct ibv_context *ctx, int cqe, void *cq_context) {
  struct fcq *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  pthread_mutex_init(&c->mu, NULL);
  c->cq.context = ctx;
  c->cq.cq_context = cq_context;
  c->cq.cqe = cqe;
  c->cq.handle = __atomic_fetch_add(&g_handles, 1, __ATOMIC_RELAXED);
  return c;
}

/* fake_verbs_datapath.c: the CQs' queues, the send path, the ops table's entries. Out of
 * line, as they were in one file (the unwrapped bench baseline runs exactly these). */
int cq_pop(struct fcq *c, struct ibv_wc *wc);
void send_one(struct fqp *q, const struct ibv_send_wr *w); /* under g_mu */
int f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int f_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int f_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int f_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);

/* fake_verbs_qp.c */
struct fqp *qp_new(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
                   struct ibv_srq *srq, int sig_all, enum ibv_qp_type type, struct ibv_qp_cap *cap);
int f_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);

/* fake_verbs_ex.c: verbs_context's create_*_ex and the objects' ex entry points. */
struct ibv_cq_ex *f_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr);
struct ibv_qp *f_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a);

#pragma GCC visibility pop
#endif
