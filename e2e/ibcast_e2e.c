/*
 * ibcast_e2e: an IB-CAST-shaped libibverbs program that drives librccl_telemetry
 * on a real verbs device (Soft-RoCE in the e2e guest) and keeps its own exact
 * tally of what it did, written as JSON for e2e/check.py.
 *
 * Shape (after RCCL's IB-CAST / NCCL net_ib transport):
 *  - per channel id, one send comm and one recv comm, each with its own CQ,
 *    N >= 2 data QPs and one CTS QP, all RC; the send comm of this process is
 *    connected to the recv comm of the peer (itself in single-host mode, the
 *    same rank on the other host in pair mode) and vice versa;
 *  - the receiver posts one receive WQE per data QP for every request, then
 *    publishes a CTS entry (buffer address, rkey, size, sequence) into the
 *    sender's FIFO with an RDMA_WRITE on its CTS QP (signalled one in
 *    FIFO_DEPTH, the rest unsignalled);
 *  - the sender polls its FIFO slot (a slot miss when the entry is not yet
 *    published), stripes the request over the data QPs: per QP either one
 *    RDMA_WRITE_WITH_IMM carrying the chunk, or, for a chunk above
 *    SPLIT_BYTES, an unsignalled RDMA_WRITE with the bulk followed by a
 *    0-byte RDMA_WRITE_WITH_IMM; imm_data carries (seq, chunk length);
 *  - completions are drained with ibv_poll_cq and matched to requests through
 *    wr_id (comm slot + sequence) and imm_data; a request completes when all
 *    of its per-QP completions are in; the receiver then checks the payload;
 *  - closing: not part of IB-CAST; the send comm sends one IBV_WR_SEND "fin"
 *    (request count and byte total) on its CTS QP, which the receiver checks.
 *    It exists so the rxe rdma_sends counter, which counts SEND opcodes only,
 *    has traffic to count;
 *  - with --error-probe, one RDMA_WRITE with a wrong rkey after the traffic
 *    provokes a real IBV_WC_REM_ACCESS_ERR completion (the CqError path).
 *
 * Telemetry hooks are called where IB-CAST calls them (C_API.md): Init and
 * RegisterDevice at transport init, SetupChannel/SetQpRole/Resolve* at connect,
 * QpSendPosted + WqeSize per data WQE and PostTs for the signalled one (the only
 * one with a completion to hand the token back to), Bytes per request, QpRecvPosted
 * per receive WQE, PostTs (signalled only) + QpCtsSent per CTS, QpSlotMiss per
 * unpublished FIFO slot, QpWqeComplete per drained completion (the PostTs token
 * of a signalled send, 0 for a receive), CqError per error completion,
 * ChRequestCompleted per request, AddCqPolls at comm close. One channel
 * (--index-channel) uses the index forms instead of the handle forms.
 *
 * The tally is counted at the verbs calls themselves (WR chains walked after a
 * successful ibv_post_send, completions as polled), never inside the hook
 * wrappers, so a hook that is missing or counts wrongly shows up as a mismatch.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rccl_telemetry.h"


#define DEV 0               /* telemetry device slot */
#define MAX_CH 8
#define MAX_LINKS 4         /* bootstrap connections (peers) of one rank */
#define MAX_DQP 4
#define QPS_PER_CH (2 * (MAX_DQP + 1))
#define FIFO_DEPTH 8        /* CTS FIFO slots per send comm */
#define INFLIGHT 4          /* requests in flight per comm (<= FIFO_DEPTH) */
#define MAX_REQ (256 * 1024)
#define SPLIT_BYTES 8192    /* chunks above this go as WRITE + 0-byte WRITE_WITH_IMM */
#define CHUNK_ALIGN 128
#define MAX_SIZES 64

static const uint32_t kSizes[] = {0, 1, 100, 4096, 5000, 12288, 65536, 200000, 777, 32768};
#define NSIZES (sizeof kSizes / sizeof kSizes[0])

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ibcast_e2e: FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ tally */

struct QpTally {
    int used, is_data;
    uint64_t wqe_sent, recv_wqe, wqe_rcvd, wqe_completed, wqe_sampled;
    uint64_t cts_sig, cts_unsig, slot_miss, write, write_imm;
    /* for the hardware checks: request packets this QP put on / took off the wire */
    uint64_t pkts_out;
    /* identity told to rcclTelemetryQpSetPeer: local QPN, the peer's QPN, GID and LID */
    uint32_t qp_num, peer_qp_num;
    uint16_t peer_lid;
    uint8_t peer_gid[16];
    int peer_set;
};

struct ChTally {
    int id, requested_slots, granted_slots;
    uint64_t req_completed;
    struct QpTally qp[QPS_PER_CH];
};

static struct {
    uint64_t tx_bytes, rx_bytes, cq_errors, cq_polls;
    uint64_t size_val[MAX_SIZES], size_cnt[MAX_SIZES];
    int nsizes;
    uint64_t sends, recv_completions;        /* SEND opcodes completed / receive completions */
    uint64_t send_pkts_min, recv_pkts_min;   /* request packets sent / received, lower bound */
    uint64_t payload_checked, payload_errors, tokens_unsampled, tokens_sampled;
    struct ChTally ch[MAX_CH];
    int nch;
} T;

static void tally_size(uint64_t s) {
    for (int i = 0; i < T.nsizes; i++)
        if (T.size_val[i] == s) { T.size_cnt[i]++; return; }
    if (T.nsizes == MAX_SIZES) die("too many distinct WQE sizes");
    T.size_val[T.nsizes] = s;
    T.size_cnt[T.nsizes++] = 1;
}

/* ------------------------------------------------------------ structures */

struct CtsEntry {             /* one FIFO slot, written by the receiver with RDMA_WRITE */
    uint64_t addr;
    uint32_t rkey, size;
    uint32_t seq, pad;
    uint64_t ready;           /* seq + 1 once published (last field of the entry) */
};

struct Fin {                  /* close message (IBV_WR_SEND) */
    uint64_t nreq, bytes;
    uint32_t tag, magic;
};
#define FIN_MAGIC 0x46494e21u

struct Chan;

typedef struct {
    struct ibv_qp *qp;
    RcclQpStats *h;
    int slot;                 /* telemetry QP index within the channel */
    struct QpTally *t;
} Qp;

typedef struct {
    int active, seq, pending;
    uint32_t size, got;
    int64_t tok[MAX_DQP];     /* PostTs token of the signalled WR on each data QP */
} Req;

