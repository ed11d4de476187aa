/*
 * ibcast_sim: drives librccl_telemetry the way RCCL's IB-CAST transport does, without
 * verbs, and keeps its own exact tally of every hook it called.
 *
 *   init -> register devices (after sorting their names) -> per channel: connect (send comm:
 *   data QPs) and accept (recv comm: data QPs + one CTS QP) with SetupChannel, SetQpRole,
 *   ResolveQp, ResolveChannel -> isend (WqeSize, PostTs, QpSendPosted, Bytes; striped over the
 *   data QPs, the last WQE WRITE_WITH_IMM) -> irecv (QpRecvPosted, CTS RDMA_WRITE on the CTS QP,
 *   some signalled) -> completion processing (QpWqeComplete with the stored tokens, CQ errors,
 *   slot misses) -> request completion -> close (AddCqPolls).
 *
 * Usage: ibcast_sim TALLY.json [options]
 *   --devices N --channels N --data-qps N --requests N  workload size (defaults 2 4 2 64)
 *   --threads          one thread per (device, channel), while the main thread calls
 *                      SwCapture repeatedly and Flush once, mid-run
 *   --unknown-channels the transport supplies no channel id (MarkChannelsUnknown)
 *   --bad-calls        also make every kind of invalid call (must all be no-ops)
 *   --no-flush         do not call rcclTelemetryFlush (the exit handler writes the file)
 *   --signal-snapshots with --threads: the main thread also raises SIGUSR1 while the hooks run
 *                      (run with RCCL_TELEMETRY_SNAPSHOT_SIGNAL=SIGUSR1: signal-driven writes)
 *   --rank R           this rank (0 <= R < N, default 0) of a simulated N-rank job: each QP is
 *                      told its identity and its peer (rcclTelemetryQpSetPeer at
 *                      connect/accept), so the ranks' files join QP by QP
 *   --ranks N          the job's size (even, default 2). The ranks form two halves (two hosts,
 *                      when the caller gives each half its own host name): channel c connects
 *                      rank i of the first half with rank (i + c) mod N/2 of the second, so
 *                      every link crosses between the halves and N/2 channels reach every
 *                      pair. With N = 2 the peer is rank 1-R, as before.
 *   --latency-us U     completions take a modelled time instead of the few ns between two hook
 *                      calls: U us plus the WQE's bytes at --link-gbps (default 100), times a
 *                      log-normal spread (sigma 0.3), and 1 completion in 100 waits 4-8x longer.
 *                      The completion is reported with rcclTelemetryQpWqeCompleteAt(qp, token,
 *                      token + latency): a constructed token, no sleeping. Tokens must be ns:
 *                      run with RCCL_TELEMETRY_CLOCK=monotonic (checked; exit 2 otherwise).
 *   --sizes log        request sizes log-uniform from 4 KiB to 2 MiB, no zero-byte sends
 *                      (default "uniform": 0 to 1 MiB, a quarter zero-byte)
 *   --slow-nic R:D     device D of rank R is a slow NIC: with --latency-us, every completion
 *                      on a link it is an end of (its own QPs, and its peers' QPs towards it)
 *                      takes --slow-factor F (default 6) times longer
 *   --first-nic K      name the devices mlx5_K.. (default K = l * devices, below): when the
 *                      two halves cannot have two host names, they still drive distinct NICs
 *   --nic-counters     the sim also plays its NICs' counters, in the fixture sysfs tree that
 *                      RCCL_TELEMETRY_SYSFS_ROOT names (demo_job.sh makes one): after the
 *                      traffic, before the flush, it adds to each device's
 *                      ports/1/counters/port_{xmit,rcv}_{data,packets} what the device sent and
 *                      received (4 KiB packets), and to hw_counters/np_ecn_marked_roce_packets,
 *                      np_cnp_sent and rp_cnp_handled 1 per 256 received packets (the slow NIC:
 *                      ECN marks and CNPs sent on 1 received packet in 8, and its CQ errors as
 *                      local_ack_timeout_err and out_of_sequence)
 *   --cq-errors slow   CQ errors only on the slow NIC (1 request in 40); default "all": every
 *                      device, 1 request in 29
 *
 * Identities (RoCE v2, IPv4-mapped GIDs, no LIDs): device d of rank R has the GID
 * ::ffff:10.0.R.(d+1) and is named mlx5_(l * devices + d') with l = R mod N/2 (the rank's
 * place on its host); QP slot i of channel c has QPN 0x1000 * (R + 1) + 17 * c + i. The send
 * comm's data QP q connects to the peer's recv comm data QP q and back; the CTS QPs pair up;
 * device d connects to the peer's device d.
 * The tally is written as JSON in the library's layout, so a checker compares key by key.
 * Exit status: 0 when every self-check held.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "rccl_telemetry.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DEV 4
#define MAX_CH 64
#define MAX_DATA 8
#define QPS_PER_CH (2 * MAX_DATA + 1)
#define MAX_RANKS 64

typedef struct {
  uint64_t sent, recv, rcvd, completed, sampled, cts_sig, cts_unsig, slot_miss, write, write_imm;
  int role; /* 0 none, 1 data, 2 cts */
  uint32_t qpn, peer_qpn; /* what rcclTelemetryQpSetPeer was last told */
  int peer_dev;           /* the peer rank's device (its GID) */
  int peer_rank;
} QpTally;

