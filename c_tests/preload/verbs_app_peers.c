/*
 * c_tests/preload/verbs_app_peers.c: verbs_app's peer scenarios: QPs of every type taken
 * through ibv_modify_qp the way RC, UC and UD programs do (ports, GIDs, LIDs, failed and
 * repeated transitions), and many peers at once. Separate because it is the interposer's
 * cold path: what it tells of a QP beyond its counts.
 */
#include "verbs_app.h"

/* The GIDs, LIDs and remote QP numbers below are what preload/tests/interposer/peers.rs
 * expects (peers_* tests): keep both in step. */
static const uint8_t GID_LL_LOCAL[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x01};
static const uint8_t GID_V4_LOCAL[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 10, 1};
static const uint8_t GID_V6_LOCAL[16] = {0xfd, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1};

static int g_modify_bad; /* modify calls whose result, attr or state differed from the expected */

/* One ibv_modify_qp, checked: its return code, that attr came back byte for byte as passed,
 * and the QP's state after (the new one on success, the old one on failure). */
static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, int want_rc) {
  struct ibv_qp_attr copy = *a;
  enum ibv_qp_state before = qp->state;
  int saved_errno = errno = 12345;
  int rc = V.modify_qp(qp, a, mask);
  int ok = rc == want_rc && memcmp(&copy, a, sizeof copy) == 0 && errno == saved_errno &&
           qp->state == (rc == 0 && (mask & IBV_QP_STATE) ? a->qp_state : before);
  if (!ok) {
    fprintf(stderr, "modify qp %u mask 0x%x: rc %d (want %d), state %d, errno %d\n", qp->qp_num, mask, rc, want_rc,
            qp->state, errno);
    g_modify_bad++;
  }
}

static void to_init(struct ibv_qp *qp, uint8_t port) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = port;
  a.pkey_index = 0;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (qp->qp_type == IBV_QPT_UD) {
    a.qkey = 0x11111111;
    mask |= IBV_QP_QKEY;
  } else {
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    mask |= IBV_QP_ACCESS_FLAGS;
  }
  modify(qp, &a, mask, 0);
}

/* INIT -> RTR towards remote QP rqpn: over a GRH (sgid_index >= 0, dgid) or LID-only (dlid).
 * ah_port 0 leaves the address vector's port to the one INIT named. */
static void to_rtr(struct ibv_qp *qp, uint32_t rqpn, int sgid_index, const uint8_t *dgid, uint16_t dlid, uint8_t ah_port,
                   int want_rc) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = rqpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.dlid = dlid;
  a.ah_attr.port_num = ah_port;
  if (sgid_index >= 0) {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.sgid_index = (uint8_t)sgid_index;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.grh.traffic_class = sgid_index == 3 ? 106 : 0; /* C rides DSCP 26 */
    memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
  }
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (qp->qp_type == IBV_QPT_RC) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  modify(qp, &a, mask, want_rc);
}

static void to_rts(struct ibv_qp *qp) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (qp->qp_type == IBV_QPT_RC) {
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  modify(qp, &a, mask, 0);
}

static void to_state(struct ibv_qp *qp, enum ibv_qp_state st) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = st;
  modify(qp, &a, IBV_QP_STATE, 0);
}

static struct ibv_qp *mk_typed_qp(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t) {
  struct ibv_qp_init_attr a;
  memset(&a, 0, sizeof a);
  a.send_cq = a.recv_cq = cq;
  a.qp_type = t;
  a.cap.max_send_wr = 64;
  a.cap.max_recv_wr = 64;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  struct ibv_qp *q = V.create_qp(pd, &a);
  if (!q) FAIL("create_qp type %d", t);
  return q;
}

