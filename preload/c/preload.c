/*
 * preload/c/preload.c: librccl_telemetry_preload.so, the LD_PRELOAD verbs interposer.
 *
 * The data path of ibverbs (ibv_post_send, ibv_post_recv, ibv_post_srq_recv, ibv_poll_cq,
 * ibv_create_qp_ex, ibv_create_cq_ex, the ibv_wr_* builders and ibv_start_poll & co.) is
 * static inline in <infiniband/verbs.h>: it jumps through tables that live in each context
 * (ctx->ops, struct verbs_context) or in each object (struct ibv_qp_ex, struct ibv_cq_ex).
 * Symbol interposition cannot see those calls, so this file interposes the exported entry
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
 *   receives posted to SRQs, completions of QPs this file does not know.
 * Each QP has a posting and a completing side (struct side): the thread that owns a side
 * counts with plain stores and no lock; once a second thread uses it, everyone takes the
 * side's lock, held on the posting side across the provider's post call so that the order of
 * the send record is the send queue's. Receive counts use atomic adds.
 */
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
 * the clock reads cost an N=1 WQE from everything else this file does. */
static uint64_t rtp_bench_clock;
static inline uint64_t rtp_bench_tsc(void) { return rtp_bench_clock += 1000; }
#define __builtin_ia32_rdtsc rtp_bench_tsc
#endif
#include "engine.h"

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
/* Plain add, for counters written only under their QP's lock. */
#define ADD(x, v) ST(x, LD(x) + (v))
#define XADD(x, v) __atomic_fetch_add(&(x), (v), __ATOMIC_RELAXED)

/* ------------------------------------------------------------------------------------ */
/* State                                                                                */

/* 0: not decided, 1: telemetry on (tables are patched), -1: off for good. */
static int g_state;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
/* 1 in a child forked after start: inert. Its copy of g_mu may have been held by a thread
 * that does not exist in it, and its records may be half-written: no wrapper of the child
 * takes g_mu or touches a record (only the provider's call is made). */
static int g_forked;

/* The slot's idx_sent (num_wqe_sent without an opcode of the seed's), found by offset. */
static size_t g_idx_sent_off;

#define MAX_CTX 64
#define RADIX 4096 /* qp_num (24 bits) = page (12 bits) : index (12 bits) */

struct rqp;
struct rcq;

/* One opened context: its device id, the original tables, its cq_ex records by handle. */
struct rctx {
  struct ibv_context *ctx; /* NULL: free entry */
  int dev;
  struct ibv_context_ops orig;
  struct ibv_qp *(*orig_create_qp_ex)(struct ibv_context *, struct ibv_qp_init_attr_ex *);
  struct ibv_cq_ex *(*orig_create_cq_ex)(struct ibv_context *, struct ibv_cq_init_attr_ex *);
  struct rcq **cqs[RADIX];
};
static struct rctx g_ctx[MAX_CTX];
static int g_nctx; /* entries in use or used before (a high-water mark) */

/* QP records by device and qp_num: qp_num (24 bits) = top (16 bits) : leaf index (8 bits).
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
static struct qleaf *g_qpn[32][QTOP];

/* One send WR outstanding on a QP's send queue, in posting order. gap: how many signalled
 * (high half) and unsignalled (low half) WRs had gone untracked (record full) when this one
 * was recorded, each modulo 2^32. */
struct ent {
  uint64_t wr_id;
  int64_t token;  /* signalled: PostTs token (1 unsampled, > 1 a clock reading, 0 no slot) */
  uint64_t gap;
  uint32_t flags; /* ENT_SIG, ENT_VOID (atomic: a refused post voids entries it published) */
  uint32_t pad_;
};
#define GAP_S(g) ((uint32_t)((g) >> 32))
#define GAP_U(g) ((uint32_t)(g))
#define GAP(s, u) (((uint64_t)(uint32_t)(s) << 32) | (uint32_t)(u))
#define ENT_SIG 1u
#define ENT_VOID 2u

/*
 * One side of a QP: its posting side (the send record's tail, the posting counters) or its
 * completing side (the record's head, the completion counters). The first thread to use a
 * side owns it and works without any atomic read-modify-write: it raises busy, checks shared
 * and goes. A second thread takes the side's lock, sets shared, forces a memory barrier on
 * every thread of the process (membarrier, so that the owner's plain store of busy and its
 * load of shared need no fence of their own) and waits for the owner's section in flight;
 * from then on everyone takes the lock. Without membarrier every side starts shared.
 */
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
};
static struct rqp *g_free_qps;
static struct rqp *g_all_qps;

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
  int64_t now;
  struct rcq *next_free;
};
static struct rcq *g_free_cqs;

