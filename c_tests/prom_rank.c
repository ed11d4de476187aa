/* prom_rank: a rank that stays alive with traffic, for the node_exporter test
 * (rust_tests/prom_node_exporter.rs). It includes the generated header as RCCL does.
 *
 *   prom_rank REQUESTS [stall]
 *
 * mlx5_0: two channels of two data QPs and a CTS QP; REQUESTS requests on each channel, each
 * one receive, one CTS (signalled every 4th), two 32 KiB sends (the second with immediate
 * data) and 64 KiB each way. Then "ready" on stdout, and from then on one such request on
 * mlx5_1 (one channel) every 10 ms, until a signal ends the process: mlx5_0's counters stay
 * at known values while mlx5_1's keep moving. Telemetry must be enabled in the environment.
 * With "stall": mlx5_0 also gets a channel 2 with one data QP (QPN 4660, peer fe80::2 QPN 77)
 * whose write + WRITE_WITH_IMM pair
 * gets no completion (a stall) until a line "complete" arrives on stdin; then "completed".
 */
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rccl_telemetry.h"

struct chan {
  struct RcclQpStats *data[2];
  struct RcclQpStats *cts;
  struct RcclChannelStats *ch;
};

static int setup(int dev, int ch, struct chan *c) {
  int n = 0;
  int first = rcclTelemetrySetupChannel(dev, ch, 3, &n);
  if (first < 0 || n != 3) return -1;
  for (int q = 0; q < 3; q++) rcclTelemetrySetQpRole(dev, ch, first + q, q < 2);
  c->data[0] = rcclTelemetryResolveQp(dev, ch, first);
  c->data[1] = rcclTelemetryResolveQp(dev, ch, first + 1);
  c->cts = rcclTelemetryResolveQp(dev, ch, first + 2);
  c->ch = rcclTelemetryResolveChannel(dev, ch);
  return c->data[0] && c->data[1] && c->cts && c->ch ? 0 : -1;
}

static void request(int dev, const struct chan *c, uint64_t r) {
  struct RcclQpStats *data = c->data[r % 2];
  int signalled = r % 4 == 0;
  rcclTelemetryQpRecvPosted(data);
  rcclTelemetryQpCtsSent(c->cts, signalled);
  for (int i = 0; i < 2; i++) {
    rcclTelemetryWqeSize(dev, 32768);
    int64_t ts = rcclTelemetryPostTs(c->data[i]);
    rcclTelemetryQpSendPosted(c->data[i], i == 1);
    rcclTelemetryQpWqeComplete(c->data[i], ts);
  }
  rcclTelemetryBytes(dev, 1, 65536);
  rcclTelemetryQpWqeComplete(data, 0);
  rcclTelemetryBytes(dev, 0, 65536);
  if (signalled) rcclTelemetryQpWqeComplete(c->cts, 0);
  rcclTelemetryChRequestCompleted(c->ch);
  rcclTelemetryAddCqPolls(dev, 3);
}

int main(int argc, char **argv) {
  int stall = argc == 3 && strcmp(argv[2], "stall") == 0;
  if (argc != 2 && !stall) {
    fprintf(stderr, "usage: %s REQUESTS [stall]\n", argv[0]);
    return 2;
  }
  uint64_t requests = strtoull(argv[1], NULL, 10);
  if (rcclTelemetryInit() != 0 || !rcclTelemetryOn()) {
    fprintf(stderr, "prom_rank: telemetry is not on (set RCCL_TELEMETRY_ENABLE=1)\n");
    return 1;
  }
  if (rcclTelemetryRegisterDevice(0, "mlx5_0", "IB-CAST") != 0 || rcclTelemetryRegisterDevice(1, "mlx5_1", "IB-CAST") != 1) {
    fprintf(stderr, "prom_rank: RegisterDevice failed\n");
    return 1;
  }
  struct chan c0[2], c1;
  if (setup(0, 0, &c0[0]) || setup(0, 1, &c0[1]) || setup(1, 0, &c1)) {
    fprintf(stderr, "prom_rank: SetupChannel failed\n");
    return 1;
  }
  for (int ch = 0; ch < 2; ch++)
    for (uint64_t r = 0; r < requests; r++) request(0, &c0[ch], r);
  struct RcclQpStats *stuck = NULL;
  int64_t stuck_ts = 0;
  if (stall) {
    int n = 0;
    int first = rcclTelemetrySetupChannel(0, 2, 1, &n);
    if (first < 0 || n != 1) return 1;
    rcclTelemetrySetQpRole(0, 2, first, 1);
    stuck = rcclTelemetryResolveQp(0, 2, first);
    static const uint8_t lgid[16] = {0xfe, 0x80, [15] = 1}, rgid[16] = {0xfe, 0x80, [15] = 2};
    rcclTelemetryQpSetPeer(stuck, 4660, lgid, 0, 77, rgid, 0);
    stuck_ts = rcclTelemetryPostTs(stuck);
    rcclTelemetryQpSendPosted(stuck, 0);
    rcclTelemetryQpSendPosted(stuck, 1);
  }
  printf("ready\n");
  fflush(stdout);
  struct timespec tick = {0, 10 * 1000 * 1000};
  for (uint64_t r = 0;; r++) {
    request(1, &c1, r);
    if (!stuck) {
      nanosleep(&tick, NULL);
      continue;
    }
    struct pollfd pfd = {0, POLLIN, 0};
    char buf[64];
    if (poll(&pfd, 1, 10) == 1 && read(0, buf, sizeof buf) > 0 && strncmp(buf, "complete", 8) == 0) {
      rcclTelemetryQpWqeComplete(stuck, stuck_ts);
      stuck = NULL;
      printf("completed\n");
      fflush(stdout);
    }
  }
}
