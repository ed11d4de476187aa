/*
 * verbs_loader: a plain verbs program (no telemetry calls) that loads libibverbs in one of
 * two ways and polls in one of two ways, and keeps its own exact tally of what it did, so
 * the e2e checker can hold librccl_telemetry_preload.so's file against it.
 *
 * Built twice from this file (e2e/run.sh):
 *   verbs_direct  linked with -libverbs; every entry point is the linked symbol (what a
 *                 symbol interposer sees);
 *   verbs_dlopen  not linked with libibverbs: dlopen("libibverbs.so.1") and every entry
 *                 point taken with dlvsym(handle, name, "IBVERBS_1.1"), the way stock
 *                 NCCL's and RCCL's ibvwrap do. Symbol interposition alone never sees it.
 * The data path is the same in both: ibv_post_send / ibv_post_recv / ibv_poll_cq and
 * ibv_create_cq_ex / ibv_start_poll are static inline in <infiniband/verbs.h> and jump
 * through the context's ops tables.
 *
 * --cq poll   ibv_create_cq + ibv_poll_cq (batches of up to 4)
 * --cq ex     ibv_create_cq_ex (wc_flags BYTE_LEN | QP_NUM | IMM) + ibv_start_poll /
 *             ibv_end_poll, one completion per start/end pair: rdma-core 44's rxe cq_ex
 *             advances its consumer index once too often in the start / next ... / end loop.
 *
 * Workload (one process, loopback on one device): QPs A and B connected to each other,
 * C and D connected to each other, all RC on ONE shared CQ (so completions must be
 * attributed by qp_num). Per round:
 *   B posts a chain of 3 receives, A posts 1 receive;
 *   A: a chain RDMA_WRITE(unsignalled) + RDMA_WRITE(unsignalled) + RDMA_WRITE(signalled)
 *      (one completion retires the two unsignalled WRs before it), SEND, SEND_WITH_IMM,
 *      RDMA_WRITE_WITH_IMM (each consuming one of B's receives), RDMA_READ;
 *   B: SEND (consuming A's receive);
 *   then it polls until the round's 10 completions are in, and checks the payloads.
 * After the rounds, C posts one RDMA_WRITE with a wrong rkey: one IBV_WC_REM_ACCESS_ERR.
 *
 * The tally (JSON, --tally FILE) is counted at the verbs calls: WRs as posted (after the
 * post returned 0), completions as polled, every poll call (start_poll in ex mode).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "verbs_loader: FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

/* The entry points the program calls, NCCL ibvwrap style: one table, filled either with
 * the linked symbols or with dlvsym results. */
static struct {
    struct ibv_device **(*get_device_list)(int *);
    void (*free_device_list)(struct ibv_device **);
    const char *(*get_device_name)(struct ibv_device *);
    struct ibv_context *(*open_device)(struct ibv_device *);
    int (*close_device)(struct ibv_context *);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *);
    int (*dealloc_pd)(struct ibv_pd *);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
    int (*dereg_mr)(struct ibv_mr *);
    struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
    int (*destroy_cq)(struct ibv_cq *);
    struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
    int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
    int (*destroy_qp)(struct ibv_qp *);
    int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
} V;

