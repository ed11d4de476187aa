/*
 * preload/c/sides.c: the hand-over of a QP side from its owner to shared use.
 *
 * One side of a QP: its posting side (the send record's tail, the posting counters) or its
 * completing side (the record's head, the completion counters). The first thread to use a
 * side owns it and works without any atomic read-modify-write: it raises busy, checks shared
 * and goes. A second thread takes the side's lock, sets shared, forces a memory barrier on
 * every thread of the process (membarrier, so that the owner's plain store of busy and its
 * load of shared need no fence of their own) and waits for the owner's section in flight;
 * from then on everyone takes the lock. Without membarrier every side starts shared.
 *
 * The owner's fast way in and the exit are static inline in preload.h (the data path inlines
 * them); here is the slow way (a first user claiming the side, or the switch to shared) and
 * a new record's reset. Separate because it is the one membarrier hand-over of the data path.
 */
#include "preload.h"

/* The slow way into a side: claim it when it has no owner yet, else take its lock (the
 * first time, making the side shared and waiting out the owner's section in flight). */
__attribute__((noinline)) int side_enter_slow(struct side *s, uintptr_t tp) {
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

void side_reset(struct side *s) {
  ST(s->owner, 0);
  ST(s->busy, 0);
  ST(s->shared, !g_fast);
  ST(s->lock, 0);
}