typedef struct {
  int id;
  int first_send, first_recv; /* slot indices of the two comms */
  int nqp;
  RcclQpStats *qp[QPS_PER_CH];
  RcclChannelStats *ch;
  QpTally t[QPS_PER_CH];
  uint64_t req_completed;
  uint64_t tx_bytes, rx_bytes, cq_errors, polls, sizes[66];
  int64_t lat_min, lat_max; /* --latency-us: the modelled latencies reported, -1 before any */
} Channel;

typedef struct {
  int id;
  char name[32];
  Channel ch[MAX_CH];
} Device;

static int g_ndev = 2, g_nch = 4, g_ndata = 2, g_nreq = 64;
static int g_threads, g_unknown, g_bad, g_noflush, g_sigsnap, g_rank;
static int g_nranks = 2, g_sizes_log, g_cq_slow_only, g_slow_rank = -1, g_slow_dev = -1, g_first_nic = -1;
static int g_nic_counters;
static double g_latency_us, g_link_gbps = 100.0, g_slow_factor = 6.0;
static Device g_dev[MAX_DEV];
static int g_fail;

#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "ibcast_sim: check failed at line %d: %s\n", __LINE__, #cond); \
      g_fail = 1;                                                         \
    }                                                                     \
  } while (0)

static int size_bucket(uint64_t b) {
  if (b == 0) return 0;
  if (b == 1) return 1;
  return 1 + (64 - __builtin_clzll(b - 1));
}

/* A tiny deterministic generator, so every run does the same traffic. */
static uint64_t mix(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
  return x;
}

/* The rank channel c connects this rank with (--ranks): across the two halves of the job. */
static int partner(int c) {
  int half = g_nranks / 2, l = g_rank % half;
  return g_rank < half ? half + (l + c) % half : (l - c % half + half) % half;
}

/* Device d of rank r is the slow NIC (--slow-nic). */
static int is_slow(int r, int d) { return r == g_slow_rank && d == g_slow_dev; }

/* exp(x) for the few units x takes here, without libm: (1 + x/1024)^1024 (error < 0.5%). */
static double exp_approx(double x) {
  double y = 1.0 + x / 1024.0;
  for (int i = 0; i < 10; i++) y *= y;
  return y;
}

/* The modelled completion latency (ns, >= 1) of a WQE of b bytes (--latency-us); h seeds it. */
static int64_t model_latency(uint64_t h, uint64_t b, int slow) {
  /* A standard normal, near enough: four uniforms summed (Irwin-Hall), centred and scaled. */
  double z = 0;
  for (int k = 0; k < 4; k++) z += (double)((h >> (16 * k)) & 0xffff) / 65536.0;
  z = (z - 2.0) * 1.7320508;
  double ns = (g_latency_us * 1000.0 + (double)b * 8.0 / g_link_gbps) * exp_approx(0.3 * z);
  uint64_t t = mix(h ^ 0x9e3779b97f4a7c15ULL);
  if (t % 100 == 0) ns *= 4.0 + (double)(t / 100 % 5); /* the tail: a pause, a retransmit */
  if (slow) ns *= g_slow_factor;
  return ns < 1.0 ? 1 : (int64_t)ns;
}

static int cmp_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* One posted-but-not-completed WQE, as the transport keeps it in its request table. */
typedef struct { int qp; int64_t ts; uint64_t b; } Pending;

