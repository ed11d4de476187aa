/* c_tests/preload/fake_verbs.h: the fake libibverbs' test controls (see fake_verbs.c). */
#ifndef FAKE_VERBS_H
#define FAKE_VERBS_H
#include <infiniband/verbs.h>
#include <stdint.h>

/* A send WR with this wr_id is refused: EINVAL, *bad_wr = it. */
#define FAKEVERBS_REJECT_WR_ID 0xBADBADULL

void fakeverbs_connect(struct ibv_qp *a, struct ibv_qp *b);
void fakeverbs_fail_next(struct ibv_qp *qp);
void fakeverbs_inject(struct ibv_cq *cq, uint32_t qp_num);
void fakeverbs_fail_modify(struct ibv_qp *qp, int err);
int fakeverbs_set_gid(struct ibv_context *ctx, uint8_t port, int index, const void *gid16);
int fakeverbs_set_lid(struct ibv_context *ctx, uint8_t port, uint16_t lid);
unsigned long fakeverbs_queries(void);
int fakeverbs_pristine(struct ibv_context *ctx);
void fakeverbs_provider_ops(struct ibv_context_ops *ops);
int fakeverbs_cq_pristine(struct ibv_cq_ex *cq);
int fakeverbs_qpx_pristine(struct ibv_qp_ex *qpx);
/* Cues: fakeverbs_hold(point) makes the next call that reaches point block there until
 * fakeverbs_release(point) (each point on its own); fakeverbs_wait_held(point, s) returns 0 once a call is blocked there,
 * -1 when none came within s seconds (a guard against a hang, not a measurement). */
#define FAKEVERBS_AT_QP_TO_QP_EX 1 /* ibv_qp_to_qp_ex, on entry */
#define FAKEVERBS_AT_COMPLETION 2  /* the interposer's test build, inside a QP's completion */
#define FAKEVERBS_AT_CLOSED 3      /* ibv_close_device, the context freed, before returning */
void fakeverbs_cue(int point); /* where a point is reached (the fake's own, or a caller's) */
void fakeverbs_hold(int point);
int fakeverbs_wait_held(int point, int seconds);
void fakeverbs_release(int point);
#endif
