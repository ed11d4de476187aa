// rccl_callsites.cc: the call expressions of RCCL's IB-CAST transport, written the way RCCL
// writes them, through "net_telemetry.h" (the in-tree header's name), compiled as C++ with
// -Wall -Wextra -Wsign-conversion -Werror, with and without the inline hooks, then linked and run.
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
// Connection setup: each side fills its connection metadata (the QPNs of its QPs and its
// device's port, LID and GID, the GID held as the 16 raw bytes of a `union ibv_gid`), the two
// sides swap it, and once a QP is moved to RTR with the peer's QPN/GID/LID the transport calls
// rcclTelemetryQpSetPeer with both ends. Device 0 is RoCE (GIDs, no LIDs), device 1
// InfiniBand without GRH (LIDs, an all-zero GID). After the final Flush the file is read back
// and must show, per QP, exactly the QPNs, GIDs and LIDs passed.
//
// Path and retry settings: once ncclIbRtrQp and ncclIbRtsQp have moved a QP to RTS, the
// transport tells the settings it gave them (NCCL_IB_TC, NCCL_IB_SL, NCCL_IB_TIMEOUT,
// NCCL_IB_RETRY_CNT, the port's active MTU, ...) through rcclTelemetryQpSetAttrs, sizing the
// struct as it was compiled. Device 1's channel 1 plays a transport built against an older
// header (its struct ends at hopLimit: the file shows those fields only), channel 0's QP 0
// one built against a newer header (a larger struct, accepted whole); a size below the first
// field is refused with RCCL_TELEMETRY_QP_ATTRS_BAD_SIZE wherever the library is loaded.
//
// Error completions: where the transport's poll finds a work completion whose status is not
// IBV_WC_SUCCESS, it finds the QP by the completion's qp_num and calls rcclTelemetryQpCqError
// with the status and vendor_err (a dead path: one RETRY_EXC_ERR, then WR_FLUSH_ERR for the
// WRs behind it); one with no QP of its own still calls rcclTelemetryCqError. The device's
// num_cq_errors counts all of them, and the file names the failed QP's errors by status and
// its first one.
//
// Communicators: ncclCommInitRank gives each ncclComm its telemetry context
// (rcclTelemetryCommInit with comm->commHash, rank, nRanks), the transport's connection setup
// of a communicator uses its Comm forms (SetupChannel, SetQpRole, ResolveQp, ResolveChannel),
// and ncclCommDestroy, after the transport has destroyed the communicator's QPs, calls
// rcclTelemetryCommFinalize. Here a communicator split from the process's (its own hash, rank
// and size) runs on the same devices and channels as the process-wide calls and is destroyed
// before the final Flush: SwCapture keeps its counts, and the file shows it finalized, apart.
//
// Usage: rccl_callsites. With RCCL_TELEMETRY_ENABLE=1 (and RCCL_TELEMETRY_OUTPUT_DIR) it
// exits 0 when the library's live totals equal the counts this program made; disabled, when
// setup refuses as documented (-1, NULL handles) and the same data path runs harmlessly.
#include "net_telemetry.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace {

constexpr int kDevs = 2, kChannels = 2, kQps = 3;  // per channel: 2 data QPs and 1 CTS QP

struct ncclIbQp {               // the transport's QP wrapper, holding its telemetry handle
  void *qp = nullptr;
  uint32_t qpn = 0;             // qp->qp_num once created
  RcclQpStats *telQp = nullptr;
};

// The connection data the two ends exchange (the shape of IB-CAST's metadata: per-QP info,
// per-device info with the GID as `union ibv_gid` keeps it; no verbs header needed).
union ibGid {
  uint8_t raw[16];
  struct {
    uint64_t subnet_prefix, interface_id;
  } global;
};
struct ncclIbQpInfo {
  uint32_t qpn;
};
struct ncclIbDevInfo {
  uint16_t lid;
  uint8_t ib_port, link_layer;  // link_layer: 1 InfiniBand, 2 Ethernet (RoCE)
  union ibGid gid;
};
struct ncclIbConnectionMetadata {
  ncclIbQpInfo qpInfo[kQps];
  ncclIbDevInfo devs[1];
};