typedef struct {
    int is_send, ndata;
    struct Chan *ch;
    struct ibv_cq *cq;
    Qp data[MAX_DQP], cts;
    uint8_t *buf; struct ibv_mr *buf_mr;            /* INFLIGHT * MAX_REQ */
    struct CtsEntry *fifo; struct ibv_mr *fifo_mr;  /* send: FIFO; recv: CTS sources */
    struct Fin *fin; struct ibv_mr *fin_mr;
    uint64_t rfifo_addr; uint32_t rfifo_rkey;       /* recv: the peer's FIFO */
    int posted, completed, nreq;
    Req req[INFLIGHT];
    int64_t cts_tok[FIFO_DEPTH];
    int fin_posted, fin_done;
    int64_t fin_tok;
    uint64_t bytes_done, polls;
} Comm;

typedef struct Chan {
    int id, index_forms, link;
    RcclChannelStats *h;
    struct ChTally *t;
    Comm send, recv;
    uint32_t peer_tag;
} Chan;

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static int gid_index = 1, ib_port = 1, qp_timeout = 19;
static union ibv_gid my_gid;
static uint16_t my_lid;
static enum ibv_mtu path_mtu;
static uint32_t mtu_bytes;
static uint32_t my_tag;
static Chan chans[MAX_CH];
static int nchan;

/* ------------------------------------------------------- telemetry calls */
/* Thin wrappers: handle forms, or index forms on the --index-channel channel. */

static int64_t t_post_ts(Qp *q) { return rcclTelemetryPostTs(q->h); }

static void t_send_posted(Chan *c, Qp *q, int imm) {
    if (c->index_forms) {
        rcclTelemetryWqePosted(DEV, c->id, q->slot, 1);
        rcclTelemetryWriteWqe(DEV, c->id, q->slot, imm);
    } else {
        rcclTelemetryQpSendPosted(q->h, imm);
    }
}
static void t_recv_posted(Chan *c, Qp *q) {
    if (c->index_forms) rcclTelemetryWqePosted(DEV, c->id, q->slot, 0);
    else rcclTelemetryQpRecvPosted(q->h);
}
static void t_cts_sent(Chan *c, Qp *q, int sig) {
    if (c->index_forms) rcclTelemetryCtsSent(DEV, c->id, q->slot, sig);
    else rcclTelemetryQpCtsSent(q->h, sig);
}
static void t_slot_miss(Chan *c, Qp *q) {
    if (c->index_forms) rcclTelemetrySlotMiss(DEV, c->id, q->slot);
    else rcclTelemetryQpSlotMiss(q->h);
}
static void t_wqe_complete(Chan *c, Qp *q, int64_t tok) {
    if (c->index_forms) rcclTelemetryWqeComplete(DEV, c->id, q->slot, tok);
    else rcclTelemetryQpWqeComplete(q->h, tok);
}
static void t_req_completed(Chan *c) {
    if (c->index_forms) rcclTelemetryRequestCompleted(DEV, c->id);
    else rcclTelemetryChRequestCompleted(c->h);
}

/* ------------------------------------------------------------- workload */

static uint32_t max_size = MAX_REQ;
static int inflight = INFLIGHT;   /* requests in flight per comm, 1..INFLIGHT */
static uint32_t req_size(int ch, int seq) {
    uint32_t s = kSizes[(unsigned)(seq + 3 * ch) % NSIZES];
    return s < max_size ? s : max_size;
}

static uint8_t pattern(uint32_t tag, int ch, int seq, uint32_t i) {
    return (uint8_t)((i * 131u) ^ (i >> 8) ^ ((uint32_t)seq * 29u) ^ ((uint32_t)ch * 7u) ^ (tag * 61u));
}

/* Chunk of QP q for a request of `size` bytes over n QPs: [*off, *off + *len). */
static void chunk_of(uint32_t size, int n, int q, uint32_t *off, uint32_t *len) {
    uint32_t per = (size + n - 1) / n;
    per = (per + CHUNK_ALIGN - 1) / CHUNK_ALIGN * CHUNK_ALIGN;
    uint64_t o = (uint64_t)per * q;
    if (o > size) o = size;
    uint64_t e = o + per;
    if (e > size) e = size;
    *off = (uint32_t)o;
    *len = (uint32_t)(e - o);
}

static uint64_t pkts_for(uint32_t len) { return len == 0 ? 1 : (len + mtu_bytes - 1) / mtu_bytes; }

/* ------------------------------------------------------------ verbs glue */

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

static void connect_qp(struct ibv_qp *qp, uint32_t rqpn, uint32_t rpsn, uint32_t mypsn, const union ibv_gid *rgid) {
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR, .path_mtu = path_mtu, .dest_qp_num = rqpn, .rq_psn = rpsn,
        .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
        .ah_attr = {.is_global = 1, .port_num = ib_port,
                    .grh = {.dgid = *rgid, .sgid_index = gid_index, .hop_limit = 64}},
    };
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        die("modify_qp RTR: %s", strerror(errno));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = (uint8_t)qp_timeout; /* 19 = ~2 s: TCG guests on a busy host are slow, and every
                              * spurious retransmission stresses rxe's duplicate handling;
                              * the stall scenarios shorten it (--timeout) */
    a.retry_cnt = 7;
    a.rnr_retry = 7;
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

static void *zalloc(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, n)) die("out of memory");
    memset(p, 0, n);
    return p;
}

/* Post a send chain and tally it, WR by WR, from what was actually posted. */
static void post_send(Comm *c, Qp *q, struct ibv_send_wr *wr) {
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

static void post_recv(Qp *q, uint64_t wr_id, struct ibv_sge *sge) {
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = sge, .num_sge = sge ? 1 : 0}, *bad = NULL;
    int rc = ibv_post_recv(q->qp, &wr, &bad);
    if (rc) die("ibv_post_recv on qp %u: %s", q->qp->qp_num, strerror(rc));
    q->t->recv_wqe++;
}

/* wr_id: kind in bits 60..63, request sequence in 8..39, slot in 0..7 */
enum { K_DATA = 1, K_CTS = 2, K_FIN = 3, K_BULK = 4, K_PROBE = 5 };
static uint64_t mkid(int kind, int seq, int slot) {
    return ((uint64_t)kind << 60) | ((uint64_t)(uint32_t)seq << 8) | (uint64_t)slot;
}
static int id_kind(uint64_t id) { return (int)(id >> 60); }
static int id_seq(uint64_t id) { return (int)(uint32_t)(id >> 8); }
static int id_slot(uint64_t id) { return (int)(id & 0xff); }

