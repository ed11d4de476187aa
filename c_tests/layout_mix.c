/*
 * layout_mix.c: two components of one process, built against headers of different inline
 * layouts. The main part includes the installed header and starts telemetry; the other part
 * (this file again with LAYOUT_MIX_OTHER, against a header of layout 99: the Makefile's
 * build/abi/other_layout/) receives the communicator and asks for handles. Every function that
 * hands out a handle must refuse it (the header's layout check), and counting stops for the
 * process with one line.
 *
 * Usage: layout_mix commInit|commResolveQp|commResolveChannel|resolveQp|resolveChannel (the
 * call the other component makes). Run with RCCL_TELEMETRY_ENABLE=1; exits 0 when the other
 * component got NULL and telemetry is off afterwards.
 */
#include "rccl_telemetry.h"

#include <stdio.h>
#include <string.h>

#ifdef LAYOUT_MIX_OTHER
/* The other component: the handle it is handed, or NULL. */
void *layout_mix_other(const char *call, rcclTelemetryComm_t *comm);
void *layout_mix_other(const char *call, rcclTelemetryComm_t *comm) {
  if (strcmp(call, "commInit") == 0) return rcclTelemetryCommInit(0x99, 0, 1);
  if (strcmp(call, "commResolveQp") == 0) return rcclTelemetryCommResolveQp(comm, 0, 0, 0);
  if (strcmp(call, "commResolveChannel") == 0) return rcclTelemetryCommResolveChannel(comm, 0, 0);
  if (strcmp(call, "resolveQp") == 0) return rcclTelemetryResolveQp(0, 0, 0);
  if (strcmp(call, "resolveChannel") == 0) return rcclTelemetryResolveChannel(0, 0);
  fprintf(stderr, "layout_mix: unknown call %s\n", call);
  return comm;
}
#else
void *layout_mix_other(const char *call, rcclTelemetryComm_t *comm);

int main(int argc, char **argv) {
  const char *call = argc > 1 ? argv[1] : "commResolveQp";
  int n = 0;
  if (rcclTelemetryInit() != RCCL_TELEMETRY_INIT_STARTED || rcclTelemetryRegisterDevice(0, "mlx5_0", "IB-CAST") != 0 ||
      rcclTelemetrySetupChannel(0, 0, 1, &n) != 0) {
    fprintf(stderr, "layout_mix: telemetry did not start\n");
    return 2;
  }
  rcclTelemetryComm_t *comm = rcclTelemetryCommInit(0x5eed, 0, 1);
  if (!comm || rcclTelemetryCommSetupChannel(comm, 0, 0, 1, &n) != 0 || !rcclTelemetryCommResolveQp(comm, 0, 0, 0)) {
    fprintf(stderr, "layout_mix: the communicator did not start\n");
    return 2;
  }
  void *got = layout_mix_other(call, comm);
  int stopped = rcclTelemetryOn() == 0 && rcclTelemetryCommResolveQp(comm, 0, 0, 0) == NULL;
  printf("layout_mix: %s handed the other layout %s; telemetry %s\n", call, got ? "a handle" : "nothing",
         stopped ? "stopped" : "still counts");
  return got != NULL || !stopped;
}
#endif
