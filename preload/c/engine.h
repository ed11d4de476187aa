/*
 * preload/c/engine.h: what the C interposer calls in the Rust engine
 * (preload/src/lib.rs, linked in as librccl_telemetry_preload_engine.a), and its mirror of
 * the engine's per-QP interposer counters (QpExt in src/counters.rs), checked at start-up
 * against rtp_ext_layout().
 */
#ifndef RTP_ENGINE_H
#define RTP_ENGINE_H
#include <stdint.h>
#include "rccl_telemetry.h"

/* Mirror of QpExt: every field is updated with atomic adds, from any thread, but the last
 * two, written only by the stall walk (stall.c: stall_walk) and at QP destruction. */
typedef struct rtp_qpext {
  uint64_t send_wqe, read_wqe, atomic_wqe, other_wqe, retired_unsignalled, track_full, stall_out, stall_oldest;
} rtp_qpext;

int rtp_init(void);
int rtp_register_device(int index, const char *name);
RcclQpStats *rtp_qp_slot(int dev, const rtp_qpext **ext);
void rtp_latency(const RcclQpStats *slot, int64_t token);
void rtp_srq_recv(int dev, uint64_t n);
void rtp_wc_unknown(int dev, uint64_t n);
void rtp_diag(int debug_only, const char *msg);
/* A QP's identity and peer (cold path; slot from rtp_qp_slot, NULL: no-op). type: "rc", "uc",
 * "ud", ... (a static string). port: -1 unknown; gid_index: -1 unknown; GIDs are 16 raw bytes
 * or NULL; LIDs 0 unknown. A second call replaces the first. */
void rtp_qp_set_type(RcclQpStats *slot, const char *type);
void rtp_qp_set_local(RcclQpStats *slot, uint32_t qp_num, int port);
void rtp_qp_set_peer(RcclQpStats *slot, uint32_t qp_num, const uint8_t *local_gid, uint16_t local_lid, int port,
                     int gid_index, uint32_t remote_qp_num, const uint8_t *remote_gid, uint16_t remote_lid);
/* One error completion (cold path): on slot's QP (NULL: a completion of no tracked QP of device
 * dev, counted by status on the device only). opcode: the failed WR's enum ibv_wr_opcode, -2 a
 * receive, -1 unknown; bytes: its payload, -1 unknown; token: its PostTs token (> 1: a clock
 * reading, so its age is known); rc: 1 for an RC or XRC QP (an error leaves it in ERR). The
 * device's num_cq_errors is the caller's (rcclTelemetryCqError). */
void rtp_cq_error(RcclQpStats *slot, int dev, int status, uint32_t vendor_err, int opcode, int64_t bytes,
                  int64_t token, int rc);
/* Registers the walk the stall detector's tick calls (stall.c: stall_walk). */
void rtp_stall_walker(void (*walk)(void));
/* [size, send, read, atomic, other, retired, track_full, offset of idx_sent in the slot] */
int rtp_ext_layout(uint64_t *out, int n);
#endif