static inline void lock(int *l) {
  while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
    while (LD(*l)) __builtin_ia32_pause();
}
static inline void unlock(int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

/* 1 when this process is registered for expedited membarrier: side owners skip the lock. */
static int g_fast;

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

/* The slow way into a side: claim it when it has no owner yet, else take its lock (the
 * first time, making the side shared and waiting out the owner's section in flight). */
static __attribute__((noinline)) int side_enter_slow(struct side *s, uintptr_t tp) {
  uintptr_t none = 0;
  if (!LD(s->shared) && LD(s->owner) == 0 &&
      __atomic_compare_exchange_n(&s->owner, &none, tp, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED) &&
      side_enter_owned(s))
    return 0;
  lock(&s->lock);
  if (!LD(s->shared)) {
    ST(s->shared, 1);
    /* After this, an owner section that began before it has busy visible, and one that
     * begins after it sees shared. */
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    while (__atomic_load_n(&s->busy, __ATOMIC_ACQUIRE)) __builtin_ia32_pause();
  }
  return 1;
}

/* Enter side s: 0 when the caller owns it (no lock taken), 1 when it holds the side's lock. */
static inline int side_enter(struct side *s, uintptr_t tp) {
  if (LIKELY(LD(s->owner) == tp) && LIKELY(side_enter_owned(s))) return 0;
  return side_enter_slow(s, tp);
}
static inline void side_exit(struct side *s, int locked) {
  if (LIKELY(!locked)) __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
  else unlock(&s->lock);
}
static void side_reset(struct side *s) {
  ST(s->owner, 0);
  ST(s->busy, 0);
  ST(s->shared, !g_fast);
  ST(s->lock, 0);
}

/*
 * Record reuse. A poller reaches a QP's record through the completion's qp_num and cannot
 * know that another thread has just destroyed that QP, so a destroyed QP's record is not
 * handed to a new QP until every thread that may still hold it has left. Each polling thread
 * has a node whose seq it makes odd before it looks a completion's record up and even once it
 * has left the record's completing side (plain stores by the owner thread; a cost of a few
 * instructions a poll). ibv_destroy_qp unlinks the record and puts it in limbo; the next QP
 * create (or destroy) under g_mu, after a membarrier (which orders every thread's odd store
 * before its lookup against the unlink), notes the threads whose seq is odd and moves the
 * limbo to the free list once each of them has moved on. Meanwhile a new QP gets a new
 * record; a late poller finishes on the old one (the destroyed QP's own counters).
 * Posting-side holders are the program's own: a QP it posts to while destroying it.
 */
struct tnode {
  uint64_t seq; /* odd: inside a poll's lookup-to-exit window */
  int used;     /* a live thread has it (0: free for the next thread that polls) */
  struct tnode *next;
} __attribute__((aligned(64)));
static struct tnode *g_tnodes; /* every node ever made (never freed), newest first */
static __thread struct tnode *t_node __attribute__((tls_model("initial-exec")));
static pthread_key_t g_tnode_key; /* its destructor gives an exiting thread's node back */
static int g_tnode_key_ok;

static void tnode_release(void *p) { __atomic_store_n(&((struct tnode *)p)->used, 0, __ATOMIC_RELEASE); }

/* The calling thread's node, made (or taken from an exited thread) on its first poll; NULL
 * when out of memory (that poll's completions are then not counted). */
static __attribute__((noinline)) struct tnode *tnode_slow(void) {
  struct tnode *n;
  for (n = __atomic_load_n(&g_tnodes, __ATOMIC_ACQUIRE); n; n = n->next) {
    int z = 0;
    if (!LD(n->used) && __atomic_compare_exchange_n(&n->used, &z, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) break;
  }
  if (!n) {
    if (posix_memalign((void **)&n, 64, sizeof *n) != 0) return NULL;
    memset(n, 0, sizeof *n);
    n->used = 1;
    n->next = __atomic_load_n(&g_tnodes, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&g_tnodes, &n->next, n, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
  }
  if (g_tnode_key_ok) pthread_setspecific(g_tnode_key, n);
  t_node = n;
  return n;
}

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

struct rqp;
static struct rqp *g_limbo_new;  /* destroyed since the last look at the threads */
static struct rqp *g_limbo_wait; /* destroyed before it: free once g_snap's threads moved on */
static struct snap {
  struct tnode *n;
  uint64_t seq;
} *g_snap;
static size_t g_nsnap, g_snap_cap;
static uint64_t g_limbo_count; /* records in limbo (both lists), for the tests' account */
static struct qleaf *g_leaf_limbo_new, *g_leaf_limbo_wait; /* unlinked leaves, likewise */

static void diagf(int debug_only, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void diagf(int debug_only, const char *fmt, ...) {
  char b[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  rtp_diag(debug_only, b);
}

/* ------------------------------------------------------------------------------------ */
/* The real dlsym and dlvsym, from libc's own dynamic symbol table.                       */
/*
 * This file defines dlsym and dlvsym, so neither dlsym(RTLD_NEXT, "dlsym") nor any other
 * call through the dynamic linker can name glibc's: it would find this file's again and
 * recurse. glibc 2.34+ keeps dlsym/dlvsym in libc.so.6 (before, libdl.so.2), so the loaded
 * libc's PT_DYNAMIC is read directly: DT_GNU_HASH (or DT_HASH), DT_SYMTAB, DT_STRTAB and
 * DT_VERSYM locate the default (non-hidden) version of each name, without any call into the
 * dynamic linker but dl_iterate_phdr.
 */
static void *(*real_dlsym)(void *, const char *);
static void *(*real_dlvsym)(void *, const char *, const char *);

struct findsym {
  const char *lib;
  const char *names[2];
  void *found[2];
};

static uint32_t gnu_hash(const char *s) {
  uint32_t h = 5381;
  for (; *s; s++) h = h * 33 + (unsigned char)*s;
  return h;
}

static int find_in_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  struct findsym *f = arg;
  const char *base = strrchr(info->dlpi_name, '/');
  base = base ? base + 1 : info->dlpi_name;
  if (strncmp(base, f->lib, strlen(f->lib)) != 0) return 0;
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return 0;
  const ElfW(Sym) *symtab = NULL;
  const char *strtab = NULL;
  const uint32_t *gnuhash = NULL, *hash = NULL;
  const ElfW(Half) *versym = NULL;
  for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
    /* glibc relocates these entries of a loaded object to addresses; the vDSO does not. */
    uintptr_t p = d->d_un.d_ptr;
    if (p < info->dlpi_addr) p += info->dlpi_addr;
    switch (d->d_tag) {
    case DT_SYMTAB: symtab = (const void *)p; break;
    case DT_STRTAB: strtab = (const void *)p; break;
    case DT_GNU_HASH: gnuhash = (const void *)p; break;
    case DT_HASH: hash = (const void *)p; break;
    case DT_VERSYM: versym = (const void *)p; break;
    }
  }
  if (!symtab || !strtab || (!gnuhash && !hash)) return 0;
  for (int k = 0; k < 2; k++) {
    const char *name = f->names[k];
    if (!name || f->found[k]) continue;
    /* Every symbol with this name, keeping the default version (or the only one). */
    uint32_t idx[64];
    int n = 0;
    if (gnuhash) {
      uint32_t nbuckets = gnuhash[0], symoffset = gnuhash[1], bloom_size = gnuhash[2];
      const ElfW(Addr) *bloom = (const void *)&gnuhash[4];
      const uint32_t *buckets = (const void *)&bloom[bloom_size];
      const uint32_t *chain = &buckets[nbuckets];
      uint32_t h = gnu_hash(name);
      uint32_t i = buckets[h % nbuckets];
      if (i >= symoffset)
        for (;; i++) {
          uint32_t ch = chain[i - symoffset];
          if ((ch | 1) == (h | 1) && strcmp(strtab + symtab[i].st_name, name) == 0 && n < 64) idx[n++] = i;
          if (ch & 1) break;
        }
    } else {
      uint32_t nchain = hash[1];
      for (uint32_t i = 0; i < nchain && n < 64; i++)
        if (strcmp(strtab + symtab[i].st_name, name) == 0) idx[n++] = i;
    }
    for (int j = 0; j < n; j++) {
      const ElfW(Sym) *s = &symtab[idx[j]];
      if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC) continue;
      if (versym && (versym[idx[j]] & 0x8000)) continue; /* hidden: a compat version */
      f->found[k] = (void *)(info->dlpi_addr + s->st_value);
    }
  }
  return f->found[0] != NULL;
}

static void find_real_dl(void) {
  if (real_dlsym && real_dlvsym) return;
  struct findsym f = {"libc.so.6", {"dlsym", "dlvsym"}, {NULL, NULL}};
  dl_iterate_phdr(find_in_object, &f);
  if (!f.found[0]) {
    f.lib = "libdl.so.2";
    dl_iterate_phdr(find_in_object, &f);
  }
  if (f.found[1]) __atomic_store_n(&real_dlvsym, (void *(*)(void *, const char *, const char *))f.found[1], __ATOMIC_RELEASE);
  if (f.found[0]) __atomic_store_n(&real_dlsym, (void *(*)(void *, const char *))f.found[0], __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------------------------ */
/* The real libibverbs entry points                                                      */

/* The libibverbs that is loaded (by the program, directly or with dlopen), or NULL. */
static void *verbs_handle(void) {
  static void *h;
  void *v = __atomic_load_n(&h, __ATOMIC_ACQUIRE);
  if (!v) {
    v = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (v) __atomic_store_n(&h, v, __ATOMIC_RELEASE);
  }
  return v;
}

static void *real_fn(void **cache, const char *name) {
  void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
  if (LIKELY(f)) return f;
  find_real_dl();
  void *h = verbs_handle();
  if (h && real_dlsym) f = real_dlsym(h, name);
  if (f) __atomic_store_n(cache, f, __ATOMIC_RELEASE);
  return f;
}
#define REAL(name)                                                                       \
  static void *real_##name##_p;                                                          \
  static __typeof__(&name) real_##name(void) { return (__typeof__(&name))real_fn(&real_##name##_p, #name); }

REAL(ibv_open_device)
REAL(ibv_close_device)
REAL(ibv_get_device_list)
REAL(ibv_free_device_list)
REAL(ibv_create_qp)
REAL(ibv_destroy_qp)
REAL(ibv_destroy_cq)
REAL(ibv_qp_to_qp_ex)
REAL(ibv_modify_qp)
REAL(ibv_query_gid)
REAL(ibv_query_port)

/* ------------------------------------------------------------------------------------ */
/* Start-up                                                                             */

__attribute__((constructor)) static void rtp_ctor(void) {
  find_real_dl();
  const char *e = getenv("RCCL_TELEMETRY_ENABLE");
  if (!e || strcmp(e, "1") != 0) __atomic_store_n(&g_state, -1, __ATOMIC_RELEASE);
}

/* Whether to count: decided at the first device opened (so a process that never opens one
 * starts no engine and writes no file), then the engine's own word (0 in a forked child and
 * once the final file is claimed). */
static void stall_walk(void);

/* pthread_atfork's child handler (the forking thread, alone in the child): inert from here,
 * with a fresh g_mu should anything still reach it. */
static void in_forked_child(void) {
  ST(g_forked, 1);
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&g_mu, &fresh, sizeof fresh);
}

static int start(void) {
  int s = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
  if (s == 0) {
    pthread_mutex_lock(&g_mu);
    s = g_state;
    if (s == 0) {
      uint64_t l[8];
      s = -1;
      if (rtp_init() != 1) {
        /* the engine said why (or telemetry is simply off) */
      } else if (rtp_ext_layout(l, 8) != 8 || l[0] != sizeof(rtp_qpext) ||
                 l[1] != offsetof(rtp_qpext, send_wqe) || l[2] != offsetof(rtp_qpext, read_wqe) ||
                 l[3] != offsetof(rtp_qpext, atomic_wqe) || l[4] != offsetof(rtp_qpext, other_wqe) ||
                 l[5] != offsetof(rtp_qpext, retired_unsignalled) || l[6] != offsetof(rtp_qpext, track_full)) {
        rtp_diag(0, "verbs interposer: engine layout mismatch; nothing is counted");
      } else {
        g_idx_sent_off = (size_t)l[7];
        long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
        g_fast = q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                 syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
        if (!g_fast) rtp_diag(1, "verbs interposer: no expedited membarrier; every QP takes a lock per post and completion");
        rtp_stall_walker(stall_walk);
        g_tnode_key_ok = pthread_key_create(&g_tnode_key, tnode_release) == 0;
        if (pthread_atfork(NULL, NULL, in_forked_child) != 0)
          rtp_diag(1, "verbs interposer: no fork handler; a child forked while a QP is being created may hang in destroy");
        s = 1;
      }
      __atomic_store_n(&g_state, s, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_mu);
  }
  return s == 1 && !LD(g_forked) && rcclTelemetryOn();
}

static inline int on(void) { return LD(g_state) == 1 && !LD(g_forked) && rcclTelemetryOn(); }
/* The cold wrappers' bookkeeping (records, g_mu): only where telemetry started, not in a
 * forked child. */
static inline int book(void) { return LD(g_state) == 1 && !LD(g_forked); }
/* In a wrapper of a patched table, where g_state is 1 already. */
static inline int counting(void) { return rcclTelemetryOn(); }

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

/* qp_by_num anywhere else (cold: a cache miss, a create, a modify): in a window of its own,
 * or under g_mu when the thread has no node. Records are never freed, so the one returned
 * stays readable. */
static struct tnode *tnode_slow(void);
static __attribute__((noinline)) struct rqp *qp_find(int dev, uint32_t qpn) {
  struct tnode *tn = t_node;
  if (!tn) tn = tnode_slow();
  if (!tn) {
    pthread_mutex_lock(&g_mu);
    struct rqp *r = qp_by_num(dev, qpn);
    pthread_mutex_unlock(&g_mu);
    return r;
  }
  uint64_t out = window_enter(tn);
  struct rqp *r = qp_by_num(dev, qpn);
  window_exit(tn, out);
  return r;
}

static inline struct rqp *qp_rec(struct ibv_qp *qp) {
  struct rctx *c = ctx_of(qp->context);
  if (!c) return NULL;
  struct rqp *r = qp_find(c->dev, qp->qp_num);
  return r && LD(r->qp) == qp ? r : NULL;
}

/* QP records by the ibv_qp's address: a direct-mapped cache in front of qp_rec, filled on
 * a miss; an entry is only believed when its record still holds that ibv_qp. */
#define QPC 4096
static struct rqp *g_qpc[QPC];
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
static __thread rcclTelemetryStripe_ *t_stripe[32] __attribute__((tls_model("initial-exec")));
static __attribute__((noinline)) rcclTelemetryStripe_ *own_stripe_slow(int dev, uintptr_t tp) {
  rcclTelemetryStripe_ *s = rcclTelemetryStripe_of_(dev, tp);
  if (!s || LD(s->owner) != tp) return NULL;
  t_stripe[dev] = s;
  return s;
}
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

/* Entry t (not yet published) for one send WR, on the posting side. */
static inline void record(struct rqp *r, uint64_t t, uint64_t wr_id, int signalled) {
  struct ent *e = &r->ring[t & (r->ring_cap - 1)];
  e->wr_id = wr_id;
  e->token = signalled ? rcclTelemetryPostTs(r->slot) : 0;
  e->gap = r->gap_total;
  ST(e->flags, signalled ? ENT_SIG : 0u);
}

/* After the provider's call, on the posting side: entries [from, to) of WRs it refused are
 * voided, and the sampling sequence their signalled WRs advanced is given back. */
static inline void record_refused(struct rqp *r, uint64_t from, uint64_t to) {
  uint64_t sig = 0;
  for (uint64_t t = from; t < to; t++) {
    struct ent *e = &r->ring[t & (r->ring_cap - 1)];
    sig += (LD(e->flags) & ENT_SIG) != 0;
    ST(e->flags, LD(e->flags) | ENT_VOID);
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

/* The untracked WRs due before the oldest entry (or, with none, all published so far), on
 * the completing side; e is that entry or NULL. */
static inline struct ent *oldest(struct rqp *r, uint64_t *gap) {
  if (r->head != __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE)) {
    struct ent *e = &r->ring[r->head & (r->ring_cap - 1)];
    *gap = e->gap;
    return e;
  }
  *gap = __atomic_load_n(&r->gap_total, __ATOMIC_ACQUIRE);
  return NULL;
}

static inline int send_outstanding(struct rqp *r) {
  uint64_t g;
  return oldest(r, &g) || g != r->gap_done;
}

/* A successful send completion, on the completing side: retires the unsignalled WRs before
 * the signalled one it completes; returns that one's token (0 when none was recorded). */
static inline int64_t retire_signalled(struct rqp *r) {
  uint64_t retired = 0, h = r->head;
  int64_t tok = 0;
  for (;;) {
    uint64_t g;
    struct ent *e = oldest(r, &g);
    uint32_t done_s = GAP_S(r->gap_done);
    retired += (uint32_t)(GAP_U(g) - GAP_U(r->gap_done)); /* untracked unsignalled WRs before e */
    r->gap_done = GAP(done_s, GAP_U(g));
    if (UNLIKELY(GAP_S(g) != done_s)) { /* an untracked signalled WR is next: its completion, */
      r->gap_done = GAP(done_s + 1, GAP_U(g)); /* matched to no entry (tok 0) */
      break;
    }
    if (!e) break; /* nothing recorded: unmatched */
    uint32_t fl = LD(e->flags);
    int64_t t = e->token;
    __atomic_store_n(&r->head, ++h, __ATOMIC_RELEASE);
    if (UNLIKELY(fl & ENT_VOID)) continue;
    if (fl & ENT_SIG) {
      tok = t;
      break;
    }
    retired++;
  }
  if (retired && r->ext) ADD(r->ext->retired_unsignalled, retired);
  return tok;
}

/* An error completion of the send queue, on the completing side: errors complete one WR
 * each, signalled or not. RCCL_TELEMETRY_TS_UNSAMPLED when a WR was outstanding, else 0. */
static inline int64_t retire_error(struct rqp *r) {
  for (;;) {
    uint64_t g, d = r->gap_done;
    struct ent *e = oldest(r, &g);
    if (GAP_U(g) != GAP_U(d)) r->gap_done = GAP(GAP_S(d), GAP_U(d) + 1);
    else if (GAP_S(g) != GAP_S(d)) r->gap_done = GAP(GAP_S(d) + 1, GAP_U(d));
    else if (e) {
      uint32_t fl = LD(e->flags);
      __atomic_store_n(&r->head, r->head + 1, __ATOMIC_RELEASE);
      if (fl & ENT_VOID) continue;
    } else return 0;
    return RCCL_TELEMETRY_TS_UNSAMPLED;
  }
}

#ifdef RTP_TEST_HOOKS
/* A build for the host tests only (preload/preload.mk: build/preload/
 * librccl_telemetry_preload_hooks.so; never installed): at the points named, the fake
 * provider's fakeverbs_cue may hold the calling thread on a test's cue. */
#define RTP_AT_COMPLETION 2 /* = FAKEVERBS_AT_COMPLETION */
static void test_hook(int point) {
  static void (*cue)(int);
  if (!cue && real_dlsym && verbs_handle()) cue = (void (*)(int))real_dlsym(verbs_handle(), "fakeverbs_cue");
  if (cue) cue(point);
}
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

/* The rest of complete(): receives, errors, and the latency of a sampled send (all but the
 * unsampled successful send completion), inside the completing side. */
static __attribute__((noinline)) void complete_rest(struct rqp *r, int dev, struct ibv_cq *cq, int status, int opcode,
                                                    uint32_t byte_len, uint64_t wr_id, int64_t *now, uintptr_t tp) {
  int err = status != IBV_WC_SUCCESS;
  if (UNLIKELY(err)) rcclTelemetryCqError(dev);
  int recv;
  if (LIKELY(!err)) {
    recv = (opcode & IBV_WC_RECV) != 0;
  } else if (r->scq != r->rcq) {
    recv = cq == r->rcq;
  } else {
    /* One CQ for both queues, and an error's opcode is undefined: the queue that has WRs
     * outstanding; when both have, the send queue if its oldest WR has this wr_id. */
    int s = send_outstanding(r), rv = r->has_srq || LD(r->recv_out) != 0;
    if (s && rv) {
      uint64_t g;
      struct ent *e = oldest(r, &g);
      recv = !(e && g == r->gap_done && e->wr_id == wr_id);
    } else {
      recv = rv;
    }
  }
  int64_t tok;
  if (recv) {
    tok = 0;
    if (r->has_srq) {
      tok = RCCL_TELEMETRY_TS_UNSAMPLED;
    } else {
      uint64_t o = LD(r->recv_out);
      while (o && !__atomic_compare_exchange_n(&r->recv_out, &o, o - 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      }
      if (o) tok = RCCL_TELEMETRY_TS_UNSAMPLED;
    }
  } else {
    tok = err ? retire_error(r) : retire_signalled(r);
    if (tok > RCCL_TELEMETRY_TS_UNSAMPLED && *now <= RCCL_TELEMETRY_TS_UNSAMPLED) *now = rcclTelemetryPollTs();
  }
  rcclTelemetryQpWqeCompleteAt(r->slot, tok, *now > RCCL_TELEMETRY_TS_UNSAMPLED ? *now : 1);
  if (recv && !err) {
    rcclTelemetryStripe_ *st = own_stripe(dev, tp);
    if (LIKELY(st != NULL)) ADD(st->own.rx_bytes, byte_len);
    else (rcclTelemetryBytes)(dev, 0, byte_len);
  }
}

/* One completion of device dev's CQ cq, by the thread tp. now: the poll's clock reading,
 * read on first need. The common case (complete_common) is handled inline. */
static inline __attribute__((always_inline)) void complete(int dev, struct ibv_cq *cq, uint32_t qpn, int status,
                                                           int opcode, uint32_t byte_len, uint64_t wr_id, int64_t *now,
                                                           uintptr_t tp) {
  struct rqp *r = qp_by_num(dev, qpn);
  if (UNLIKELY(!r)) {
    if (UNLIKELY(status != IBV_WC_SUCCESS)) rcclTelemetryCqError(dev);
    rtp_wc_unknown(dev, 1);
    return;
  }
  int locked = side_enter(&r->cs, tp);
  if (UNLIKELY(!complete_common(r, status, opcode, now))) complete_rest(r, dev, cq, status, opcode, byte_len, wr_id, now, tp);
  side_exit(&r->cs, locked);
}

/* ------------------------------------------------------------------------------------ */
/* ctx->ops wrappers                                                                    */

static inline int signalled_wr(const struct rqp *r, const struct ibv_send_wr *w) {
  return r->sig_all || (w->send_flags & IBV_SEND_SIGNALED);
}

/* Any post but the common one (see w_post_send), inside the QP's posting side (entered
 * already; locked as side_enter said): a chain, a record without room, a shared side, a
 * thread without its own device stripe. Counted after the provider's call, for the WRs it
 * took. */
static __attribute__((noinline)) int post_general(struct rqp *r, struct ibv_qp *qp, struct ibv_send_wr *wr,
                                                  struct ibv_send_wr **bad, int locked, uintptr_t tp) {
  int dev = r->dev;
  rcclTelemetryStripe_ *st = own_stripe(dev, tp);
  uint64_t t0 = r->tail;
  /* The chain goes into the record before the provider sees it (see the record above). */
  uint64_t n = 0;
  for (struct ibv_send_wr *w = wr; w; w = w->next) n++;
  int fits = record_room(r, n);
  if (LIKELY(fits)) {
    uint64_t t = t0;
    for (struct ibv_send_wr *w = wr; w; w = w->next) record(r, t++, w->wr_id, signalled_wr(r, w));
    __atomic_store_n(&r->tail, t, __ATOMIC_RELEASE);
  }
  struct ibv_send_wr *badwr = NULL;
  int rc = r->c->orig.post_send(qp, wr, &badwr);
  uint64_t bytes = 0, k = 0;
  uint32_t sig = 0, unsig = 0;
  for (struct ibv_send_wr *w = wr; w && !(rc && w == badwr); w = w->next, k++) {
    uint64_t b = wr_bytes(w);
    bytes += b;
    wqe_size(st, dev, b);
    count_send_op(r, w->opcode, 1);
    if (UNLIKELY(!fits)) {
      if (signalled_wr(r, w)) sig++;
      else unsig++;
    }
  }
  if (UNLIKELY(!fits)) record_untracked(r, sig, unsig);
  else if (UNLIKELY(k < n)) record_refused(r, t0 + k, t0 + n);
  side_exit(&r->ps, locked);
  if (bytes) tx_bytes(st, dev, bytes);
  if (bad) *bad = badwr;
  return rc;
}

/* The common post refused by the provider (its one WR, the newest entry of the record):
 * what was counted for it before the call is taken back. */
static __attribute__((noinline)) void post_refused(struct rqp *r, const struct ibv_send_wr *wr) {
  rcclTelemetryStripe_ *st = t_stripe[r->dev & 31];
  uint64_t b = wr_bytes(wr), t = r->tail - 1;
  ADD(st->own.sizes[rcclTelemetrySizeBucket_(b)], (uint64_t)-1);
  ADD(st->own.tx_bytes, -b);
  count_send_op(r, wr->opcode, (uint64_t)-1);
  record_refused(r, t, t + 1);
}

/* Every post but the common one (see w_post_send): an uncounted QP, telemetry off, a side
 * this thread does not own, a chain, a full record, a thread without its device stripe. */
static __attribute__((noinline)) int post_slow(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  struct rqp *r = qp_cached(qp);
  if (UNLIKELY(!r)) { /* a QP this file does not count (created before, or beyond the slots) */
    struct rctx *c = ctx_of(qp->context);
    return c ? c->orig.post_send(qp, wr, bad) : ENOSYS;
  }
  if (UNLIKELY(!rcclTelemetryOn())) return r->c->orig.post_send(qp, wr, bad);
  uintptr_t tp = self_tp();
  return post_general(r, qp, wr, bad, side_enter(&r->ps, tp), tp);
}

/*
 * The common post: one WR on a cached QP, by the thread that owns the QP's posting side and
 * its device stripe, with room in the record. It is counted before the provider's call, so
 * that only the record and the WR live across it, and taken back if the provider refuses
 * the WR; bad goes to the provider as the program passed it. Anything else, post_slow.
 */
static int w_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  struct rqp *r = LD(g_qpc[qpc_slot(qp)]);
  if (UNLIKELY(r == NULL) || UNLIKELY(__atomic_load_n(&r->qp, __ATOMIC_ACQUIRE) != qp)) return post_slow(qp, wr, bad);
  int (*post)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **) = r->c->orig.post_send;
  if (UNLIKELY(!rcclTelemetryOn())) return post(qp, wr, bad);
  rcclTelemetryStripe_ *st = t_stripe[r->dev & 31];
  if (UNLIKELY(LD(r->ps.owner) != self_tp()) || UNLIKELY(wr == NULL) || UNLIKELY(wr->next != NULL) ||
      UNLIKELY(st == NULL))
    return post_slow(qp, wr, bad);
  if (UNLIKELY(!side_enter_owned(&r->ps))) return post_slow(qp, wr, bad);
  uint64_t t0 = r->tail;
  if (UNLIKELY(!record_room(r, 1))) {
    side_exit(&r->ps, 0);
    return post_slow(qp, wr, bad);
  }
  record(r, t0, wr->wr_id, signalled_wr(r, wr));
  __atomic_store_n(&r->tail, t0 + 1, __ATOMIC_RELEASE);
  uint64_t b = wr_bytes(wr);
  wqe_size(st, r->dev, b); /* st is not NULL here: the stores only */
  tx_bytes(st, r->dev, b);
  count_send_op(r, wr->opcode, 1);
  int rc = post(qp, wr, bad);
  if (UNLIKELY(rc != 0)) post_refused(r, wr);
  side_exit(&r->ps, 0);
  return rc;
}

static int w_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  struct rctx *c = ctx_of(qp->context);
  if (UNLIKELY(!c)) return ENOSYS;
  struct ibv_recv_wr *badwr = NULL;
  int rc = c->orig.post_recv(qp, wr, &badwr);
  struct rqp *r;
  if (LIKELY(counting()) && (r = qp_cached(qp)) != NULL) {
    uint64_t n = 0;
    for (struct ibv_recv_wr *w = wr; w && !(rc && w == badwr); w = w->next) n++;
    /* After the provider's post: a completion can overtake this count, which only means a
     * receive that completes first counts unmatched when recv_out is 0 (see complete_rest()). */
    if (n) {
      XADD(r->recv_out, n);
      if (r->slot) XADD(((rcclTelemetryQp_ *)(void *)r->slot)->recv_wqe, n);
    }
  }
  if (bad) *bad = badwr;
  return rc;
}

static int w_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  struct rctx *c = ctx_of(srq->context);
  if (UNLIKELY(!c)) return ENOSYS;
  struct ibv_recv_wr *badwr = NULL;
  int rc = c->orig.post_srq_recv(srq, wr, &badwr);
  if (LIKELY(counting())) {
    uint64_t n = 0;
    for (struct ibv_recv_wr *w = wr; w && !(rc && w == badwr); w = w->next) n++;
    if (n) rtp_srq_recv(c->dev, n);
  }
  if (bad) *bad = badwr;
  return rc;
}

/* The counting of a poll that returned got completions (any number, any kind), after the
 * provider's call. */
static __attribute__((noinline)) int poll_counted(struct rctx *c, struct ibv_cq *cq, int got, struct ibv_wc *wc) {
  int dev = c->dev;
  uintptr_t tp = self_tp();
  rcclTelemetryStripe_ *st = own_stripe(dev, tp);
  if (LIKELY(st != NULL)) ADD(st->own.cq_polls, 1);
  else (rcclTelemetryAddCqPolls)(dev, 1);
  if (got <= 0) return got;
  struct tnode *tn = t_node;
  if (!tn && !(tn = tnode_slow())) return got;
  uint64_t out = window_enter(tn);
  int64_t now = 0;
  for (int i = 0; i < got; i++)
    complete(dev, cq, wc[i].qp_num, wc[i].status, wc[i].opcode, wc[i].byte_len, wc[i].wr_id, &now, tp);
  window_exit(tn, out);
  return got;
}

/*
 * The common poll: one completion, on a QP whose completing side and device stripe the
 * calling thread owns, counted inline (complete_common, else complete_rest). Any other poll,
 * poll_counted.
 */
static int w_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
  struct rctx *c = ctx_of(cq->context);
  if (UNLIKELY(!c)) return -1;
  int got = c->orig.poll_cq(cq, n, wc);
  if (UNLIKELY(!counting())) return got;
  int dev = c->dev;
  rcclTelemetryStripe_ *st = t_stripe[dev & 31];
  struct tnode *tn = t_node;
  if (UNLIKELY(got != 1) || UNLIKELY(st == NULL) || UNLIKELY(tn == NULL)) return poll_counted(c, cq, got, wc);
  uintptr_t tp = self_tp();
  uint64_t out = window_enter_fast(tn);
  struct rqp *r = qp_by_num(dev, wc->qp_num);
  if (UNLIKELY(r == NULL) || UNLIKELY(LD(r->cs.owner) != tp) || UNLIKELY(!side_enter_owned(&r->cs))) {
    window_exit(tn, out);
    return poll_counted(c, cq, got, wc);
  }
  ADD(st->own.cq_polls, 1);
  int64_t now = 0, now_rest = 0; /* two, so that only the rare path's lives in memory */
  if (UNLIKELY(!complete_common(r, wc->status, wc->opcode, &now)))
    complete_rest(r, dev, cq, wc->status, wc->opcode, wc->byte_len, wc->wr_id, &now_rest, tp);
  side_exit(&r->cs, 0);
  window_exit(tn, out);
  return 1;
}

/* ------------------------------------------------------------------------------------ */
/* QP records                                                                           */

/* Under g_mu: the leaf of (dev, qpn), made when absent; NULL when out of memory. */
static struct qleaf *qpn_leaf(int dev, uint32_t qpn) {
  struct qleaf **pp = &g_qpn[dev & 31][(qpn >> 8) & (QTOP - 1)];
  struct qleaf *l = *pp;
  if (!l) {
    l = calloc(1, sizeof *l);
    if (!l) return NULL;
    __atomic_store_n(pp, l, __ATOMIC_RELEASE);
  }
  return l;
}

static void free_qp_locked(struct rqp *r) {
  struct qleaf **pp = &g_qpn[r->dev & 31][(r->qpn >> 8) & (QTOP - 1)];
  struct qleaf *l = *pp;
  if (l && l->cell[r->qpn & (QLEAF - 1)] == r) {
    __atomic_store_n(&l->cell[r->qpn & (QLEAF - 1)], NULL, __ATOMIC_RELEASE);
    if (--l->live == 0) { /* its last QP: unlinked, freed once no poller can be reading it */
      __atomic_store_n(pp, NULL, __ATOMIC_RELEASE);
      l->next_free = g_leaf_limbo_new;
      g_leaf_limbo_new = l;
    }
  }
  ST(r->qp, NULL);
  /* A destroyed QP has nothing outstanding: a stall of it ends at the detector's next tick. */
  if (r->ext) {
    ST(r->ext->stall_out, 0);
    ST(r->ext->stall_oldest, 0);
  }
  r->next_free = g_limbo_new;
  g_limbo_new = r;
  g_limbo_count++;
}

/* Under g_mu: limbo records whose pollers have all moved on go to the free list (see
 * "Record reuse" above). Never waits. */
static void reclaim_locked(void) {
  for (int round = 0; round < 2; round++) {
    if (g_limbo_wait) {
      for (size_t i = 0; i < g_nsnap; i++)
        if (__atomic_load_n(&g_snap[i].n->seq, __ATOMIC_ACQUIRE) == g_snap[i].seq) return;
      while (g_limbo_wait) {
        struct rqp *r = g_limbo_wait;
        g_limbo_wait = r->next_free;
        r->next_free = g_free_qps;
        g_free_qps = r;
        g_limbo_count--;
      }
      while (g_leaf_limbo_wait) {
        struct qleaf *l = g_leaf_limbo_wait;
        g_leaf_limbo_wait = l->next_free;
        free(l);
      }
    }
    if (!g_limbo_new && !g_leaf_limbo_new) return;
    /* Every thread's odd seq store before this is visible below, and a lookup after it
     * cannot find a record unlinked before it. */
    if (LD(g_fast)) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    else __atomic_thread_fence(__ATOMIC_SEQ_CST);
    size_t n = 0;
    for (struct tnode *t = __atomic_load_n(&g_tnodes, __ATOMIC_ACQUIRE); t; t = t->next) {
      uint64_t q = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
      if (!(q & 1)) continue;
      if (n == g_snap_cap) {
        size_t c = g_snap_cap ? 2 * g_snap_cap : 16;
        struct snap *p = realloc(g_snap, c * sizeof *p);
        if (!p) return; /* out of memory: the limbo waits for a later call */
        g_snap = p;
        g_snap_cap = c;
      }
      g_snap[n].n = t;
      g_snap[n++].seq = q;
    }
    g_nsnap = n;
    g_limbo_wait = g_limbo_new;
    g_limbo_new = NULL;
    g_leaf_limbo_wait = g_leaf_limbo_new;
    g_leaf_limbo_new = NULL;
  }
}

static void patch_qpx(struct rqp *r, struct ibv_qp_ex *qpx);

/*
 * The stall detector's walk (docs/operators.md, "Stalled queue pairs"), called by the engine's tick on its writer
 * thread, never on the data path: for every live QP, the send WRs outstanding in its record
 * (entries between head and tail that are not void, then the untracked WRs not yet accounted
 * for) and whether a signalled one is among them (else no completion will come), and the
 * PostTs token of the oldest when it is a recorded signalled WR, published into its QpExt.
 * Under g_mu, so no record is recycled meanwhile, taken only if free: a tick never waits for
 * a QP being created or destroyed (a signal's file write may come from a thread interrupted
 * there); it keeps the previous tick's values instead. The record itself is read with
 * relaxed and acquire loads while both sides keep working, so a count is a reading at the
 * tick, not a snapshot. At most WALK_SCAN entries a QP are looked at; beyond them every entry counts as
 * not void and as expecting a completion.
 */
#define WALK_SCAN 4096u
#define STALL_EXPECT (1ull << 63)
static void stall_walk(void) {
  if (pthread_mutex_trylock(&g_mu) != 0) return;
  for (struct rqp *r = g_all_qps; r; r = r->all_next) {
    if (!LD(r->qp) || !r->ext || !r->ring) continue;
    uint64_t h = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
    uint64_t gd = LD(r->gap_done);
    uint64_t t = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
    uint64_t gt = __atomic_load_n(&r->gap_total, __ATOMIC_ACQUIRE);
    uint64_t n = t - h;
    if (n > r->ring_cap) n = 0; /* head moved past the tail read: nothing left of those */
    uint64_t scan = n < WALK_SCAN ? n : WALK_SCAN, out = n - scan;
    int expect = n > scan, first = 1;
    int64_t oldest = 0;
    for (uint64_t k = 0; k < scan; k++) {
      struct ent *e = &r->ring[(h + k) & (r->ring_cap - 1)];
      uint32_t fl = LD(e->flags);
      if (fl & ENT_VOID) continue;
      out++;
      if (fl & ENT_SIG) expect = 1;
      if (first) {
        first = 0;
        if ((fl & ENT_SIG) && LD(e->gap) == gd) oldest = LD(e->token);
      }
    }
    uint32_t us = GAP_U(gt) - GAP_U(gd), ss = GAP_S(gt) - GAP_S(gd);
    out += (uint64_t)us + ss;
    if (ss) expect = 1;
    if (__atomic_load_n(&r->head, __ATOMIC_ACQUIRE) != h) oldest = 0; /* retired meanwhile */
    ST(r->ext->stall_out, (out & ~STALL_EXPECT) | (expect && out ? STALL_EXPECT : 0));
    ST(r->ext->stall_oldest, (uint64_t)(oldest > RCCL_TELEMETRY_TS_UNSAMPLED ? oldest : 0));
  }
  pthread_mutex_unlock(&g_mu);
}

/* A QP just created on context c: its record (slot, in-order record), before the program
 * sees the QP. */
static void track_qp(struct rctx *c, struct ibv_qp *qp, struct ibv_cq *scq, struct ibv_cq *rcq, int has_srq,
                     int sig_all, uint32_t max_send_wr, int ex) {
  if (!qp || c->dev < 0) return;
  pthread_mutex_lock(&g_mu);
  struct qleaf *leaf = qpn_leaf(c->dev, qp->qp_num);
  struct rqp **cell = leaf ? &leaf->cell[qp->qp_num & (QLEAF - 1)] : NULL;
  if (!cell || (*cell && (*cell)->qp == qp)) { /* no memory, or seen already (nested create) */
    pthread_mutex_unlock(&g_mu);
    return;
  }
  if (*cell) { /* a destroyed QP this file did not see go (its leaf may go with it) */
    free_qp_locked(*cell);
    leaf = qpn_leaf(c->dev, qp->qp_num);
    cell = leaf ? &leaf->cell[qp->qp_num & (QLEAF - 1)] : NULL;
    if (!cell) {
      pthread_mutex_unlock(&g_mu);
      return;
    }
  }
  uint32_t cap = 64;
  while (cap < max_send_wr && cap < (1u << 16)) cap <<= 1;
  reclaim_locked();
  struct rqp *r = g_free_qps;
  if (r) {
    g_free_qps = r->next_free;
  } else {
    r = calloc(1, sizeof *r);
    if (!r) {
      pthread_mutex_unlock(&g_mu);
      diagf(0, "verbs interposer: out of memory; QP %u is not counted", qp->qp_num);
      return;
    }
    r->all_next = g_all_qps;
    g_all_qps = r;
  }
  if (r->ring_cap < cap) {
    free(r->ring);
    r->ring = calloc(cap, sizeof *r->ring);
    r->ring_cap = r->ring ? cap : 0;
  }
  if (!r->ring) {
    r->next_free = g_free_qps;
    g_free_qps = r;
    pthread_mutex_unlock(&g_mu);
    diagf(0, "verbs interposer: out of memory; QP %u is not counted", qp->qp_num);
    return;
  }
  const rtp_qpext *ext = NULL;
  r->slot = rtp_qp_slot(c->dev, &ext);
  r->ext = (rtp_qpext *)ext;
  r->c = c;
  r->qpn = qp->qp_num;
  r->dev = c->dev;
  r->scq = scq;
  r->rcq = rcq;
  r->has_srq = has_srq;
  r->sig_all = sig_all;
  r->recv_out = 0;
  side_reset(&r->ps);
  side_reset(&r->cs);
  r->head = r->tail = 0;
  r->gap_total = r->gap_done = 0;
  r->qpx = NULL;
  r->npend = r->pend_lost = 0;
  __atomic_store_n(&r->qp, qp, __ATOMIC_RELEASE);
  leaf->live++;
  __atomic_store_n(cell, r, __ATOMIC_RELEASE);
  if (ex) {
    struct ibv_qp_ex *(*to_ex)(struct ibv_qp *) = real_ibv_qp_to_qp_ex();
    struct ibv_qp_ex *qpx = to_ex ? to_ex(qp) : NULL;
    if (qpx) patch_qpx(r, qpx);
  }
  pthread_mutex_unlock(&g_mu);
}

/* ------------------------------------------------------------------------------------ */
/* QP identity and peer (cold path: create and ibv_modify_qp)                           */
/*
 * A QP's type and number are told to the engine at create; its port at the INIT transition
 * (IBV_QP_PORT); its peer at the transition to RTR, from what the program passed to a
 * successful ibv_modify_qp: dest_qp_num and ah_attr (the remote GID when is_global, the
 * remote LID), with the local GID read back from the GID table (sgid_index on the port) and
 * the port's LID. Nothing the program passes or gets back is touched, errno included; a
 * modify that failed records nothing. UD QPs have no single peer (each send names its own
 * address handle): they keep "peer": null.
 */

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
static void qp_identity(struct ibv_qp *qp, enum ibv_qp_type type) {
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

/* After a successful ibv_modify_qp(qp, attr, mask), telemetry on. */
static void qp_modified(struct ibv_qp *qp, const struct ibv_qp_attr *attr, int mask) {
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
  errno = saved;
}

/* ------------------------------------------------------------------------------------ */
/* ibv_qp_ex builders (ibv_wr_*): a session from wr_start to wr_complete or wr_abort       */
/*
 * The provider serialises a QP's sessions (its send-queue lock is held from wr_start to
 * wr_complete / wr_abort, or the program promised one thread), so the session's pending
 * list needs no lock of ours; wr_complete takes the QP's lock around the provider's call
 * and commits the pending WRs only when it succeeded.
 */
static inline struct rqp *qpx_rec(struct ibv_qp_ex *qpx) {
  struct rctx *c = ctx_of(qpx->qp_base.context);
  struct rqp *r = c ? qp_find(c->dev, qpx->qp_base.qp_num) : NULL;
  return r && r->qpx == qpx ? r : NULL;
}

/* The builders are only patched on QPs with a record, and a record outlives its QP's use. */
#define QPX_REC(qpx) struct rqp *r = qpx_rec(qpx)

static void pend_new(struct rqp *r, int op, unsigned flags) {
  if (r->npend == r->pend_cap) {
    uint32_t n = r->pend_cap ? 2 * r->pend_cap : 64;
    struct pend *p = realloc(r->pend, n * sizeof *p);
    if (!p) {
      r->pend_lost++;
      return;
    }
    r->pend = p;
    r->pend_cap = n;
  }
  struct pend *p = &r->pend[r->npend++];
  p->op = op;
  p->bytes = 0;
  p->wr_id = r->qpx ? r->qpx->wr_id : 0;
  p->signalled = r->sig_all || (flags & IBV_SEND_SIGNALED);
}
static inline void pend_bytes(struct rqp *r, uint64_t b) {
  if (r->npend) r->pend[r->npend - 1].bytes += b;
}

static void qx_wr_start(struct ibv_qp_ex *qpx) {
  QPX_REC(qpx);
  r->orig_qpx.wr_start(qpx);
  r->npend = 0;
  r->pend_lost = 0;
}
static int qx_wr_complete(struct ibv_qp_ex *qpx) {
  QPX_REC(qpx);
  if (!counting()) {
    r->npend = 0;
    return r->orig_qpx.wr_complete(qpx);
  }
  uintptr_t tp = self_tp();
  int locked = side_enter(&r->ps, tp);
  rcclTelemetryStripe_ *st = own_stripe(r->dev, tp);
  /* The session's WRs go into the record before the provider posts them, as in post_send. */
  uint64_t n = r->npend, t0 = r->tail;
  int fits = record_room(r, n);
  if (LIKELY(fits)) {
    for (uint32_t i = 0; i < r->npend; i++) record(r, t0 + i, r->pend[i].wr_id, r->pend[i].signalled);
    __atomic_store_n(&r->tail, t0 + n, __ATOMIC_RELEASE);
  }
  int rc = r->orig_qpx.wr_complete(qpx);
  uint64_t bytes = 0;
  uint32_t sig = 0, unsig = 0;
  if (rc == 0) {
    for (uint32_t i = 0; i < r->npend; i++) {
      struct pend *p = &r->pend[i];
      bytes += p->bytes;
      wqe_size(st, r->dev, p->bytes);
      count_send_op(r, p->op, 1);
      if (p->signalled) sig++;
      else unsig++;
    }
    if (UNLIKELY(!fits)) record_untracked(r, sig, unsig);
  } else if (fits) {
    record_refused(r, t0, t0 + n); /* wr_complete failed: none of the session's WRs is posted */
  }
  uint32_t lost = r->pend_lost;
  r->npend = 0;
  r->pend_lost = 0;
  side_exit(&r->ps, locked);
  if (bytes) tx_bytes(st, r->dev, bytes);
  if (lost) diagf(0, "verbs interposer: out of memory; %u WRs of a wr_complete of QP %u not counted", lost, r->qpn);
  return rc;
}
static void qx_wr_abort(struct ibv_qp_ex *qpx) {
  QPX_REC(qpx);
  r->npend = 0;
  r->orig_qpx.wr_abort(qpx);
}

#define BUILDER(name, op, params, args)                                                  \
  static void qx_##name params {                                                         \
    QPX_REC(qpx);                                                                        \
    pend_new(r, op, qpx->wr_flags);                                                      \
    r->orig_qpx.name args;                                                               \
  }
BUILDER(wr_atomic_cmp_swp, IBV_WR_ATOMIC_CMP_AND_SWP,
        (struct ibv_qp_ex * qpx, uint32_t rkey, uint64_t ra, uint64_t cmp, uint64_t swp), (qpx, rkey, ra, cmp, swp))
BUILDER(wr_atomic_fetch_add, IBV_WR_ATOMIC_FETCH_AND_ADD, (struct ibv_qp_ex * qpx, uint32_t rkey, uint64_t ra, uint64_t add),
        (qpx, rkey, ra, add))
BUILDER(wr_bind_mw, IBV_WR_BIND_MW,
        (struct ibv_qp_ex * qpx, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *bi), (qpx, mw, rkey, bi))
BUILDER(wr_local_inv, IBV_WR_LOCAL_INV, (struct ibv_qp_ex * qpx, uint32_t rkey), (qpx, rkey))
BUILDER(wr_rdma_read, IBV_WR_RDMA_READ, (struct ibv_qp_ex * qpx, uint32_t rkey, uint64_t ra), (qpx, rkey, ra))
BUILDER(wr_rdma_write, IBV_WR_RDMA_WRITE, (struct ibv_qp_ex * qpx, uint32_t rkey, uint64_t ra), (qpx, rkey, ra))
BUILDER(wr_rdma_write_imm, IBV_WR_RDMA_WRITE_WITH_IMM, (struct ibv_qp_ex * qpx, uint32_t rkey, uint64_t ra, __be32 imm),
        (qpx, rkey, ra, imm))
BUILDER(wr_send, IBV_WR_SEND, (struct ibv_qp_ex * qpx), (qpx))
BUILDER(wr_send_imm, IBV_WR_SEND_WITH_IMM, (struct ibv_qp_ex * qpx, __be32 imm), (qpx, imm))
BUILDER(wr_send_inv, IBV_WR_SEND_WITH_INV, (struct ibv_qp_ex * qpx, uint32_t rkey), (qpx, rkey))
BUILDER(wr_send_tso, IBV_WR_TSO, (struct ibv_qp_ex * qpx, void *hdr, uint16_t hsz, uint16_t mss), (qpx, hdr, hsz, mss))
BUILDER(wr_atomic_write, IBV_WR_ATOMIC_WRITE, (struct ibv_qp_ex * qpx, uint32_t rkey, uint64_t ra, const void *d),
        (qpx, rkey, ra, d))

static void qx_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t len) {
  QPX_REC(qpx);
  pend_bytes(r, len);
  r->orig_qpx.wr_set_sge(qpx, lkey, addr, len);
}
static void qx_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_sge *sg) {
  QPX_REC(qpx);
  uint64_t b = 0;
  for (size_t i = 0; i < n; i++) b += sg[i].length;
  pend_bytes(r, b);
  r->orig_qpx.wr_set_sge_list(qpx, n, sg);
}
static void qx_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t len) {
  QPX_REC(qpx);
  pend_bytes(r, len);
  r->orig_qpx.wr_set_inline_data(qpx, addr, len);
}
static void qx_wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_data_buf *bl) {
  QPX_REC(qpx);
  uint64_t b = 0;
  for (size_t i = 0; i < n; i++) b += bl[i].length;
  pend_bytes(r, b);
  r->orig_qpx.wr_set_inline_data_list(qpx, n, bl);
}

