/*
 * preload/c/preload.h: what the parts of librccl_telemetry_preload.so share (one shared
 * object, several translation units): the records (per context, QP and ibv_cq_ex), the
 * state, the hot helpers the wrappers inline (the owned/shared sides' fast way in, the poll
 * window, the lookups, the per-device stripes, the posting half of the send record, the
 * common completion) and the functions one part calls in another. Everything declared here
 * is hidden: the exported set is exports.map's.
 *
 * The data path of ibverbs (ibv_post_send, ibv_post_recv, ibv_post_srq_recv, ibv_poll_cq,
 * ibv_create_qp_ex, ibv_create_cq_ex, the ibv_wr_* builders and ibv_start_poll & co.) is
 * static inline in <infiniband/verbs.h>: it jumps through tables that live in each context
 * (ctx->ops, struct verbs_context) or in each object (struct ibv_qp_ex, struct ibv_cq_ex).
 * Symbol interposition cannot see those calls, so the interposer interposes the exported entry
 * points that create the objects (ibv_open_device, ibv_create_qp, ...) and, inside them,
 * before the new object reaches the program, replaces the table entries with its own
 * wrappers, keeping the originals per context / per object. Programs that load libibverbs
 * with dlopen + dlsym (NCCL's and RCCL's ibvwrap) are caught by interposing dlsym/dlvsym.
 *
 * ibv_modify_qp is interposed too (cold path): the RTR transition names each QP's peer.
 *
 * Nothing here links against libibverbs: every real entry point is found at run time in the
 * already-loaded libibverbs.so.1. With RCCL_TELEMETRY_ENABLE unset (or not "1") no table is
 * touched: the exported wrappers call straight through.
 *
 * Counting (see docs/preload.md):
 * - per QP (a slot of the engine, channel unknown): send WRs by opcode, receive WRs, the
 *   completions drained (attributed by wc.qp_num), the send WRs a signalled completion retired
 *   without their own, the latency of 1 in N signalled send WRs;
 * - per device (the engine's striped device forms): tx bytes (SGE sums at post), rx bytes
 *   (byte_len of successful receive completions), WQE sizes, error completions, poll calls;
 *   receives posted to SRQs, completions of QPs the interposer does not know.
 * Each QP has a posting and a completing side (struct side): the thread that owns a side
 * counts with plain stores and no lock; once a second thread uses it, everyone takes the
 * side's lock, held on the posting side across the provider's post call so that the order of
 * the send record is the send queue's. Receive counts use atomic adds.
 *
 * The parts: symbols.c (the real dlsym/dlvsym from libc's ELF tables, the real libibverbs
 * entry points, the dlsym/dlvsym interposition), lifecycle.c (start-up, the decision to count,
 * fork), context.c (ibv_open_device's ops patching, ibv_close_device), sides.c (the
 * owned/shared hand-over), qp_table.c (QP records by qp_num, their reuse, QP create and
 * destroy), post.c and poll.c (the data path: posts, and polls of ibv_cq and ibv_cq_ex),
 * qp_ex.c (the ibv_wr_* builders), cq_ex.c (the ibv_cq_ex records), peer.c (QP identity and
 * peer, ibv_modify_qp), stall.c (the stall detector's walk).
 */
#ifndef RTP_PRELOAD_H
#define RTP_PRELOAD_H
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <link.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef RTP_BENCH_COUNTER_CLOCK
/* A build for bench/preload_bench.c only (bench/bench.mk; never installed): the header's TSC
 * reads become a counter that advances 1000 ticks a read, so that the bench can tell what
 * the clock reads cost an N=1 WQE from everything else the interposer does. One counter for
 * the whole object (lifecycle.c), so that post and poll readings stay comparable. */
extern uint64_t rtp_bench_clock __attribute__((visibility("hidden")));
static inline uint64_t rtp_bench_tsc(void) { return rtp_bench_clock += 1000; }
#define __builtin_ia32_rdtsc rtp_bench_tsc
#endif
#include "engine.h"

/* Every declaration below names a symbol of this object only. */
#pragma GCC visibility push(hidden)

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
/* Plain add, for counters written only under their QP's lock. */
#define ADD(x, v) ST(x, LD(x) + (v))
#define XADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_RELAXED)

