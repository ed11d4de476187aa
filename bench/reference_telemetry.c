/*
 * reference_telemetry.c -- cold path of the in-tree-design stand-in (see the header).
 * Only setup and the sums the benchmark uses to check that the loop really counted.
 */
#define _GNU_SOURCE /* clock_gettime under -std=c11 */
#include "reference_telemetry.h"

#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int refTelemetryEnabled = 0;
uint64_t refSampleMask = 0;
uint64_t refBucketRecip = 0;
int refHistogramBuckets = 5;
RefDevStats refDevs[REF_MAX_DEVS];

static RefChannelStats* refChannels[REF_MAX_DEVS][REF_MAX_CHANNELS];

/* Every QP array ever handed out, so the sums can walk them. */
typedef struct RefQpBlock {
  RefQpStats* qps;
  int n;
  struct RefQpBlock* next;
} RefQpBlock;
static RefQpBlock* refBlocks = NULL;

void refTelemetryInit(int enable, int latencySample, int buckets, int64_t intervalNs) {
  refTelemetryEnabled = enable ? 1 : 0;
  if (!enable) return;
  uint64_t n = 1;
  while (n < (uint64_t)(latencySample > 0 ? latencySample : 1)) n <<= 1;
  if (n > 1) refSampleMask = n - 1; /* at N = 1 the global is never written */
  refHistogramBuckets = buckets < 1 ? 1 : buckets > REF_HISTOGRAM_SIZE ? REF_HISTOGRAM_SIZE : buckets;
  if (intervalNs < 1) intervalNs = 30000;
  /* ceil(2^64 / interval): b = (ns * recip) >> 64 */
  refBucketRecip = (uint64_t)(((unsigned __int128)1 << 64) / (uint64_t)intervalNs) + 1;
}

int refTelemetryRegisterDevice(int devIdx) {
  if (!refTelemetryEnabled || devIdx < 0 || devIdx >= REF_MAX_DEVS) return -1;
  refDevs[devIdx].registered = 1;
  return devIdx;
}

RefQpStats* refTelemetrySetupChannel(int devIdx, int chIdx, int numQps) {
  if (!refTelemetryEnabled || devIdx < 0 || devIdx >= REF_MAX_DEVS || chIdx < 0 ||
      chIdx >= REF_MAX_CHANNELS || numQps <= 0)
    return NULL;
  RefQpStats* qps = aligned_alloc(REF_CACHELINE, sizeof(RefQpStats) * (size_t)numQps);
  RefQpBlock* blk = malloc(sizeof *blk);
  if (!qps || !blk) {
    fprintf(stderr, "reference_telemetry: out of memory for %d QP slots\n", numQps);
    free(qps);
    free(blk);
    return NULL;
  }
  memset(qps, 0, sizeof(RefQpStats) * (size_t)numQps);
  for (int i = 0; i < numQps; i++) atomic_store(&qps[i].wqe_completion_ns_min, INT64_MAX);
  blk->qps = qps;
  blk->n = numQps;
  blk->next = refBlocks;
  refBlocks = blk;
  if (!refChannels[devIdx][chIdx]) {
    RefChannelStats* ch = aligned_alloc(REF_CACHELINE, sizeof(RefChannelStats));
    if (ch) {
      memset(ch, 0, sizeof *ch);
      refChannels[devIdx][chIdx] = ch;
    }
  }
  return qps;
}

RefChannelStats* refTelemetryResolveChannel(int devIdx, int chIdx) {
  if (!refTelemetryEnabled || devIdx < 0 || devIdx >= REF_MAX_DEVS || chIdx < 0 ||
      chIdx >= REF_MAX_CHANNELS)
    return NULL;
  return refChannels[devIdx][chIdx];
}

static uint64_t refSum(size_t offset) {
  uint64_t s = 0;
  for (RefQpBlock* b = refBlocks; b; b = b->next)
    for (int i = 0; i < b->n; i++)
      s += atomic_load((_Atomic uint64_t*)((char*)&b->qps[i] + offset));
  return s;
}

uint64_t refTelemetryTotalWqeSent(void) { return refSum(offsetof(RefQpStats, num_wqe_sent)); }
uint64_t refTelemetryTotalWqeCompleted(void) {
  return refSum(offsetof(RefQpStats, num_wqe_completed));
}
uint64_t refTelemetryTotalSampled(void) {
  uint64_t s = 0;
  for (int b = 0; b < REF_HISTOGRAM_SIZE; b++)
    s += refSum(offsetof(RefQpStats, wqe_completion_histogram) + (size_t)b * sizeof(uint64_t));
  return s;
}