static void patch_qpx(struct rqp *r, struct ibv_qp_ex *qpx) {
  if (r->qpx == qpx) return;
  r->orig_qpx = *qpx;
  /* Each entry is replaced only when the provider has one (a NULL builder stays NULL). */
#define P(name)                                                                          \
  if (qpx->name) qpx->name = qx_##name
  P(wr_atomic_cmp_swp);
  P(wr_atomic_fetch_add);
  P(wr_bind_mw);
  P(wr_local_inv);
  P(wr_rdma_read);
  P(wr_rdma_write);
  P(wr_rdma_write_imm);
  P(wr_send);
  P(wr_send_imm);
  P(wr_send_inv);
  P(wr_send_tso);
  P(wr_atomic_write);
  P(wr_set_sge);
  P(wr_set_sge_list);
  P(wr_set_inline_data);
  P(wr_set_inline_data_list);
  /* A session is bracketed by all three or by none. */
  if (qpx->wr_start && qpx->wr_complete && qpx->wr_abort) {
    P(wr_start);
    P(wr_complete);
    P(wr_abort);
  }
#undef P
  __atomic_store_n(&r->qpx, qpx, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------------------------ */
/* ibv_cq_ex polling                                                                    */

static inline void cqx_one(struct rcq *q, struct ibv_cq_ex *cq) {
  uint32_t qpn = q->read_qp_num(cq);
  int op = q->read_opcode ? (int)q->read_opcode(cq) : 0;
  uint32_t len = (cq->status == IBV_WC_SUCCESS && q->have_len && (op & IBV_WC_RECV)) ? q->read_byte_len(cq) : 0;
  struct tnode *tn = t_node;
  if (UNLIKELY(!tn) && !(tn = tnode_slow())) return;
  uint64_t out = window_enter(tn);
  complete(q->dev, ibv_cq_ex_to_cq(cq), qpn, cq->status, op, len, cq->wr_id, &q->now, self_tp());
  window_exit(tn, out);
}

static int cx_start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr) {
  struct rctx *c = ctx_of(cq->context);
  struct rcq *q = c ? cq_rec(c, cq) : NULL;
  if (UNLIKELY(!q)) return ENOSYS; /* cannot happen: only recorded CQs are patched */
  int rc = q->start_poll(cq, attr);
  if (LIKELY(counting())) {
    rcclTelemetryStripe_ *st = own_stripe(q->dev, self_tp());
    if (LIKELY(st != NULL)) ADD(st->own.cq_polls, 1);
    else (rcclTelemetryAddCqPolls)(q->dev, 1);
    q->now = 0;
    if (rc == 0) cqx_one(q, cq);
  }
  return rc;
}
static int cx_next_poll(struct ibv_cq_ex *cq) {
  struct rctx *c = ctx_of(cq->context);
  struct rcq *q = c ? cq_rec(c, cq) : NULL;
  if (UNLIKELY(!q)) return ENOSYS;
  int rc = q->next_poll(cq);
  if (rc == 0 && LIKELY(counting())) cqx_one(q, cq);
  return rc;
}

static struct ibv_cq_ex *w_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr) {
  struct rctx *c = ctx_of(ctx);
  if (!c) return NULL;
  if (!on() || !attr) return c->orig_create_cq_ex(ctx, attr);
  /* Attribution needs the QP number (and receive bytes the length) of each completion: ask
   * for them on a copy of the program's attributes; when the provider refuses, retry with
   * the program's own. The program reads what it asked for, either way. */
  const uint64_t want = IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_BYTE_LEN;
  struct ibv_cq_ex *cq = NULL;
  uint64_t flags = attr->wc_flags;
  if ((attr->wc_flags & want) != want) {
    struct ibv_cq_init_attr_ex a = *attr;
    a.wc_flags |= want;
    cq = c->orig_create_cq_ex(ctx, &a);
    if (cq) {
      flags = a.wc_flags;
    } else {
      diagf(1, "verbs interposer: the provider refused IBV_WC_EX_WITH_QP_NUM|BYTE_LEN (errno %d); retrying with the program's flags",
            errno);
    }
  }
  if (!cq) cq = c->orig_create_cq_ex(ctx, attr);
  if (!cq) return NULL;
  if (!(flags & IBV_WC_EX_WITH_QP_NUM) || !cq->read_qp_num || !cq->start_poll || !cq->next_poll) {
    diagf(0, "verbs interposer: an ibv_cq_ex without qp_num: its completions are not counted");
    return cq;
  }
  pthread_mutex_lock(&g_mu);
  struct rcq **page = c->cqs[(cq->handle >> 12) & (RADIX - 1)];
  if (!page) {
    page = calloc(RADIX, sizeof *page);
    if (page) __atomic_store_n(&c->cqs[(cq->handle >> 12) & (RADIX - 1)], page, __ATOMIC_RELEASE);
  }
  struct rcq *q = g_free_cqs;
  if (q) g_free_cqs = q->next_free;
  else q = calloc(1, sizeof *q);
  if (!page || !q) {
    if (q) {
      q->next_free = g_free_cqs;
      g_free_cqs = q;
    }
    pthread_mutex_unlock(&g_mu);
    diagf(0, "verbs interposer: out of memory; an ibv_cq_ex is not counted");
    return cq;
  }
  struct rcq **cell = &page[cq->handle & (RADIX - 1)];
  if (*cell) {
    ST((*cell)->cq, NULL);
    (*cell)->next_free = g_free_cqs;
    g_free_cqs = *cell;
  }
  q->c = c;
  q->dev = c->dev;
  q->have_qpn = 1;
  q->have_len = (flags & IBV_WC_EX_WITH_BYTE_LEN) && cq->read_byte_len;
  q->start_poll = cq->start_poll;
  q->next_poll = cq->next_poll;
  q->end_poll = cq->end_poll;
  q->read_qp_num = cq->read_qp_num;
  q->read_byte_len = cq->read_byte_len;
  q->read_opcode = cq->read_opcode;
  q->cq = cq;
  __atomic_store_n(cell, q, __ATOMIC_RELEASE);
  cq->start_poll = cx_start_poll;
  cq->next_poll = cx_next_poll;
  pthread_mutex_unlock(&g_mu);
  return cq;
}

