/*
 * bench_report.c -- the table's rows from the series: library against reference per
 * configuration, ratios of medians, the clock-per-poll rows, and their JSON.
 */

#include "bench.h"

/* callgrind instructions per WQE of loop `name` in configuration cfg, minus the no-hook loop if `over` */
double instr_over(const char* name, const char* cfg, int over) {
  char k[96], kn[96];
  snprintf(k, sizeof k, "instr.%s.%s", name, cfg);
  snprintf(kn, sizeof kn, "instr.none.%s", cfg);
  return last(k) - (over ? last(kn) : 0);
}

/* median over children of each child's median */
double child_median(const char* key) {
  char k[96];
  snprintf(k, sizeof k, "cm.%s", key);
  return stats(k).median;
}

/* ratio of the child medians; undefined (NaN, "null" in JSON) when the reference costs
   less than 0.5 ns/WQE, i.e. when both are within noise of zero (the disabled case) */
double ratio_of_medians(const char* num, const char* den) {
  double a = child_median(num), b = child_median(den);
  return (isfinite(a) && isfinite(b) && b >= 0.5) ? a / b : NAN;
}

/* per-child ratio lib/ref of median overheads (same process, same minute): its spread */
void per_child_ratio(const char* cfg) {
  char kl[64], kr[64], kq[64];
  snprintf(kl, sizeof kl, "cm.over.lib.%s", cfg);
  snprintf(kr, sizeof kr, "cm.over.ref.%s", cfg);
  snprintf(kq, sizeof kq, "ratio.%s", cfg);
  Series* l = series(kl);
  Series* r = series(kr);
  for (int i = 0; i < l->n && i < r->n; i++)
    if (r->v[i] >= 0.5) add_sample(kq, l->v[i] / r->v[i]);
}

void print_stats_row(const char* label, Stats s, const char* unit) {
  printf("  %-44s %10.3f %-3s [%.3f .. %.3f]  min %.3f max %.3f  n=%d\n", label, s.median, unit, s.p25, s.p75,
         s.min, s.max, s.n);
}

/* a hot-path figure: median of the children's medians, their range, and the pooled quartiles */
void print_hot_row(const char* label, const char* key) {
  char k[96];
  snprintf(k, sizeof k, "cm.%s", key);
  Stats c = stats(k), p = stats(key);
  printf("  %-26s %8.3f ns  children [%.3f .. %.3f] n=%d   all reps p25..p75 [%.3f .. %.3f] n=%d\n", label,
         c.median, c.min, c.max, c.n, p.p25, p.p75, p.n);
}

/* print_hot_row for the library and the reference in each of the 3 configurations, from the
   series `what`.lib.<cfg> and `what`.ref.<cfg> */
const char* const kCfgLabel[3] = {"disabled", "enabled N=1", "enabled N=16"};
void print_lib_ref_rows(const char* what, const char* const cfgs[3]) {
  for (int c = 0; c < 3; c++) {
    char k[64], label[96];
    snprintf(k, sizeof k, "%s.lib.%s", what, cfgs[c]);
    snprintf(label, sizeof label, "library   %s", kCfgLabel[c]);
    print_hot_row(label, k);
    snprintf(k, sizeof k, "%s.ref.%s", what, cfgs[c]);
    snprintf(label, sizeof label, "reference %s", kCfgLabel[c]);
    print_hot_row(label, k);
  }
}


void j_hot(Json* j, const char* name, const char* key) {
  char k[96];
  snprintf(k, sizeof k, "cm.%s", key);
  j_open(j, name, '{');
  j_stats(j, "per_child_medians", stats(k));
  j_stats(j, "all_reps", stats(key));
  j_close(j, '}');
}

/* The one-clock-read-per-poll rows: the library mix with QpWqeComplete and with
   PollTs + QpWqeCompleteAt, ns per WQE above the no-hook loop, and their paired difference. */