static void run_channel(Device *d, Channel *c) {
  Pending pend[MAX_DATA * 2];
  uint64_t polls = 0;
  /* --slow-nic: this device is the slow one, or the peer it connects to on this channel is. */
  int slow_here = is_slow(g_rank, d->id), slow_link = slow_here || is_slow(partner(c->id), d->id);
  for (int r = 0; r < g_nreq; r++) {
    uint64_t h = mix(((uint64_t)d->id << 40) ^ ((uint64_t)c->id << 20) ^ (uint64_t)r);
    uint64_t size;
    if (g_sizes_log) {
      uint64_t base = 4096ull << (h % 9); /* 4 KiB .. 2 MiB */
      size = base + (h >> 8) % base;
    } else {
      size = (h % 4 == 0) ? 0 : (h >> 8) % (1u << 20) + 1; /* some zero-byte sends */
    }

    /* irecv on the recv comm: one receive WQE for the WRITE_WITH_IMM, then the CTS. */
    int rq = c->first_recv + (r % g_ndata);
    rcclTelemetryQpRecvPosted(c->qp[rq]);
    c->t[rq].recv++;
    int cts = c->first_recv + g_ndata;
    int sig = (r % 4 == 0);
    rcclTelemetryQpCtsSent(c->qp[cts], sig);
    if (sig) c->t[cts].cts_sig++; else c->t[cts].cts_unsig++;

    /* The sender looks for the CTS slot; sometimes it is not there yet. */
    if (h % 7 == 0) {
      rcclTelemetryQpSlotMiss(c->qp[c->first_send]);
      c->t[c->first_send].slot_miss++;
    }

    /* isend: stripe the request over the data QPs, one WQE each. */
    int np = 0;
    uint64_t chunk = size / (uint64_t)g_ndata, left = size;
    for (int q = 0; q < g_ndata; q++) {
      int qi = c->first_send + q;
      uint64_t b = (q == g_ndata - 1) ? left : chunk;
      left -= b;
      int imm = (q == g_ndata - 1);
      rcclTelemetryWqeSize(d->id, b);
      c->sizes[size_bucket(b)]++;
      int64_t ts = rcclTelemetryPostTs(c->qp[qi]);
      CHECK(c->qp[qi] ? (ts == RCCL_TELEMETRY_TS_UNSAMPLED || ts > 1) : ts == 0);
      rcclTelemetryQpSendPosted(c->qp[qi], imm);
      c->t[qi].sent++;
      if (imm) c->t[qi].write_imm++; else c->t[qi].write++;
      pend[np].qp = qi;
      pend[np].ts = ts;
      pend[np].b = b;
      np++;
    }
    rcclTelemetryBytes(d->id, 1, size);
    c->tx_bytes += size;

    /* Completion processing: poll until every WQE of the request is back. */
    for (int i = 0; i < np; i++) {
      polls++;
      int qi = pend[i].qp;
      int err = g_cq_slow_only ? (slow_here && h % 40 == 0 && i == 0) : (h % 29 == 0 && i == 0);
      if (err) {
        rcclTelemetryCqError(d->id);
        c->cq_errors++;
      }
      if (g_latency_us > 0 && pend[i].ts > 1) {
        /* A sampled posting: report it as completed `lat` ns after its (ns) token. */
        uint64_t seed = h ^ ((uint64_t)g_rank << 52) ^ (0x100000001ULL * (uint64_t)(i + 1));
        int64_t lat = model_latency(mix(seed), pend[i].b, slow_link);
        rcclTelemetryQpWqeCompleteAt(c->qp[qi], pend[i].ts, pend[i].ts + lat);
        if (c->lat_min < 0 || lat < c->lat_min) c->lat_min = lat;
        if (lat > c->lat_max) c->lat_max = lat;
      } else {
        rcclTelemetryQpWqeComplete(c->qp[qi], pend[i].ts);
      }
      c->t[qi].rcvd++;
      if (pend[i].ts != 0) c->t[qi].completed++;
      if (pend[i].ts > 1) c->t[qi].sampled++;
    }
    /* The receive side drains the WRITE_WITH_IMM completion (matched to no posting token). */
    polls += 2;
    rcclTelemetryQpWqeComplete(c->qp[rq], 0);
    c->t[rq].rcvd++;
    rcclTelemetryBytes(d->id, 0, size);
    c->rx_bytes += size;
    if (sig) {
      rcclTelemetryQpWqeComplete(c->qp[cts], 0);
      c->t[cts].rcvd++;
    }
    rcclTelemetryChRequestCompleted(c->ch); /* the send request */
    rcclTelemetryChRequestCompleted(c->ch); /* the recv request */
    c->req_completed += 2;
  }
  /* close: hand over the poll count of both comms. */
  rcclTelemetryAddCqPolls(d->id, polls);
  c->polls += polls;
}

static void *thread_main(void *arg) {
  Channel *c = (Channel *)arg;
  Device *d = &g_dev[0];
  for (int i = 0; i < g_ndev; i++)
    if (c >= g_dev[i].ch && c < g_dev[i].ch + MAX_CH) d = &g_dev[i];
  run_channel(d, c);
  return NULL;
}

/* The GID of device d of rank r, as the transport holds it (union ibv_gid: 16 raw bytes). */
static void rank_gid(int r, int d, unsigned char gid[16]) {
  memset(gid, 0, 16);
  gid[10] = 0xff;
  gid[11] = 0xff;
  gid[12] = 10;
  gid[14] = (unsigned char)r;
  gid[15] = (unsigned char)(d + 1);
}

static void gid_text(const unsigned char g[16], char out[40]) {
  for (int i = 0; i < 8; i++) sprintf(out + 5 * i, "%02x%02x%s", g[2 * i], g[2 * i + 1], i < 7 ? ":" : "");
}

