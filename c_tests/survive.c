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