void print_pollts_rows(const char* const cfgs[3]) {
  printf("\nOne clock read per poll (4 completions per poll), library mix with guards, ns per WQE above the\n"
         "no-hook loop: QpWqeComplete (a clock read per sampled completion) vs PollTs once per poll +\n"
         "QpWqeCompleteAt, and At minus per-WQE paired batch by batch (negative = At cheaper):\n");
  for (int c = 0; c < 3; c++) {
    char k[64], label[96];
    snprintf(k, sizeof k, "pt.over.lib.%s", cfgs[c]);
    snprintf(label, sizeof label, "Complete      %s", kCfgLabel[c]);
    print_hot_row(label, k);
    snprintf(k, sizeof k, "pt.over.at.%s", cfgs[c]);
    snprintf(label, sizeof label, "PollTs+At     %s", kCfgLabel[c]);
    print_hot_row(label, k);
    snprintf(k, sizeof k, "pt.at_minus_lib.%s", cfgs[c]);
    snprintf(label, sizeof label, "At - Complete %s", kCfgLabel[c]);
    print_hot_row(label, k);
  }
  printf("\nThe inline layout's negotiation, ns per WQE: the library mix against this header minus the same\n"
         "loop against 0.1.0's header (hooks whose layout was assumed), paired batch by batch:\n");
  for (int c = 0; c < 3; c++) {
    char k[64], label[96];
    snprintf(k, sizeof k, "pt.lib_minus_prev.%s", cfgs[c]);
    snprintf(label, sizeof label, "negotiated - 0.1.0 %s", kCfgLabel[c]);
    print_hot_row(label, k);
  }
  printf("\nThe library loaded at run time, ns per WQE: the library mix through the header's loader\n"
         "(RCCL_TELEMETRY_DLOPEN: the hot block through a pointer) minus the same loop linked, paired batch by\n"
         "batch (goal: within 0.1 disabled):\n");
  for (int c = 0; c < 3; c++) {
    char k[64], label[96];
    snprintf(k, sizeof k, "pt.dl_minus_lib.%s", cfgs[c]);
    snprintf(label, sizeof label, "dlopen - linked %s", kCfgLabel[c]);
    print_hot_row(label, k);
  }
}

void j_pollts(Json* j, const char* const cfgs[3]) {
  j_open(j, "one_clock_read_per_poll_ns_per_wqe", '{');
  j_str(j, "what",
        "library mix with RCCL's guards; completions drained 4 per poll; QpWqeComplete vs PollTs once per "
        "poll that returned completions + QpWqeCompleteAt; overheads above the no-hook loop of the same child");
  for (int c = 0; c < 3; c++) {
    char k[64];
    j_open(j, cfgs[c], '{');
    snprintf(k, sizeof k, "pt.over.lib.%s", cfgs[c]);
    j_hot(j, "per_wqe_complete_overhead", k);
    snprintf(k, sizeof k, "pt.over.at.%s", cfgs[c]);
    j_hot(j, "pollts_complete_at_overhead", k);
    snprintf(k, sizeof k, "pt.at_minus_lib.%s", cfgs[c]);
    j_hot(j, "at_minus_per_wqe", k);
    j_close(j, '}');
  }
  j_close(j, '}');
  j_open(j, "inline_layout_negotiation_ns_per_wqe", '{');
  j_str(j, "what",
        "the library mix with RCCL's guards against this header, minus the same loop compiled against 0.1.0's "
        "header (inline hooks whose layout was assumed, not negotiated), paired batch by batch in one child");
  for (int c = 0; c < 3; c++) {
    char k[64];
    snprintf(k, sizeof k, "pt.lib_minus_prev.%s", cfgs[c]);
    j_hot(j, cfgs[c], k);
  }
  j_close(j, '}');
  j_open(j, "dlopen_minus_linked_ns_per_wqe", '{');
  j_str(j, "what",
        "the library mix with RCCL's guards through the header's loader (RCCL_TELEMETRY_DLOPEN, the hot block "
        "read through a pointer), minus the same loop linked against the library, paired batch by batch in one "
        "child");
  for (int c = 0; c < 3; c++) {
    char k[64];
    snprintf(k, sizeof k, "pt.dl_minus_lib.%s", cfgs[c]);
    j_hot(j, cfgs[c], k);
  }
  j_close(j, '}');
}
