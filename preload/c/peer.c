/*
 * preload/c/peer.c: who a QP is and whom it talks to (cold path: create and ibv_modify_qp).
 *
 * A QP's type and number are told to the engine at create; its port at the INIT transition
 * (IBV_QP_PORT); its peer at the transition to RTR, from what the program passed to a
 * successful ibv_modify_qp: dest_qp_num and ah_attr (the remote GID when is_global, the
 * remote LID), with the local GID read back from the GID table (sgid_index on the port) and
 * the port's LID. Nothing the program passes or gets back is touched, errno included; a
 * modify that failed records nothing. UD QPs have no single peer (each send names its own
 * address handle): they keep "peer": null. Every successful modify also tells the path and
 * retry settings its mask carries (the QP's "attrs").
 * Separate because it is the only part that reads addresses and GIDs.
 */
#include "preload.h"

static const char *qp_type_name(enum ibv_qp_type t) {
  switch (t) {
  case IBV_QPT_RC: return "rc";
  case IBV_QPT_UC: return "uc";
  case IBV_QPT_UD: return "ud";
  case IBV_QPT_RAW_PACKET: return "raw_packet";
  case IBV_QPT_XRC_SEND: return "xrc_send";
  case IBV_QPT_XRC_RECV: return "xrc_recv";
  case IBV_QPT_DRIVER: return "driver";
  default: return "other";
  }
}

/* A QP just created (and recorded by track_qp): its type and number. */
void qp_identity(struct ibv_qp *qp, enum ibv_qp_type type) {
  struct rqp *r = qp_rec(qp);
  if (!r) return;
  ST(r->port, 0);
  if (!r->slot) return;
  rtp_qp_set_type(r->slot, qp_type_name(type));
  rtp_qp_set_local(r->slot, qp->qp_num, -1);
}

/* The LID of port `port` of ctx, 0 when unknown: through the context's query_port when it
 * has one (as <infiniband/verbs.h>'s ibv_query_port does), else libibverbs' exported one. */
static uint16_t port_lid(struct ibv_context *ctx, uint8_t port) {
  struct ibv_port_attr pa;
  memset(&pa, 0, sizeof pa);
  int rc = -1;
  struct verbs_context *v = verbs_get_ctx_op(ctx, query_port);
  if (v) {
    rc = v->query_port(ctx, port, &pa, sizeof pa);
  } else {
    int (*f)(struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *) = real_ibv_query_port();
    if (f) rc = f(ctx, port, (struct _compat_ibv_port_attr *)(void *)&pa);
  }
  return rc == 0 ? pa.lid : 0;
}

/* The path and retry settings a successful modify set, each only where the mask carries it:
 * the address vector's traffic class, SL, port, GID index and hop limit (the GRH's only when
 * it has one), the path MTU (in bytes), the RTR's RNR timer and responder depth, the RTS's
 * timeout, retry counts and initiator depth. */
static void qp_settings(struct rqp *r, const struct ibv_qp_attr *attr, int mask) {
  const int settings = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_TIMEOUT |
                       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  if (!(mask & settings)) return;
  struct rtp_qp_attrs a = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
  if (mask & IBV_QP_AV) {
    const struct ibv_ah_attr *ah = &attr->ah_attr;
    a.sl = ah->sl;
    a.port = ah->port_num;
    if (ah->is_global) {
      a.traffic_class = ah->grh.traffic_class;
      a.sgid_index = ah->grh.sgid_index;
      a.hop_limit = ah->grh.hop_limit;
    }
  }
  if ((mask & IBV_QP_PATH_MTU) && attr->path_mtu >= IBV_MTU_256 && attr->path_mtu <= IBV_MTU_4096)
    a.path_mtu = 128 << attr->path_mtu;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) a.min_rnr_timer = attr->min_rnr_timer;
  if (mask & IBV_QP_TIMEOUT) a.timeout = attr->timeout;
  if (mask & IBV_QP_RETRY_CNT) a.retry_cnt = attr->retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) a.rnr_retry = attr->rnr_retry;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) a.max_rd_atomic = attr->max_rd_atomic;
  rtp_qp_set_attrs(r->slot, &a);
}

/* After a successful ibv_modify_qp(qp, attr, mask), telemetry on. */
void qp_modified(struct ibv_qp *qp, const struct ibv_qp_attr *attr, int mask) {
  struct rqp *r = qp_rec(qp);
  if (!r || !r->slot) return;
  int saved = errno;
  if (mask & IBV_QP_PORT) {
    ST(r->port, attr->port_num);
    rtp_qp_set_local(r->slot, qp->qp_num, attr->port_num ? attr->port_num : -1);
  }
  /* The peer is named at INIT -> RTR (RC, UC, XRC): the address vector and the remote QPN
   * are both required there; a QP without them (UD, raw packet) has no single peer. */
  if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RTR && (mask & IBV_QP_AV) && (mask & IBV_QP_DEST_QPN) &&
      qp->qp_type != IBV_QPT_UD) {
    const struct ibv_ah_attr *ah = &attr->ah_attr;
    int port = ah->port_num ? ah->port_num : LD(r->port);
    const uint8_t *lgid = NULL;
    union ibv_gid g;
    int gidx = -1;
    if (ah->is_global) {
      gidx = ah->grh.sgid_index;
      int (*qg)(struct ibv_context *, uint8_t, int, union ibv_gid *) = real_ibv_query_gid();
      if (port > 0 && qg && qg(qp->context, (uint8_t)port, gidx, &g) == 0) lgid = g.raw;
    }
    uint16_t llid = port > 0 ? port_lid(qp->context, (uint8_t)port) : 0;
    rtp_qp_set_peer(r->slot, qp->qp_num, lgid, llid, port > 0 ? port : -1, gidx, attr->dest_qp_num,
                    ah->is_global ? ah->grh.dgid.raw : NULL, ah->dlid);
  }
  qp_settings(r, attr, mask);
  errno = saved;
}

/* libibverbs' ibv_modify_qp reaches the provider through a table private to libibverbs (not
 * ctx->ops), so the exported symbol is the one place every state change passes: the
 * program's own calls, NCCL's through dlvsym, librdmacm's (rdma_connect, rdma_accept). */
EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
  int (*f)(struct ibv_qp *, struct ibv_qp_attr *, int) = real_ibv_modify_qp();
  if (!f) return ENOSYS;
  int rc = f(qp, attr, mask);
  if (rc == 0 && qp && attr && on()) qp_modified(qp, attr, mask);
  return rc;
}
