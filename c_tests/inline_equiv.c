/*
 * The header's inline hooks against the library's exported functions.
 *
 *   inline_equiv layout       prints the offsets the header's mirrors assume ("name value"),
 *                             for rust_tests/c_abi/inline.rs to compare with the library's layout.
 *   inline_equiv logindex     prints the header's log-scale bucket index of many values ("value
 *                             index"), for rust_tests/c_abi/inline.rs to compare with the library's.
 *   inline_equiv run SEED     drives device 0 (mlx5_0) through the inline hooks, device 1
 *                             (mlx5_1) through the exported handle functions and device 2
 *                             (mlx5_2) through the index forms, with the same pseudo-random
 *                             sequence of calls, then exits (the exit handler writes the file).
 *                             The test compares the three devices in the file: every counter
 *                             must be equal. Completion tokens include constructed ones whose
 *                             latency sits half an interval inside a histogram bucket, so the
 *                             bucket arithmetic is compared too (with RCCL_TELEMETRY_CLOCK=
 *                             monotonic, where tokens are ns); threads that share the devices'
 *                             stripes exercise the owner and shared paths of the device forms.
 *
 * Needs RCCL_TELEMETRY_ENABLE=1 for "run". The histogram interval is read from
 * RCCL_TELEMETRY_HISTOGRAM_INTERVAL_NS (the test sets it).
 */
#define _POSIX_C_SOURCE 200809L
#include "rccl_telemetry.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef RCCL_TELEMETRY_INLINE_HOOKS
#error "the inline hooks are off for this compiler or target: nothing to compare"
#endif

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int layout(void) {
#define P(name, v) printf("%s %zu\n", name, (size_t)(v))
#define Q(field) P("qp." #field, offsetof(rcclTelemetryQp_, field))
#define S(field) P("set." #field, offsetof(rcclTelemetryDevSet_, field))
#define H(field) P("hot." #field, offsetof(rcclTelemetryHot_, field))
  Q(sent_write); Q(sent_imm); Q(recv_wqe); Q(cts_signalled); Q(cts_unsignalled); Q(post_seq);
  Q(wqe_rcvd); Q(sample_mask); Q(untracked); Q(lat_min_inv); Q(lat_max); Q(slot_miss); Q(mon_thr); Q(log_hist); Q(hist);
  Q(mon_hist); Q(mon_sum); Q(mon_sq_lo); Q(mon_sq_hi); Q(slow); Q(slow_ns); Q(slow_post);
  P("log.owner", offsetof(rcclTelemetryLog_, owner));
  P("log.counts", offsetof(rcclTelemetryLog_, counts));
  P("ch.req_completed", offsetof(rcclTelemetryCh_, req_completed));
  S(tx_bytes); S(rx_bytes); S(cq_errors); S(cq_polls); S(sizes);
  P("stripe.owner", offsetof(rcclTelemetryStripe_, owner));
  P("stripe.own", offsetof(rcclTelemetryStripe_, own));
  H(sample_mask); H(ns_mult); H(div_mul); H(div_shift); H(last_bucket); H(use_tsc); H(enabled); H(layout); H(stripes);
  P("layout", RCCL_TELEMETRY_INLINE_LAYOUT);
  P("qp.size", sizeof(rcclTelemetryQp_));
  P("stripe.size", sizeof(rcclTelemetryStripe_));
  P("hot.size", sizeof(rcclTelemetryHot_));
  P("log.size", sizeof(rcclTelemetryLog_));
#undef Q
#undef S
#undef H
#undef P
  return 0;
}

#define QPS 3
#define SIZES 12
static const uint64_t sizes[SIZES] = {0, 1, 2, 3, 4, 5, 4096, 4097, 65536, 1ull << 40, (1ull << 63) + 1, UINT64_MAX};

/* Device-form traffic from many threads on both devices, so several threads share stripes:
 * the first on a stripe counts inline as its owner, the others through the library. */
#define THREADS 12
#define PER_THREAD 5000
static void *device_forms(void *arg) {
  uint64_t salt = (uint64_t)(uintptr_t)arg;
  for (uint64_t i = 0; i < PER_THREAD; i++) {
    uint64_t b = sizes[(i + salt) % SIZES] & 0xffffffull;
    rcclTelemetryBytes(0, (int)(i & 1), b);
    (rcclTelemetryBytes)(1, (int)(i & 1), b);
    (rcclTelemetryBytes)(2, (int)(i & 1), b);
    rcclTelemetryWqeSize(0, sizes[(i + salt) % SIZES]);
    (rcclTelemetryWqeSize)(1, sizes[(i + salt) % SIZES]);
    (rcclTelemetryWqeSize)(2, sizes[(i + salt) % SIZES]);
    if (i % 7 == 0) {
      rcclTelemetryCqError(0);
      (rcclTelemetryCqError)(1);
      (rcclTelemetryCqError)(2);
      rcclTelemetryAddCqPolls(0, i);
      (rcclTelemetryAddCqPolls)(1, i);
      (rcclTelemetryAddCqPolls)(2, i);
    }
  }
  return NULL;
}