static Qp *qp_by_num(Comm *c, uint32_t qpn) {
    for (int i = 0; i < c->ndata; i++)
        if (c->data[i].qp->qp_num == qpn) return &c->data[i];
    if (c->cts.qp->qp_num == qpn) return &c->cts;
    die("completion for unknown qp %u", qpn);
    return NULL;
}

/* ------------------------------------------------------------ send comm */

static void send_try_post(Comm *c) {
    Chan *ch = c->ch;
    if (c->posted >= c->nreq) return;
    int seq = c->posted;
    Req *r = &c->req[seq % INFLIGHT];
    if (r->active || seq - c->completed >= inflight) return; /* no free request slot yet */
    volatile struct CtsEntry *e = &c->fifo[seq % FIFO_DEPTH];
    if (e->ready != (uint64_t)seq + 1) {                     /* CTS not published yet */
        c->cts.t->slot_miss++;
        t_slot_miss(ch, &c->cts);
        return;
    }
    __sync_synchronize();
    T.recv_pkts_min += 1;                                    /* the CTS write that landed here */
    uint32_t size = req_size(ch->id, seq);
    if (e->seq != (uint32_t)seq || e->size != size) die("ch %d: CTS for seq %d says seq %u size %u, want size %u", ch->id, seq, e->seq, e->size, size);
    uint64_t raddr = e->addr;
    uint32_t rkey = e->rkey;
    uint8_t *src = c->buf + (size_t)(seq % INFLIGHT) * MAX_REQ;
    for (uint32_t i = 0; i < size; i++) src[i] = pattern(my_tag, ch->id, seq, i);
    memset(r, 0, sizeof *r);
    r->active = 1; r->seq = seq; r->size = size; r->pending = c->ndata;
    for (int q = 0; q < c->ndata; q++) {
        Qp *qp = &c->data[q];
        uint32_t off, len;
        chunk_of(size, c->ndata, q, &off, &len);
        struct ibv_sge sge[2] = {
            {.addr = (uintptr_t)(src + off), .length = len, .lkey = c->buf_mr->lkey},
            {.addr = (uintptr_t)(src + off), .length = 0, .lkey = c->buf_mr->lkey},
        };
        struct ibv_send_wr wr[2];
        memset(wr, 0, sizeof wr);
        uint32_t imm = ((uint32_t)(seq & 0xff) << 24) | len;
        int nwr;
        if (len > SPLIT_BYTES) {       /* bulk as a plain write, then a 0-byte write-with-imm */
            wr[0].wr_id = mkid(K_BULK, seq, q);
            wr[0].opcode = IBV_WR_RDMA_WRITE;
            wr[0].sg_list = &sge[0]; wr[0].num_sge = 1;
            wr[0].wr.rdma.remote_addr = raddr + off; wr[0].wr.rdma.rkey = rkey;
            wr[0].next = &wr[1];
            wr[1].sg_list = &sge[1]; wr[1].num_sge = 0;
            wr[1].wr.rdma.remote_addr = raddr + off + len; wr[1].wr.rdma.rkey = rkey;
            nwr = 2;
        } else {
            wr[1].sg_list = &sge[0]; wr[1].num_sge = len ? 1 : 0;
            wr[1].wr.rdma.remote_addr = raddr + off; wr[1].wr.rdma.rkey = rkey;
            nwr = 1;
        }
        struct ibv_send_wr *last = &wr[1];
        last->wr_id = mkid(K_DATA, seq, q);
        last->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        last->imm_data = htonl(imm);
        last->send_flags = IBV_SEND_SIGNALED;
        last->next = NULL;
        /* hooks, as IB-CAST's multi-send does them: token for the signalled WR,
         * one SendPosted + WqeSize per WQE */
        r->tok[q] = t_post_ts(qp);
        if (nwr == 2) {
            t_send_posted(ch, qp, 0);
            rcclTelemetryWqeSize(DEV, len);
            t_send_posted(ch, qp, 1);
            rcclTelemetryWqeSize(DEV, 0);
        } else {
            t_send_posted(ch, qp, 1);
            rcclTelemetryWqeSize(DEV, len);
        }
        post_send(c, qp, nwr == 2 ? &wr[0] : &wr[1]);
    }
    rcclTelemetryBytes(DEV, 1, size);
    T.tx_bytes += size;
    c->posted++;
}