static struct ibv_qp *w_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr) {
  struct rctx *c = ctx_of(ctx);
  if (!c) return NULL;
  struct ibv_qp *qp = c->orig_create_qp_ex(ctx, attr);
  if (qp && attr && on()) {
    track_qp(c, qp, attr->send_cq, attr->recv_cq, attr->srq != NULL, attr->sq_sig_all, attr->cap.max_send_wr,
             (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0);
    qp_identity(qp, attr->qp_type);
  }
  return qp;
}

/* ------------------------------------------------------------------------------------ */
/* Exported entry points                                                                */

/* The device's position in ibv_get_device_list. */
static int device_index(struct ibv_device *dev) {
  struct ibv_device **(*get)(int *) = real_ibv_get_device_list();
  void (*put)(struct ibv_device **) = real_ibv_free_device_list();
  if (!get || !put) return -1;
  int n = 0, idx = -1;
  struct ibv_device **l = get(&n);
  if (!l) return -1;
  for (int i = 0; i < n && idx < 0; i++)
    if (l[i] == dev) idx = i;
  for (int i = 0; i < n && idx < 0; i++)
    if (strcmp(l[i]->name, dev->name) == 0) idx = i;
  put(l);
  return idx;
}

EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device) {
  struct ibv_context *(*f)(struct ibv_device *) = real_ibv_open_device();
  if (!f) {
    errno = ENOSYS;
    return NULL;
  }
  struct ibv_context *ctx = f(device);
  if (!ctx || !start()) return ctx;
  int idx = device_index(device);
  int dev = idx >= 0 ? rtp_register_device(idx, device->name) : -1;
  if (dev < 0) {
    diagf(0, "verbs interposer: device %s (index %d) not counted", device->name, idx);
    return ctx;
  }
  pthread_mutex_lock(&g_mu);
  struct rctx *c = NULL;
  for (int i = 0; i < g_nctx && !c; i++)
    if (!g_ctx[i].ctx) c = &g_ctx[i];
  if (!c && g_nctx < MAX_CTX) c = &g_ctx[g_nctx];
  if (!c) {
    pthread_mutex_unlock(&g_mu);
    diagf(0, "verbs interposer: more than %d contexts open; %s not counted", MAX_CTX, device->name);
    return ctx;
  }
  c->dev = dev;
  c->orig = ctx->ops;
  c->orig_create_qp_ex = NULL;
  c->orig_create_cq_ex = NULL;
  if (ctx->ops.post_send) ctx->ops.post_send = w_post_send;
  if (ctx->ops.post_recv) ctx->ops.post_recv = w_post_recv;
  if (ctx->ops.post_srq_recv) ctx->ops.post_srq_recv = w_post_srq_recv;
  if (ctx->ops.poll_cq) ctx->ops.poll_cq = w_poll_cq;
  struct verbs_context *v = verbs_get_ctx_op(ctx, create_qp_ex);
  if (v) {
    c->orig_create_qp_ex = v->create_qp_ex;
    v->create_qp_ex = w_create_qp_ex;
  }
  v = verbs_get_ctx_op(ctx, create_cq_ex);
  if (v) {
    c->orig_create_cq_ex = v->create_cq_ex;
    v->create_cq_ex = w_create_cq_ex;
  }
  __atomic_store_n(&c->ctx, ctx, __ATOMIC_RELEASE);
  if (c == &g_ctx[g_nctx]) __atomic_store_n(&g_nctx, g_nctx + 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g_mu);
  diagf(1, "verbs interposer: %s opened as device %d", device->name, dev);
  return ctx;
}

