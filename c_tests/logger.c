/*
 * logger.c: the library's lines through a logger with NCCL's signature
 * (rcclTelemetrySetLogger), and rcclTelemetryInit's results (run by rust_tests/logger.rs, as C
 * and as C++ as RCCL would build it). The logger is declared exactly as RCCL declares
 * ncclDebugLog, with the level enum of RCCL's nccl_common.h, and passed through the
 * three-line trampoline the header documents (no cast between function types). It prints each line it gets on stdout:
 *   LOG <level> <flags in hex> <file>:<line> <the formatted message>
 *
 *   logger on     the logger installed before Init; Init (its lines, the signal handlers'
 *                 line); a refused registration (a warning); the logger removed; another
 *                 refused registration (on stderr); Flush; Init again; Init in a forked child.
 *   logger init   Init alone, with the logger (for the disabled and failed runs).
 *   logger reenter  a logger that calls back into the library on every line (Init, Flush,
 *                 SetParam, CommInit/CommFinalize, SwCapture; printed as "reentered ..."):
 *                 Init with a line to say (run it with a malformed variable), a refused
 *                 registration, then Flush. Every re-entrant call returns at once.
 * Also prints "init <rc>", "flush <rc>", "child init <rc>" on stdout.
 */
#include "rccl_telemetry.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* As in NCCL's and RCCL's nccl_common.h. */
typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

static int reenter;

static void ncclDebugLog(ncclDebugLogLevel level, unsigned long flags, const char *filefunc, int line,
                         const char *fmt, ...) {
  char msg[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("LOG %d %#lx %s:%d %s\n", (int)level, flags, filefunc, line, msg);
  fflush(stdout);
  if (reenter) {
    RcclTelemetrySwSnapshot s;
    int init = rcclTelemetryInit(), flush = rcclTelemetryFlush();
    int param = rcclTelemetrySetParam("RCCL_TELEMETRY_DEBUG", "1");
    rcclTelemetryComm_t *comm = rcclTelemetryCommInit(1, 0, 1);
    rcclTelemetryCommFinalize(comm);
    int capture = rcclTelemetrySwCapture(&s, 1);
    printf("reentered init %d flush %d param %d comm %s capture %d\n", init, flush, param, comm ? "yes" : "NULL",
           capture);
    fflush(stdout);
  }
}

/* The trampoline of rcclTelemetrySetLogger's documentation, as RCCL writes it. */
static void telemetryLog(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  va_list ap; va_start(ap, fmt); const char *msg = va_arg(ap, const char *); va_end(ap);
  ncclDebugLog((ncclDebugLogLevel)level, flags, file, line, "%s", msg);
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  reenter = strcmp(argv[1], "reenter") == 0;
  rcclTelemetrySetLogger(telemetryLog);
  int rc = rcclTelemetryInit();
  printf("init %d\n", rc);
  fflush(stdout);
  if (strcmp(argv[1], "init") == 0) return 0;
  if (rc != RCCL_TELEMETRY_INIT_STARTED) return 3;
  if (reenter) {
    if (rcclTelemetryRegisterDevice(0, "", "IB-CAST") != -1) return 4;
    printf("flush %d\n", rcclTelemetryFlush());
    return 0;
  }
  if (rcclTelemetryRegisterDevice(0, "", "IB-CAST") != -1) return 4;
  rcclTelemetrySetLogger(NULL);
  if (rcclTelemetryRegisterDevice(1, "", "IB-CAST") != -1) return 4;
  printf("flush %d\n", rcclTelemetryFlush());
  printf("init %d\n", rcclTelemetryInit());
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    printf("child init %d\n", rcclTelemetryInit());
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 5;
  return 0;
}