static uint32_t qp_num(int r, int c, int i) { return 0x1000u * (uint32_t)(r + 1) + 17u * (uint32_t)c + (uint32_t)i; }

/* The peer's QP slot for ours: send data q <-> recv data q, CTS <-> CTS. */
static int peer_slot(int i) { return i < g_ndata ? i + g_ndata : i < 2 * g_ndata ? i - g_ndata : i; }

/* Connection data exchanged: tell each QP who it is and who is on the other end. Channel 0's
 * QPs are first told a wrong peer (as if re-connected): the second call must win. */
static void set_peers(Device *d, Channel *c) {
  unsigned char local[16], remote[16], wrong[16];
  int peer = partner(c->id);
  rank_gid(g_rank, d->id, local);
  rank_gid(peer, d->id, remote);
  rank_gid(7, 7, wrong);
  for (int q = 0; q < c->nqp; q++) {
    uint32_t qpn = qp_num(g_rank, c->id, q), rqpn = qp_num(peer, c->id, peer_slot(q));
    if (c->id == 0) rcclTelemetryQpSetPeer(c->qp[q], qpn, local, 0, 0xdead, wrong, 0);
    rcclTelemetryQpSetPeer(c->qp[q], qpn, local, 0, rqpn, remote, 0);
    c->t[q].qpn = qpn;
    c->t[q].peer_qpn = rqpn;
    c->t[q].peer_dev = d->id;
    c->t[q].peer_rank = peer;
  }
}

static void connect_all(void) {
  for (int di = 0; di < g_ndev; di++) {
    Device *d = &g_dev[di];
    if (g_unknown) rcclTelemetryMarkChannelsUnknown(d->id);
    for (int ci = 0; ci < g_nch; ci++) {
      Channel *c = &d->ch[ci];
      /* without channel ids every QP shares the one device-wide bucket, channel 0 */
      int chIdx = g_unknown ? 0 : ci;
      c->id = chIdx;
      int n = -1;
      int first = rcclTelemetrySetupChannel(d->id, chIdx, g_ndata, &n); /* connect: send comm */
      CHECK(n == g_ndata && first >= 0);
      c->first_send = first;
      first = rcclTelemetrySetupChannel(d->id, chIdx, g_ndata + 1, &n); /* accept: recv comm */
      CHECK(n == g_ndata + 1 && first == c->first_send + g_ndata);
      c->first_recv = first;
      c->nqp = 2 * g_ndata + 1;
      for (int q = 0; q < c->nqp; q++) {
        int slot = c->first_send + q;
        int is_data = q < 2 * g_ndata;
        rcclTelemetrySetQpRole(d->id, chIdx, slot, is_data);
        c->t[q].role = is_data ? 1 : 2;
      }
      /* handles are indexed by position within this channel's range */
      for (int q = 0; q < c->nqp; q++) {
        c->qp[q] = rcclTelemetryResolveQp(d->id, chIdx, c->first_send + q);
        CHECK(c->qp[q] != NULL);
      }
      c->first_send = 0;
      c->first_recv = g_ndata;
      c->ch = rcclTelemetryResolveChannel(d->id, chIdx);
      CHECK(c->ch != NULL);
      set_peers(d, c);
    }
  }
}

