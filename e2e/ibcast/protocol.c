/*
 * e2e/ibcast/protocol.c: the IB-CAST protocol as ibcast_e2e runs it: the workload (request
 * sizes, payload pattern, chunks per data QP), the send comm (FIFO slots polled, requests
 * striped over the data QPs, the closing fin), the recv comm (receives posted, CTS entries
 * written into the sender's FIFO, payload checked) and the completions, matched to requests
 * through wr_id and imm_data. Separate because it is the transport's own logic.
 */
#include "ibcast.h"

static const uint32_t kSizes[] = {0, 1, 100, 4096, 5000, 12288, 65536, 200000, 777, 32768};
#define NSIZES (sizeof kSizes / sizeof kSizes[0])

uint32_t max_size = MAX_REQ;
int inflight = INFLIGHT;   /* requests in flight per comm, 1..INFLIGHT */
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

uint64_t pkts_for(uint32_t len) { return len == 0 ? 1 : (len + mtu_bytes - 1) / mtu_bytes; }

static Qp *qp_by_num(Comm *c, uint32_t qpn) {
    for (int i = 0; i < c->ndata; i++)
        if (c->data[i].qp->qp_num == qpn) return &c->data[i];
    if (c->cts.qp->qp_num == qpn) return &c->cts;
    die("completion for unknown qp %u", qpn);
    return NULL;
}

/* ------------------------------------------------------------ send comm */

void send_try_post(Comm *c) {
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

void send_fin(Comm *c) {
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

void recv_try_post(Comm *c) {
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
    /* --rnr-after: from that request on the CTS goes out with no receive behind it */
    for (int q = 0; q < c->ndata && (rnr_after < 0 || seq < rnr_after); q++) {
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

int probe_done, expect_errors, rnr_after = -1, error_probe;
uint64_t errors_seen;

/* IB-CAST's error path: the QP by the completion's qp_num, its status and vendor_err. */
static void on_error(Comm *c, Qp *q, struct ibv_wc *wc) {
    T.cq_errors++;
    rcclTelemetryQpCqError(q->h, (int)wc->status, wc->vendor_err);
    if (q->t->first_error < 0) q->t->first_error = (int)wc->status;
    q->t->errors[wc->status & 31]++;
    if (id_kind(wc->wr_id) == K_PROBE && wc->status == IBV_WC_REM_ACCESS_ERR) {
        probe_done = 1;   /* the one error this program provokes on purpose */
        return;
    }
    if (expect_errors) {
        if (!errors_seen++)
            printf("ibcast_e2e: first error: ch %d %s comm qp %u: %s (vendor_err %#x)\n", c->ch->id,
                   c->is_send ? "send" : "recv", q->qp->qp_num, ibv_wc_status_str(wc->status), wc->vendor_err);
        fflush(stdout);
        return;
    }
    die("ch %d %s comm: completion error on qp %u: %s (wr_id %#llx)", c->ch->id, c->is_send ? "send" : "recv",
        q->qp->qp_num, ibv_wc_status_str(wc->status), (unsigned long long)wc->wr_id);
}

void progress(Comm *c) {
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
