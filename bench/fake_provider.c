/* fake_provider.c -- see fake_provider.h. */
#include "fake_provider.h"

#include <string.h>

__attribute__((noinline)) static int post_send(FakeQp* qp, const FakeWr* wr) {
  FakeCq* cq = qp->cq;
  if (cq->tail - cq->head >= FAKE_CQ_SIZE) return -1; /* CQ would overflow: ENOMEM, as a provider would */
  uint32_t pos = qp->sq_pos++;
  FakeWqe* w = &qp->ring[pos & (FAKE_RING - 1)];
  w->wr_id = wr->wr_id;
  w->remote_addr = wr->remote_addr;
  w->local_addr = wr->local_addr;
  w->length = wr->length;
  w->lkey = wr->lkey;
  w->rkey = wr->rkey;
  w->opcode = wr->opcode;
  w->flags = wr->send_flags;
  w->imm = wr->imm;
  w->qpn = qp->qpn;
  __atomic_store_n(&qp->doorbell, (uint64_t)qp->sq_pos, __ATOMIC_RELEASE);
  FakeWc* e = &cq->entries[cq->tail & (FAKE_CQ_SIZE - 1)];
  e->wr_id = wr->wr_id;
  e->byte_len = wr->length;
  e->status = 0;
  e->opcode = wr->opcode;
  e->qp_num = qp->qpn;
  cq->tail++;
  return 0;
}

__attribute__((noinline)) static int poll_cq(FakeCq* cq, int n, FakeWc* wc) {
  int got = 0;
  while (got < n && cq->tail - cq->head > cq->lag) {
    wc[got++] = cq->entries[cq->head & (FAKE_CQ_SIZE - 1)];
    cq->head++;
  }
  return got;
}

FakePostSendFn fake_post_send = post_send;
FakePollCqFn fake_poll_cq = poll_cq;

void fake_qp_init(FakeQp* qp, uint32_t qpn, FakeCq* cq) {
  memset(qp, 0, sizeof *qp);
  qp->qpn = qpn;
  qp->cq = cq;
}

void fake_cq_init(FakeCq* cq, uint32_t lag) {
  memset(cq, 0, sizeof *cq);
  cq->lag = lag;
}