// Both ends' metadata for (dev, channel); `side` 0 is this rank, 1 the remote one.
ncclIbConnectionMetadata makeMeta(int d, int c, int side) {
  ncclIbConnectionMetadata m;
  std::memset(&m, 0, sizeof m);
  for (int q = 0; q < kQps; q++) m.qpInfo[q].qpn = static_cast<uint32_t>(0x300 + 0x400 * side + 0x40 * d + 4 * c + q);
  m.devs[0].ib_port = 1;
  if (d == 0) {                 // RoCE v2: ::ffff:192.168.<side+1>.<d+1>, no LID
    m.devs[0].link_layer = 2;
    m.devs[0].gid.raw[10] = 0xff;
    m.devs[0].gid.raw[11] = 0xff;
    m.devs[0].gid.raw[12] = 192;
    m.devs[0].gid.raw[13] = 168;
    m.devs[0].gid.raw[14] = static_cast<uint8_t>(side + 1);
    m.devs[0].gid.raw[15] = static_cast<uint8_t>(d + 1);
  } else {                      // InfiniBand without GRH: a LID, the GID left zero
    m.devs[0].link_layer = 1;
    m.devs[0].lid = static_cast<uint16_t>(0x20 + 0x10 * side + d);
  }
  return m;
}

std::string gidText(const union ibGid &g) {
  char out[40];
  for (int i = 0; i < 8; i++)
    std::snprintf(out + 5 * i, sizeof out - static_cast<size_t>(5 * i), "%02x%02x%s", g.raw[2 * i], g.raw[2 * i + 1], i < 7 ? ":" : "");
  return out;
}

// Finds `needle` in `text` at or after `from`, before `limit`; npos when absent.
size_t findIn(const std::string &text, const std::string &needle, size_t from, size_t limit) {
  size_t at = text.find(needle, from);
  return at != std::string::npos && at < limit ? at : std::string::npos;
}

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
  uint64_t sent = 0, recv = 0, rcvd = 0, txBytes = 0, rxBytes = 0, cqErrors = 0;
};

// The part of RCCL's ncclComm the telemetry calls read, and the context it keeps.
struct ncclComm {
  uint64_t commHash = 0;
  int rank = 0, nRanks = 0;
  rcclTelemetryComm_t *telComm = nullptr;
};

// ncclCommInitRank: the communicator's telemetry context (NULL when telemetry is off).
void commInitTelemetry(ncclComm *comm) {
  comm->telComm = rcclTelemetryCommInit(comm->commHash, comm->rank, comm->nRanks);
}

// ncclCommDestroy: the transport has destroyed the communicator's QPs (their handles go with
// them), then the context ends.
void commDestroyTelemetry(ncclComm *comm, ncclIbComm (*ibComms)[kChannels]) {
  for (int d = 0; d < kDevs; d++)
    for (int c = 0; c < kChannels; c++) {
      for (int q = 0; q < kQps; q++) ibComms[d][c].qps[q].telQp = nullptr;
      ibComms[d][c].telCh = nullptr;
    }
  rcclTelemetryCommFinalize(comm->telComm);
  comm->telComm = nullptr;
}

// The transport's connection setup of one (device, channel) of a communicator.
bool commConnect(ncclComm *comm, ncclIbComm *ib, bool on) {
  int numSlots = 0;
  int got = rcclTelemetryCommSetupChannel(comm->telComm, ib->dev, ib->ch, kQps, &numSlots);
  if (on ? (got != 0 || numSlots != kQps) : (got != -1 || numSlots != 0)) return false;
  for (int q = 0; q < kQps; q++) {
    bool isData = q < kQps - 1;
    rcclTelemetryCommSetQpRole(comm->telComm, ib->dev, ib->ch, q, isData);
    ib->qps[q].telQp = rcclTelemetryCommResolveQp(comm->telComm, ib->dev, ib->ch, q);
    if ((ib->qps[q].telQp != nullptr) != on) return false;
  }
  ib->telCh = rcclTelemetryCommResolveChannel(comm->telComm, ib->dev, ib->ch);
  return (ib->telCh != nullptr) == on;
}

