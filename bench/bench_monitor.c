/*
 * bench_monitor.c -- what the WQE latency monitor (RCCL_TELEMETRY_SLOW_NS, or NCCL's
 * NCCL_IB_WQE_LATENCY_THRESHOLD_NS) costs: breakdown children with it on beside the default
 * children (off), one of each per round, paired as the log-scale histogram's are.
 */

#include "bench.h"

/*
 * The monitor's added cost per measured completion is read from the PostTs + QpWqeComplete
 * family at N=1 (every completion measured), against the same family of the default child of
 * the same round ("n1", the monitor off). The threshold is 1 s: no completion of the loop is
 * slow, so what is measured is the monitor's work on every completion (the sums, the QP's own
 * count, the compare); a slow one adds three stores, and its line is the writer thread's.
 */
static const char* const kMonEnv[] = {"RCCL_TELEMETRY_ENABLE=1", "RCCL_TELEMETRY_LATENCY_SAMPLE=1",
                                      "RCCL_TELEMETRY_SLOW_NS=1000000000", NULL};

void monitor_round(int r, const char* breps_s, const char* nreq_s) {
  (void)r;
  const char* a[] = {"breakdown", "n1_mon", breps_s, nreq_s, NULL};
  run_child(kMonEnv, a);
}

typedef struct MonFig {
  double on, off;
  Stats added; /* per-round paired differences of the children's medians */
} MonFig;

static MonFig monitor_figures(void) {
  MonFig f;
  f.on = child_median("brk.lib.lat.n1_mon");
  f.off = child_median("brk.lib.lat.n1");
  Series* w = series("cm.brk.lib.lat.n1_mon");
  Series* n = series("cm.brk.lib.lat.n1");
  for (int i = 0; i < w->n && i < n->n; i++) add_sample("mondelta.lat.n1", w->v[i] - n->v[i]);
  f.added = stats("mondelta.lat.n1");
  return f;
}

static MonFig monitor_cached(void) {
  static MonFig f;
  static int done;
  if (!done) {
    f = monitor_figures();
    done = 1;
  }
  return f;
}

void monitor_print(void) {
  MonFig f = monitor_cached();
  printf("\nWQE latency monitor on (RCCL_TELEMETRY_SLOW_NS=1000000000) against off, same run, N=1 (every\n"
         "completion measured), PostTs + QpWqeComplete, ns per WQE above the no-hook loop:\n");
  printf("  monitor on %8.2f, off %8.2f, added %+.2f [%+.2f .. %+.2f] (median of per-round paired differences)\n",
         f.on, f.off, f.added.median, f.added.p25, f.added.p75);
  printf("  target: added cost <= 1 ns per WQE: %.2f ns, %s\n", f.added.median,
         !isfinite(f.added.median) ? "NOT MEASURED" : f.added.median <= 1.0 ? "met" : "MISSED");
}

void monitor_json(Json* j) {
  MonFig f = monitor_cached();
  j_open(j, "wqe_monitor", '{');
  j_num(j, "lat_on_ns_per_wqe", f.on);
  j_num(j, "lat_off_ns_per_wqe", f.off);
  j_stats(j, "lat_added_ns_per_wqe_paired", f.added);
  j_num(j, "target_added_ns_per_wqe", 1.0);
  j_bool(j, "target_met", isfinite(f.added.median) && f.added.median <= 1.0);
  j_close(j, '}');
}
