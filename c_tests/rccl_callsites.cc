// rccl_callsites.cc: the call expressions of RCCL's IB-CAST transport, written the way RCCL
// writes them, through "net_telemetry.h" (the in-tree header's name), compiled as C++ with
// -Wall -Wextra -Werror, with and without the inline hooks, then linked and run.
//
// RCCL's shapes reproduced here: handles kept in the transport's own structs, a `bool` role
// argument, PostTs tokens kept in a `uint64_t` field and handed back where an int64_t token is
// expected, `if (rcclTelemetryOn())` guards on the data path (before PostTs, per completion,
// per poll call, empty polls too, into a per-comm poll counter), the ternary channel argument
// of rcclTelemetryChRequestCompleted, and `size_t` byte counts.
//
// rcclTelemetryOn() is checked against the exported function before Init, after Init and after
// the final Flush.
//
// Usage: rccl_callsites. With RCCL_TELEMETRY_ENABLE=1 (and RCCL_TELEMETRY_OUTPUT_DIR) it
// exits 0 when the library's live totals equal the counts this program made; disabled, when
// setup refuses as documented (-1, NULL handles) and the same data path runs harmlessly.
#include "net_telemetry.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kDevs = 2, kChannels = 2, kQps = 3;  // per channel: 2 data QPs and 1 CTS QP

struct ncclIbQp {               // the transport's QP wrapper, holding its telemetry handle
  void *qp = nullptr;
  RcclQpStats *telQp = nullptr;
};

struct ncclIbRequest {
  int type = 0;                 // 0 = send, 1 = recv
  uint64_t tel_post_ts = 0;     // RCCL keeps the token unsigned
  size_t size = 0;
};

struct ncclIbComm {
  int dev = 0, ch = 0;
  ncclIbQp qps[kQps];
  RcclChannelStats *telCh = nullptr;
  uint64_t telCqPollCount = 0;
};

struct Tally {
  uint64_t sent = 0, recv = 0, rcvd = 0, txBytes = 0, rxBytes = 0;
};