static void bad_calls(void) {
  int n = 7;
  CHECK(rcclTelemetrySetupChannel(-1, 0, 4, &n) == -1 && n == 0);
  CHECK(rcclTelemetrySetupChannel(31, 0, 4, &n) == -1 && n == 0); /* unregistered */
  CHECK(rcclTelemetrySetupChannel(0, 0, 0, &n) == -1 && n == 0);
  CHECK(rcclTelemetrySetupChannel(0, 0, -5, NULL) == -1);
  CHECK(rcclTelemetryResolveQp(0, 0, 1 << 30) == NULL);
  CHECK(rcclTelemetryResolveQp(0, -1, 0) == NULL);
  CHECK(rcclTelemetryResolveQp(99, 0, 0) == NULL);
  CHECK(rcclTelemetryResolveChannel(0, 4096) == NULL);
  CHECK(rcclTelemetryRegisterDevice(32, "x", "IB-CAST") == -1);
  CHECK(rcclTelemetryRegisterDevice(-3, "x", "IB-CAST") == -1);
  CHECK(rcclTelemetryRegisterDevice(5, NULL, NULL) == -1);
  CHECK(rcclTelemetryPostTs(NULL) == 0);
  rcclTelemetryQpSendPosted(NULL, 1);
  rcclTelemetryQpRecvPosted(NULL);
  rcclTelemetryQpCtsSent(NULL, 1);
  rcclTelemetryQpSlotMiss(NULL);
  rcclTelemetryQpWqeComplete(NULL, 12345);
  rcclTelemetryChRequestCompleted(NULL);
  rcclTelemetryBytes(-1, 1, 100);
  rcclTelemetryBytes(40, 1, 100);
  rcclTelemetryBytes(30, 1, 100); /* in range, unregistered */
  rcclTelemetryCqError(1 << 20);
  rcclTelemetryAddCqPolls(-7, 3);
  rcclTelemetryWqeSize(77, 3);
  rcclTelemetryWqeComplete(0, 0, 1 << 29, 5);
  rcclTelemetryWqePosted(0, 600, 0, 1);
  rcclTelemetryRequestCompleted(0, -2);
  rcclTelemetrySlotMiss(-1, 0, 0);
  rcclTelemetryCtsSent(0, 0, -1, 0);
  rcclTelemetryWriteWqe(12, 0, 0, 1);
  rcclTelemetrySetQpRole(0, 0, 1 << 30, 1);
  rcclTelemetryMarkChannelsUnknown(-1);
  rcclTelemetryQpSetPeer(NULL, 1, NULL, 0, 2, NULL, 0);
  { /* not a handle of the library's: ignored */
    static char stray[512] __attribute__((aligned(64)));
    unsigned char g[16] = {0xfe, 0x80};
    rcclTelemetryQpSetPeer((RcclQpStats *)(void *)stray, 1, g, 0, 2, g, 0);
  }
  CHECK(rcclTelemetrySwCapture(NULL, 4) == -1);
  RcclTelemetrySwSnapshot s[1];
  CHECK(rcclTelemetrySwCapture(s, -1) == -1);
  CHECK(rcclTelemetrySwCapture(s, 0) == 0);
  /* An out-of-range channel: these QPs are untracked on device 0. */
  CHECK(rcclTelemetrySetupChannel(0, RCCL_TELEMETRY_MAX_CHANNELS, 3, &n) == -1 && n == 0);
}

/* Adds `add` to the counter file ROOT/class/infiniband/DEV/ports/1/DIR/NAME (--nic-counters);
 * a file that cannot be read or written gets one line and is left alone. */
static void bump_counter(const char *root, const char *dev, const char *dir, const char *name, uint64_t add) {
  char path[1024];
  unsigned long long v = 0;
  snprintf(path, sizeof path, "%s/class/infiniband/%s/ports/1/%s/%s", root, dev, dir, name);
  FILE *f = fopen(path, "r");
  int ok = f && fscanf(f, "%llu", &v) == 1;
  if (f) fclose(f);
  f = ok ? fopen(path, "w") : NULL;
  if (!f) {
    fprintf(stderr, "ibcast_sim: --nic-counters: cannot update %s; left alone\n", path);
    g_fail = 1;
    return;
  }
  fprintf(f, "%llu\n", v + (unsigned long long)add);
  fclose(f);
}

/* --nic-counters: what this rank's NICs counted, written where the library reads it. */
static void count_on_nics(void) {
  const char *root = getenv("RCCL_TELEMETRY_SYSFS_ROOT");
  if (!root || !*root) {
    fprintf(stderr, "ibcast_sim: --nic-counters needs RCCL_TELEMETRY_SYSFS_ROOT (a fixture tree); none written\n");
    g_fail = 1;
    return;
  }
  for (int di = 0; di < g_ndev; di++) {
    Device *d = &g_dev[di];
    uint64_t tx = 0, rx = 0, sent = 0, rcvd = 0, err = 0;
    for (int ci = 0; ci < g_nch; ci++) {
      Channel *c = &d->ch[ci];
      tx += c->tx_bytes; rx += c->rx_bytes; err += c->cq_errors;
      for (int q = 0; q < c->nqp; q++) { sent += c->t[q].sent + c->t[q].cts_sig + c->t[q].cts_unsig; rcvd += c->t[q].recv; }
    }
    uint64_t txp = tx / 4096 + sent, rxp = rx / 4096 + rcvd;
    int slow = is_slow(g_rank, d->id);
    bump_counter(root, d->name, "counters", "port_xmit_data", tx / 4); /* PMA: 4-byte words */
    bump_counter(root, d->name, "counters", "port_rcv_data", rx / 4);
    bump_counter(root, d->name, "counters", "port_xmit_packets", txp);
    bump_counter(root, d->name, "counters", "port_rcv_packets", rxp);
    bump_counter(root, d->name, "hw_counters", "np_ecn_marked_roce_packets", slow ? rxp / 8 : rxp / 256);
    bump_counter(root, d->name, "hw_counters", "np_cnp_sent", slow ? rxp / 8 : rxp / 256);
    bump_counter(root, d->name, "hw_counters", "rp_cnp_handled", txp / 256);
    if (slow) {
      bump_counter(root, d->name, "hw_counters", "local_ack_timeout_err", err);
      bump_counter(root, d->name, "hw_counters", "out_of_sequence", err);
    }
  }
}