/* ------------------------------------------------------------------------------------ */
/* State (lifecycle.c)                                                                  */

/* 0: not decided, 1: telemetry on (tables are patched), -1: off for good. */
extern int g_state;
extern pthread_mutex_t g_mu;
/* 1 in a child forked after start: inert. Its copy of g_mu may have been held by a thread
 * that does not exist in it, and its records may be half-written: no wrapper of the child
 * takes g_mu or touches a record (only the provider's call is made). */
extern int g_forked;

/* The slot's idx_sent (num_wqe_sent without an opcode key), found by offset. */
extern size_t g_idx_sent_off;
/* 1 when this process is registered for expedited membarrier: side owners skip the lock. */
extern int g_fast;

void diagf(int debug_only, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether to count, decided at the first device opened (see lifecycle.c). */
int start(void);
static inline int on(void) { return LD(g_state) == 1 && !LD(g_forked) && rcclTelemetryOn(); }
/* The cold wrappers' bookkeeping (records, g_mu): only where telemetry started, not in a
 * forked child. */
static inline int book(void) { return LD(g_state) == 1 && !LD(g_forked); }
/* In a wrapper of a patched table, where g_state is 1 already. */
static inline int counting(void) { return rcclTelemetryOn(); }

/* ------------------------------------------------------------------------------------ */
/* Records                                                                              */

#define MAX_CTX 64
#define RADIX 4096 /* qp_num (24 bits) = page (12 bits) : index (12 bits) */

struct rqp;
struct rcq;

/* One opened context (context.c): its device id, the original tables, its cq_ex records by handle. */
struct rctx {
  struct ibv_context *ctx; /* NULL: free entry */
  int dev;
  struct ibv_context_ops orig;
  struct ibv_qp *(*orig_create_qp_ex)(struct ibv_context *, struct ibv_qp_init_attr_ex *);
  struct ibv_cq_ex *(*orig_create_cq_ex)(struct ibv_context *, struct ibv_cq_init_attr_ex *);
  struct rcq **cqs[RADIX];
};
extern struct rctx g_ctx[MAX_CTX];
extern int g_nctx; /* entries in use or used before (a high-water mark) */

/* QP records by device and qp_num (qp_table.c): qp_num (24 bits) = top (16 bits) : leaf index (8 bits).
 * A leaf (2 KiB) exists while a QP of its 256 numbers is live: the last one's destroy
 * unlinks it into the same limbo as the records (a poller may be reading it), so memory
 * follows the live QPs however the provider spreads their numbers over the 24-bit space:
 * at most 2 KiB per live QP plus the touched part of the top array (512 KiB per device). */
#define QLEAF 256
#define QTOP (1u << 16)
struct qleaf {
  struct rqp *cell[QLEAF];
  uint32_t live; /* cells in use (under g_mu) */
  struct qleaf *next_free;
};
extern struct qleaf *g_qpn[32][QTOP];

/* One send WR outstanding on a QP's send queue, in posting order. gap: how many signalled
 * (high half) and unsignalled (low half) WRs had gone untracked (record full) when this one
 * was recorded, each modulo 2^32. op and bytes name the WR if it fails (an error completion
 * carries no opcode): in what was padding, so an entry stays 32 bytes. */
struct ent {
  uint64_t wr_id;
  int64_t token;  /* signalled: PostTs token (1 unsampled, > 1 a clock reading, 0 no slot) */
  uint64_t gap;
  uint16_t flags; /* ENT_SIG, ENT_VOID (atomic: a refused post voids entries it published) */
  uint8_t op;     /* enum ibv_wr_opcode */
  uint8_t pad_;
  uint32_t bytes; /* its SGE sum, at most UINT32_MAX */
};
_Static_assert(sizeof(struct ent) == 32, "a send record entry is 32 bytes");
#define GAP_S(g) ((uint32_t)((g) >> 32))
#define GAP_U(g) ((uint32_t)(g))
#define GAP(s, u) (((uint64_t)(uint32_t)(s) << 32) | (uint32_t)(u))
#define ENT_SIG 1u
#define ENT_VOID 2u

/* One side of a QP: its posting side or its completing side, owned by the first thread that
 * uses it until a second one does (sides.c). */
struct side {
  uintptr_t owner; /* the owner's thread pointer, 0 before the first use */
  int busy;        /* the owner is inside its lock-free section */
  int shared;      /* every user takes the lock */
  int lock;
};
/* One pending WR of an ibv_wr_start ... ibv_wr_complete session. */
struct pend {
  uint64_t bytes, wr_id;
  int op;
  int signalled;
};

struct rqp {
  struct ibv_qp *qp;
  struct rctx *c;
  uint32_t qpn;
  int dev;
  RcclQpStats *slot;
  rtp_qpext *ext;
  struct ibv_cq *scq, *rcq;
  int has_srq, sig_all;
  struct ent *ring;
  uint32_t ring_cap; /* power of two */
  uint8_t port;      /* the port its INIT transition named (IBV_QP_PORT), 0 before; in the
                        padding before recv_out, so the hot fields keep their cache lines */
  uint64_t recv_out; /* receives posted and not completed (atomic) */
  /* Posting side: the record's tail (published with release after its entries), the WRs
   * that found the record full (monotonic; entries snapshot them). */
  struct side ps __attribute__((aligned(64)));
  uint64_t tail;
  uint64_t gap_total;
  /* Completing side: the record's head (published with release once an entry is read), the
   * untracked WRs accounted for so far. */
  struct side cs __attribute__((aligned(64)));
  uint64_t head;
  uint64_t gap_done;
  /* ibv_qp_ex builders: the provider's, and the session being built. */
  struct ibv_qp_ex *qpx;
  struct ibv_qp_ex orig_qpx;
  struct pend *pend;
  uint32_t npend, pend_cap, pend_lost;
  struct rqp *next_free;
  struct rqp *all_next; /* every record ever allocated (never freed), for stall_walk */
  /* Under g_mu: which QP the record holds (+1 each time it is given to one), and whether
   * ibv_destroy_qp is inside the provider's destroy of it (its ibv_qp address and QPN may
   * then belong to a new QP before the record is unlinked: qp_table.c). */
  uint64_t gen;
  int dying;
};
extern struct rqp *g_free_qps;
extern struct rqp *g_all_qps;

/* One ibv_cq_ex: the provider's polling functions, the session's clock reading. */
struct rcq {
  struct ibv_cq_ex *cq;
  struct rctx *c;
  int dev;
  int have_qpn, have_len;
  int (*start_poll)(struct ibv_cq_ex *, struct ibv_poll_cq_attr *);
  int (*next_poll)(struct ibv_cq_ex *);
  void (*end_poll)(struct ibv_cq_ex *);
  uint32_t (*read_qp_num)(struct ibv_cq_ex *);
  uint32_t (*read_byte_len)(struct ibv_cq_ex *);
  enum ibv_wc_opcode (*read_opcode)(struct ibv_cq_ex *);
  uint32_t (*read_vendor_err)(struct ibv_cq_ex *); /* NULL when the provider has none */
  int64_t now;
  struct rcq *next_free;
};
extern struct rcq *g_free_cqs;

/* ------------------------------------------------------------------------------------ */
/* The owned/shared sides (sides.c)                                                     */

static inline void lock(int *l) {
  while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
    while (LD(*l)) __builtin_ia32_pause();
}
static inline void unlock(int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

static inline uintptr_t self_tp(void) { return rcclTelemetryThreadPointer_(); }

/* The owner's way into its side: 1 when the side is still its own (busy raised), 0 when it
 * has become shared (busy lowered again). */
static inline int side_enter_owned(struct side *s) {
  ST(s->busy, 1);
  __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the asymmetric half: membarrier is the other */
  if (LIKELY(!LD(s->shared))) return 1;
  __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
  return 0;
}

/* The slow way into a side (sides.c). */
int side_enter_slow(struct side *s, uintptr_t tp);

/* Enter side s: 0 when the caller owns it (no lock taken), 1 when it holds the side's lock. */
static inline int side_enter(struct side *s, uintptr_t tp) {
  if (LIKELY(LD(s->owner) == tp) && LIKELY(side_enter_owned(s))) return 0;
  return side_enter_slow(s, tp);
}
static inline void side_exit(struct side *s, int locked) {
  if (LIKELY(!locked)) __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
  else unlock(&s->lock);
}
void side_reset(struct side *s);

/* ------------------------------------------------------------------------------------ */
/* The poll window (the records' reuse: qp_table.c)                                     */

struct tnode {
  uint64_t seq; /* odd: inside a poll's lookup-to-exit window */
  int used;     /* a live thread has it (0: free for the next thread that polls) */
  struct tnode *next;
} __attribute__((aligned(64)));
extern __thread struct tnode *t_node __attribute__((tls_model("initial-exec")));
extern pthread_key_t g_tnode_key; /* its destructor gives an exiting thread's node back */
extern int g_tnode_key_ok;

void tnode_release(void *p);
/* The calling thread's node, made (or taken from an exited thread) on its first poll; NULL
 * when out of memory (that poll's completions are then not counted). */
struct tnode *tnode_slow(void);

/* Into the window: seq odd, ordered before the lookups that follow (by the reclaimer's
 * membarrier, or by a fence where there is none). Returns the value to leave with. */
static inline uint64_t window_enter(struct tnode *n) {
  uint64_t s = n->seq;
  ST(n->seq, s + 1);
  if (UNLIKELY(!LD(g_fast))) __atomic_thread_fence(__ATOMIC_SEQ_CST);
  else __atomic_signal_fence(__ATOMIC_SEQ_CST);
  return s + 2;
}
/* The same where membarrier is known to be on (w_poll_cq's short path: a side can only be
 * owned when it is). */
static inline uint64_t window_enter_fast(struct tnode *n) {
  uint64_t s = n->seq;
  ST(n->seq, s + 1);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  return s + 2;
}
static inline void window_exit(struct tnode *n, uint64_t s) { __atomic_store_n(&n->seq, s, __ATOMIC_RELEASE); }

/* ------------------------------------------------------------------------------------ */
/* The real entry points (symbols.c)                                                    */

extern void *(*real_dlsym)(void *, const char *);
extern void *(*real_dlvsym)(void *, const char *, const char *);
void find_real_dl(void);
void *verbs_handle(void);
void *real_fn(void **cache, const char *name);

/* real_NAME(): libibverbs' NAME, found on first use (NULL when libibverbs is not loaded);
 * real_NAME_p caches it (dlsym's redirect may fill it first). */
#define RTP_REAL_FNS(X)                                                                  \
  X(ibv_open_device)                                                                     \
  X(ibv_close_device)                                                                    \
  X(ibv_get_device_list)                                                                 \
  X(ibv_free_device_list)                                                                \
  X(ibv_create_qp)                                                                       \
  X(ibv_destroy_qp)                                                                      \
  X(ibv_destroy_cq)                                                                      \
  X(ibv_qp_to_qp_ex)                                                                     \
  X(ibv_modify_qp)                                                                       \
  X(ibv_query_gid)                                                                       \
  X(ibv_query_port)
#define REAL(name)                                                                       \
  extern void *real_##name##_p;                                                          \
  static inline __typeof__(&name) real_##name(void) {                                    \
    return (__typeof__(&name))real_fn(&real_##name##_p, #name);                          \
  }
RTP_REAL_FNS(REAL)
#undef REAL

/* ------------------------------------------------------------------------------------ */
/* Lookups                                                                              */

static inline struct rctx *ctx_of(struct ibv_context *ctx) {
  if (LIKELY(__atomic_load_n(&g_ctx[0].ctx, __ATOMIC_ACQUIRE) == ctx)) return &g_ctx[0];
  int n = __atomic_load_n(&g_nctx, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n; i++)
    if (__atomic_load_n(&g_ctx[i].ctx, __ATOMIC_ACQUIRE) == ctx) return &g_ctx[i];
  return NULL;
}

/* Inside a poll's window (or under g_mu): the leaf it reads cannot be freed meanwhile. */
static inline struct rqp *qp_by_num(int dev, uint32_t qpn) {
  struct qleaf *l = __atomic_load_n(&g_qpn[dev & 31][(qpn >> 8) & (QTOP - 1)], __ATOMIC_ACQUIRE);
  return l ? __atomic_load_n(&l->cell[qpn & (QLEAF - 1)], __ATOMIC_ACQUIRE) : NULL;
}

/* qp_by_num anywhere else (qp_table.c). */
struct rqp *qp_find(int dev, uint32_t qpn);

static inline struct rqp *qp_rec(struct ibv_qp *qp) {
  struct rctx *c = ctx_of(qp->context);
  if (!c) return NULL;
  struct rqp *r = qp_find(c->dev, qp->qp_num);
  return r && LD(r->qp) == qp ? r : NULL;
}

/* QP records by the ibv_qp's address: a direct-mapped cache in front of qp_rec, filled on
 * a miss; an entry is only believed when its record still holds that ibv_qp. */
#define QPC 4096
extern struct rqp *g_qpc[QPC];
static inline unsigned qpc_slot(const void *p) {
  uintptr_t a = (uintptr_t)p;
  return (unsigned)(a >> 6) & (QPC - 1);
}
static inline struct rqp *qp_cached(struct ibv_qp *qp) {
  struct rqp *r = LD(g_qpc[qpc_slot(qp)]);
  if (LIKELY(r != NULL) && LIKELY(__atomic_load_n(&r->qp, __ATOMIC_ACQUIRE) == qp)) return r;
  r = qp_rec(qp);
  if (r) ST(g_qpc[qpc_slot(qp)], r);
  return r;
}

static inline struct rcq *cq_rec(struct rctx *c, struct ibv_cq_ex *cq) {
  struct rcq **page = __atomic_load_n(&c->cqs[(cq->handle >> 12) & (RADIX - 1)], __ATOMIC_ACQUIRE);
  struct rcq *r = page ? __atomic_load_n(&page[cq->handle & (RADIX - 1)], __ATOMIC_ACQUIRE) : NULL;
  return r && LD(r->cq) == cq ? r : NULL;
}

/* ------------------------------------------------------------------------------------ */
/* Counting                                                                             */

/* The calling thread's own stripe of device dev, or NULL (then the library's calls count).
 * A stripe's owner never changes once set, so each thread keeps the stripes it owns. */
extern __thread rcclTelemetryStripe_ *t_stripe[32] __attribute__((tls_model("initial-exec")));
rcclTelemetryStripe_ *own_stripe_slow(int dev, uintptr_t tp);
static inline rcclTelemetryStripe_ *own_stripe(int dev, uintptr_t tp) {
  rcclTelemetryStripe_ *s = t_stripe[dev & 31]; /* dev: a context's, always < 32 */
  return LIKELY(s != NULL) ? s : own_stripe_slow(dev, tp);
}
static inline void wqe_size(rcclTelemetryStripe_ *s, int dev, uint64_t b) {
  if (LIKELY(s != NULL)) ADD(s->own.sizes[rcclTelemetrySizeBucket_(b)], 1);
  else (rcclTelemetryWqeSize)(dev, b);
}
static inline void tx_bytes(rcclTelemetryStripe_ *s, int dev, uint64_t b) {
  if (LIKELY(s != NULL)) ADD(s->own.tx_bytes, b);
  else (rcclTelemetryBytes)(dev, 1, b);
}

static inline uint64_t *idx_sent(RcclQpStats *slot) { return (uint64_t *)((char *)slot + g_idx_sent_off); }

/* One send WR of opcode op counted (d = 1) or taken back (d = -1: a post the provider
 * refused), on the QP's posting side. */
static inline __attribute__((always_inline)) void count_send_op(struct rqp *r, int op, uint64_t d) {
  rcclTelemetryQp_ *q = (rcclTelemetryQp_ *)(void *)r->slot;
  if (!q) return;
  if (LIKELY(op == IBV_WR_RDMA_WRITE)) {
    ADD(q->sent_write, d);
    return;
  }
  if (op == IBV_WR_RDMA_WRITE_WITH_IMM) {
    ADD(q->sent_imm, d);
    return;
  }
  ADD(*idx_sent(r->slot), d);
  switch (op) {
  case IBV_WR_SEND:
  case IBV_WR_SEND_WITH_IMM:
  case IBV_WR_SEND_WITH_INV: ADD(r->ext->send_wqe, d); break;
  case IBV_WR_RDMA_READ: ADD(r->ext->read_wqe, d); break;
  case IBV_WR_ATOMIC_CMP_AND_SWP:
  case IBV_WR_ATOMIC_FETCH_AND_ADD: ADD(r->ext->atomic_wqe, d); break;
  default: ADD(r->ext->other_wqe, d); break;
  }
}

/* The bytes of a send WR: the sum of its SGE lengths. */
static inline uint64_t wr_bytes(const struct ibv_send_wr *w) {
  if (LIKELY(w->num_sge == 1)) return w->sg_list[0].length;
  uint64_t b = 0;
  for (int i = 0; i < w->num_sge; i++) b += w->sg_list[i].length;
  return b;
}

/* ------------------------------------------------------------------------------------ */
/* The in-order send record: its posting half (its completing half is poll.c's)         */

/*
 * The send record is a ring between the two sides of a QP: the posting side writes entries
 * at tail and publishes tail (release) before the provider sees the WRs, so a completion
 * polled on another thread always finds its WR recorded; the completing side reads entries
 * at head and publishes head once done with them. A post the provider refuses (in part)
 * voids the entries of the WRs it did not take. A chain that does not fit (the provider
 * took more WRs than its send queue's reported depth) is counted in track_full and in the
 * monotonic gap_total, which every later entry snapshots, so its WRs keep their
 * place in the order: completions retire them as untracked.
 */

/* Whether the record has room for n more entries. */
static inline int record_room(const struct rqp *r, uint64_t n) {
  return r->tail + n - __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) <= r->ring_cap;
}

/* Entry t (not yet published) for one send WR of opcode op and bytes, on the posting side. */
static inline void record(struct rqp *r, uint64_t t, uint64_t wr_id, int signalled, int op, uint64_t bytes) {
  struct ent *e = &r->ring[t & (r->ring_cap - 1)];
  e->wr_id = wr_id;
  e->token = signalled ? rcclTelemetryPostTs(r->slot) : 0;
  e->gap = r->gap_total;
  e->op = (uint8_t)op;
  e->bytes = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
  ST(e->flags, (uint16_t)(signalled ? ENT_SIG : 0u));
}

/* After the provider's call, on the posting side: entries [from, to) of WRs it refused are
 * voided, and the sampling sequence their signalled WRs advanced is given back. */
static inline void record_refused(struct rqp *r, uint64_t from, uint64_t to) {
  uint64_t sig = 0;
  for (uint64_t t = from; t < to; t++) {
    struct ent *e = &r->ring[t & (r->ring_cap - 1)];
    sig += (LD(e->flags) & ENT_SIG) != 0;
    ST(e->flags, (uint16_t)(LD(e->flags) | ENT_VOID));
  }
  rcclTelemetryQp_ *q = (rcclTelemetryQp_ *)(void *)r->slot;
  if (sig && q && LD(q->sample_mask)) ST(q->post_seq, LD(q->post_seq) - sig);
}

/* WRs that found the record full and that the provider took, on the posting side. */
static inline void record_untracked(struct rqp *r, uint32_t sig, uint32_t unsig) {
  if (r->ext) ADD(r->ext->track_full, (uint64_t)sig + unsig);
  uint64_t g = r->gap_total;
  __atomic_store_n(&r->gap_total, GAP(GAP_S(g) + sig, GAP_U(g) + unsig), __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------------------------ */
/* The common completion                                                                */

#ifdef RTP_TEST_HOOKS
/* A build for the host tests only (preload/preload.mk: build/preload/
 * librccl_telemetry_preload_hooks.so; never installed): at the points named, the fake
 * provider's fakeverbs_cue may hold the calling thread on a test's cue (symbols.c). */
#define RTP_AT_COMPLETION 2 /* = FAKEVERBS_AT_COMPLETION */
void test_hook(int point);
#define TEST_HOOK(p) test_hook(p)
#else
#define TEST_HOOK(p) ((void)0)
#endif

/* The common completion, inside the QP's completing side: a successful send completion
 * that retires the oldest entry, signalled, with no untracked WRs before it; a sampled one is
 * measured to the poll's clock reading *now (read on first need). 1 when it was that and is
 * counted; 0 when it is complete_rest's. */
static inline __attribute__((always_inline)) int complete_common(struct rqp *r, int status, int opcode, int64_t *now) {
  uint64_t h = r->head;
  rcclTelemetryQp_ *q = (rcclTelemetryQp_ *)(void *)r->slot;
  struct ent *e = &r->ring[h & (r->ring_cap - 1)];
  if (UNLIKELY(status != IBV_WC_SUCCESS) || UNLIKELY(opcode & IBV_WC_RECV) || UNLIKELY(q == NULL) ||
      UNLIKELY(h == __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE)) || UNLIKELY(LD(e->flags) != ENT_SIG) ||
      UNLIKELY(e->gap != r->gap_done))
    return 0;
  int64_t tok = e->token;
  TEST_HOOK(RTP_AT_COMPLETION); /* the record read, its head not yet moved */
  __atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
  if (LIKELY(tok <= RCCL_TELEMETRY_TS_UNSAMPLED)) {
    ADD(q->wqe_rcvd, 1);
  } else {
    if (*now <= RCCL_TELEMETRY_TS_UNSAMPLED) *now = rcclTelemetryPollTs();
    rcclTelemetryQpWqeCompleteAt((RcclQpStats *)(void *)q, tok, *now);
  }
  return 1;
}

/* The rest of complete() (poll.c). vendor_err: the completion's (read only for an error). */
void complete_rest(struct rqp *r, int dev, struct ibv_cq *cq, int status, int opcode, uint32_t byte_len,
                   uint64_t wr_id, int64_t *now, uintptr_t tp, uint32_t vendor_err);

/* One completion of device dev's CQ cq, by the thread tp. now: the poll's clock reading,
 * read on first need. The common case (complete_common) is handled inline. */
static inline __attribute__((always_inline)) void complete(int dev, struct ibv_cq *cq, uint32_t qpn, int status,
                                                           int opcode, uint32_t byte_len, uint64_t wr_id, int64_t *now,
                                                           uintptr_t tp, uint32_t vendor_err) {
  struct rqp *r = qp_by_num(dev, qpn);
  if (UNLIKELY(!r)) {
    if (UNLIKELY(status != IBV_WC_SUCCESS)) {
      rcclTelemetryCqError(dev);
      rtp_cq_error(NULL, dev, status, vendor_err, -1, -1, 0, 0);
    }
    rtp_wc_unknown(dev, 1);
    return;
  }
  int locked = side_enter(&r->cs, tp);
  if (UNLIKELY(!complete_common(r, status, opcode, now)))
    complete_rest(r, dev, cq, status, opcode, byte_len, wr_id, now, tp, vendor_err);
  side_exit(&r->cs, locked);
}

/* ------------------------------------------------------------------------------------ */
/* Across the parts                                                                     */

/* ctx->ops and verbs_context wrappers, patched in by ibv_open_device (context.c). */
int w_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int w_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int w_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int w_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
struct ibv_qp *w_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr);
/* ibv_cq_ex's start_poll and next_poll, patched in by create_cq_ex (poll.c, cq_ex.c). */
int cx_start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr);
int cx_next_poll(struct ibv_cq_ex *cq);
struct ibv_cq_ex *w_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr);

/* QP records (qp_table.c), under g_mu. */
void free_qp_locked(struct rqp *r);
void reclaim_locked(void);
/* The ibv_qp_ex builders of a recorded QP (qp_ex.c), under g_mu. */
void patch_qpx(struct rqp *r, struct ibv_qp_ex *qpx);
/* A QP's identity at create and its port and peer at ibv_modify_qp (peer.c). */
void qp_identity(struct ibv_qp *qp, enum ibv_qp_type type);
void qp_modified(struct ibv_qp *qp, const struct ibv_qp_attr *attr, int mask);
/* The stall detector's walk (stall.c). */
void stall_walk(void);

#pragma GCC visibility pop
#endif
