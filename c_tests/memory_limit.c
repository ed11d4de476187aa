/*
 * memory_limit.c: the library under a memory limit (run under `ulimit -v`, by
 * rust_tests/memory.rs). The program's own exit status must survive whatever memory does.
 *
 *   memory_limit huge            rcclTelemetrySetupChannel(0, 1, INT_MAX, &n), then Flush:
 *                                refused, the file written; exits 0.
 *   memory_limit exhaust flush   sets up 3 channels of 4,000 QPs with traffic, then takes every
 *   memory_limit exhaust exit    byte of address space the limit leaves (1 MiB, then 4 KiB,
 *                                then 64-byte blocks until malloc refuses), then asks for more
 *                                slots, tells peers and errors, and writes the file with
 *                                rcclTelemetryFlush or from the exit handler; exits 42.
 *
 * Prints on stdout (with write(2): stdio may need memory) "granted N" for the slots the last
 * SetupChannel got, and "flush RC".
 */
#include "rccl_telemetry.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define QPS 4000
#define CHANNELS 3

static void say(const char *what, long v) {
  char line[96];
  int n = snprintf(line, sizeof line, "%s %ld\n", what, v);
  if (n > 0 && write(1, line, (size_t)n) < 0) _exit(3);
}

/* Takes what the limit leaves: blocks of `size` until malloc refuses (never freed). */
static void take_all(size_t size) {
  for (;;) {
    char *p = malloc(size);
    if (!p) return;
    memset(p, 1, size < 4096 ? size : 4096); /* touched: it is really ours */
  }
}

static int huge(void) {
  int n = -1;
  int first = rcclTelemetrySetupChannel(0, 1, INT_MAX, &n);
  if (first != -1 || n != 0) return 2;
  say("granted", n);
  say("flush", rcclTelemetryFlush());
  return 0;
}

static int exhaust(int flush) {
  for (int c = 0; c < CHANNELS; c++) {
    int n = 0;
    if (rcclTelemetrySetupChannel(0, c, QPS, &n) != 0 || n != QPS) return 2;
    for (int i = 0; i < QPS; i++) {
      RcclQpStats *q = rcclTelemetryResolveQp(0, c, i);
      rcclTelemetrySetQpRole(0, c, i, i % 4 != 3);
      int64_t t = rcclTelemetryPostTs(q);
      rcclTelemetryQpSendPosted(q, 1);
      rcclTelemetryQpWqeComplete(q, t);
      rcclTelemetryQpRecvPosted(q);
    }
  }
  take_all(1 << 20);
  take_all(4096);
  take_all(64);
  /* Now nothing is left but what the library set aside. */
  int n = -1;
  rcclTelemetrySetupChannel(0, CHANNELS, 65536, &n);
  say("granted", n);
  unsigned char lg[16] = {0}, rg[16] = {0};
  lg[10] = rg[10] = lg[11] = rg[11] = 0xff;
  lg[12] = rg[12] = 10;
  lg[15] = 1;
  rg[15] = 2;
  for (int c = 0; c < CHANNELS; c++) {
    RcclQpStats *q = rcclTelemetryResolveQp(0, c, QPS - 1);
    rcclTelemetryQpSetPeer(q, 100, lg, 0, 200, rg, 0);
    rcclTelemetryQpCqError(q, 12, 0);
  }
  rcclTelemetryBytes(0, 1, 4096);
  if (flush) say("flush", rcclTelemetryFlush());
  return 42;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  if (rcclTelemetryInit() != 0) return 2;
  if (rcclTelemetryRegisterDevice(0, "mlx5_0", "IB-CAST") != 0) return 2;
  if (strcmp(argv[1], "huge") == 0) return huge();
  if (strcmp(argv[1], "exhaust") == 0 && argc >= 3) return exhaust(strcmp(argv[2], "flush") == 0);
  return 2;
}
