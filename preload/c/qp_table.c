/*
 * preload/c/qp_table.c: the QP records. Found by (device, qp_num) in a two-level table
 * (what a completion names) and by the ibv_qp's address in a cache in front of it (what a
 * post names); made before the program sees a new QP (ibv_create_qp, verbs_context's
 * create_qp_ex), unlinked at ibv_destroy_qp and reused only once no poller can still be
 * reading them (the poll window's nodes and the limbo below). Separate because every other
 * part reads these records and only this one makes, unlinks and recycles them.
 */
#include "preload.h"

struct qleaf *g_qpn[32][QTOP];
struct rqp *g_free_qps;
struct rqp *g_all_qps;
struct rqp *g_qpc[QPC];

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
struct tnode *g_tnodes; /* every node ever made (never freed), newest first */
__thread struct tnode *t_node __attribute__((tls_model("initial-exec")));
pthread_key_t g_tnode_key;
int g_tnode_key_ok;

void tnode_release(void *p) { __atomic_store_n(&((struct tnode *)p)->used, 0, __ATOMIC_RELEASE); }

/* The calling thread's node (see preload.h). */
__attribute__((noinline)) struct tnode *tnode_slow(void) {
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

static struct rqp *g_limbo_new;  /* destroyed since the last look at the threads */
static struct rqp *g_limbo_wait; /* destroyed before it: free once g_snap's threads moved on */
static struct snap {
  struct tnode *n;
  uint64_t seq;
} *g_snap;
static size_t g_nsnap, g_snap_cap;
static uint64_t g_limbo_count; /* records in limbo (both lists), for the tests' account */
static struct qleaf *g_leaf_limbo_new, *g_leaf_limbo_wait; /* unlinked leaves, likewise */

/* qp_by_num anywhere else (cold: a cache miss, a create, a modify): in a window of its own,
 * or under g_mu when the thread has no node. Records are never freed, so the one returned
 * stays readable. */
__attribute__((noinline)) struct rqp *qp_find(int dev, uint32_t qpn) {
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

void free_qp_locked(struct rqp *r) {
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
void reclaim_locked(void) {
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

/* A QP just created on context c: its record (slot, in-order record), before the program
 * sees the QP. */
void track_qp(struct rctx *c, struct ibv_qp *qp, struct ibv_cq *scq, struct ibv_cq *rcq, int has_srq,
                     int sig_all, uint32_t max_send_wr, int ex) {
  if (!qp || c->dev < 0) return;
  pthread_mutex_lock(&g_mu);
  struct qleaf *leaf = qpn_leaf(c->dev, qp->qp_num);
  struct rqp **cell = leaf ? &leaf->cell[qp->qp_num & (QLEAF - 1)] : NULL;
  /* No memory, or seen already (a nested create: the provider's ibv_create_qp through its
   * create_qp_ex). A record of that address whose QP is being destroyed is not this QP: the
   * provider handed the destroyed QP's memory and number to a new one before the destroying
   * thread unlinked it, so it goes now, as below. */
  if (!cell || (*cell && (*cell)->qp == qp && !(*cell)->dying)) {
    pthread_mutex_unlock(&g_mu);
    return;
  }
  if (*cell) { /* a destroyed QP this file did not see go, or not yet (its leaf may go with it) */
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
  r->slot = (RcclQpStats *)rtp_qp_slot(c->dev, &ext);
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
  r->gen++;
  r->dying = 0;
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

struct ibv_qp *w_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr) {
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

/* The record is marked dying (under g_mu) before the provider's destroy and unlinked after
 * it only if it still holds the same QP (its generation): once the provider has freed the QP,
 * another thread's create may get the same ibv_qp address and QPN, and track_qp gives that
 * new QP a record of its own (never taking it for a nested create of the dying one). */
EXPORT int ibv_destroy_qp(struct ibv_qp *qp) {
  int (*f)(struct ibv_qp *) = real_ibv_destroy_qp();
  if (!f) return ENOSYS;
  struct rqp *r = qp && book() ? qp_rec(qp) : NULL;
  uint64_t gen = 0;
  if (r) {
    pthread_mutex_lock(&g_mu);
    if (r->qp == qp) {
      r->dying = 1;
      gen = r->gen;
    } else {
      r = NULL;
    }
    pthread_mutex_unlock(&g_mu);
  }
  int rc = f(qp);
  if (r) {
    pthread_mutex_lock(&g_mu);
    if (r->gen == gen && r->qp == qp) {
      if (rc == 0) free_qp_locked(r);
      else r->dying = 0; /* the provider refused: the QP lives on */
    }
    reclaim_locked();
    pthread_mutex_unlock(&g_mu);
  }
  return rc;
}
