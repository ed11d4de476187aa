/*
 * fake_provider.h -- the stand-in for the verbs provider under the benchmark's transport loop.
 *
 * RCCL's IB transport posts each WQE through ibv_post_send and drains completions
 * through ibv_poll_cq: both are indirect calls into the provider library, opaque to
 * the compiler. The benchmark keeps that shape (calls through function pointers into
 * another translation unit), so the code the compiler generates around the telemetry
 * hooks carries the same register pressure and call clobbers as in RCCL. Without
 * them the no-hook loop would be an unrealistically call-free, fully unrolled loop
 * that any branch at all slows down.
 *
 * There is no device: a WQE is "completed" once FAKE_CQ_LAG later WQEs have been
 * posted on the same CQ, in posting order.
 */
#ifndef RCCL_BENCH_FAKE_PROVIDER_H
#define RCCL_BENCH_FAKE_PROVIDER_H

#include <stdint.h>

#define FAKE_RING 64     /* send-ring entries per QP */
#define FAKE_CQ_SIZE 256 /* CQ entries (power of two) */

typedef struct FakeWr {
  uint64_t wr_id;
  uint64_t remote_addr;
  uint64_t local_addr;
  uint32_t length, lkey, rkey, opcode, send_flags, imm;
} FakeWr;

/* A 64-byte WQE as the provider writes it into the send ring. */
typedef struct FakeWqe {
  uint64_t wr_id;
  uint64_t remote_addr;
  uint64_t local_addr;
  uint32_t length, lkey, rkey, opcode, flags, imm;
  uint32_t qpn, pad;
} __attribute__((aligned(64))) FakeWqe;

typedef struct FakeWc {
  uint64_t wr_id;
  uint32_t byte_len;
  uint32_t status;
  uint32_t opcode;
  uint32_t qp_num;
} FakeWc;

typedef struct FakeCq {
  uint64_t head, tail; /* consumer / producer */
  uint32_t lag;        /* WQEs that stay outstanding */
  FakeWc entries[FAKE_CQ_SIZE];
} FakeCq;

typedef struct FakeQp {
  uint32_t qpn;
  uint32_t sq_pos;
  uint64_t doorbell; /* last producer index "rung" */
  FakeCq* cq;
  FakeWqe ring[FAKE_RING];
} __attribute__((aligned(64))) FakeQp;

typedef int (*FakePostSendFn)(FakeQp* qp, const FakeWr* wr);
typedef int (*FakePollCqFn)(FakeCq* cq, int n, FakeWc* wc);

/* The provider's entry points, reached only through these pointers (as through ibv ops). */
extern FakePostSendFn fake_post_send;
extern FakePollCqFn fake_poll_cq;

void fake_qp_init(FakeQp* qp, uint32_t qpn, FakeCq* cq);
void fake_cq_init(FakeCq* cq, uint32_t lag);

#endif