static void write_tally(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) { perror(path); exit(2); }
  fprintf(f, "{\"devices\": [");
  for (int di = 0; di < g_ndev; di++) {
    Device *d = &g_dev[di];
    uint64_t tx = 0, rx = 0, err = 0, polls = 0, sizes[66] = {0};
    for (int ci = 0; ci < g_nch; ci++) {
      Channel *c = &d->ch[ci];
      tx += c->tx_bytes; rx += c->rx_bytes; err += c->cq_errors; polls += c->polls;
      for (int b = 0; b < 66; b++) sizes[b] += c->sizes[b];
    }
    unsigned char g[16];
    char gt[40];
    rank_gid(g_rank, d->id, g);
    gid_text(g, gt);
    fprintf(f, "%s{\"gid\": \"%s\", \"gid_ip\": \"10.0.%d.%d\", ", di ? ", " : "", gt, g_rank, d->id + 1);
    fprintf(f, "\"device_id\": %d, \"roce_device\": \"%s\", \"tx_bytes\": %llu, \"rx_bytes\": %llu, "
               "\"num_cq_errors\": %llu, \"cq_poll_count\": %llu, \"num_qp_untracked\": %d, \"size_buckets\": [",
            d->id, d->name, (unsigned long long)tx, (unsigned long long)rx,
            (unsigned long long)err, (unsigned long long)polls, (g_bad && d->id == 0) ? 3 : 0);
    for (int b = 0; b < 66; b++) fprintf(f, "%s%llu", b ? ", " : "", (unsigned long long)sizes[b]);
    fprintf(f, "], \"channels\": [");
    for (int ci = 0; ci < g_nch; ci++) {
      Channel *c = &d->ch[ci];
      fprintf(f, "%s{\"id\": %d, \"num_req_completed\": %llu, \"queue_pairs\": [", ci ? ", " : "", c->id,
              (unsigned long long)c->req_completed);
      for (int q = 0; q < c->nqp; q++) {
        QpTally *t = &c->t[q];
        rank_gid(t->peer_rank, t->peer_dev, g);
        gid_text(g, gt);
        fprintf(f, "%s{\"qp_num\": %u, \"peer\": {\"qp_num\": %u, \"gid\": \"%s\", \"gid_ip\": \"10.0.%d.%d\", \"lid\": null}, ",
                q ? ", " : "", t->qpn, t->peer_qpn, gt, t->peer_rank, t->peer_dev + 1);
        fprintf(f, "\"role\": \"%s\", \"num_wqe_sent\": %llu, \"num_recv_wqe\": %llu, \"num_wqe_rcvd\": %llu, "
                   "\"num_wqe_completed\": %llu, \"sampled\": %llu, \"num_cts_sent_signalled\": %llu, "
                   "\"num_cts_sent_unsignalled\": %llu, \"num_slot_miss\": %llu, \"num_write_wqe\": %llu, "
                   "\"num_write_imm_wqe\": %llu}",
                t->role == 1 ? "data" : "cts", (unsigned long long)t->sent,
                (unsigned long long)t->recv, (unsigned long long)t->rcvd, (unsigned long long)t->completed,
                (unsigned long long)t->sampled, (unsigned long long)t->cts_sig, (unsigned long long)t->cts_unsig,
                (unsigned long long)t->slot_miss, (unsigned long long)t->write, (unsigned long long)t->write_imm);
      }
      fprintf(f, "]}");
    }
    fprintf(f, "]}");
  }
  fprintf(f, "]}\n");
  fclose(f);
}

/* After every hook returned: SwCapture must equal the tally exactly. */
static void check_capture(void) {
  RcclTelemetrySwSnapshot s[RCCL_TELEMETRY_MAX_DEVS];
  int n = rcclTelemetrySwCapture(s, RCCL_TELEMETRY_MAX_DEVS);
  CHECK(n == g_ndev);
  for (int di = 0; di < n && di < g_ndev; di++) {
    Device *d = &g_dev[di];
    uint64_t tx = 0, rx = 0, err = 0, sent = 0, recv = 0, rcvd = 0, comp = 0, samp = 0;
    int64_t lmin = -1, lmax = -1;
    for (int ci = 0; ci < g_nch; ci++) {
      Channel *c = &d->ch[ci];
      tx += c->tx_bytes; rx += c->rx_bytes; err += c->cq_errors;
      if (c->lat_min >= 0 && (lmin < 0 || c->lat_min < lmin)) lmin = c->lat_min;
      if (c->lat_max > lmax) lmax = c->lat_max;
      for (int q = 0; q < c->nqp; q++) {
        sent += c->t[q].sent; recv += c->t[q].recv; rcvd += c->t[q].rcvd;
        comp += c->t[q].completed; samp += c->t[q].sampled;
      }
    }
    uint64_t hsum = 0;
    for (int b = 0; b < RCCL_TELEMETRY_HISTOGRAM_SIZE; b++) hsum += s[di].wqe_completion_histogram[b];
    CHECK(s[di].device_id == d->id);
    CHECK(s[di].tx_bytes == tx && s[di].rx_bytes == rx && s[di].num_cq_errors == err);
    CHECK(s[di].wqe_sent == sent && s[di].recv_wqe == recv && s[di].wqe_rcvd == rcvd);
    CHECK(s[di].wqe_completed == comp && s[di].wqe_sampled == samp && hsum == samp);
    CHECK(samp == 0 ? (s[di].wqe_completion_ns_min == -1 && s[di].wqe_completion_ns_max == -1)
                    : (s[di].wqe_completion_ns_min >= 0 && s[di].wqe_completion_ns_min <= s[di].wqe_completion_ns_max));
    /* Constructed ns tokens: the library saw exactly the modelled latencies. */
    if (g_latency_us > 0) CHECK(s[di].wqe_completion_ns_min == lmin && s[di].wqe_completion_ns_max == lmax);
  }
}

