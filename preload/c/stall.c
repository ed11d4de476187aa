/*
 * preload/c/stall.c: the stall detector's walk (docs/operators.md, "Stalled queue pairs"),
 * called by the engine's tick on its writer thread, never on the data path: for every live QP,
 * the send WRs outstanding in its record (entries between head and tail that are not void,
 * then the untracked WRs not yet accounted for) and whether a signalled one is among them
 * (else no completion will come), and the PostTs token of the oldest when it is a recorded
 * signalled WR, published into its QpExt. Under g_mu, so no record is recycled meanwhile,
 * taken only if free: a tick never waits for a QP being created or destroyed (a signal's file
 * write may come from a thread interrupted there); it keeps the previous tick's values
 * instead. The record itself is read with relaxed and acquire loads while both sides keep
 * working, so a count is a reading at the tick, not a snapshot. At most WALK_SCAN entries from
 * the head are counted one by one (beyond them every entry counts as not void); when none of
 * them is signalled, the rest are searched newest first for a signalled one, and only one
 * seen (or a signalled untracked WR) makes the QP wait for a completion: a deep send queue
 * of unsignalled WRs with nothing signalled after them expects none, however long.
 * Separate because it is the only reader of the records off the data path.
 */
#include "preload.h"

#define WALK_SCAN 4096u
/* STALL_EXPECT: engine.h (src/qp_ext.rs). */
void stall_walk(void) {
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
    int expect = 0, first = 1;
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
    /* Beyond the counted ones: the newest signalled entry, if any (a completion retires the
     * WRs before it). Bounded by the record's capacity, and stops at the first one found. */
    for (uint64_t k = n; !expect && k > scan; k--) {
      struct ent *e = &r->ring[(h + k - 1) & (r->ring_cap - 1)];
      uint32_t fl = LD(e->flags);
      if ((fl & (ENT_SIG | ENT_VOID)) == ENT_SIG) expect = 1;
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
