/*
 * reference_telemetry.h -- a stand-in for RCCL's in-tree C telemetry design
 * (net_telemetry.{h,cc} on the IB-CAST branch), written for this benchmark only.
 *
 * It reproduces the cost model of that design as the issue describes it, so the
 * library can be compared against "what RCCL has today" in the same run:
 *
 *   - every hook is inline in the caller (no call, no PLT, no GOT indirection
 *     for the handle forms; the globals live in the executable);
 *   - every counter touched is a relaxed atomic read-modify-write
 *     (atomic_fetch_add, i.e. a `lock xadd` on x86-64), even on a QP that only
 *     one thread drives;
 *   - posting a send WQE bumps num_wqe_sent and the opcode counter
 *     (num_write_wqe / num_write_imm_wqe);
 *   - a completion bumps num_wqe_rcvd, num_wqe_completed and one latency
 *     histogram bucket, and updates min/max with compare-and-swap loops;
 *   - a CTS bumps signalled/unsignalled and num_cts_sent;
 *   - a request completion bumps the channel's num_req_completed;
 *   - tx_bytes and a 32-bucket WQE-size histogram are device-wide: every
 *     thread that uses the NIC increments the same cache lines;
 *   - the latency histogram bucket comes from a reciprocal multiply, not a
 *     64-bit division;
 *   - a sampled WQE reads CLOCK_MONOTONIC twice (post and completion);
 *   - 1-in-N selection: at N = 1 a load of a never-written global and a
 *     predicted branch in front of the clock read; at N > 1 a per-QP relaxed
 *     load + store of a posting counter.
 *
 * Disabled, every handle is NULL and the device forms test one global, so the
 * disabled cost is a predicted branch per hook.
 *
 * Not part of the library and never linked into it.
 */
#ifndef RCCL_BENCH_REFERENCE_TELEMETRY_H
#define RCCL_BENCH_REFERENCE_TELEMETRY_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#define REF_MAX_DEVS 32
#define REF_MAX_CHANNELS 512
#define REF_HISTOGRAM_SIZE 16
#define REF_WQE_SIZE_BUCKETS 32
#define REF_TS_UNSAMPLED 1

#define REF_CACHELINE 64

/* Per-QP slot: one thread drives a QP, but every update is still an atomic RMW. */
typedef struct RefQpStats {
  _Atomic uint64_t num_wqe_sent;
  _Atomic uint64_t num_recv_wqe;
  _Atomic uint64_t num_wqe_rcvd;
  _Atomic uint64_t num_wqe_completed;
  _Atomic uint64_t num_cts_sent;
  _Atomic uint64_t num_cts_sent_signalled;
  _Atomic uint64_t num_cts_sent_unsignalled;
  _Atomic uint64_t num_slot_miss;
  _Atomic uint64_t num_write_wqe;
  _Atomic uint64_t num_write_imm_wqe;
  _Atomic int64_t wqe_completion_ns_min;
  _Atomic int64_t wqe_completion_ns_max;
  _Atomic uint64_t post_seq; /* 1-in-N selection, relaxed load + store */
  _Atomic uint64_t wqe_completion_histogram[REF_HISTOGRAM_SIZE];
  int is_data_qp;
} __attribute__((aligned(REF_CACHELINE))) RefQpStats;

typedef struct RefChannelStats {
  _Atomic uint64_t num_req_completed;
} __attribute__((aligned(REF_CACHELINE))) RefChannelStats;

/* Device-wide counters: shared by every thread that uses the NIC. */
typedef struct RefDevStats {
  _Atomic uint64_t tx_bytes;
  _Atomic uint64_t rx_bytes;
  _Atomic uint64_t num_cq_errors;
  _Atomic uint64_t cq_poll_count;
  _Atomic uint64_t wqe_size_histogram[REF_WQE_SIZE_BUCKETS];
  int registered;
} __attribute__((aligned(REF_CACHELINE))) RefDevStats;

/* Configuration globals, written once at init, read on the hot path. */
extern int refTelemetryEnabled;
extern uint64_t refSampleMask;    /* N - 1; never written when N = 1 */
extern uint64_t refBucketRecip;   /* ceil(2^64 / interval_ns) */
extern int refHistogramBuckets;   /* 1..16 */
extern RefDevStats refDevs[REF_MAX_DEVS];

/* Cold path (reference_telemetry.c). */
void refTelemetryInit(int enable, int latencySample, int buckets, int64_t intervalNs);
int refTelemetryRegisterDevice(int devIdx);
/* Allocates numQps QP slots of (dev, ch) as one array; NULL when disabled or out of range. */
RefQpStats* refTelemetrySetupChannel(int devIdx, int chIdx, int numQps);
RefChannelStats* refTelemetryResolveChannel(int devIdx, int chIdx);
/* Sums for the sanity check (not on any hot path). */
uint64_t refTelemetryTotalWqeSent(void);
uint64_t refTelemetryTotalWqeCompleted(void);
uint64_t refTelemetryTotalSampled(void);