// The fields of a `struct ibv_wc` the error path reads (no verbs header needed).
struct wcLike {
  int status;                   // enum ibv_wc_status: 0 success, 5 WR_FLUSH_ERR, 12 RETRY_EXC_ERR
  uint32_t vendor_err;
  uint32_t qp_num;
};

// The transport's poll loop on an error completion: the QP it belongs to, by qp_num.
void onErrorCompletion(ncclIbComm *comm, const wcLike &wc, Tally *tally) {
  ncclIbQp *qp = nullptr;
  for (int q = 0; q < kQps; q++)
    if (comm->qps[q].qpn == wc.qp_num) qp = &comm->qps[q];
  if (qp != nullptr) {
    if (rcclTelemetryOn()) rcclTelemetryQpCqError(qp->telQp, wc.status, wc.vendor_err);
  } else {
    rcclTelemetryCqError(comm->dev);
  }
  tally->cqErrors++;
}

// ncclIbRtsQp: the settings of (dev, channel, qp) as NCCL's defaults and the port give them.
rcclTelemetryQpAttrs_t qpSettings(int d) {
  rcclTelemetryQpAttrs_t a;
  std::memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.trafficClass = d == 0 ? 106 : 0;  // RoCE: NCCL_IB_TC=106 (DSCP 26); InfiniBand: none
  a.serviceLevel = d == 0 ? 3 : 0;
  a.portNum = 1;
  a.sgidIndex = d == 0 ? 3 : 0;
  a.hopLimit = 255;
  a.pathMtu = d == 0 ? 1024 : 4096;
  a.timeout = 20;
  a.retryCnt = 7;
  a.rnrRetry = 7;
  a.minRnrTimer = 12;
  a.maxRdAtomic = 1;
  a.maxDestRdAtomic = 1;
  return a;
}

// A newer header's struct: today's fields, then more.
struct newerQpAttrs {
  rcclTelemetryQpAttrs_t known;
  uint32_t later[4];
};

// Tells telemetry the settings of one QP as a transport built against this header (`size`
// 0), an older one (the struct cut after hopLimit) or a newer one (a larger struct).
int tellSettings(ncclIbQp *qp, int d, int c, int q) {
  rcclTelemetryQpAttrs_t a = qpSettings(d);
  if (d == 1 && c == 1) a.size = offsetof(rcclTelemetryQpAttrs_t, hopLimit) + 1;
  if (d == 1 && c == 0 && q == 0) {
    newerQpAttrs n;
    n.known = a;
    n.known.size = sizeof n;
    for (uint32_t &l : n.later) l = 0xffffffffu;
    return rcclTelemetryQpSetAttrs(qp->telQp, &n.known);
  }
  return rcclTelemetryQpSetAttrs(qp->telQp, &a);
}

