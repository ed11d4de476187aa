/*
 * dlclose: loads librccl_telemetry with dlopen (as a plugin host would), enables every
 * background feature (sampler, interval writer, signal handlers), drives hooks, then
 * dlcloses it while another library (libm) stays loaded, and goes on running. The library
 * is linked NODELETE (its handles are valid for the life of the process), so dlclose leaves
 * it mapped: a handle resolved before dlclose still counts, and a later SIGTERM still
 * writes the file before the process dies of it.
 *
 * Usage: dlclose /path/to/librccl_telemetry.so
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "proc_threads.h"
#include <string.h>
#include <unistd.h>


typedef int (*init_fn)(void);
typedef int (*register_fn)(int, const char *, const char *);
typedef int (*setup_fn)(int, int, int, int *);
typedef void *(*resolve_fn)(int, int, int);
typedef void (*posted_fn)(void *, int);

#define SYM(T, name)                                \
  T name = (T)dlsym(lib, #name);                    \
  if (!name) {                                      \
    fprintf(stderr, "no %s\n", #name);              \
    return 2;                                       \
  }

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  void *m = dlopen("libm.so.6", RTLD_NOW);
  int threads0 = thread_count();
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
  SYM(init_fn, rcclTelemetryInit)
  SYM(register_fn, rcclTelemetryRegisterDevice)
  SYM(setup_fn, rcclTelemetrySetupChannel)
  SYM(resolve_fn, rcclTelemetryResolveQp)
  SYM(posted_fn, rcclTelemetryQpSendPosted)
  if (rcclTelemetryInit() != 0) return 3;
  rcclTelemetryRegisterDevice(0, "mlx5_0", "IB-CAST");
  int n;
  int first = rcclTelemetrySetupChannel(0, 0, 1, &n);
  void *qp = rcclTelemetryResolveQp(0, 0, first);
  for (int i = 0; i < 123; i++) rcclTelemetryQpSendPosted(qp, 0);
  int threads1 = thread_count();
  if (dlclose(lib) != 0) { fprintf(stderr, "dlclose: %s\n", dlerror()); return 4; }
  for (int i = 0; i < 77; i++) rcclTelemetryQpSendPosted(qp, 1); /* still mapped, still counting */
  int threads2 = thread_count();
  struct sigaction cur;
  sigaction(SIGTERM, NULL, &cur);
  printf("threads before %d, loaded %d, after dlclose %d; SIGTERM handled: %d; libm loaded: %d\n",
         threads0, threads1, threads2, cur.sa_handler != SIG_DFL, m != NULL && dlsym(m, "cos") != NULL);
  fflush(stdout);
  raise(SIGTERM); /* the library's handler writes the file, then the default action ends us */
  return 6;
}