/*
 * fake0, RoCE-like (port 1: GID 0 link-local, GID 1 IPv4-mapped, GID 3 IPv6; no LID):
 *   A  RC  INIT, RTR to 0x2001 over GID 0, RTS; then RESET, INIT, RTR to 0x2005, RTS
 *          (the later peer replaces the first); 5 signalled writes to B, completed
 *   B  RC  INIT, RTR to 0x2002 over GID 1 (IPv4-mapped), the AV naming no port; no RTS
 *   C  RC  (ibv_create_qp_ex) INIT, RTR to 0x2003 over GID 3 with traffic class 106, RTS
 *   D  UD  INIT, RTR, RTS: no peer
 *   E  RC  INIT; an RTR the provider fails (ETIMEDOUT), one it refuses (sgid_index 99:
 *          EINVAL), and an RTS from INIT (EINVAL): no peer
 *   F  UC  INIT, RTR to 0x2004 over GID 0, RTS
 * fake1, InfiniBand LID-only (port 1: LID 7):
 *   G  RC  INIT, RTR to 0x3001 at LID 0x11 without a GRH, RTS
 * Prints the QP numbers in creation order per device, and the fake's GID/port reads.
 */
void sc_peers(void) {
  static const uint8_t rgid1[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x02};
  static const uint8_t rgid5[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x05};
  static const uint8_t rgid2[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 10, 2};
  static const uint8_t rgid3[16] = {0xfd, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2};
  static const uint8_t rgid4[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x04};
  struct ibv_context *c0 = open_dev(0), *c1 = open_dev(1);
  if (V.set_gid(c0, 1, 0, GID_LL_LOCAL) || V.set_gid(c0, 1, 1, GID_V4_LOCAL) || V.set_gid(c0, 1, 3, GID_V6_LOCAL) ||
      V.set_lid(c1, 1, 7))
    FAIL("fake GID/LID set-up");
  struct ibv_pd *pd0 = V.alloc_pd(c0), *pd1 = V.alloc_pd(c1);
  struct ibv_cq *cq0 = V.create_cq(c0, 256, NULL, NULL, 0), *cq1 = V.create_cq(c1, 64, NULL, NULL, 0);
  if (!pd0 || !pd1 || !cq0 || !cq1) FAIL("pd/cq");

  struct ibv_qp *a = mk_typed_qp(pd0, cq0, IBV_QPT_RC), *b = mk_typed_qp(pd0, cq0, IBV_QPT_RC);
  struct ibv_qp_init_attr_ex xa;
  memset(&xa, 0, sizeof xa);
  xa.send_cq = xa.recv_cq = cq0;
  xa.qp_type = IBV_QPT_RC;
  xa.cap.max_send_wr = 64;
  xa.pd = pd0;
  /* With IBV_QP_INIT_ATTR_PD alone, verbs.h's ibv_create_qp_ex calls ibv_create_qp. */
  xa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  xa.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
  struct ibv_qp *cx = ibv_create_qp_ex(c0, &xa);
  if (!cx) FAIL("create_qp_ex");
  struct ibv_qp *d = mk_typed_qp(pd0, cq0, IBV_QPT_UD), *e = mk_typed_qp(pd0, cq0, IBV_QPT_RC),
                *f = mk_typed_qp(pd0, cq0, IBV_QPT_UC);
  struct ibv_qp *g = mk_typed_qp(pd1, cq1, IBV_QPT_RC);

  to_init(a, 1);
  to_rtr(a, 0x2001, 0, rgid1, 0, 1, 0);
  to_rts(a);
  to_state(a, IBV_QPS_RESET);
  to_init(a, 1);
  to_rtr(a, 0x2005, 0, rgid5, 0, 1, 0);
  to_rts(a);

  to_init(b, 1);
  to_rtr(b, 0x2002, 1, rgid2, 0, 0, 0);

  to_init(cx, 1);
  to_rtr(cx, 0x2003, 3, rgid3, 0, 1, 0);
  to_rts(cx);

  to_init(d, 1);
  to_state(d, IBV_QPS_RTR);
  {
    struct ibv_qp_attr at;
    memset(&at, 0, sizeof at);
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = 0;
    modify(d, &at, IBV_QP_STATE | IBV_QP_SQ_PSN, 0);
  }

  to_init(e, 1);
  V.fail_modify(e, ETIMEDOUT);
  to_rtr(e, 0x2006, 0, rgid1, 0, 1, ETIMEDOUT);
  to_rtr(e, 0x2007, 99, rgid1, 0, 1, EINVAL);
  {
    struct ibv_qp_attr at;
    memset(&at, 0, sizeof at);
    at.qp_state = IBV_QPS_RTS;
    modify(e, &at, IBV_QP_STATE, EINVAL);
  }

  to_init(f, 1);
  to_rtr(f, 0x2004, 0, rgid4, 0, 1, 0);
  to_rts(f);

  to_init(g, 1);
  to_rtr(g, 0x3001, -1, NULL, 0x11, 1, 0);
  to_rts(g);

  /* Traffic on A (towards its second peer): 5 signalled writes, completed. */
  V.connect(a, b);
  for (int i = 0; i < 5; i++) {
    struct ibv_send_wr w, *bad = NULL;
    struct ibv_sge sg;
    set_wr(&w, &sg, IBV_WR_RDMA_WRITE, 4096, 1, (uint64_t)i);
    if (ibv_post_send(a, &w, &bad)) FAIL("post_send");
    drain(cq0, 1, IBV_WC_SUCCESS);
  }
  if (g_modify_bad) FAIL("%d modify calls went wrong (stderr)", g_modify_bad);

  /* Whose ibv_modify_qp the program called. */
  Dl_info di;
  const char *from = dladdr(*(void **)&V.modify_qp, &di) && di.dli_fname ? di.dli_fname : "?";
  const char *base = strrchr(from, '/');
  char extra[512];
  snprintf(extra, sizeof extra, "\"qpn0\":[%u,%u,%u,%u,%u,%u],\"qpn1\":[%u],\"queries\":%lu,\"modify_from\":\"%s\"", a->qp_num,
           b->qp_num, cx->qp_num, d->qp_num, e->qp_num, f->qp_num, g->qp_num, V.queries(), base ? base + 1 : from);
  struct ibv_qp *all[] = {a, b, cx, d, e, f, g};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) V.destroy_qp(all[i]);
  V.destroy_cq(cq0);
  V.destroy_cq(cq1);
  V.dealloc_pd(pd0);
  V.dealloc_pd(pd1);
  V.close_device(c0);
  V.close_device(c1);
  report(extra);
}