static int run(uint64_t seed) {
  const char *iv = getenv("RCCL_TELEMETRY_HISTOGRAM_INTERVAL_NS");
  uint64_t interval = iv ? strtoull(iv, NULL, 10) : 30000;
  int n = 0;
  if (rcclTelemetryInit() != 0 || !rcclTelemetryOn()) {
    fprintf(stderr, "inline_equiv: telemetry is not on\n");
    return 1;
  }
  for (int d = 0; d < 3; d++) {
    char name[16];
    snprintf(name, sizeof name, "mlx5_%d", d);
    if (rcclTelemetryRegisterDevice(d, name, "IB-CAST") != d || rcclTelemetrySetupChannel(d, 3, QPS, &n) != 0 || n != QPS) {
      fprintf(stderr, "inline_equiv: setup failed\n");
      return 1;
    }
  }
  RcclQpStats *a[QPS], *b[QPS];
  for (int q = 0; q < QPS; q++) {
    for (int d = 0; d < 3; d++) rcclTelemetrySetQpRole(d, 3, q, q != 0);
    a[q] = rcclTelemetryResolveQp(0, 3, q);
    b[q] = rcclTelemetryResolveQp(1, 3, q);
  }
  RcclChannelStats *ca = rcclTelemetryResolveChannel(0, 3), *cb = rcclTelemetryResolveChannel(1, 3);
  if (!a[0] || !b[0] || !ca || !cb) {
    fprintf(stderr, "inline_equiv: no handles\n");
    return 1;
  }
  /* Constructed tokens only make sense when tokens are ns and the clock has run long enough
   * for the oldest one (17.5 intervals back) to be positive. */
  int monotonic = getenv("RCCL_TELEMETRY_CLOCK") && strcmp(getenv("RCCL_TELEMETRY_CLOCK"), "monotonic") == 0;
  int constructed = monotonic && monotonic_ns() / 18 > interval;
  rng ^= seed * 0x9E3779B97F4A7C15ull;
  int64_t pending_a[QPS][64], pending_b[QPS][64], pending_c[QPS][64];
  int npend[QPS] = {0};
  for (int i = 0; i < 200000; i++) {
    int q = (int)(next() % QPS);
    uint64_t r = next();
    switch (r % 10) {
      case 0: case 1: case 2: { /* post */
        int imm = (int)(r >> 8) & 1;
        int64_t ta = rcclTelemetryPostTs(a[q]);
        int64_t tb = (rcclTelemetryPostTs)(b[q]);
        int64_t tc = rcclTelemetryPostTsIdx(2, 3, q);
        if ((ta == RCCL_TELEMETRY_TS_UNSAMPLED) != (tb == RCCL_TELEMETRY_TS_UNSAMPLED) ||
            (ta == RCCL_TELEMETRY_TS_UNSAMPLED) != (tc == RCCL_TELEMETRY_TS_UNSAMPLED) || ta == 0 || tb == 0 || tc == 0) {
          fprintf(stderr, "inline_equiv: PostTs disagrees: %lld, %lld, %lld\n", (long long)ta, (long long)tb, (long long)tc);
          return 1;
        }
        rcclTelemetryQpSendPosted(a[q], imm);
        (rcclTelemetryQpSendPosted)(b[q], imm);
        rcclTelemetryWqePosted(2, 3, q, 1);
        rcclTelemetryWriteWqe(2, 3, q, imm);
        if (npend[q] < 64) {
          pending_a[q][npend[q]] = ta;
          pending_c[q][npend[q]] = tc;
          pending_b[q][npend[q]++] = tb;
        }
        break;
      }
      case 3: case 4: { /* complete: a stored token, or 0, 1, an ancient one, a constructed one */
        int64_t ta, tb, tc;
        uint64_t kind = (r >> 8) % 8;
        if (kind < 4 && npend[q] > 0) {
          npend[q]--;
          ta = pending_a[q][npend[q]];
          tb = pending_b[q][npend[q]];
          tc = pending_c[q][npend[q]];
        } else if (kind == 4) {
          ta = tb = tc = 0;
        } else if (kind == 5) {
          ta = tb = tc = 1;
        } else if (kind == 6 || !constructed) {
          ta = tb = tc = 2;
        } else {
          uint64_t k = (r >> 16) % 18;
          ta = tb = tc = (int64_t)(monotonic_ns() - k * interval - interval / 2);
        }
        rcclTelemetryQpWqeComplete(a[q], ta);
        (rcclTelemetryQpWqeComplete)(b[q], tb);
        rcclTelemetryWqeComplete(2, 3, q, tc);
        break;
      }
      case 5:
        rcclTelemetryQpRecvPosted(a[q]);
        (rcclTelemetryQpRecvPosted)(b[q]);
        rcclTelemetryWqePosted(2, 3, q, 0);
        break;
      case 6:
        rcclTelemetryQpCtsSent(a[q], (int)(r >> 8) & 1);
        (rcclTelemetryQpCtsSent)(b[q], (int)(r >> 8) & 1);
        rcclTelemetryCtsSent(2, 3, q, (int)(r >> 8) & 1);
        break;
      case 7:
        rcclTelemetryQpSlotMiss(a[q]);
        (rcclTelemetryQpSlotMiss)(b[q]);
        rcclTelemetrySlotMiss(2, 3, q);
        break;
      case 8:
        rcclTelemetryChRequestCompleted(ca);
        (rcclTelemetryChRequestCompleted)(cb);
        rcclTelemetryRequestCompleted(2, 3);
        break;
      default: {
        uint64_t s = sizes[(r >> 8) % SIZES];
        rcclTelemetryWqeSize(0, s);
        (rcclTelemetryWqeSize)(1, s);
        (rcclTelemetryWqeSize)(2, s);
        rcclTelemetryBytes(0, (int)(r >> 20) & 1, s & 0xffffffull);
        (rcclTelemetryBytes)(1, (int)(r >> 20) & 1, s & 0xffffffull);
        (rcclTelemetryBytes)(2, (int)(r >> 20) & 1, s & 0xffffffull);
        break;
      }
    }
  }
  /* Out-of-range and unregistered devices: silent no-ops on both paths. */
  rcclTelemetryWqeSize(-1, 5);
  rcclTelemetryWqeSize(32, 5);
  rcclTelemetryBytes(7, 1, 5);
  rcclTelemetryQpSendPosted(NULL, 1);
  rcclTelemetryQpWqeComplete(NULL, 5);
  pthread_t t[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, device_forms, (void *)i);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  printf("inline_equiv: %s clock, constructed tokens %s\n", monotonic ? "monotonic" : "default", constructed ? "on" : "off");
  return 0;
}