EXPORT int ibv_close_device(struct ibv_context *ctx) {
  int (*f)(struct ibv_context *) = real_ibv_close_device();
  if (!f) return ENOSYS;
  struct rctx *c = ctx && book() ? ctx_of(ctx) : NULL;
  if (!c) return f(ctx);
  /* g_mu is held across the provider's close: a device opened meanwhile by another thread
   * can get this context's address as soon as the provider frees it, and must not find this
   * entry still holding it (its QPs would be counted on this device, then freed with it);
   * its open waits here until the entry is free. */
  pthread_mutex_lock(&g_mu);
  int rc = f(ctx);
  if (rc != 0) {
    pthread_mutex_unlock(&g_mu);
    return rc;
  }
  {
    /* QPs the program did not destroy go with their context. */
    for (uint32_t p = 0; p < QTOP; p++) {
      struct qleaf *l = g_qpn[c->dev & 31][p]; /* an unlinked leaf stays readable until reclaimed */
      for (int i = 0; l && i < QLEAF; i++)
        if (l->cell[i] && l->cell[i]->c == c) free_qp_locked(l->cell[i]);
    }
    reclaim_locked();
    for (int p = 0; p < RADIX; p++) {
      struct rcq **page = c->cqs[p];
      for (int i = 0; page && i < RADIX; i++)
        if (page[i]) {
          ST(page[i]->cq, NULL);
          page[i]->next_free = g_free_cqs;
          g_free_cqs = page[i];
          __atomic_store_n(&page[i], NULL, __ATOMIC_RELEASE);
        }
    }
    __atomic_store_n(&c->ctx, NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_mu);
  }
  return rc;
}

EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr) {
  struct ibv_qp *(*f)(struct ibv_pd *, struct ibv_qp_init_attr *) = real_ibv_create_qp();
  if (!f) {
    errno = ENOSYS;
    return NULL;
  }
  struct ibv_qp *qp = f(pd, attr);
  if (qp && attr && on()) {
    struct rctx *c = ctx_of(pd->context);
    if (c) {
      track_qp(c, qp, attr->send_cq, attr->recv_cq, attr->srq != NULL, attr->sq_sig_all, attr->cap.max_send_wr, 0);
      qp_identity(qp, attr->qp_type);
    }
  }
  return qp;
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

EXPORT int ibv_destroy_qp(struct ibv_qp *qp) {
  int (*f)(struct ibv_qp *) = real_ibv_destroy_qp();
  if (!f) return ENOSYS;
  struct rqp *r = qp && book() ? qp_rec(qp) : NULL;
  int rc = f(qp);
  if (r && rc == 0) {
    pthread_mutex_lock(&g_mu);
    if (r->qp == qp) free_qp_locked(r);
    reclaim_locked();
    pthread_mutex_unlock(&g_mu);
  }
  return rc;
}

EXPORT int ibv_destroy_cq(struct ibv_cq *cq) {
  int (*f)(struct ibv_cq *) = real_ibv_destroy_cq();
  if (!f) return ENOSYS;
  struct rctx *c = cq && book() ? ctx_of(cq->context) : NULL;
  struct rcq *q = c ? cq_rec(c, (struct ibv_cq_ex *)cq) : NULL;
  uint32_t handle = cq ? cq->handle : 0;
  int rc = f(cq);
  if (q && rc == 0) {
    pthread_mutex_lock(&g_mu);
    struct rcq **page = c->cqs[(handle >> 12) & (RADIX - 1)];
    struct rcq **cell = page ? &page[handle & (RADIX - 1)] : NULL;
    if (cell && *cell == q) __atomic_store_n(cell, NULL, __ATOMIC_RELEASE);
    ST(q->cq, NULL);
    q->next_free = g_free_cqs;
    g_free_cqs = q;
    pthread_mutex_unlock(&g_mu);
  }
  return rc;
}

EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp) {
  struct ibv_qp_ex *(*f)(struct ibv_qp *) = real_ibv_qp_to_qp_ex();
  if (!f) return NULL;
  struct ibv_qp_ex *qpx = f(qp);
  if (qpx && on()) {
    struct rqp *r = qp_rec(qp);
    if (r && r->qpx != qpx) {
      pthread_mutex_lock(&g_mu);
      if (r->qp == qp) patch_qpx(r, qpx);
      pthread_mutex_unlock(&g_mu);
    }
  }
  return qpx;
}