/* Whether this run asked for telemetry (what rcclTelemetryInit reads). */
static int on_asked(void) {
  const char *e = getenv("RCCL_TELEMETRY_ENABLE");
  return e && strcmp(e, "1") == 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s TALLY.json [--devices N] [--channels N] [--data-qps N] [--requests N] "
                    "[--threads] [--unknown-channels] [--bad-calls] [--no-flush] [--signal-snapshots] [--rank R] "
                    "[--ranks N] [--latency-us U] [--link-gbps G] [--sizes uniform|log] [--slow-nic R:D] "
                    "[--slow-factor F] [--first-nic K] [--nic-counters] [--cq-errors all|slow]\n", argv[0]);
    return 2;
  }
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--devices") && i + 1 < argc) g_ndev = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--channels") && i + 1 < argc) g_nch = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--data-qps") && i + 1 < argc) g_ndata = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--requests") && i + 1 < argc) g_nreq = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads")) g_threads = 1;
    else if (!strcmp(argv[i], "--unknown-channels")) g_unknown = 1;
    else if (!strcmp(argv[i], "--bad-calls")) g_bad = 1;
    else if (!strcmp(argv[i], "--no-flush")) g_noflush = 1;
    else if (!strcmp(argv[i], "--signal-snapshots")) g_sigsnap = 1;
    else if (!strcmp(argv[i], "--rank") && i + 1 < argc) g_rank = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ranks") && i + 1 < argc) g_nranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--nic-counters")) g_nic_counters = 1;
    else if (!strcmp(argv[i], "--first-nic") && i + 1 < argc) g_first_nic = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--latency-us") && i + 1 < argc) g_latency_us = atof(argv[++i]);
    else if (!strcmp(argv[i], "--link-gbps") && i + 1 < argc) g_link_gbps = atof(argv[++i]);
    else if (!strcmp(argv[i], "--slow-factor") && i + 1 < argc) g_slow_factor = atof(argv[++i]);
    else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
      const char *v = argv[++i];
      if (strcmp(v, "log") && strcmp(v, "uniform")) { fprintf(stderr, "ibcast_sim: --sizes takes uniform or log, not %s\n", v); return 2; }
      g_sizes_log = !strcmp(v, "log");
    } else if (!strcmp(argv[i], "--cq-errors") && i + 1 < argc) {
      const char *v = argv[++i];
      if (strcmp(v, "slow") && strcmp(v, "all")) { fprintf(stderr, "ibcast_sim: --cq-errors takes all or slow, not %s\n", v); return 2; }
      g_cq_slow_only = !strcmp(v, "slow");
    } else if (!strcmp(argv[i], "--slow-nic") && i + 1 < argc) {
      char tail;
      if (sscanf(argv[++i], "%d:%d%c", &g_slow_rank, &g_slow_dev, &tail) != 2) {
        fprintf(stderr, "ibcast_sim: --slow-nic takes RANK:DEVICE, not %s\n", argv[i]);
        return 2;
      }
    } else { fprintf(stderr, "ibcast_sim: unknown option %s\n", argv[i]); return 2; }
  }
  if (g_ndev < 1 || g_ndev > MAX_DEV || g_nch < 1 || g_nch > MAX_CH || g_ndata < 1 || g_ndata > MAX_DATA ||
      g_nreq < 0 || (g_unknown && g_nch != 1) || g_nranks < 2 || g_nranks > MAX_RANKS || g_nranks % 2 ||
      g_rank < 0 || g_rank >= g_nranks || !(g_latency_us >= 0 && g_latency_us <= 1e6) || !(g_link_gbps > 0) ||
      !(g_slow_factor >= 1 && g_slow_factor <= 1000) || g_first_nic < -1 || g_first_nic > 999 ||
      (g_slow_rank != -1 && (g_slow_rank < 0 || g_slow_rank >= g_nranks || g_slow_dev < 0 || g_slow_dev >= g_ndev))) {
    fprintf(stderr, "ibcast_sim: workload out of range\n");
    return 2;
  }

  int init_rc = rcclTelemetryInit();
  if (init_rc < 0) fprintf(stderr, "ibcast_sim: telemetry could not start; running without it\n");
  /* Idempotent: later calls give the first call's answer, and On agrees with it. */
  CHECK(rcclTelemetryInit() == init_rc);
  CHECK(rcclTelemetryInit() == init_rc);
  CHECK(init_rc == (on_asked() ? RCCL_TELEMETRY_INIT_STARTED : RCCL_TELEMETRY_INIT_OFF) || init_rc < 0);
  CHECK(init_rc == 0 || rcclTelemetryOn() == 0);
  if (g_latency_us > 0 && rcclTelemetryOn()) {
    /* Constructed tokens are token + ns: they need the library's tokens to be ns readings of
     * CLOCK_MONOTONIC, not TSC ticks. */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t mono = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec, tok = rcclTelemetryNowToken();
    if (tok - mono > 1000000000 || mono - tok > 1000000000) {
      fprintf(stderr, "ibcast_sim: --latency-us needs ns tokens: run with RCCL_TELEMETRY_CLOCK=monotonic\n");
      return 2;
    }
  }

  /* IB-CAST sorts the devices it found by name before registering them. */
  char names[MAX_DEV][32];
  /* The rank's place on its host picks its NICs: rank l of a half drives mlx5_(l * devices).. */
  int first_nic = g_first_nic >= 0 ? g_first_nic : (g_rank % (g_nranks / 2)) * g_ndev;
  for (int i = 0; i < g_ndev; i++) snprintf(names[i], sizeof names[i], "mlx5_%d", first_nic + g_ndev - 1 - i);
  qsort(names, (size_t)g_ndev, sizeof names[0], cmp_name);
  for (int i = 0; i < g_ndev; i++) {
    g_dev[i].id = i;
    for (int ci = 0; ci < MAX_CH; ci++) g_dev[i].ch[ci].lat_min = g_dev[i].ch[ci].lat_max = -1;
    memcpy(g_dev[i].name, names[i], sizeof names[i]);
    int id = rcclTelemetryRegisterDevice(i, names[i], "IB-CAST");
    CHECK(id == (rcclTelemetryOn() ? i : -1));
  }
  int on = rcclTelemetryOn();
  if (on) connect_all();
  if (on && g_bad) bad_calls();

  if (g_threads) {
    pthread_t th[MAX_DEV * MAX_CH];
    int nt = 0;
    for (int di = 0; di < g_ndev; di++)
      for (int ci = 0; ci < g_nch; ci++) pthread_create(&th[nt++], NULL, thread_main, &g_dev[di].ch[ci]);
    RcclTelemetrySwSnapshot s[RCCL_TELEMETRY_MAX_DEVS];
    for (int k = 0; k < 200; k++) {
      int n = rcclTelemetrySwCapture(s, RCCL_TELEMETRY_MAX_DEVS);
      CHECK(n == (on ? g_ndev : -1));
      if (g_sigsnap && k % 40 == 0) raise(SIGUSR1);
    }
    if (!g_noflush) CHECK(rcclTelemetryFlush() == 0); /* mid-run: a valid file of what was counted so far */
    for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
  } else {
    for (int di = 0; di < g_ndev; di++)
      for (int ci = 0; ci < g_nch; ci++) run_channel(&g_dev[di], &g_dev[di].ch[ci]);
  }
  if (on && g_threads && !g_noflush) {
    /* After the final write every entry point is inert: no capture, no new channel. */
    RcclTelemetrySwSnapshot s[RCCL_TELEMETRY_MAX_DEVS];
    int n = 5;
    CHECK(rcclTelemetrySwCapture(s, RCCL_TELEMETRY_MAX_DEVS) == -1);
    CHECK(rcclTelemetryOn() == 0);
    CHECK(rcclTelemetrySetupChannel(0, RCCL_TELEMETRY_MAX_CHANNELS - 1, 1, &n) == -1 && n == 0);
    CHECK(rcclTelemetryInit() == RCCL_TELEMETRY_INIT_FINISHED); /* finished, not started again */
  } else if (on) {
    check_capture();
  }
  if (on && g_nic_counters) count_on_nics();
  write_tally(argv[1]);
  if (!g_noflush && !g_threads) {
    int rc = rcclTelemetryFlush();
    if (rc != 0) fprintf(stderr, "ibcast_sim: rcclTelemetryFlush returned %d\n", rc);
    CHECK(rcclTelemetryFlush() == 0 || rc != 0); /* later calls are no-ops */
  }
  return g_fail;
}
