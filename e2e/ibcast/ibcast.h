/*
 * e2e/ibcast/ibcast.h: what the parts of ibcast_e2e share. ibcast_e2e is an IB-CAST-shaped
 * libibverbs program that drives librccl_telemetry on a real verbs device (Soft-RoCE in the
 * e2e guest) and keeps its own exact tally of what it did, written as JSON for e2e/check.py.
 * Built from the .c files beside this header by e2e/run.sh: main.c (the command line and
 * the run), verbs.c (verbs setup: QPs, MRs, comms, the tallying posts), protocol.c (the
 * IB-CAST protocol: the send and recv comms' requests, CTS FIFO and completions),
 * bootstrap.c (the TCP peer exchange), tally.c (the program's own tally and its JSON).
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
 *    provokes a real IBV_WC_REM_ACCESS_ERR completion (the QpCqError path);
 *  - faults (--expect-errors): error completions are tallied per QP by status
 *    instead of ending the run; once nothing moved for --hang-ms (after
 *    errors, or with nothing in flight on a dead path) the rank writes its
 *    tally and stops (--hang: stays, hung, until killed).
 *    --retry-cnt / --rnr-retry set the QPs' RC retry counts (7 by default);
 *    --rnr-after N makes the receiver publish the CTS of request N on without
 *    posting its receives (a frozen receive queue: the sender's
 *    WRITE_WITH_IMM meets RNR NAKs until rnr_retry runs out).
 *  - QP settings: --tclass TC connects every QP with GRH traffic class TC and
 *    tells each QP's settings with rcclTelemetryQpSetAttrs, as IB-CAST does at
 *    RTR/RTS; --odd-tclass CH:TC gives the first data QP of channel CH's send
 *    comm class TC instead (one connection on another class: a tc filter on
 *    the IP TOS byte can then drop that QP's packets only).
 *
 * Telemetry hooks are called where IB-CAST calls them (C_API.md): Init and
 * RegisterDevice at transport init, SetupChannel/SetQpRole/Resolve* at connect,
 * QpSendPosted + WqeSize per data WQE and PostTs for the signalled one (the only
 * one with a completion to hand the token back to), Bytes per request, QpRecvPosted
 * per receive WQE, PostTs (signalled only) + QpCtsSent per CTS, QpSlotMiss per
 * unpublished FIFO slot, QpWqeComplete per drained completion (the PostTs token
 * of a signalled send, 0 for a receive), QpCqError per error completion,
 * ChRequestCompleted per request, AddCqPolls at comm close. One channel
 * (--index-channel) uses the index forms instead of the handle forms.
 *
 * The tally is counted at the verbs calls themselves (WR chains walked after a
 * successful ibv_post_send, completions as polled), never inside the hook
 * wrappers, so a hook that is missing or counts wrongly shows up as a mismatch.
 */
#ifndef IBCAST_E2E_H
#define IBCAST_E2E_H
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

/* main.c */
void die(const char *fmt, ...) __attribute__((noreturn));
uint64_t now_ms(void);

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
    /* error completions by enum ibv_wc_status, and the first one's (-1: none) */
    uint64_t errors[32];
    int first_error;
    int tclass;    /* the GRH traffic class it was connected with (-1: not connected) */
};

struct ChTally {
    int id, requested_slots, granted_slots;
    uint64_t req_completed;
    struct QpTally qp[QPS_PER_CH];
};

struct Tally {
    uint64_t tx_bytes, rx_bytes, cq_errors, cq_polls;
    uint64_t size_val[MAX_SIZES], size_cnt[MAX_SIZES];
    int nsizes;
    uint64_t sends, recv_completions;        /* SEND opcodes completed / receive completions */
    uint64_t send_pkts_min, recv_pkts_min;   /* request packets sent / received, lower bound */
    uint64_t payload_checked, payload_errors, tokens_unsampled, tokens_sampled;
    struct ChTally ch[MAX_CH];
    int nch;
};
extern struct Tally T; /* tally.c */
void tally_size(uint64_t s);
void write_tally(const char *path, const char *mode, int rank, int nreq, uint64_t ms);

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

/* the device (verbs.c) */
extern struct ibv_context *ctx;
extern struct ibv_pd *pd;
extern int gid_index, ib_port, qp_timeout, retry_cnt, rnr_retry;
extern int tclass, odd_tclass_ch, odd_tclass;   /* --tclass (-1: not given), --odd-tclass CH:TC */
extern union ibv_gid my_gid;
extern uint16_t my_lid;
extern enum ibv_mtu path_mtu;
extern uint32_t mtu_bytes;
/* the channels (main.c) */
extern uint32_t my_tag;
extern Chan chans[MAX_CH];
extern int nchan;