#ifdef VL_DLOPEN
#define MODE "dlopen"
static void load(void) {
    void *h = dlopen("libibverbs.so.1", RTLD_NOW);
    if (!h) die("dlopen libibverbs.so.1: %s", dlerror());
#define SYM(f)                                                                    \
    do {                                                                          \
        *(void **)&V.f = dlvsym(h, "ibv_" #f, "IBVERBS_1.1");                   \
        if (!V.f) die("dlvsym ibv_%s@IBVERBS_1.1: %s", #f, dlerror());          \
    } while (0)
    SYM(get_device_list); SYM(free_device_list); SYM(get_device_name); SYM(open_device);
    SYM(close_device); SYM(alloc_pd); SYM(dealloc_pd); SYM(reg_mr); SYM(dereg_mr);
    SYM(create_cq); SYM(destroy_cq); SYM(create_qp); SYM(modify_qp); SYM(destroy_qp);
    SYM(query_gid);
#undef SYM
}
#else
#define MODE "direct"
static void load(void) {
    /* Function-like macros (ibv_reg_mr, ibv_query_port) do not expand without parentheses:
     * these are the exported symbols, as linked. */
    V.get_device_list = ibv_get_device_list; V.free_device_list = ibv_free_device_list;
    V.get_device_name = ibv_get_device_name; V.open_device = ibv_open_device;
    V.close_device = ibv_close_device; V.alloc_pd = ibv_alloc_pd; V.dealloc_pd = ibv_dealloc_pd;
    V.reg_mr = ibv_reg_mr; V.dereg_mr = ibv_dereg_mr; V.create_cq = ibv_create_cq;
    V.destroy_cq = ibv_destroy_cq; V.create_qp = ibv_create_qp; V.modify_qp = ibv_modify_qp;
    V.destroy_qp = ibv_destroy_qp; V.query_gid = ibv_query_gid;
}
#endif

enum { QA, QB, QC, QD, NQP };
static const char *kQpName[NQP] = {"A", "B", "C", "D"};

struct QpTally {
    uint64_t wqe_sent, send_wqe, write_wqe, write_imm_wqe, read_wqe, recv_wqe, completions;
    uint64_t send_completions, recv_completions, cq_errors, retired_unsignalled, tx_bytes, rx_bytes;
    uint64_t unsignalled_pending; /* unsignalled WRs posted since the last signalled one */
};

static struct {
    struct QpTally qp[NQP];
    uint64_t polls, cq_errors, tx_bytes, rx_bytes, unknown_wc;
    uint64_t sends_completed, recv_completions_ok; /* what rxe's rdma_sends / rdma_recvs count */
    uint64_t payload_checked, payload_errors;
    uint32_t sizes[64];
    uint64_t size_count[64];
    int nsizes;
} T;

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;         /* poll mode, or ibv_cq_ex_to_cq(cqx) */
static struct ibv_cq_ex *cqx;     /* ex mode */
static struct ibv_qp *qp[NQP];
static struct ibv_mr *mr[NQP];
static uint8_t *buf[NQP];
static int use_ex, gid_index = 1;
static union ibv_gid gid;
#define BUF 65536
/* B's receive slots, A's receive slot, the write/read areas */
#define RECV_OFF(i) ((i) * 8192)
#define WRITE_OFF 32768
#define READ_OFF 49152
#define SRC_OFF 0
#define DST_OFF 32768

static void note_size(uint32_t s) {
    for (int i = 0; i < T.nsizes; i++)
        if (T.sizes[i] == s) { T.size_count[i]++; return; }
    if (T.nsizes < 64) { T.sizes[T.nsizes] = s; T.size_count[T.nsizes++] = 1; }
}

static int qp_index(uint32_t qpn) {
    for (int i = 0; i < NQP; i++)
        if (qp[i] && qp[i]->qp_num == qpn) return i;
    return -1;
}

/* Post a send chain; tally it only if the provider took all of it. */
static void post_send(int q, struct ibv_send_wr *wr) {
    struct ibv_send_wr *bad = NULL;
    int rc = ibv_post_send(qp[q], wr, &bad);
    if (rc) die("ibv_post_send on %s: %s", kQpName[q], strerror(rc));
    for (struct ibv_send_wr *w = wr; w; w = w->next) {
        struct QpTally *t = &T.qp[q];
        uint64_t len = 0;
        for (int i = 0; i < w->num_sge; i++) len += w->sg_list[i].length;
        t->wqe_sent++;
        t->tx_bytes += len;
        T.tx_bytes += len;
        note_size((uint32_t)len);
        switch (w->opcode) {
        case IBV_WR_SEND: case IBV_WR_SEND_WITH_IMM: t->send_wqe++; break;
        case IBV_WR_RDMA_WRITE: t->write_wqe++; break;
        case IBV_WR_RDMA_WRITE_WITH_IMM: t->write_imm_wqe++; break;
        case IBV_WR_RDMA_READ: t->read_wqe++; break;
        default: break;
        }
        if (w->send_flags & IBV_SEND_SIGNALED) {
            t->retired_unsignalled += t->unsignalled_pending;
            t->unsignalled_pending = 0;
        } else {
            t->unsignalled_pending++;
        }
    }
}

static void post_recv(int q, struct ibv_recv_wr *wr) {
    struct ibv_recv_wr *bad = NULL;
    int rc = ibv_post_recv(qp[q], wr, &bad);
    if (rc) die("ibv_post_recv on %s: %s", kQpName[q], strerror(rc));
    for (struct ibv_recv_wr *w = wr; w; w = w->next) T.qp[q].recv_wqe++;
}

struct Wc { uint32_t qp_num, byte_len; int status, opcode; uint64_t wr_id; };

static void tally_wc(const struct Wc *w) {
    int q = qp_index(w->qp_num);
    if (q < 0) { T.unknown_wc++; return; }
    struct QpTally *t = &T.qp[q];
    t->completions++;
    int recv = w->opcode & IBV_WC_RECV; /* IBV_WC_RECV and IBV_WC_RECV_RDMA_WITH_IMM */
    if (w->status != IBV_WC_SUCCESS) {
        t->cq_errors++;
        T.cq_errors++;
        return;
    }
    if (recv) {
        t->recv_completions++;
        t->rx_bytes += w->byte_len;
        T.rx_bytes += w->byte_len;
        T.recv_completions_ok++;
    } else {
        t->send_completions++;
        if (w->opcode == IBV_WC_SEND) T.sends_completed++;
    }
}

/* One poll call; returns the number of completions it gave. */
static int poll_once(struct Wc *out, int max) {
    T.polls++;
    if (!use_ex) {
        struct ibv_wc wc[4];
        int n = ibv_poll_cq(cq, max < 4 ? max : 4, wc);
        if (n < 0) die("ibv_poll_cq: %d", n);
        for (int i = 0; i < n; i++)
            out[i] = (struct Wc){wc[i].qp_num, wc[i].byte_len, wc[i].status, wc[i].opcode, wc[i].wr_id};
        return n;
    }
    struct ibv_poll_cq_attr attr = {0};
    int rc = ibv_start_poll(cqx, &attr);
    if (rc == ENOENT) return 0;
    if (rc) die("ibv_start_poll: %d", rc);
    out[0] = (struct Wc){ibv_wc_read_qp_num(cqx), ibv_wc_read_byte_len(cqx), cqx->status,
                         ibv_wc_read_opcode(cqx), cqx->wr_id};
    ibv_end_poll(cqx);
    return 1;
}

static void drain(int want) {
    struct Wc wc[4];
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (want > 0) {
        int n = poll_once(wc, want < 4 ? want : 4);
        for (int i = 0; i < n; i++) {
            tally_wc(&wc[i]);
            if (wc[i].status != IBV_WC_SUCCESS && wc[i].qp_num != qp[QC]->qp_num)
                die("completion error status %d on QP %u, wr_id %llu", wc[i].status, wc[i].qp_num,
                    (unsigned long long)wc[i].wr_id);
        }
        want -= n;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 60) die("timed out waiting for %d completions", want);
    }
}

static void to_init(struct ibv_qp *q) {
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE};
    if (V.modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die("modify_qp INIT: %s", strerror(errno));
}

static void connect_pair(struct ibv_qp *q, uint32_t rqpn) {
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = rqpn,
                            .rq_psn = rqpn & 0xffffff, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
                            .ah_attr = {.is_global = 1, .port_num = 1,
                                        .grh = {.dgid = gid, .sgid_index = (uint8_t)gid_index, .hop_limit = 64}}};
    if (V.modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        die("modify_qp RTR: %s", strerror(errno));
    struct ibv_qp_attr s = {.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
                            .sq_psn = q->qp_num & 0xffffff, .max_rd_atomic = 1};
    if (V.modify_qp(q, &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                               IBV_QP_MAX_QP_RD_ATOMIC))
        die("modify_qp RTS: %s", strerror(errno));
}

static void fill(uint8_t *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(seed * 31 + i * 7 + 1);
}

static void expect(const uint8_t *got, unsigned seed, size_t n, const char *what) {
    uint8_t want[8192];
    fill(want, n, seed);
    T.payload_checked += n;
    if (memcmp(got, want, n)) {
        T.payload_errors++;
        fprintf(stderr, "verbs_loader: payload mismatch in %s\n", what);
    }
}

static struct ibv_sge sge(int q, size_t off, uint32_t len) {
    return (struct ibv_sge){(uintptr_t)(buf[q] + off), len, mr[q]->lkey};
}

static void round_trip(unsigned r) {
    /* receives: B a chain of 3, A one */
    struct ibv_sge rs[3] = {sge(QB, RECV_OFF(0), 8192), sge(QB, RECV_OFF(1), 8192), sge(QB, RECV_OFF(2), 8192)};
    struct ibv_recv_wr rw[3];
    for (int i = 0; i < 3; i++)
        rw[i] = (struct ibv_recv_wr){.wr_id = 100 + i, .next = i < 2 ? &rw[i + 1] : NULL, .sg_list = &rs[i], .num_sge = 1};
    post_recv(QB, rw);
    struct ibv_sge ra = sge(QA, DST_OFF, 8192);
    struct ibv_recv_wr rwa = {.wr_id = 200, .sg_list = &ra, .num_sge = 1};
    post_recv(QA, &rwa);

    uint64_t raddr = (uintptr_t)buf[QB];
    uint32_t rkey = mr[QB]->rkey;
    /* A: a chain of writes, the last one signalled; wr_id is the same on all (programs reuse wr_id) */
    fill(buf[QA] + SRC_OFF, 1000 + 3000 + 64, r);
    struct ibv_sge ws[3] = {sge(QA, SRC_OFF, 1000), sge(QA, SRC_OFF + 1000, 3000), sge(QA, SRC_OFF + 4000, 64)};
    struct ibv_send_wr w[3];
    for (int i = 0; i < 3; i++)
        w[i] = (struct ibv_send_wr){.wr_id = 7, .next = i < 2 ? &w[i + 1] : NULL, .sg_list = &ws[i], .num_sge = 1,
                                    .opcode = IBV_WR_RDMA_WRITE, .send_flags = i == 2 ? IBV_SEND_SIGNALED : 0,
                                    .wr = {.rdma = {raddr + WRITE_OFF + (i == 0 ? 0 : i == 1 ? 1000 : 4000), rkey}}};
    post_send(QA, w);
    drain(1);
    expect(buf[QB] + WRITE_OFF, r, 4064, "RDMA_WRITE chain");

    /* A: SEND 512, SEND_WITH_IMM 100, RDMA_WRITE_WITH_IMM 2048 (to B's write area) */
    fill(buf[QA] + 8192, 512, r + 1);
    fill(buf[QA] + 16384, 100, r + 2);
    fill(buf[QA] + 24576, 2048, r + 3);
    struct ibv_sge s1 = sge(QA, 8192, 512), s2 = sge(QA, 16384, 100), s3 = sge(QA, 24576, 2048);
    struct ibv_send_wr x3 = {.wr_id = 7, .sg_list = &s3, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                             .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(r),
                             .wr = {.rdma = {raddr + WRITE_OFF + 8192, rkey}}};
    struct ibv_send_wr x2 = {.wr_id = 7, .next = &x3, .sg_list = &s2, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
                             .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(r)};
    struct ibv_send_wr x1 = {.wr_id = 7, .next = &x2, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED};
    post_send(QA, &x1);
    drain(6); /* 3 send completions on A, 3 receive completions on B */
    expect(buf[QB] + RECV_OFF(0), r + 1, 512, "SEND");
    expect(buf[QB] + RECV_OFF(1), r + 2, 100, "SEND_WITH_IMM");
    expect(buf[QB] + WRITE_OFF + 8192, r + 3, 2048, "RDMA_WRITE_WITH_IMM");

    /* A: RDMA_READ 4096 from B's read area */
    fill(buf[QB] + READ_OFF, 4096, r + 4);
    struct ibv_sge rd = sge(QA, 40960, 4096);
    struct ibv_send_wr rr = {.wr_id = 8, .sg_list = &rd, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
                             .send_flags = IBV_SEND_SIGNALED, .wr = {.rdma = {raddr + READ_OFF, rkey}}};
    post_send(QA, &rr);
    /* B: SEND 256 to A */
    fill(buf[QB] + 57344, 256, r + 5);
    struct ibv_sge bs = sge(QB, 57344, 256);
    struct ibv_send_wr bw = {.wr_id = 9, .sg_list = &bs, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED};
    post_send(QB, &bw);
    drain(3); /* read on A, send on B, receive on A */
    expect(buf[QA] + 40960, r + 4, 4096, "RDMA_READ");
    expect(buf[QA] + DST_OFF, r + 5, 256, "SEND B->A");
}

static void put_qp_json(FILE *f, int q, int last) {
    const struct QpTally *t = &T.qp[q];
    fprintf(f,
            "    {\"name\": \"%s\", \"qp_num\": %u, \"num_wqe_sent\": %llu, \"num_send_wqe\": %llu, "
            "\"num_write_wqe\": %llu, \"num_write_imm_wqe\": %llu, \"num_read_wqe\": %llu, \"num_recv_wqe\": %llu, "
            "\"num_wqe_rcvd\": %llu, \"send_completions\": %llu, \"recv_completions\": %llu, "
            "\"num_cq_errors\": %llu, \"num_wqe_retired_unsignalled\": %llu, \"tx_bytes\": %llu, \"rx_bytes\": %llu}%s\n",
            kQpName[q], qp[q]->qp_num, (unsigned long long)t->wqe_sent, (unsigned long long)t->send_wqe,
            (unsigned long long)t->write_wqe, (unsigned long long)t->write_imm_wqe, (unsigned long long)t->read_wqe,
            (unsigned long long)t->recv_wqe, (unsigned long long)t->completions,
            (unsigned long long)t->send_completions, (unsigned long long)t->recv_completions,
            (unsigned long long)t->cq_errors, (unsigned long long)t->retired_unsignalled,
            (unsigned long long)t->tx_bytes, (unsigned long long)t->rx_bytes, last ? "" : ",");
}

int main(int argc, char **argv) {
    const char *tally = NULL, *devname = "rxe0";
    int rounds = 16, error_probe = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--tally") && v) tally = v, i++;
        else if (!strcmp(a, "--dev") && v) devname = v, i++;
        else if (!strcmp(a, "--gid") && v) gid_index = atoi(v), i++;
        else if (!strcmp(a, "--rounds") && v) rounds = atoi(v), i++;
        else if (!strcmp(a, "--cq") && v) use_ex = !strcmp(v, "ex"), i++;
        else if (!strcmp(a, "--no-error-probe")) error_probe = 0;
        else {
            fprintf(stderr, "usage: verbs_%s --tally FILE [--dev rxe0] [--gid 1] [--rounds 16] [--cq poll|ex] "
                            "[--no-error-probe]\n", MODE);
            return 2;
        }
    }
    if (!tally || rounds < 1) die("--tally FILE is required, --rounds >= 1");
    setvbuf(stdout, NULL, _IOLBF, 0);
    load();
    int n = 0;
    struct ibv_device **list = V.get_device_list(&n);
    if (!list) die("ibv_get_device_list: %s", strerror(errno));
    struct ibv_device *dev = NULL;
    for (int i = 0; i < n; i++)
        if (!strcmp(V.get_device_name(list[i]), devname)) dev = list[i];
    if (!dev) die("device %s not found among %d", devname, n);
    ctx = V.open_device(dev);
    if (!ctx) die("ibv_open_device %s: %s", devname, strerror(errno));
    V.free_device_list(list);
    if (V.query_gid(ctx, 1, gid_index, &gid)) die("ibv_query_gid %d", gid_index);
    pd = V.alloc_pd(ctx);
    if (!pd) die("ibv_alloc_pd");
    if (use_ex) {
        struct ibv_cq_init_attr_ex ca = {.cqe = 256,
                                         .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_IMM};
        cqx = ibv_create_cq_ex(ctx, &ca);
        if (!cqx) die("ibv_create_cq_ex: %s", strerror(errno));
        cq = ibv_cq_ex_to_cq(cqx);
    } else {
        cq = V.create_cq(ctx, 256, NULL, NULL, 0);
        if (!cq) die("ibv_create_cq: %s", strerror(errno));
    }
    for (int q = 0; q < NQP; q++) {
        buf[q] = aligned_alloc(4096, BUF);
        if (!buf[q]) die("out of memory");
        memset(buf[q], 0, BUF);
        mr[q] = V.reg_mr(pd, buf[q], BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
        if (!mr[q]) die("ibv_reg_mr: %s", strerror(errno));
        struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                      .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
        qp[q] = V.create_qp(pd, &qa);
        if (!qp[q]) die("ibv_create_qp: %s", strerror(errno));
        to_init(qp[q]);
    }
    connect_pair(qp[QA], qp[QB]->qp_num);
    connect_pair(qp[QB], qp[QA]->qp_num);
    connect_pair(qp[QC], qp[QD]->qp_num);
    connect_pair(qp[QD], qp[QC]->qp_num);

    for (int r = 0; r < rounds; r++) round_trip((unsigned)r);
    if (error_probe) {
        struct ibv_sge es = sge(QC, 0, 64);
        struct ibv_send_wr ew = {.wr_id = 66, .sg_list = &es, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                                 .send_flags = IBV_SEND_SIGNALED,
                                 .wr = {.rdma = {(uintptr_t)buf[QD], mr[QD]->rkey ^ 0x5a5a00}}};
        post_send(QC, &ew);
        drain(1);
        if (T.qp[QC].cq_errors != 1) die("the wrong rkey gave no error completion");
    }

    FILE *f = fopen(tally, "w");
    if (!f) die("cannot write %s: %s", tally, strerror(errno));
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    fprintf(f, "{\n  \"program\": \"verbs_%s\", \"mode\": \"%s\", \"cq\": \"%s\", \"rounds\": %d,\n", MODE, MODE,
            use_ex ? "ex" : "poll", rounds);
    fprintf(f, "  \"process_id\": %ld, \"host_name\": \"%s\", \"device\": \"%s\",\n", (long)getpid(), host, devname);
    fprintf(f, "  \"cq_poll_count\": %llu, \"num_cq_errors\": %llu, \"tx_bytes\": %llu, \"rx_bytes\": %llu,\n",
            (unsigned long long)T.polls, (unsigned long long)T.cq_errors, (unsigned long long)T.tx_bytes,
            (unsigned long long)T.rx_bytes);
    fprintf(f, "  \"unknown_qp_completions\": %llu, \"sends_completed\": %llu, \"recv_completions\": %llu,\n",
            (unsigned long long)T.unknown_wc, (unsigned long long)T.sends_completed,
            (unsigned long long)T.recv_completions_ok);
    fprintf(f, "  \"payload_bytes_checked\": %llu, \"payload_errors\": %llu,\n  \"wqe_sizes\": [",
            (unsigned long long)T.payload_checked, (unsigned long long)T.payload_errors);
    for (int i = 0; i < T.nsizes; i++)
        fprintf(f, "%s[%u, %llu]", i ? ", " : "", T.sizes[i], (unsigned long long)T.size_count[i]);
    fprintf(f, "],\n  \"queue_pairs\": [\n");
    for (int q = 0; q < NQP; q++) put_qp_json(f, q, q == NQP - 1);
    fprintf(f, "  ]\n}\n");
    if (fclose(f)) die("writing %s failed", tally);

    for (int q = 0; q < NQP; q++) {
        if (V.destroy_qp(qp[q])) die("ibv_destroy_qp");
        if (V.dereg_mr(mr[q])) die("ibv_dereg_mr");
        free(buf[q]);
    }
    if (V.destroy_cq(cq)) die("ibv_destroy_cq");
    if (V.dealloc_pd(pd)) die("ibv_dealloc_pd");
    if (V.close_device(ctx)) die("ibv_close_device");
    printf("verbs_%s --cq %s: %d rounds, %llu WRs posted, %llu completions, %llu polls, payload errors %llu\n", MODE,
           use_ex ? "ex" : "poll", rounds,
           (unsigned long long)(T.qp[QA].wqe_sent + T.qp[QB].wqe_sent + T.qp[QC].wqe_sent),
           (unsigned long long)(T.qp[QA].completions + T.qp[QB].completions + T.qp[QC].completions + T.qp[QD].completions),
           (unsigned long long)T.polls, (unsigned long long)T.payload_errors);
    return T.payload_errors ? 1 : 0;
}