static void send_fin(Comm *c) {
    Chan *ch = c->ch;
    c->fin->nreq = (uint64_t)c->nreq;
    c->fin->bytes = c->bytes_done;
    c->fin->tag = my_tag;
    c->fin->magic = FIN_MAGIC;
    struct ibv_sge sge = {.addr = (uintptr_t)c->fin, .length = sizeof(struct Fin), .lkey = c->fin_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = mkid(K_FIN, 0, 0), .sg_list = &sge, .num_sge = 1,
                             .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
    c->fin_tok = t_post_ts(&c->cts);
    /* a SEND is neither a write nor a CTS: the index form counts it as a send WQE only */
    rcclTelemetryWqePosted(DEV, ch->id, c->cts.slot, 1);
    post_send(c, &c->cts, &wr);
    c->fin_posted = 1;
}

/* ------------------------------------------------------------ recv comm */

static void recv_try_post(Comm *c) {
    Chan *ch = c->ch;
    if (c->posted >= c->nreq) return;
    int seq = c->posted;
    Req *r = &c->req[seq % INFLIGHT];
    if (r->active || seq - c->completed >= inflight) return;
    uint32_t size = req_size(ch->id, seq);
    uint8_t *dst = c->buf + (size_t)(seq % INFLIGHT) * MAX_REQ;
    memset(dst, 0xEE, size + 64 < MAX_REQ ? size + 64 : MAX_REQ);   /* stale data cannot pass the check */
    memset(r, 0, sizeof *r);
    r->active = 1; r->seq = seq; r->size = size; r->pending = c->ndata;
    for (int q = 0; q < c->ndata; q++) {
        t_recv_posted(ch, &c->data[q]);
        post_recv(&c->data[q], mkid(K_DATA, seq, q), NULL);  /* write-with-imm consumes no SGE */
    }
    /* publish the CTS entry into the sender's FIFO slot */
    int slot = seq % FIFO_DEPTH;
    struct CtsEntry *e = &c->fifo[slot];
    e->addr = (uintptr_t)dst; e->rkey = c->buf_mr->rkey; e->size = size;
    e->seq = (uint32_t)seq; e->pad = 0; e->ready = (uint64_t)seq + 1;
    int sig = slot == 0;      /* signal one CTS in FIFO_DEPTH so the send queue drains */
    struct ibv_sge sge = {.addr = (uintptr_t)e, .length = sizeof *e, .lkey = c->fifo_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = mkid(K_CTS, seq, slot), .sg_list = &sge, .num_sge = 1,
                             .opcode = IBV_WR_RDMA_WRITE, .send_flags = sig ? IBV_SEND_SIGNALED : 0};
    wr.wr.rdma.remote_addr = c->rfifo_addr + (uint64_t)slot * sizeof *e;
    wr.wr.rdma.rkey = c->rfifo_rkey;
    c->cts_tok[slot] = sig ? t_post_ts(&c->cts) : 0;
    t_cts_sent(ch, &c->cts, sig);
    post_send(c, &c->cts, &wr);
    c->posted++;
}

static void check_payload(Comm *c, Req *r) {
    Chan *ch = c->ch;
    const uint8_t *dst = c->buf + (size_t)(r->seq % INFLIGHT) * MAX_REQ;
    uint32_t bad = 0, first = 0;
    for (uint32_t i = 0; i < r->size; i++)
        if (dst[i] != pattern(ch->peer_tag, ch->id, r->seq, i)) { if (!bad) first = i; bad++; }
    T.payload_checked += r->size;
    if (bad) {
        T.payload_errors += bad;
        fprintf(stderr, "ibcast_e2e: payload mismatch ch %d seq %d: %u bad bytes, first at %u\n", ch->id, r->seq, bad, first);
    }
}

/* ---------------------------------------------------------- completions */

static int probe_done;

static void on_error(Comm *c, Qp *q, struct ibv_wc *wc) {
    T.cq_errors++;
    rcclTelemetryCqError(DEV);
    if (id_kind(wc->wr_id) == K_PROBE && wc->status == IBV_WC_REM_ACCESS_ERR) {
        probe_done = 1;   /* the one error this program provokes on purpose */
        return;
    }
    die("ch %d %s comm: completion error on qp %u: %s (wr_id %#llx)", c->ch->id, c->is_send ? "send" : "recv",
        q->qp->qp_num, ibv_wc_status_str(wc->status), (unsigned long long)wc->wr_id);
}

static void progress(Comm *c) {
    Chan *ch = c->ch;
    struct ibv_wc wcs[16];
    int n = ibv_poll_cq(c->cq, 16, wcs);
    c->polls++;
    T.cq_polls++;
    if (n < 0) die("ibv_poll_cq failed");
    for (int i = 0; i < n; i++) {
        struct ibv_wc *wc = &wcs[i];
        Qp *q = qp_by_num(c, wc->qp_num);
        q->t->wqe_rcvd++;
        int kind = id_kind(wc->wr_id), seq = id_seq(wc->wr_id), slot = id_slot(wc->wr_id);
        if (wc->status != IBV_WC_SUCCESS) {
            t_wqe_complete(ch, q, 0);   /* drained, but not a completed posting */
            on_error(c, q, wc);
            continue;
        }
        int64_t tok = 0;
        if (c->is_send && kind == K_DATA) {            /* signalled write-with-imm of a request */
            Req *r = &c->req[seq % INFLIGHT];
            if (!r->active || r->seq != seq || q != &c->data[slot] || wc->opcode != IBV_WC_RDMA_WRITE)
                die("ch %d send: unexpected completion wr_id %#llx", ch->id, (unsigned long long)wc->wr_id);
            tok = r->tok[slot];
            t_wqe_complete(ch, q, tok);
            if (--r->pending == 0) {
                r->active = 0;
                c->completed++;
                c->bytes_done += r->size;
                ch->t->req_completed++;
                t_req_completed(ch);
            }
        } else if (c->is_send && kind == K_FIN) {
            if (wc->opcode != IBV_WC_SEND) die("ch %d: fin completion opcode %d", ch->id, wc->opcode);
            tok = c->fin_tok;
            t_wqe_complete(ch, q, tok);
            c->fin_done = 1;
            T.sends++;
        } else if (!c->is_send && kind == K_DATA) {    /* receive completion of a write-with-imm */
            Req *r = &c->req[seq % INFLIGHT];
            uint32_t imm = ntohl(wc->imm_data);
            uint32_t off, len;
            chunk_of(r->size, c->ndata, slot, &off, &len);
            if (!r->active || r->seq != seq || q != &c->data[slot] || wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
                !(wc->wc_flags & IBV_WC_WITH_IMM) || (imm >> 24) != (uint32_t)(seq & 0xff) || (imm & 0xffffff) != len)
                die("ch %d recv: unexpected completion wr_id %#llx opcode %d imm %#x (want seq %d len %u)", ch->id,
                    (unsigned long long)wc->wr_id, wc->opcode, imm, seq, len);
            t_wqe_complete(ch, q, 0);
            T.recv_completions++;
            T.recv_pkts_min += len > SPLIT_BYTES ? pkts_for(len) + 1 : pkts_for(len);
            rcclTelemetryBytes(DEV, 0, imm & 0xffffff);
            T.rx_bytes += imm & 0xffffff;
            r->got += imm & 0xffffff;
            if (--r->pending == 0) {
                if (r->got != r->size) die("ch %d recv seq %d: got %u bytes, want %u", ch->id, seq, r->got, r->size);
                check_payload(c, r);
                r->active = 0;
                c->completed++;
                c->bytes_done += r->size;
                ch->t->req_completed++;
                t_req_completed(ch);
            }
        } else if (!c->is_send && kind == K_CTS) {     /* a signalled CTS write */
            if (q != &c->cts || wc->opcode != IBV_WC_RDMA_WRITE) die("ch %d: bad CTS completion", ch->id);
            tok = c->cts_tok[slot];
            t_wqe_complete(ch, q, tok);
        } else if (!c->is_send && kind == K_FIN) {
            if (q != &c->cts || wc->opcode != IBV_WC_RECV || wc->byte_len != sizeof(struct Fin))
                die("ch %d: bad fin receive", ch->id);
            t_wqe_complete(ch, q, 0);
            T.recv_completions++;
            T.recv_pkts_min += 1;
            if (c->fin->magic != FIN_MAGIC || c->fin->tag != ch->peer_tag || c->fin->nreq != (uint64_t)c->nreq)
                die("ch %d: fin says %llu requests from tag %u, want %d from %u", ch->id,
                    (unsigned long long)c->fin->nreq, c->fin->tag, c->nreq, ch->peer_tag);
            c->fin_done = 1;
        } else {
            die("ch %d: completion of unknown kind (wr_id %#llx)", ch->id, (unsigned long long)wc->wr_id);
        }
        if (tok > 1) T.tokens_sampled++, q->t->wqe_sampled++;
        else if (tok == 1) T.tokens_unsampled++;
        if (tok != 0) q->t->wqe_completed++;
    }
}

/* ------------------------------------------------------------ bootstrap */

struct QpInfo { uint32_t qpn, psn; };
struct CommInfo { struct QpInfo data[MAX_DQP], cts; uint64_t fifo_addr; uint32_t fifo_rkey, ndata; };
struct PeerInfo {
    uint8_t gid[16];
    uint32_t tag, nch, lid;
    struct { int32_t id; struct CommInfo send, recv; } ch[MAX_CH];
};

static uint32_t psn_of(uint32_t qpn) { return (qpn * 2654435761u) & 0xffffff; }

static void comm_info(Comm *c, struct CommInfo *ci) {
    memset(ci, 0, sizeof *ci);
    ci->ndata = (uint32_t)c->ndata;
    for (int q = 0; q < c->ndata; q++) ci->data[q] = (struct QpInfo){c->data[q].qp->qp_num, psn_of(c->data[q].qp->qp_num)};
    ci->cts = (struct QpInfo){c->cts.qp->qp_num, psn_of(c->cts.qp->qp_num)};
    if (c->is_send) { ci->fifo_addr = (uintptr_t)c->fifo; ci->fifo_rkey = c->fifo_mr->rkey; }
}

static void xfer(int fd, void *p, size_t n, int wr) {
    uint8_t *b = p;
    while (n) {
        ssize_t k = wr ? write(fd, b, n) : read(fd, b, n);
        if (k <= 0) die("bootstrap socket %s: %s", wr ? "write" : "read", k == 0 ? "peer closed" : strerror(errno));
        b += k; n -= (size_t)k;
    }
}

static int bootstrap_connect(const char *peer, int port, int listen_side) {
    int fd;
    if (listen_side) {
        int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = INADDR_ANY};
        if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1)) die("bootstrap listen on %d: %s", port, strerror(errno));
        fd = accept(ls, NULL, NULL);
        if (fd < 0) die("accept: %s", strerror(errno));
        close(ls);
    } else {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        if (inet_pton(AF_INET, peer, &a.sin_addr) != 1) die("bad peer address %s", peer);
        uint64_t t0 = now_ms();
        for (;;) {
            fd = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) break;
            close(fd);
            if (now_ms() - t0 > 60000) die("cannot reach %s:%d: %s", peer, port, strerror(errno));
            usleep(100000);
        }
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}