/* The header's log-scale bucket index of every value 0..2^16, of every edge of every bucket
 * (each value 2^k * m for m in 8..16, and one below and above), of the largest values and of
 * 50,000 pseudo-random values spread over every magnitude: "value index raw" lines, for
 * rust_tests/c_abi/inline.rs to compare with the library's loghist::clamp_index (index: the stored
 * bucket, clamped) and loghist::bucket_index (raw: the unclamped index the sampled path takes
 * for a latency below 2^32 ns, defined below 2^61; "-" above). */
static void log_line(uint64_t v) {
  if (v < (1ull << 61))
    printf("%llu %u %llu\n", (unsigned long long)v, rcclTelemetryLogIndex_(v),
           (unsigned long long)rcclTelemetryLogIndexRaw_(v));
  else
    printf("%llu %u -\n", (unsigned long long)v, rcclTelemetryLogIndex_(v));
}
static int log_index(void) {
  for (uint64_t v = 0; v <= 65536; v++) log_line(v);
  for (unsigned k = 0; k < 61; k++)
    for (uint64_t m = 8; m <= 16; m++) {
      uint64_t e = m << k;
      log_line(e - 1);
      log_line(e);
      log_line(e + 1);
    }
  log_line(UINT64_MAX);
  log_line(UINT64_MAX - 1);
  log_line(1ull << 63);
  for (int i = 0; i < 50000; i++) {
    uint64_t r = next();
    unsigned bits = (unsigned)(r % 65);
    log_line(bits == 0 ? 0 : (next() >> (64 - bits)) | (1ull << (bits - 1)));
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "layout") == 0) return layout();
  if (argc >= 2 && strcmp(argv[1], "logindex") == 0) return log_index();
  if (argc >= 3 && strcmp(argv[1], "run") == 0) return run(strtoull(argv[2], NULL, 10));
  fprintf(stderr, "usage: inline_equiv layout | logindex | run SEED\n");
  return 2;
}