/* ------------------------------------------------------------------------------------ */
/* dlsym / dlvsym: libibverbs' own entry points become ours                               */

static const struct {
  const char *name;
  void *wrapper;
  void **real;
} g_wrapped[] = {
    {"ibv_open_device", (void *)ibv_open_device, &real_ibv_open_device_p},
    {"ibv_close_device", (void *)ibv_close_device, &real_ibv_close_device_p},
    {"ibv_create_qp", (void *)ibv_create_qp, &real_ibv_create_qp_p},
    {"ibv_destroy_qp", (void *)ibv_destroy_qp, &real_ibv_destroy_qp_p},
    {"ibv_destroy_cq", (void *)ibv_destroy_cq, &real_ibv_destroy_cq_p},
    {"ibv_qp_to_qp_ex", (void *)ibv_qp_to_qp_ex, &real_ibv_qp_to_qp_ex_p},
    {"ibv_modify_qp", (void *)ibv_modify_qp, &real_ibv_modify_qp_p},
};

/* sym: what the real lookup of name found in handle. Ours when it is libibverbs' default
 * version of an entry point this file wraps. */
static void *redirect(void *handle, const char *name, void *sym) {
  if (!sym || name[0] != 'i' || name[1] != 'b' || name[2] != 'v' || LD(g_state) < 0) return sym;
  for (size_t i = 0; i < sizeof g_wrapped / sizeof g_wrapped[0]; i++) {
    if (strcmp(name, g_wrapped[i].name) != 0) continue;
    if (sym == g_wrapped[i].wrapper) return sym;
    Dl_info di;
    if (!dladdr(sym, &di) || !di.dli_fname) return sym;
    const char *b = strrchr(di.dli_fname, '/');
    b = b ? b + 1 : di.dli_fname;
    if (strncmp(b, "libibverbs.so", 13) != 0) return sym;
    /* Only the default version: an older one (ibv_open_device@IBVERBS_1.0) has other
     * structure layouts, and the program gets it unchanged. */
    if (handle && real_dlsym(handle, name) != sym) return sym;
    void *expect = NULL;
    __atomic_compare_exchange_n(g_wrapped[i].real, &expect, sym, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    return g_wrapped[i].wrapper;
  }
  return sym;
}

EXPORT void *dlsym(void *handle, const char *name) {
  if (UNLIKELY(!real_dlsym)) find_real_dl();
  /* RTLD_NEXT and RTLD_DEFAULT are relative to the caller: a sibling call keeps the
   * program's return address, which glibc reads to find the caller. */
  if (handle == RTLD_NEXT || handle == RTLD_DEFAULT || LD(g_state) < 0) return real_dlsym(handle, name);
  return redirect(handle, name, real_dlsym(handle, name));
}

EXPORT void *dlvsym(void *handle, const char *name, const char *version) {
  if (UNLIKELY(!real_dlvsym)) find_real_dl();
  if (handle == RTLD_NEXT || handle == RTLD_DEFAULT || LD(g_state) < 0) return real_dlvsym(handle, name, version);
  return redirect(handle, name, real_dlvsym(handle, name, version));
}
