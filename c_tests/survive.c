/*
 * survive: a process that telemetry must outlive. It sets up one device with traffic on two
 * threads, prints "ready", then behaves as its mode says; the Rust test
 * (rust_tests/survive.rs) signals or kills it and checks the file it left.
 *
 *   survive busy                 hooks until killed
 *   survive own-handler-exit     a SIGTERM handler installed BEFORE Init that calls exit(7)
 *   survive own-handler-_exit    the same handler calling _exit(9) (no exit handlers)
 *   survive late-handler         a SIGTERM handler installed AFTER Init; it must still run
 *   survive fork                 a forked child counts and exits; the parent flushes
 *   survive exit-racing          exit() while two threads still call hooks
 *   survive sigwait              blocks SIGTERM after Init and takes it with sigwait(), then exit(0)
 *   survive flush-big            32x128x16 slots, prints "flushing" and calls Flush (signalled meanwhile)
 *   survive after-flush          every entry point after Flush must be inert; exit 0 if so
 */
#define _GNU_SOURCE
#include "rccl_telemetry.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static RcclQpStats *g_qp[2];
static RcclChannelStats *g_ch;
static atomic_int g_stop;
static atomic_int g_running;

static void *traffic(void *arg) {
  RcclQpStats *qp = (RcclQpStats *)arg;
  int started = 0;
  while (!atomic_load(&g_stop)) {
    int64_t ts = rcclTelemetryPostTs(qp);
    rcclTelemetryQpSendPosted(qp, 0);
    rcclTelemetryWqeSize(0, 4096);
    rcclTelemetryBytes(0, 1, 4096);
    rcclTelemetryQpWqeComplete(qp, ts);
    if (qp == g_qp[0]) rcclTelemetryChRequestCompleted(g_ch);
    if (!started) {
      started = 1;
      atomic_fetch_add(&g_running, 1);
    }
  }
  return NULL;
}

static void say(const char *s) {
  /* async-signal-safe */
  ssize_t r = write(1, s, strlen(s));
  (void)r;
}

static void handler_exit(int sig) {
  (void)sig;
  say("own handler called\n");
  exit(7);
}

static void handler__exit(int sig) {
  (void)sig;
  say("own handler called\n");
  _exit(9);
}

static void late_handler(int sig) {
  (void)sig;
  say("late handler called\n");
  atomic_store(&g_stop, 1);
}

static void setup(void) {
  if (rcclTelemetryInit() != 0) fprintf(stderr, "survive: telemetry did not start\n");
  rcclTelemetryRegisterDevice(0, "mlx5_0", "IB-CAST");
  int n;
  int first = rcclTelemetrySetupChannel(0, 0, 2, &n);
  for (int q = 0; q < 2; q++) g_qp[q] = rcclTelemetryResolveQp(0, 0, first + q);
  g_ch = rcclTelemetryResolveChannel(0, 0);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "busy";
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  if (!strcmp(mode, "own-handler-exit") || !strcmp(mode, "own-handler-_exit")) {
    sa.sa_handler = !strcmp(mode, "own-handler-exit") ? handler_exit : handler__exit;
    sigaction(SIGTERM, &sa, NULL);
  }
  setup();
  if (!strcmp(mode, "after-flush")) {
    for (int i = 0; i < 100; i++) rcclTelemetryQpSendPosted(g_qp[0], 0);
    if (rcclTelemetryFlush() != 0) return 10;
    int bad = 0, n = 77;
    bad |= (rcclTelemetryOn() != 0) << 0;
    bad |= (rcclTelemetryRegisterDevice(1, "mlx5_1", "IB-CAST") != -1) << 1;
    bad |= (rcclTelemetrySetupChannel(0, 1, 4, &n) != -1 || n != 0) << 2;
    bad |= (rcclTelemetryResolveQp(0, 0, 0) != NULL) << 3;
    bad |= (rcclTelemetryResolveChannel(0, 0) != NULL) << 4;
    RcclTelemetrySwSnapshot snap[2];
    bad |= (rcclTelemetrySwCapture(snap, 2) != -1) << 5;
    for (int i = 0; i < 100; i++) {
      rcclTelemetryQpSendPosted(g_qp[0], 0);
      rcclTelemetryWqePosted(0, 0, 0, 1);
      rcclTelemetryBytes(0, 1, 4096);
    }
    bad |= (rcclTelemetryFlush() != 0) << 6;
    if (bad) fprintf(stderr, "survive: after Flush, inert checks failed: 0x%x\n", bad);
    return bad ? 11 : 0; /* exit: the file must not be rewritten */
  }
  if (!strcmp(mode, "flush-big")) {
    for (int d = 0; d < 32; d++) {
      char name[16];
      snprintf(name, sizeof name, "mlx5_%d", d);
      rcclTelemetryRegisterDevice(d, name, "IB-CAST");
      for (int c = 0; c < 128; c++) {
        int n;
        rcclTelemetrySetupChannel(d, c, 16, &n);
      }
    }
    for (int i = 0; i < 1000; i++) rcclTelemetryQpSendPosted(g_qp[0], 0);
    say("ready\nflushing\n");
    int rc = rcclTelemetryFlush();
    say(rc == 0 ? "flushed\n" : "flush failed\n");
    for (;;) pause(); /* the signal ends the process */
  }
  if (!strcmp(mode, "late-handler")) {
    sa.sa_handler = late_handler;
    sigaction(SIGTERM, &sa, NULL);
  }
  if (!strcmp(mode, "fork")) {
    for (int i = 0; i < 1000; i++) rcclTelemetryQpSendPosted(g_qp[0], 1);
    pid_t child = fork();
    if (child == 0) {
      for (int i = 0; i < 1000; i++) rcclTelemetryQpSendPosted(g_qp[1], 1);
      int rc = rcclTelemetryFlush(); /* a child writes nothing: 0, and no file */
      exit(rc == 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 3;
    return rcclTelemetryFlush() == 0 ? 0 : 4;
  }
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, traffic, g_qp[i]);
  while (atomic_load(&g_running) < 2) sched_yield(); /* traffic is flowing before "ready" */
  say("ready\n");
  if (!strcmp(mode, "sigwait")) {
    /* As MPI runtimes and servers do: SIGTERM blocked in every thread, taken by sigwait. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    atomic_store(&g_stop, 1);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    say("blocked\n");
    int sig = 0;
    sigwait(&set, &sig);
    say(sig == SIGTERM ? "sigwait got SIGTERM\n" : "sigwait got another signal\n");
    exit(0);
  }
  if (!strcmp(mode, "exit-racing")) {
    struct timespec t = {0, 100 * 1000 * 1000};
    nanosleep(&t, NULL);
    exit(0); /* the threads are still calling hooks */
  }
  while (!atomic_load(&g_stop)) {
    struct timespec t = {0, 10 * 1000 * 1000};
    nanosleep(&t, NULL);
  }
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  say("stopped\n");
  return 5;
}