/*
 * peers-wide: one device connected to N (default 12) remote NICs, one RC QP each, more than
 * the engine's per-channel cap for hook channels (8): the interposer's one channel per device
 * is the whole NIC, so each remote NIC keeps a histogram of its own. QP i goes to remote QPN
 * 0x4000 + i at GID fe80::5054:ff:fe12:3410 + i and completes i + 1 signalled writes (its
 * partner, for the fake's traffic, is the next QP).
 */
void sc_peers_wide(int n) {
  if (n < 1 || n > 64) FAIL("peers-wide: 1..64 QPs");
  struct ibv_context *c0 = open_dev(0);
  if (V.set_gid(c0, 1, 0, GID_LL_LOCAL)) FAIL("fake GID set-up");
  struct ibv_pd *pd = V.alloc_pd(c0);
  struct ibv_cq *cq = V.create_cq(c0, 256, NULL, NULL, 0);
  if (!pd || !cq) FAIL("pd/cq");
  struct ibv_qp *q[64];
  for (int i = 0; i < n; i++) {
    uint8_t rgid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, (uint8_t)(0x10 + i)};
    q[i] = mk_typed_qp(pd, cq, IBV_QPT_RC);
    to_init(q[i], 1);
    to_rtr(q[i], 0x4000u + (uint32_t)i, 0, rgid, 0, 1, 0);
    to_rts(q[i]);
  }
  for (int i = 0; i < n; i++) V.connect(q[i], q[(i + 1) % n]);
  for (int i = 0; i < n; i++)
    for (int k = 0; k <= i; k++) {
      struct ibv_send_wr w, *bad = NULL;
      struct ibv_sge sg;
      set_wr(&w, &sg, IBV_WR_RDMA_WRITE, 256, 1, (uint64_t)k);
      if (ibv_post_send(q[i], &w, &bad)) FAIL("post_send");
      drain(cq, 1, IBV_WC_SUCCESS);
    }
  if (g_modify_bad) FAIL("%d modify calls went wrong (stderr)", g_modify_bad);
  for (int i = 0; i < n; i++) V.destroy_qp(q[i]);
  V.destroy_cq(cq);
  V.dealloc_pd(pd);
  V.close_device(c0);
  report(NULL);
}