/* ------------------------------------------------------------ setup */

static void comm_create(Chan *ch, Comm *c, int is_send, int ndata, int nreq) {
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
        } else {
            static struct QpTally untracked;  /* counted, but reported nowhere */
            qp->h = NULL;
            qp->t = &untracked;
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

static void comm_connect(Comm *c, const struct CommInfo *peer, const union ibv_gid *rgid, uint16_t rlid) {
    if ((int)peer->ndata != c->ndata) die("peer comm has %u data QPs, we have %d", peer->ndata, c->ndata);
    for (int q = 0; q < c->ndata; q++) {
        connect_qp(c->data[q].qp, peer->data[q].qpn, peer->data[q].psn, psn_of(c->data[q].qp->qp_num), rgid);
        tell_peer(&c->data[q], peer->data[q].qpn, rgid, rlid);
    }
    connect_qp(c->cts.qp, peer->cts.qpn, peer->cts.psn, psn_of(c->cts.qp->qp_num), rgid);
    tell_peer(&c->cts, peer->cts.qpn, rgid, rlid);
}

static void comm_close(Comm *c) {
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

/* ------------------------------------------------------------ tally JSON */

/* ibv_devinfo's form: 8 groups of 4 lower-case hex digits */
static const char *gid_str(const uint8_t *g) {
    static char b[4][40];
    static int k;
    char *o = b[k++ % 4];
    for (int i = 0; i < 8; i++) sprintf(o + 5 * i, "%02x%02x%s", g[2 * i], g[2 * i + 1], i < 7 ? ":" : "");
    return o;
}

static void write_tally(const char *path, const char *mode, int rank, int nreq, uint64_t ms) {
    FILE *f = fopen(path, "w");
    if (!f) die("cannot write tally %s: %s", path, strerror(errno));
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    fprintf(f, "{\n  \"program\": \"ibcast_e2e\", \"mode\": \"%s\", \"rank\": %d, \"host_name\": \"%s\", \"process_id\": %d,\n",
            mode, rank, host, (int)getpid());
    fprintf(f, "  \"requests_per_comm\": %d, \"elapsed_ms\": %llu, \"mtu\": %u, \"split_bytes\": %d,\n", nreq,
            (unsigned long long)ms, mtu_bytes, SPLIT_BYTES);
    const char *ls = getenv("RCCL_TELEMETRY_LATENCY_SAMPLE");
    fprintf(f, "  \"latency_sample_env\": %s%s%s,\n", ls ? "\"" : "", ls ? ls : "null", ls ? "\"" : "");
    fprintf(f, "  \"traffic\": {\"payload_bytes_checked\": %llu, \"payload_errors\": %llu, \"sends_completed\": %llu, "
               "\"recv_completions\": %llu, \"request_pkts_sent_min\": %llu, \"request_pkts_received_min\": %llu, "
               "\"tokens_sampled\": %llu, \"tokens_unsampled\": %llu},\n",
            (unsigned long long)T.payload_checked, (unsigned long long)T.payload_errors, (unsigned long long)T.sends,
            (unsigned long long)T.recv_completions, (unsigned long long)T.send_pkts_min,
            (unsigned long long)T.recv_pkts_min, (unsigned long long)T.tokens_sampled,
            (unsigned long long)T.tokens_unsampled);
    fprintf(f, "  \"gid\": \"%s\", \"gid_index\": %d, \"lid\": %u, \"set_peer_available\": %s,\n", gid_str(my_gid.raw),
            gid_index, my_lid, "true");
    fprintf(f, "  \"devices\": [{\n    \"device_id\": %d, \"roce_device\": \"%s\",\n", DEV, ibv_get_device_name(ctx->device));
    int nuntracked = 0;
    for (int i = 0; i < T.nch; i++) nuntracked += T.ch[i].requested_slots - T.ch[i].granted_slots;
    fprintf(f, "    \"tx_bytes\": %llu, \"rx_bytes\": %llu, \"num_cq_errors\": %llu, \"cq_poll_count\": %llu,\n",
            (unsigned long long)T.tx_bytes, (unsigned long long)T.rx_bytes, (unsigned long long)T.cq_errors,
            (unsigned long long)T.cq_polls);
    fprintf(f, "    \"num_channels\": %d, \"active_channels\": %d, \"num_qp_untracked\": %d,\n", T.nch, T.nch, nuntracked);
    fprintf(f, "    \"wqe_sizes\": [");
    for (int i = 0; i < T.nsizes; i++)
        fprintf(f, "%s[%llu, %llu]", i ? ", " : "", (unsigned long long)T.size_val[i], (unsigned long long)T.size_cnt[i]);
    fprintf(f, "],\n    \"channels\": [\n");
    for (int i = 0; i < T.nch; i++) {
        struct ChTally *c = &T.ch[i];
        int nd = 0, nc = 0;
        for (int q = 0; q < QPS_PER_CH; q++)
            if (c->qp[q].used) { if (c->qp[q].is_data) nd++; else nc++; }
        fprintf(f, "      {\"id\": %d, \"num_req_completed\": %llu, \"num_data_qp\": %d, \"num_cts_qp\": %d, "
                   "\"num_qp_untracked\": %d, \"index_forms\": %s, \"link\": %d, \"queue_pairs\": [\n",
                c->id, (unsigned long long)c->req_completed, nd, nc, c->requested_slots - c->granted_slots,
                chans[i].index_forms ? "true" : "false", chans[i].link);
        int first = 1;
        for (int q = 0; q < QPS_PER_CH; q++) {
            struct QpTally *t = &c->qp[q];
            if (!t->used) continue;
            fprintf(f, "%s        {\"id\": %d, \"role\": \"%s\", \"num_wqe_sent\": %llu, \"num_recv_wqe\": %llu, "
                       "\"num_wqe_rcvd\": %llu, \"num_wqe_completed\": %llu, \"num_wqe_sampled\": %llu, "
                       "\"num_cts_sent\": %llu, \"num_cts_sent_signalled\": %llu, \"num_cts_sent_unsignalled\": %llu, "
                       "\"num_slot_miss\": %llu, \"num_write_wqe\": %llu, \"num_write_imm_wqe\": %llu, "
                       "\"request_pkts_sent_min\": %llu, \"qp_num\": %u, \"peer_qp_num\": %u, \"peer_lid\": %u, "
                       "\"peer_gid\": \"%s\", \"peer_set\": %s}",
                    first ? "" : ",\n", q, t->is_data ? "data" : "cts", (unsigned long long)t->wqe_sent,
                    (unsigned long long)t->recv_wqe, (unsigned long long)t->wqe_rcvd,
                    (unsigned long long)t->wqe_completed, (unsigned long long)t->wqe_sampled,
                    (unsigned long long)(t->cts_sig + t->cts_unsig), (unsigned long long)t->cts_sig,
                    (unsigned long long)t->cts_unsig, (unsigned long long)t->slot_miss, (unsigned long long)t->write,
                    (unsigned long long)t->write_imm, (unsigned long long)t->pkts_out, t->qp_num, t->peer_qp_num,
                    t->peer_lid, gid_str(t->peer_gid), t->peer_set ? "true" : "false");
            first = 0;
        }
        fprintf(f, "\n      ]}%s\n", i + 1 < T.nch ? "," : "");
    }
    fprintf(f, "    ]\n  }],\n");
    /* the library's live snapshot, taken after every comm closed */
    RcclTelemetrySwSnapshot snap[RCCL_TELEMETRY_MAX_DEVS];
    memset(snap, 0, sizeof snap);
    int ns = rcclTelemetrySwCapture(snap, RCCL_TELEMETRY_MAX_DEVS);
    fprintf(f, "  \"sw_capture\": [");
    for (int i = 0; i < ns && i < RCCL_TELEMETRY_MAX_DEVS; i++) {
        RcclTelemetrySwSnapshot *s = &snap[i];
        fprintf(f, "%s{\"device_id\": %d, \"tx_bytes\": %llu, \"rx_bytes\": %llu, \"num_cq_errors\": %llu, "
                   "\"wqe_sent\": %llu, \"recv_wqe\": %llu, \"wqe_rcvd\": %llu, \"wqe_completed\": %llu, "
                   "\"wqe_sampled\": %llu, \"wqe_completion_ns_min\": %lld, \"wqe_completion_ns_max\": %lld, "
                   "\"wqe_completion_histogram\": [",
                i ? ", " : "", s->device_id, (unsigned long long)s->tx_bytes, (unsigned long long)s->rx_bytes,
                (unsigned long long)s->num_cq_errors, (unsigned long long)s->wqe_sent,
                (unsigned long long)s->recv_wqe, (unsigned long long)s->wqe_rcvd,
                (unsigned long long)s->wqe_completed, (unsigned long long)s->wqe_sampled,
                (long long)s->wqe_completion_ns_min, (long long)s->wqe_completion_ns_max);
        for (int b = 0; b < RCCL_TELEMETRY_HISTOGRAM_SIZE; b++)
            fprintf(f, "%s%llu", b ? ", " : "", (unsigned long long)s->wqe_completion_histogram[b]);
        fprintf(f, "]}");
    }
    fprintf(f, "],\n  \"telemetry_on\": %d\n}\n", rcclTelemetryOn());
    if (fclose(f)) die("writing tally %s failed", path);
}

/* ------------------------------------------------------------ main */

/* One bootstrap connection: a peer and the channels this rank shares with it. Several
 * links make one rank talk to several peers (the trio: each rank to both other guests);
 * channel ids are distinct across the links of a rank. */
typedef struct {
    const char *peer;   /* NULL: listen */
    int port, fd, first, nch;
    char chlist[128];
} Link;
static Link links[MAX_LINKS];
static int nlinks;

static void usage(void) {
    fprintf(stderr,
            "usage: ibcast_e2e --tally FILE [--dev rxe0] [--gid 1] [--channels 0,3,17] [--reqs 24]\n"
            "                  [--index-channel ID] [--max-size BYTES] [--inflight 1..4] [--error-probe]\n"
            "                  [--timeout 1..31] [--linger-ms MS] [--peer IP --port P [--listen]] [--rank R]\n"
            "                  [--link listen:PORT:CHANNELS | --link IP:PORT:CHANNELS ...]\n");
    exit(2);
}

static void all_barrier(void) {
    for (int l = 0; l < nlinks; l++) {
        char b = 'b';
        if (links[l].fd >= 0) xfer(links[l].fd, &b, 1, 1);
    }
    for (int l = 0; l < nlinks; l++) {
        char b;
        if (links[l].fd >= 0) xfer(links[l].fd, &b, 1, 0);
    }
}

int main(int argc, char **argv) {
    const char *tally = NULL, *devname = "rxe0", *peer = NULL, *chlist = "0,3,17";
    int nreq = 24, port = 18515, listen_side = 0, rank = 0, index_ch = -1, error_probe = 0, linger_ms = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--listen")) { listen_side = 1; continue; }
        if (!strcmp(a, "--error-probe")) { error_probe = 1; continue; }
        if (!v) usage();
        if (!strcmp(a, "--tally")) tally = v;
        else if (!strcmp(a, "--dev")) devname = v;
        else if (!strcmp(a, "--gid")) gid_index = atoi(v);
        else if (!strcmp(a, "--channels")) chlist = v;
        else if (!strcmp(a, "--reqs")) nreq = atoi(v);
        else if (!strcmp(a, "--index-channel")) index_ch = atoi(v);
        else if (!strcmp(a, "--peer")) peer = v;
        else if (!strcmp(a, "--port")) port = atoi(v);
        else if (!strcmp(a, "--rank")) rank = atoi(v);
        else if (!strcmp(a, "--max-size")) max_size = (uint32_t)atoi(v);
        else if (!strcmp(a, "--inflight")) inflight = atoi(v);
        else if (!strcmp(a, "--timeout")) qp_timeout = atoi(v);
        else if (!strcmp(a, "--linger-ms")) linger_ms = atoi(v);
        else if (!strcmp(a, "--link")) {
            /* listen:PORT:CHANNELS or IP:PORT:CHANNELS */
            if (nlinks == MAX_LINKS) usage();
            Link *l = &links[nlinks++];
            char *d = strdup(v), *c1 = strchr(d, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
            if (!c2 || !c2[1] || strlen(c2 + 1) >= sizeof l->chlist) usage();
            *c1 = *c2 = 0;
            l->peer = strcmp(d, "listen") ? d : NULL;
            l->port = atoi(c1 + 1);
            strcpy(l->chlist, c2 + 1);
        }
        else usage();
        i++;
    }
    if (!tally || nreq < 1 || max_size > MAX_REQ || inflight < 1 || inflight > INFLIGHT || qp_timeout < 1 ||
        qp_timeout > 31 || (nlinks && (peer || listen_side)))
        usage();
    if (!nlinks) {   /* the classic forms: one link, or none (single host, loopback) */
        Link *l = &links[nlinks++];
        l->peer = peer;
        l->port = port;
        l->fd = -2;   /* -2: no bootstrap at all */
        if (strlen(chlist) >= sizeof l->chlist) usage();
        strcpy(l->chlist, chlist);
        if (peer || listen_side) l->fd = -1;
    } else {
        for (int l = 0; l < nlinks; l++) links[l].fd = -1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t t0 = now_ms();

    /* transport init: telemetry first, as RCCL's init does */
    if (rcclTelemetryInit() != 0) fprintf(stderr, "ibcast_e2e: telemetry could not start; continuing without it\n");

    int ndev = 0;
    struct ibv_device **list = ibv_get_device_list(&ndev);
    if (!list || ndev == 0) die("no RDMA devices");
    struct ibv_device *dev = NULL;
    for (int i = 0; i < ndev; i++)
        if (!strcmp(ibv_get_device_name(list[i]), devname)) dev = list[i];
    if (!dev) die("device %s not found", devname);
    ctx = ibv_open_device(dev);
    if (!ctx) die("ibv_open_device %s", devname);
    if (rcclTelemetryRegisterDevice(DEV, devname, "IB-CAST") != DEV && rcclTelemetryOn())
        fprintf(stderr, "ibcast_e2e: RegisterDevice(%d, %s) failed\n", DEV, devname);
    struct ibv_port_attr pa;
    if (ibv_query_port(ctx, ib_port, &pa)) die("ibv_query_port");
    path_mtu = pa.active_mtu;
    mtu_bytes = 128u << path_mtu;
    my_lid = pa.lid;
    if (ibv_query_gid(ctx, ib_port, gid_index, &my_gid)) die("ibv_query_gid %d", gid_index);
    pd = ibv_alloc_pd(ctx);
    if (!pd) die("ibv_alloc_pd");

    int boot = links[0].fd != -2;
    for (int l = 0; l < nlinks; l++)
        if (boot) links[l].fd = bootstrap_connect(links[l].peer, links[l].port, links[l].peer == NULL);
    my_tag = (uint32_t)(nlinks > 1 ? 3000 : links[0].peer ? 2000 : 1000) + (uint32_t)rank;
    if (!boot) my_tag = 500 + (uint32_t)rank;

    /* channels per link: "0,3,17"; data QPs per connection alternate 2, 3, 2, ... */
    for (int l = 0; l < nlinks; l++) {
        links[l].first = nchan;
        char *dup = strdup(links[l].chlist), *save = NULL;
        for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (nchan == MAX_CH) die("too many channels");
            Chan *ch = &chans[nchan];
            ch->id = atoi(tok);
            for (int j = 0; j < nchan; j++)
                if (chans[j].id == ch->id) die("channel %d given twice", ch->id);
            ch->link = l;
            ch->index_forms = ch->id == index_ch;
            ch->t = &T.ch[nchan];
            ch->t->id = ch->id;
            int ndata = 2 + (nchan % 2);
            comm_create(ch, &ch->send, 1, ndata, nreq);
            comm_create(ch, &ch->recv, 0, ndata, nreq);
            ch->h = rcclTelemetryResolveChannel(DEV, ch->id);
            nchan++;
        }
        free(dup);
        links[l].nch = nchan - links[l].first;
    }
    T.nch = nchan;

    uint32_t peer_tag = 0;
    for (int l = 0; l < nlinks; l++) {
        Link *lk = &links[l];
        struct PeerInfo mine, theirs;
        memset(&mine, 0, sizeof mine);
        memcpy(mine.gid, my_gid.raw, 16);
        mine.tag = my_tag;
        mine.lid = my_lid;
        mine.nch = (uint32_t)lk->nch;
        for (int i = 0; i < lk->nch; i++) {
            Chan *ch = &chans[lk->first + i];
            mine.ch[i].id = ch->id;
            comm_info(&ch->send, &mine.ch[i].send);
            comm_info(&ch->recv, &mine.ch[i].recv);
        }
        if (lk->fd >= 0) {
            xfer(lk->fd, &mine, sizeof mine, 1);
            xfer(lk->fd, &theirs, sizeof theirs, 0);
            if (theirs.nch != mine.nch) die("peer has %u channels, we have %u", theirs.nch, mine.nch);
        } else {
            theirs = mine;   /* single host: the send comm talks to our own recv comm */
        }
        union ibv_gid rgid;
        memcpy(rgid.raw, theirs.gid, 16);
        peer_tag = theirs.tag;
        for (int i = 0; i < lk->nch; i++) {
            Chan *ch = &chans[lk->first + i];
            if (theirs.ch[i].id != ch->id) die("channel order differs from the peer's");
            ch->peer_tag = theirs.tag;
            comm_connect(&ch->send, &theirs.ch[i].recv, &rgid, (uint16_t)theirs.lid);
            comm_connect(&ch->recv, &theirs.ch[i].send, &rgid, (uint16_t)theirs.lid);
            ch->recv.rfifo_addr = theirs.ch[i].send.fifo_addr;
            ch->recv.rfifo_rkey = theirs.ch[i].send.fifo_rkey;
            /* the receive for the peer's closing message, posted before any traffic */
            struct ibv_sge sge = {.addr = (uintptr_t)ch->recv.fin, .length = sizeof(struct Fin), .lkey = ch->recv.fin_mr->lkey};
            if (ch->index_forms) rcclTelemetryWqePosted(DEV, ch->id, ch->recv.cts.slot, 0);
            else rcclTelemetryQpRecvPosted(ch->recv.cts.h);
            post_recv(&ch->recv.cts, mkid(K_FIN, 0, 0), &sge);
        }
    }
    all_barrier();   /* every QP of both sides is in RTS before the first write */
    printf("ibcast_e2e: %d channels, %d requests per comm, mtu %u, %d link(s), peer tag %u\n", nchan, nreq, mtu_bytes,
           nlinks, peer_tag);

    /* the proxy loop */
    uint64_t last_change = now_ms();
    long last_sum = -1;
    for (;;) {
        int done = 1;
        long sum = 0;
        for (int i = 0; i < nchan; i++) {
            Chan *ch = &chans[i];
            Comm *r = &ch->recv, *s = &ch->send;
            /* the sender looks at its FIFO before the receiver publishes: the
             * first look at every slot can miss, as on a real proxy thread */
            send_try_post(s);
            progress(s);
            recv_try_post(r);
            progress(r);
            if (s->completed == s->nreq && !s->fin_posted) send_fin(s);
            done &= r->completed == r->nreq && r->fin_done && s->completed == s->nreq && s->fin_done;
            sum += r->completed + s->completed + r->posted + s->posted + r->fin_done + s->fin_done;
        }
        if (done) break;
        if (sum != last_sum) { last_sum = sum; last_change = now_ms(); }
        else if (now_ms() - last_change > 30000) die("no progress for 30 s");
    }
    if (error_probe) {
        /* Provoke one real error completion after all traffic: an RDMA_WRITE with a
         * wrong rkey (a plain write: one with immediate would wait for a receive WQE
         * and be RNR-retried forever before the rkey is even looked at). The responder NAKs it, the requester gets IBV_WC_REM_ACCESS_ERR
         * and both QPs of that pair go to the error state; nothing else is outstanding
         * on them, so no flush completions follow. */
        Chan *ch = &chans[0];
        Comm *c = &ch->send;
        Qp *qp = &c->data[0];
        struct ibv_sge sge = {.addr = (uintptr_t)c->buf, .length = 64, .lkey = c->buf_mr->lkey};
        struct ibv_send_wr wr = {.wr_id = mkid(K_PROBE, 0, 0), .sg_list = &sge, .num_sge = 1,
                                 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
        wr.wr.rdma.remote_addr = ch->recv.rfifo_addr;   /* any address: the key is what is wrong */
        wr.wr.rdma.rkey = 0x00badbadu;
        (void)t_post_ts(qp);
        t_send_posted(ch, qp, 0);
        rcclTelemetryWqeSize(DEV, 64);
        post_send(c, qp, &wr);
        uint64_t t1 = now_ms();
        while (!probe_done) {
            progress(c);
            if (now_ms() - t1 > 30000) die("the error probe got no completion in 30 s");
        }
        T.recv_pkts_min += 1;   /* the peer runs the same probe against our responder */
        printf("ibcast_e2e: error probe: IBV_WC_REM_ACCESS_ERR as intended\n");
    }
    all_barrier();   /* the peers have drained too: safe to tear the QPs down */
    for (int i = 0; i < nchan; i++) {
        comm_close(&chans[i].send);
        comm_close(&chans[i].recv);
    }
    for (int l = 0; l < nlinks; l++)
        if (links[l].fd >= 0) close(links[l].fd);
    uint64_t ms = now_ms() - t0;
    write_tally(tally, !boot ? "single" : nlinks > 1 ? "trio" : "pair", rank, nreq, ms);
    printf("ibcast_e2e: done in %llu ms: %llu payload bytes checked, %llu bad; %llu tx / %llu rx bytes; "
           "%llu CQ polls\n", (unsigned long long)ms, (unsigned long long)T.payload_checked,
           (unsigned long long)T.payload_errors, (unsigned long long)T.tx_bytes, (unsigned long long)T.rx_bytes,
           (unsigned long long)T.cq_polls);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    /* --linger-ms: stay alive (idle) so the live textfile outlives a fault's recovery */
    if (linger_ms > 0) usleep((useconds_t)linger_ms * 1000);
    if (T.payload_errors) return 1;
    return 0;   /* the library writes its JSON from its atexit handler */
}