/* ------------------------------------------------------- telemetry calls */
/* Thin wrappers: handle forms, or index forms on the --index-channel channel. */

static inline int64_t t_post_ts(Qp *q) { return rcclTelemetryPostTs(q->h); }

static inline void t_send_posted(Chan *c, Qp *q, int imm) {
    if (c->index_forms) {
        rcclTelemetryWqePosted(DEV, c->id, q->slot, 1);
        rcclTelemetryWriteWqe(DEV, c->id, q->slot, imm);
    } else {
        rcclTelemetryQpSendPosted(q->h, imm);
    }
}
static inline void t_recv_posted(Chan *c, Qp *q) {
    if (c->index_forms) rcclTelemetryWqePosted(DEV, c->id, q->slot, 0);
    else rcclTelemetryQpRecvPosted(q->h);
}
static inline void t_cts_sent(Chan *c, Qp *q, int sig) {
    if (c->index_forms) rcclTelemetryCtsSent(DEV, c->id, q->slot, sig);
    else rcclTelemetryQpCtsSent(q->h, sig);
}
static inline void t_slot_miss(Chan *c, Qp *q) {
    if (c->index_forms) rcclTelemetrySlotMiss(DEV, c->id, q->slot);
    else rcclTelemetryQpSlotMiss(q->h);
}
static inline void t_wqe_complete(Chan *c, Qp *q, int64_t tok) {
    if (c->index_forms) rcclTelemetryWqeComplete(DEV, c->id, q->slot, tok);
    else rcclTelemetryQpWqeComplete(q->h, tok);
}
static inline void t_req_completed(Chan *c) {
    if (c->index_forms) rcclTelemetryRequestCompleted(DEV, c->id);
    else rcclTelemetryChRequestCompleted(c->h);
}

/* ------------------------------------------------------------- workload (protocol.c) */

extern uint32_t max_size;
extern int inflight; /* requests in flight per comm, 1..INFLIGHT */
extern int probe_done;
extern int expect_errors, rnr_after, error_probe;
extern uint64_t errors_seen;
uint64_t pkts_for(uint32_t len);

/* wr_id: kind in bits 60..63, request sequence in 8..39, slot in 0..7 */
enum { K_DATA = 1, K_CTS = 2, K_FIN = 3, K_BULK = 4, K_PROBE = 5 };
static inline uint64_t mkid(int kind, int seq, int slot) {
    return ((uint64_t)kind << 60) | ((uint64_t)(uint32_t)seq << 8) | (uint64_t)slot;
}
static inline int id_kind(uint64_t id) { return (int)(id >> 60); }
static inline int id_seq(uint64_t id) { return (int)(uint32_t)(id >> 8); }
static inline int id_slot(uint64_t id) { return (int)(id & 0xff); }

/* ------------------------------------------------------------ verbs setup (verbs.c) */

struct CommInfo;
void *zalloc(size_t n);
void post_send(Comm *c, Qp *q, struct ibv_send_wr *wr);
void post_recv(Qp *q, uint64_t wr_id, struct ibv_sge *sge);
void comm_create(Chan *ch, Comm *c, int is_send, int ndata, int nreq);
void comm_connect(Comm *c, const struct CommInfo *peer, const union ibv_gid *rgid, uint16_t rlid);
void comm_close(Comm *c);

/* ------------------------------------------------------------ protocol (protocol.c) */

void send_try_post(Comm *c);
void send_fin(Comm *c);
void recv_try_post(Comm *c);
void progress(Comm *c);

/* ------------------------------------------------------------ bootstrap (bootstrap.c) */


/* One bootstrap connection: a peer and the channels this rank shares with it. Several
 * links make one rank talk to several peers (the trio: each rank to both other guests);
 * channel ids are distinct across the links of a rank. */
typedef struct {
    const char *peer;   /* NULL: listen */
    int port, fd, first, nch;
    char chlist[128];
} Link;
extern Link links[MAX_LINKS];
extern int nlinks;

struct QpInfo { uint32_t qpn, psn; };
struct CommInfo { struct QpInfo data[MAX_DQP], cts; uint64_t fifo_addr; uint32_t fifo_rkey, ndata; };

static inline uint32_t psn_of(uint32_t qpn) { return (qpn * 2654435761u) & 0xffffff; }
int bootstrap_connect(const char *peer, int port, int listen_side);
uint32_t exchange_and_connect(void);
void all_barrier(void);
#endif
