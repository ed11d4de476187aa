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
#endif