int fail(const char *what) {
  std::fprintf(stderr, "rccl_callsites: FAIL: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  // The inline rcclTelemetryOn() (when inline hooks are on) and the exported function agree
  // before Init, after it (enabled or not) and after the final Flush.
  if (rcclTelemetryOn() != 0 || (rcclTelemetryOn)() != 0) return fail("On before Init");
  if (rcclTelemetryInit() < 0) return fail("Init");
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

      // connect/accept: exchange the metadata, move each QP to RTR, tell telemetry who is on
      // the other end (cold path, once per QP).
      ncclIbConnectionMetadata local = makeMeta(d, c, 0);
      ncclIbConnectionMetadata remote = makeMeta(d, c, 1);
      for (int q = 0; q < kQps; q++) {
        ncclIbQp *qp = &comm->qps[q];
        qp->qpn = local.qpInfo[q].qpn;
        rcclTelemetryQpSetPeer(qp->telQp, qp->qpn, &local.devs[0].gid, local.devs[0].lid,
                               remote.qpInfo[q].qpn, &remote.devs[0].gid, remote.devs[0].lid);
        // ... then to RTS: the settings both transitions gave it.
        if (tellSettings(qp, d, c, q) != 0) return fail("QpSetAttrs");
      }
    }
  }
  {
    // A size below the first field is refused wherever the library is loaded (its off result,
    // 0, otherwise), a NULL handle ignored.
    rcclTelemetryQpAttrs_t tiny = qpSettings(0);
    tiny.size = sizeof tiny.size;
    const int refused = rcclTelemetryGetVersion() != 0 ? RCCL_TELEMETRY_QP_ATTRS_BAD_SIZE : 0;
    if (rcclTelemetryQpSetAttrs(comms[0][0].qps[0].telQp, &tiny) != refused) return fail("QpSetAttrs of a tiny size");
    if (rcclTelemetryQpSetAttrs(comms[0][0].qps[0].telQp, nullptr) != refused) return fail("QpSetAttrs of NULL");
    rcclTelemetryQpAttrs_t whole = qpSettings(0);
    if (rcclTelemetryQpSetAttrs(nullptr, &whole) != 0) return fail("QpSetAttrs of a NULL handle");
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

  // A communicator split from the process's: its context from init to destroy, on the same
  // devices and channels as the process-wide calls' QPs, yet its own slots.
  {
    ncclComm split;
    split.commHash = 0x7e1e7e1e5eedull;
    split.rank = 1;
    split.nRanks = 2;
    commInitTelemetry(&split);
    if ((split.telComm != nullptr) != on) return fail("CommInit");
    static ncclIbComm splitIb[kDevs][kChannels];
    for (int d = 0; d < kDevs; d++)
      for (int c = 0; c < kChannels; c++) {
        splitIb[d][c].dev = d;
        splitIb[d][c].ch = c;
        if (!commConnect(&split, &splitIb[d][c], on)) return fail("the communicator's connection setup");
        for (int q = 0; q < kQps; q++)
          if (on && splitIb[d][c].qps[q].telQp == comms[d][c].qps[q].telQp) return fail("a communicator shares a slot");
      }
    for (int r = 0; r < 50; r++)
      for (int d = 0; d < kDevs; d++)
        for (int c = 0; c < kChannels; c++) {
          ncclIbComm *ib = &splitIb[d][c];
          ncclIbRequest req;
          req.size = 4096;
          for (int q = 0; q < kQps - 1; q++) {
            ncclIbQp *qp = &ib->qps[q];
            if (rcclTelemetryOn()) req.tel_post_ts = static_cast<uint64_t>(rcclTelemetryPostTs(qp->telQp));
            rcclTelemetryQpSendPosted(qp->telQp, q == kQps - 2);
            rcclTelemetryBytes(ib->dev, 1, req.size);
            tally[d].sent++;
            tally[d].txBytes += req.size;
            if (rcclTelemetryOn()) rcclTelemetryQpWqeComplete(qp->telQp, req.tel_post_ts);
            tally[d].rcvd++;
          }
          rcclTelemetryChRequestCompleted(ib->telCh);
        }
    commDestroyTelemetry(&split, splitIb);
  }

  // Device 0, channel 1: data QP 1's path dies (one RETRY_EXC_ERR, two flushed WRs behind it),
  // and one error completion names no QP of the comm.
  {
    ncclIbComm *comm = &comms[0][1];
    const uint32_t qpn = comm->qps[1].qpn;
    const wcLike errs[] = {{12, 0x81, qpn}, {5, 0, qpn}, {5, 0, qpn}, {10, 0, 0xabcdefu}};
    for (const wcLike &wc : errs)
      if (wc.status != 0) onErrorCompletion(comm, wc, &tally[0]);
    rcclTelemetryQpCqError(nullptr, 12, 0);  // a NULL handle: a no-op
  }

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
    if (s.num_cq_errors != tally[d].cqErrors) return fail("num_cq_errors");
  }
  if (rcclTelemetryFlush() != 0) return fail("Flush");
  if (rcclTelemetryOn() != 0 || (rcclTelemetryOn)() != 0) return fail("On after the final Flush");
  // After the final write the hook is inert (and a NULL handle always is).
  rcclTelemetryQpSetPeer(comms[0][0].qps[0].telQp, 1, nullptr, 0, 2, nullptr, 0);
  rcclTelemetryQpSetPeer(nullptr, 1, nullptr, 0, 2, nullptr, 0);

  // The file records what was passed.
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  const char *dir = std::getenv("RCCL_TELEMETRY_OUTPUT_DIR");
  std::string path = std::string(dir && *dir ? dir : ".") + "/rccl_telemetry_" + host + "_" +
                     std::to_string(getuid()) + "_" + std::to_string(getpid()) + ".json";
  std::string text;
  if (FILE *f = std::fopen(path.c_str(), "r")) {
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
  } else {
    return fail("no telemetry file after Flush");
  }
  if (text.find("\"version\": 5,") == std::string::npos) return fail("file version 5");
  {
    // The failed QP: its errors by status, its first error with the status and vendor_err.
    size_t at = text.find("\"qp_num\": " + std::to_string(comms[0][1].qps[1].qpn) + ",");
    at = findIn(text, "\"cq_errors\": {\n", at, std::string::npos);
    size_t end = findIn(text, "}", at, std::string::npos);
    if (at == std::string::npos || findIn(text, "\"WR_FLUSH_ERR\": 2,", at, end) == std::string::npos ||
        findIn(text, "\"RETRY_EXC_ERR\": 1\n", at, end) == std::string::npos)
      return fail("the failed QP's cq_errors by status");
    at = findIn(text, "\"first_cq_error\": {", end, std::string::npos);
    end = findIn(text, "}", at, std::string::npos);
    for (const char *k : {"\"status\": \"RETRY_EXC_ERR\",", "\"status_code\": 12,", "\"vendor_err\": 129,", "\"opcode\": null,"})
      if (at == std::string::npos || findIn(text, k, at, end) == std::string::npos) return fail("the failed QP's first_cq_error");
    if (findIn(text, "\"qp_state\": \"ERR\",", end, std::string::npos) == std::string::npos) return fail("the failed QP's qp_state");
    // Every other QP: none.
    size_t none = 0;
    for (at = text.find("\"first_cq_error\": null"); at != std::string::npos; at = text.find("\"first_cq_error\": null", at + 1)) none++;
    // (and on each device's record of the finalized communicator)
    if (none != kDevs * kChannels * kQps - 1 + kDevs) return fail("first_cq_error null on every other QP");
    if (text.find("\"cq_errors_by_status\": {\n      \"WR_FLUSH_ERR\": 2,\n      \"RETRY_EXC_ERR\": 1\n    }") == std::string::npos)
      return fail("device 0's cq_errors_by_status");
  }
  for (int d = 0; d < kDevs; d++) {
    for (int c = 0; c < kChannels; c++) {
      ncclIbConnectionMetadata remote = makeMeta(d, c, 1);
      for (int q = 0; q < kQps; q++) {
        size_t at = text.find("\"qp_num\": " + std::to_string(comms[d][c].qps[q].qpn) + ",");
        size_t end = findIn(text, "}", at, std::string::npos);
        if (at == std::string::npos || end == std::string::npos) return fail("a QP's qp_num in the file");
        at = findIn(text, "\"peer\": {", at, end);
        if (at == std::string::npos) return fail("a QP's peer in the file");
        at = findIn(text, "\"qp_num\": " + std::to_string(remote.qpInfo[q].qpn) + ",", at, end);
        bool roce = remote.devs[0].link_layer == 2;
        std::string gid = roce ? "\"gid\": \"" + gidText(remote.devs[0].gid) + "\"" : "\"gid\": null";
        std::string ip = roce ? "\"gid_ip\": \"192.168.2." + std::to_string(d + 1) + "\"" : "\"gid_ip\": null";
        std::string lid = "\"lid\": " + (roce ? std::string("null") : std::to_string(remote.devs[0].lid));
        for (const std::string &k : {gid, ip, lid}) {
          if (at != std::string::npos) at = findIn(text, k, at, end);
        }
        if (at == std::string::npos) return fail("a QP's peer QPN, GID, address or LID in the file");
      }
    }
  }
  // Each QP's settings: whole from this header's struct and a newer one's, up to hopLimit from
  // the older one's.
  for (int d = 0; d < kDevs; d++) {
    for (int c = 0; c < kChannels; c++) {
      rcclTelemetryQpAttrs_t a = qpSettings(d);
      const bool older = d == 1 && c == 1;
      for (int q = 0; q < kQps; q++) {
        size_t at = text.find("\"qp_num\": " + std::to_string(comms[d][c].qps[q].qpn) + ",");
        at = findIn(text, "\"attrs\": {", at, std::string::npos);
        size_t end = findIn(text, "}", at, std::string::npos);
        if (at == std::string::npos || end == std::string::npos) return fail("a QP's attrs in the file");
        const std::string first = "\"traffic_class\": " + std::to_string(a.trafficClass) + ",\n" +
                                  "          \"sl\": " + std::to_string(a.serviceLevel) + ",\n" +
                                  "          \"path_mtu\": " + std::to_string(a.pathMtu) + ",\n";
        if (findIn(text, first, at, end) == std::string::npos) return fail("a QP's traffic class, SL and path MTU");
        const std::string rts = "\"timeout\": 20,\n          \"retry_cnt\": 7,\n          \"rnr_retry\": 7,\n"
                                "          \"min_rnr_timer\": 12,";
        if ((findIn(text, rts, at, end) == std::string::npos) != older) return fail("a QP's retry settings");
        if ((findIn(text, "\"max_dest_rd_atomic\": 1", at, end) == std::string::npos) != older)
          return fail("a QP's max_dest_rd_atomic");
        if (findIn(text, "\"hop_limit\": 255", at, end) == std::string::npos) return fail("a QP's hop_limit");
      }
    }
  }
  // The split communicator: finalized, listed with its hash, rank and size, and a record on
  // each device with every WQE it posted there.
  {
    size_t at = text.find("\"communicators\": [");
    if (findIn(text, "\"hash\": \"0x7e1e7e1e5eed\",\n    \"rank\": 1,\n    \"nranks\": 2,", at, std::string::npos) ==
        std::string::npos)
      return fail("the communicator in communicators");
    at = 0;
    for (int d = 0; d < kDevs; d++) {
      at = text.find("\"finalized_comms\": [", at + 1);
      size_t end = findIn(text, "\"peers\": [", at, std::string::npos);
      const std::string sent = "\"num_wqe_sent\": " + std::to_string(50 * kChannels * (kQps - 1)) + ",";
      if (findIn(text, "\"hash\": \"0x7e1e7e1e5eed\"", at, end) == std::string::npos ||
          findIn(text, sent, at, end) == std::string::npos)
        return fail("the finalized communicator's record on a device");
    }
  }
  // The devices' own identity: device 0's GID, device 1's LID.
  ncclIbConnectionMetadata l0 = makeMeta(0, 0, 0), l1 = makeMeta(1, 0, 0);
  if (text.find("\"gid\": \"" + gidText(l0.devs[0].gid) + "\",\n    \"gid_ip\": \"192.168.1.1\",\n    \"lid\": null") == std::string::npos)
    return fail("device 0's GID");
  if (text.find("\"gid\": null,\n    \"gid_ip\": null,\n    \"lid\": " + std::to_string(l1.devs[0].lid)) == std::string::npos)
    return fail("device 1's LID");
  std::printf("rccl_callsites: ok (%s hooks)\n",
#ifdef RCCL_TELEMETRY_INLINE_HOOKS
              "inline"
#else
              "called"
#endif
  );
  return 0;
}