int fail(const char *what) {
  std::fprintf(stderr, "rccl_callsites: FAIL: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  // The inline rcclTelemetryOn() (when inline hooks are on) and the exported function agree
  // before Init, after it (enabled or not) and after the final Flush.
  if (rcclTelemetryOn() != 0 || (rcclTelemetryOn)() != 0) return fail("On before Init");
  if (rcclTelemetryInit() != 0) return fail("Init");
  const bool on = rcclTelemetryOn() != 0;
  if ((rcclTelemetryOn)() != rcclTelemetryOn()) return fail("inline and exported On disagree after Init");
  if (on != (std::getenv("RCCL_TELEMETRY_ENABLE") && std::strcmp(std::getenv("RCCL_TELEMETRY_ENABLE"), "1") == 0))
    return fail("On does not follow RCCL_TELEMETRY_ENABLE");

  static ncclIbComm comms[kDevs][kChannels];
  Tally tally[kDevs];
  for (int d = 0; d < kDevs; d++) {
    char name[16];
    std::snprintf(name, sizeof name, "mlx5_%d", d);
    if (rcclTelemetryRegisterDevice(d, name, "IB-CAST") != (on ? d : -1)) return fail("RegisterDevice");
    for (int c = 0; c < kChannels; c++) {
      ncclIbComm *comm = &comms[d][c];
      comm->dev = d;
      comm->ch = c;
      int numSlots = 0;
      int got = rcclTelemetrySetupChannel(d, c, kQps, &numSlots);
      if (on ? (got < 0 || numSlots != kQps) : (got != -1 || numSlots != 0)) return fail("SetupChannel");
      for (int q = 0; q < kQps; q++) {
        bool isData = q < kQps - 1;
        rcclTelemetrySetQpRole(d, c, q, isData);
        comm->qps[q].telQp = rcclTelemetryResolveQp(d, c, q);
        if ((comm->qps[q].telQp != nullptr) != on) return fail("ResolveQp");
      }
      comm->telCh = rcclTelemetryResolveChannel(d, c);
      if ((comm->telCh != nullptr) != on) return fail("ResolveChannel");
    }
  }

  const int requests = 200;
  for (int r = 0; r < requests; r++) {
    for (int d = 0; d < kDevs; d++) {
      for (int c = 0; c < kChannels; c++) {
        ncclIbComm *comm = &comms[d][c];
        ncclIbRequest req;
        req.type = r % 2;
        req.size = static_cast<size_t>(1024 * (r % 7 + 1));
        for (int q = 0; q < kQps - 1; q++) {
          ncclIbQp *qp = &comm->qps[q];
          if (rcclTelemetryOn()) req.tel_post_ts = static_cast<uint64_t>(rcclTelemetryPostTs(qp->telQp));
          if (req.type == 0) {
            bool withImm = (r % 3) == 0;
            rcclTelemetryQpSendPosted(qp->telQp, withImm);
            rcclTelemetryWqeSize(comm->dev, req.size);
            rcclTelemetryBytes(comm->dev, 1, req.size);
            tally[d].sent++;
            tally[d].txBytes += req.size;
          } else {
            rcclTelemetryQpRecvPosted(qp->telQp);
            tally[d].recv++;
          }
          // Every poll call counts, the empty ones too: here one empty poll, then the completion.
          if (rcclTelemetryOn()) comm->telCqPollCount++;
          if (rcclTelemetryOn()) comm->telCqPollCount++;
          if (rcclTelemetryOn()) rcclTelemetryQpWqeComplete(qp->telQp, req.tel_post_ts);
          tally[d].rcvd++;
          if (req.type == 1) {
            rcclTelemetryBytes(comm->dev, 0, req.size);
            tally[d].rxBytes += req.size;
          }
        }
        if (rcclTelemetryOn() && (r % 8) == 0) rcclTelemetryQpSlotMiss(comm->qps[kQps - 1].telQp);
        rcclTelemetryQpCtsSent(comm->qps[kQps - 1].telQp, (r % 8) == 7);
        rcclTelemetryChRequestCompleted(req.type == 0 ? comm->telCh : nullptr);
        rcclTelemetryChRequestCompleted(comm->telCh != nullptr ? comm->telCh : NULL);
      }
    }
  }
  for (int d = 0; d < kDevs; d++)
    for (int c = 0; c < kChannels; c++) rcclTelemetryAddCqPolls(d, comms[d][c].telCqPollCount);

  RcclTelemetrySwSnapshot snap[kDevs];
  std::memset(snap, 0, sizeof snap);
  if (!on) {
    if (rcclTelemetrySwCapture(snap, kDevs) != -1) return fail("SwCapture while disabled");
    for (int d = 0; d < kDevs; d++)
      for (int c = 0; c < kChannels; c++)
        if (comms[d][c].telCqPollCount != 0) return fail("rcclTelemetryOn() guards ran while disabled");
    std::printf("rccl_callsites: ok (disabled)\n");
    return 0;
  }
  if (rcclTelemetrySwCapture(snap, kDevs) != kDevs) return fail("SwCapture");
  for (int d = 0; d < kDevs; d++) {
    const RcclTelemetrySwSnapshot &s = snap[d];
    if (s.device_id != d) return fail("device order");
    if (s.wqe_sent != tally[d].sent) return fail("wqe_sent");
    if (s.recv_wqe != tally[d].recv) return fail("recv_wqe");
    if (s.wqe_rcvd != tally[d].rcvd) return fail("wqe_rcvd");
    if (s.wqe_completed != tally[d].rcvd) return fail("wqe_completed");
    if (s.tx_bytes != tally[d].txBytes) return fail("tx_bytes");
    if (s.rx_bytes != tally[d].rxBytes) return fail("rx_bytes");
    uint64_t hist = 0;
    for (int b = 0; b < RCCL_TELEMETRY_HISTOGRAM_SIZE; b++) hist += s.wqe_completion_histogram[b];
    if (hist != tally[d].rcvd) return fail("histogram total");
  }
  if (rcclTelemetryFlush() != 0) return fail("Flush");
  if (rcclTelemetryOn() != 0 || (rcclTelemetryOn)() != 0) return fail("On after the final Flush");
  std::printf("rccl_callsites: ok (%s hooks)\n",
#ifdef RCCL_TELEMETRY_INLINE_HOOKS
              "inline"
#else
              "called"
#endif
  );
  return 0;
}
