/*
 * e2e/ibcast/verbs.c: ibcast_e2e's verbs setup: the device's state, RC QPs taken to INIT and
 * then to RTR/RTS towards the peer, memory registration, a comm's CQ, QPs, buffers and
 * telemetry slots (comm_create), the peer told to telemetry (comm_connect), teardown, and the
 * two posts that tally each WR from what was actually posted. Separate because it is the
 * plain verbs part, the same for any protocol.
 */
#include "ibcast.h"

struct ibv_context *ctx;
struct ibv_pd *pd;
int gid_index = 1, ib_port = 1, qp_timeout = 19, retry_cnt = 7, rnr_retry = 7;
int tclass = -1, odd_tclass_ch = -1, odd_tclass;
union ibv_gid my_gid;
uint16_t my_lid;
enum ibv_mtu path_mtu;
uint32_t mtu_bytes;

static struct ibv_qp *make_qp(struct ibv_cq *cq) {
    struct ibv_qp_init_attr ia = {
        .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1},
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &ia);
    if (!qp) die("ibv_create_qp: %s", strerror(errno));
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = ib_port,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die("modify_qp INIT: %s", strerror(errno));
    return qp;
}

static void connect_qp(struct ibv_qp *qp, uint32_t rqpn, uint32_t rpsn, uint32_t mypsn, const union ibv_gid *rgid,
                       uint8_t tc) {
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR, .path_mtu = path_mtu, .dest_qp_num = rqpn, .rq_psn = rpsn,
        .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
        /* rxe puts the GRH traffic class into the IP TOS byte of every packet the QP sends */
        .ah_attr = {.is_global = 1, .port_num = ib_port,
                    .grh = {.dgid = *rgid, .sgid_index = gid_index, .hop_limit = 64, .traffic_class = tc}},
    };
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        die("modify_qp RTR: %s", strerror(errno));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = (uint8_t)qp_timeout; /* 19 = ~2 s: TCG guests on a busy host are slow, and every
                              * spurious retransmission stresses rxe's duplicate handling;
                              * the stall scenarios shorten it (--timeout) */
    a.retry_cnt = (uint8_t)retry_cnt;  /* 7 unless a fault scenario wants the error */
    a.rnr_retry = (uint8_t)rnr_retry;
    a.sq_psn = mypsn;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                  IBV_QP_MAX_QP_RD_ATOMIC))
        die("modify_qp RTS: %s", strerror(errno));
}

static struct ibv_mr *reg(void *p, size_t n) {
    struct ibv_mr *mr = ibv_reg_mr(pd, p, n, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!mr) die("ibv_reg_mr(%zu): %s", n, strerror(errno));
    return mr;
}

void *zalloc(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, n)) die("out of memory");
    memset(p, 0, n);
    return p;
}

/* Post a send chain and tally it, WR by WR, from what was actually posted. */
void post_send(Comm *c, Qp *q, struct ibv_send_wr *wr) {
    struct ibv_send_wr *bad = NULL;
    int rc = ibv_post_send(q->qp, wr, &bad);
    if (rc) die("ibv_post_send on qp %u: %s", q->qp->qp_num, strerror(rc));
    for (struct ibv_send_wr *w = wr; w; w = w->next) {
        uint32_t len = w->num_sge ? w->sg_list[0].length : 0;
        q->t->pkts_out += pkts_for(len);
        T.send_pkts_min += pkts_for(len);
        if (q == &c->cts) {
            if (w->opcode == IBV_WR_RDMA_WRITE) {   /* a CTS entry */
                if (w->send_flags & IBV_SEND_SIGNALED) q->t->cts_sig++; else q->t->cts_unsig++;
            } else if (w->opcode == IBV_WR_SEND) {  /* the fin message */
                q->t->wqe_sent++;
            }
        } else {
            q->t->wqe_sent++;
            if (w->opcode == IBV_WR_RDMA_WRITE) q->t->write++;
            else if (w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) q->t->write_imm++;
            tally_size(len);
        }
    }
}

void post_recv(Qp *q, uint64_t wr_id, struct ibv_sge *sge) {
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = sge, .num_sge = sge ? 1 : 0}, *bad = NULL;
    int rc = ibv_post_recv(q->qp, &wr, &bad);
    if (rc) die("ibv_post_recv on qp %u: %s", q->qp->qp_num, strerror(rc));
    q->t->recv_wqe++;
}

