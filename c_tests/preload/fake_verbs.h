/*
 * c_tests/preload/fake_verbs.h: the test controls of the fake libibverbs.so.1 (fake_verbs_*.c,
 * fake_verbs_internal.h what those files share), and what the fake does. It is a libibverbs
 * for the interposer's host tests and bench: no kernel, no NIC. Two devices (fake0, fake1)
 * whose contexts carry a provider-style ops table and struct verbs_context (create_qp_ex,
 * create_cq_ex), QPs connected in pairs by fakeverbs_connect(), and CQs whose completions are
 * exactly what the posts imply:
 *
 * - a send WR completes at post time: a CQE on the send CQ when signalled (or when it
 *   fails); SEND, SEND_WITH_IMM and RDMA_WRITE_WITH_IMM also consume a receive of the peer
 *   (its receive queue, or its SRQ) and complete it on the peer's receive CQ with byte_len;
 * - fakeverbs_fail_next(qp) makes the QP's next send WR fail (IBV_WC_REM_ACCESS_ERR) and puts
 *   the QP in the error state: its outstanding receives flush at once, and every later WR
 *   (send or receive) completes with IBV_WC_WR_FLUSH_ERR, signalled or not;
 *   fakeverbs_fail_next_status(qp, status, vendor_err) does the same with that status and
 *   vendor_err;
 * - a send WR whose wr_id is FAKEVERBS_REJECT_WR_ID is refused (EINVAL, *bad_wr = it; the
 *   WRs before it were posted);
 * - fakeverbs_inject(cq, qp_num) queues a successful completion for any qp_num.
 * QP state: the exported ibv_modify_qp calls the provider's modify_qp through a table
 * private to the library (as libibverbs does: struct verbs_ex_private, not ctx->ops) and, on
 * success, sets qp->state. The provider's modify_qp checks the transition (to RESET or ERR
 * from anywhere; RESET->INIT->RTR->RTS; INIT->INIT, RTS->RTS), a port (1..2) where one is
 * named, IBV_QP_AV and IBV_QP_DEST_QPN at INIT->RTR of a connected QP and its sgid_index
 * (< 16) when is_global; a wrong one is EINVAL, and fakeverbs_fail_modify(qp, err) makes the
 * QP's next modify fail with err. Each device has 2 ports, each a GID table of 16 entries
 * (all zeros until fakeverbs_set_gid) and a LID (0 until fakeverbs_set_lid), read by
 * ibv_query_gid (the library's own, as libibverbs reads sysfs) and the provider's
 * query_port (reached through verbs_context.query_port or the exported ibv_query_port);
 * fakeverbs_queries() counts those reads.
 * Cues (fakeverbs_hold / fakeverbs_wait_held / fakeverbs_release): the next call reaching a
 * named point blocks there until released, so that a test can stop a thread inside a
 * provider call (and whatever the interposer holds around it) and act meanwhile.
 * QP numbers are spread over the 24-bit space (qp_new), not consecutive; after
 * fakeverbs_recycle_qps(1) a destroyed QP's memory and number go to the next QP created on
 * its device (the same ibv_qp address and qp_num), as a provider's pool may hand them out.
 * Knobs (environment): FAKEVERBS_SEND_WR_CAP=n reports cap.max_send_wr = n while taking any
 * number of WRs; FAKEVERBS_WC_FLAGS_ALLOWED=mask refuses ibv_cq_ex wc_flags outside mask.
 *
 * The symbols carry libibverbs' version nodes (fake_verbs.map), so a program can dlvsym them
 * the way NCCL's ibvwrap does. Written from verbs.h and the man pages, for these tests only.
 * Files: fake_verbs_device.c (devices, contexts, PDs, ports and GIDs), fake_verbs_qp.c (QPs,
 * SRQs, modify_qp), fake_verbs_datapath.c (CQs, post and poll), fake_verbs_ex.c (ibv_cq_ex,
 * ibv_qp_ex), fake_verbs_cues.c (the cues).
 */
#ifndef FAKE_VERBS_H
#define FAKE_VERBS_H
#include <infiniband/verbs.h>
#include <stdint.h>

/* A send WR with this wr_id is refused: EINVAL, *bad_wr = it. */
#define FAKEVERBS_REJECT_WR_ID 0xBADBADULL

void fakeverbs_connect(struct ibv_qp *a, struct ibv_qp *b);
void fakeverbs_fail_next(struct ibv_qp *qp);
void fakeverbs_fail_next_status(struct ibv_qp *qp, int status, uint32_t vendor_err);
void fakeverbs_inject(struct ibv_cq *cq, uint32_t qp_num);
void fakeverbs_fail_modify(struct ibv_qp *qp, int err);
void fakeverbs_recycle_qps(int on);
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
#define FAKEVERBS_AT_QP_DESTROYED 4 /* ibv_destroy_qp, the QP gone, before returning */
void fakeverbs_cue(int point); /* where a point is reached (the fake's own, or a caller's) */
void fakeverbs_hold(int point);
int fakeverbs_wait_held(int point, int seconds);
void fakeverbs_release(int point);
#endif