static inline int64_t refNowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#define REF_RLX memory_order_relaxed

static inline int64_t refPostTs(RefQpStats* qp) {
  if (!qp) return 0;
  uint64_t mask = refSampleMask;
  if (__builtin_expect(mask != 0, 0)) {
    uint64_t seq = atomic_load_explicit(&qp->post_seq, REF_RLX);
    atomic_store_explicit(&qp->post_seq, seq + 1, REF_RLX);
    if (seq & mask) return REF_TS_UNSAMPLED;
  }
  int64_t now = refNowNs();
  return now > REF_TS_UNSAMPLED ? now : REF_TS_UNSAMPLED + 1;
}

static inline void refQpSendPosted(RefQpStats* qp, int withImm) {
  if (!qp) return;
  atomic_fetch_add_explicit(&qp->num_wqe_sent, 1, REF_RLX);
  if (withImm)
    atomic_fetch_add_explicit(&qp->num_write_imm_wqe, 1, REF_RLX);
  else
    atomic_fetch_add_explicit(&qp->num_write_wqe, 1, REF_RLX);
}

static inline void refQpRecvPosted(RefQpStats* qp) {
  if (!qp) return;
  atomic_fetch_add_explicit(&qp->num_recv_wqe, 1, REF_RLX);
}

static inline void refQpCtsSent(RefQpStats* qp, int signalled) {
  if (!qp) return;
  if (signalled)
    atomic_fetch_add_explicit(&qp->num_cts_sent_signalled, 1, REF_RLX);
  else
    atomic_fetch_add_explicit(&qp->num_cts_sent_unsignalled, 1, REF_RLX);
  atomic_fetch_add_explicit(&qp->num_cts_sent, 1, REF_RLX);
}

static inline void refQpSlotMiss(RefQpStats* qp) {
  if (!qp) return;
  atomic_fetch_add_explicit(&qp->num_slot_miss, 1, REF_RLX);
}

static inline int refLatencyBucket(int64_t ns) {
  if (ns < 0) ns = 0;
  uint64_t b = (uint64_t)(((unsigned __int128)(uint64_t)ns * refBucketRecip) >> 64);
  int last = refHistogramBuckets - 1;
  return b > (uint64_t)last ? last : (int)b;
}

static inline void refQpWqeComplete(RefQpStats* qp, int64_t postTs) {
  if (!qp) return;
  atomic_fetch_add_explicit(&qp->num_wqe_rcvd, 1, REF_RLX);
  if (postTs == 0) return;
  atomic_fetch_add_explicit(&qp->num_wqe_completed, 1, REF_RLX);
  if (postTs == REF_TS_UNSAMPLED) return;
  int64_t lat = refNowNs() - postTs;
  atomic_fetch_add_explicit(&qp->wqe_completion_histogram[refLatencyBucket(lat)], 1, REF_RLX);
  int64_t cur = atomic_load_explicit(&qp->wqe_completion_ns_min, REF_RLX);
  while (lat < cur &&
         !atomic_compare_exchange_weak_explicit(&qp->wqe_completion_ns_min, &cur, lat, REF_RLX,
                                                REF_RLX)) {
  }
  cur = atomic_load_explicit(&qp->wqe_completion_ns_max, REF_RLX);
  while (lat > cur &&
         !atomic_compare_exchange_weak_explicit(&qp->wqe_completion_ns_max, &cur, lat, REF_RLX,
                                                REF_RLX)) {
  }
}

static inline void refChRequestCompleted(RefChannelStats* ch) {
  if (!ch) return;
  atomic_fetch_add_explicit(&ch->num_req_completed, 1, REF_RLX);
}

static inline RefDevStats* refDev(int devIdx) {
  if (!refTelemetryEnabled || (unsigned)devIdx >= REF_MAX_DEVS) return 0;
  RefDevStats* d = &refDevs[devIdx];
  return d->registered ? d : 0;
}

static inline void refBytes(int devIdx, int isSend, uint64_t bytes) {
  RefDevStats* d = refDev(devIdx);
  if (!d) return;
  atomic_fetch_add_explicit(isSend ? &d->tx_bytes : &d->rx_bytes, bytes, REF_RLX);
}

static inline void refWqeSize(int devIdx, uint64_t bytes) {
  RefDevStats* d = refDev(devIdx);
  if (!d) return;
  /* bucket b holds sizes in (2^(b-1), 2^b]; bucket 0 holds 0 and 1 */
  int b = bytes <= 1 ? 0 : 64 - __builtin_clzll(bytes - 1);
  if (b > REF_WQE_SIZE_BUCKETS - 1) b = REF_WQE_SIZE_BUCKETS - 1;
  atomic_fetch_add_explicit(&d->wqe_size_histogram[b], 1, REF_RLX);
}

#ifdef __cplusplus
}
#endif
#endif /* RCCL_BENCH_REFERENCE_TELEMETRY_H */