void comm_create(Chan *ch, Comm *c, int is_send, int ndata, int nreq) {
    memset(c, 0, sizeof *c);
    c->is_send = is_send; c->ch = ch; c->ndata = ndata; c->nreq = nreq;
    c->cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
    if (!c->cq) die("ibv_create_cq: %s", strerror(errno));
    for (int q = 0; q < ndata; q++) c->data[q].qp = make_qp(c->cq);
    c->cts.qp = make_qp(c->cq);
    c->buf = zalloc((size_t)INFLIGHT * MAX_REQ);
    c->buf_mr = reg(c->buf, (size_t)INFLIGHT * MAX_REQ);
    c->fifo = zalloc(sizeof(struct CtsEntry) * FIFO_DEPTH);
    c->fifo_mr = reg(c->fifo, sizeof(struct CtsEntry) * FIFO_DEPTH);
    c->fin = zalloc(4096);
    c->fin_mr = reg(c->fin, 4096);

    /* telemetry: reserve this comm's QP slots on (device, channel), roles, handles */
    int nslots = 0;
    int first = rcclTelemetrySetupChannel(DEV, ch->id, ndata + 1, &nslots);
#ifdef RCCL_TELEMETRY_STUBS
    /* built without the library (ibcast_plain, run under the verbs interposer): the tally
     * keeps its QPs in the slots the library would have given */
    first = ch->t->requested_slots;
    nslots = ndata + 1;
#endif
    ch->t->requested_slots += ndata + 1;
    ch->t->granted_slots += nslots > 0 ? nslots : 0;
    if (first < 0 || nslots != ndata + 1)
        fprintf(stderr, "ibcast_e2e: note: ch %d got %d of %d QP slots (first %d)\n", ch->id, nslots, ndata + 1, first);
    for (int q = 0; q <= ndata; q++) {
        Qp *qp = q < ndata ? &c->data[q] : &c->cts;
        qp->slot = first >= 0 && q < nslots ? first + q : -1;
        if (qp->slot >= 0) {
            rcclTelemetrySetQpRole(DEV, ch->id, qp->slot, q < ndata);
            qp->h = rcclTelemetryResolveQp(DEV, ch->id, qp->slot);
            qp->t = &ch->t->qp[qp->slot < QPS_PER_CH ? qp->slot : 0];
            if (qp->slot >= QPS_PER_CH) die("unexpected QP slot index %d", qp->slot);
            qp->t->used = 1;
            qp->t->is_data = q < ndata;
            qp->t->first_error = -1;
            qp->t->tclass = -1;
        } else {
            static struct QpTally untracked;  /* counted, but reported nowhere */
            qp->h = NULL;
            qp->t = &untracked;
            untracked.first_error = -1;
            untracked.tclass = -1;
        }
    }
}

/* After the exchange, as IB-CAST's connect/accept does: tell telemetry who is on the
 * other end of every QP (cold path, once per QP). */
static void tell_peer(Qp *q, uint32_t rqpn, const union ibv_gid *rgid, uint16_t rlid) {
    q->t->qp_num = q->qp->qp_num;
    q->t->peer_qp_num = rqpn;
    q->t->peer_lid = rlid;
    memcpy(q->t->peer_gid, rgid->raw, 16);
    if (q->h) {
        rcclTelemetryQpSetPeer(q->h, q->qp->qp_num, my_gid.raw, my_lid, rqpn, rgid->raw, rlid);
        q->t->peer_set = 1;
    }
}

/* With --tclass, as IB-CAST does at RTR/RTS: tell telemetry the settings the QP was
 * connected with (cold path, once per QP), the traffic class this QP got among them. */
static void tell_attrs(Qp *q, uint8_t tc) {
    q->t->tclass = tc;
    if (tclass < 0) return;
    rcclTelemetryQpAttrs_t a = {
        .size = sizeof a, .pathMtu = mtu_bytes, .trafficClass = tc, .serviceLevel = 0, .portNum = (uint8_t)ib_port,
        .sgidIndex = (uint8_t)gid_index, .hopLimit = 64, .timeout = (uint8_t)qp_timeout,
        .retryCnt = (uint8_t)retry_cnt, .rnrRetry = (uint8_t)rnr_retry, .minRnrTimer = 12, .maxRdAtomic = 1,
        .maxDestRdAtomic = 1,
    };
    if (q->h && rcclTelemetryQpSetAttrs(q->h, &a) != 0) die("rcclTelemetryQpSetAttrs refused the settings");
}

/* The traffic class of a QP: --tclass for every QP (0 without it), --odd-tclass CH:TC for
 * the first data QP of channel CH's send comm (the one connection whose class is wrong). */
static uint8_t tclass_of(const Comm *c, int q) {
    if (c->is_send && c->ch->id == odd_tclass_ch && q == 0) return (uint8_t)odd_tclass;
    return (uint8_t)(tclass < 0 ? 0 : tclass);
}

void comm_connect(Comm *c, const struct CommInfo *peer, const union ibv_gid *rgid, uint16_t rlid) {
    if ((int)peer->ndata != c->ndata) die("peer comm has %u data QPs, we have %d", peer->ndata, c->ndata);
    for (int q = 0; q < c->ndata; q++) {
        connect_qp(c->data[q].qp, peer->data[q].qpn, peer->data[q].psn, psn_of(c->data[q].qp->qp_num), rgid,
                   tclass_of(c, q));
        tell_peer(&c->data[q], peer->data[q].qpn, rgid, rlid);
        tell_attrs(&c->data[q], tclass_of(c, q));
    }
    connect_qp(c->cts.qp, peer->cts.qpn, peer->cts.psn, psn_of(c->cts.qp->qp_num), rgid, tclass_of(c, -1));
    tell_peer(&c->cts, peer->cts.qpn, rgid, rlid);
    tell_attrs(&c->cts, tclass_of(c, -1));
}

void comm_close(Comm *c) {
    /* IB-CAST hands the comm's poll count to telemetry when the comm closes */
    rcclTelemetryAddCqPolls(DEV, c->polls);
    for (int q = 0; q < c->ndata; q++) ibv_destroy_qp(c->data[q].qp);
    ibv_destroy_qp(c->cts.qp);
    ibv_dereg_mr(c->buf_mr);
    ibv_dereg_mr(c->fifo_mr);
    ibv_dereg_mr(c->fin_mr);
    ibv_destroy_cq(c->cq);
    free(c->buf); free(c->fifo); free(c->fin);
}
