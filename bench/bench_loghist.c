/*
 * bench_loghist.c -- what the log-scale completion histogram costs: the rounds of children
 * with and without it, paired differences, its table rows and JSON.
 */

#include "bench.h"

/*
 * What the log-scale completion histogram costs, in the same run as the main table: the same
 * hot-path and breakdown children at N=1 and N=16 with RCCL_TELEMETRY_LOG_HISTOGRAM=0 (the
 * seed's linear histogram alone: the figures before the log-scale one), one of each per round
 * beside the default children (both histograms), and Flush/memory children at both sizes.
 * The added cost per sampled completion is read from the PostTs + QpWqeComplete family at N=1,
 * where every completion is sampled; each round's pair of children gives one paired delta.
 */
static const char* const kLogCfg[2] = {"n1_nolog", "n16_nolog"};
static const char* const kLogWith[2] = {"n1", "n16"};
static const char* const kLogEnv[2][4] = {
    {"RCCL_TELEMETRY_ENABLE=1", "RCCL_TELEMETRY_LATENCY_SAMPLE=1", "RCCL_TELEMETRY_LOG_HISTOGRAM=0", NULL},
    {"RCCL_TELEMETRY_ENABLE=1", "RCCL_TELEMETRY_LATENCY_SAMPLE=16", "RCCL_TELEMETRY_LOG_HISTOGRAM=0", NULL}};

static const char* const kLogWithEnv[2][3] = {{"RCCL_TELEMETRY_ENABLE=1", "RCCL_TELEMETRY_LATENCY_SAMPLE=1", NULL},
                                              {"RCCL_TELEMETRY_ENABLE=1", "RCCL_TELEMETRY_LATENCY_SAMPLE=16", NULL}};

void loghist_round(int r, const char* reps_s, const char* nreq_s, const char* breps_s) {
  for (int k = 0; k < 2; k++) {
    int c = (r + k) % 2;
    const char* a[] = {"hot", kLogCfg[c], reps_s, nreq_s, NULL};
    run_child(kLogEnv[c], a);
    const char* b[] = {"breakdown", kLogCfg[c], breps_s, nreq_s, NULL};
    run_child(kLogEnv[c], b);
    /* both in one process (child_logpair); alternate rounds swap the two channels' roles */
    const char* lp[] = {"logpair", kLogWith[c], breps_s, nreq_s, (r & 1) ? "1" : "0", NULL};
    run_child(kLogWithEnv[c], lp);
  }
}

void loghist_flush_children(int quick) {
  const char* env[] = {"RCCL_TELEMETRY_ENABLE=1", "RCCL_TELEMETRY_LOG_HISTOGRAM=0", NULL};
  for (int r = 0; r < (quick ? 1 : 2); r++) {
    const char* a[] = {"flush", "small_nolog", "8", "64", "16", "1", NULL};
    run_child(env, a);
  }
  const char* b[] = {"flush", "big_nolog", "32", "512", "16", "1", NULL};
  run_child(env, b);
}

/* cm.<with> - cm.<without>, child by child (the i-th child of each ran in the same round) */
static Stats paired_delta(const char* with, const char* without, const char* out) {
  char kw[64], kn[64];
  snprintf(kw, sizeof kw, "cm.%.50s", with);
  snprintf(kn, sizeof kn, "cm.%.50s", without);
  Series* w = series(kw);
  Series* n = series(kn);
  for (int i = 0; i < w->n && i < n->n; i++) add_sample(out, w->v[i] - n->v[i]);
  return stats(out);
}

typedef struct LogFig {
  double with_mix, without_mix, with_lat, without_lat;
  Stats d_mix, d_lat;
  double per_sampled; /* added ns per sampled completion, separate children */
  /* the latency family paired batch by batch in one process (child_logpair) */
  double ip_with, ip_without;
  Stats ip_child, ip_all; /* added ns per WQE: the children's medians, and every pair */
  double ip_per_sampled;
  /* the same over the children that ran at the machine's normal speed (their no-hook loop
   * within 10% of the fastest child's): this VM has speed phases of seconds that slow every
   * loop, and every added cost with it, by up to 2-3x */
  double ip_normal, ip_normal_per_sampled;
  int ip_normal_n;
} LogFig;

static LogFig loghist_figures(int c) {
  static LogFig cache[2];
  static int done[2];
  if (done[c]) return cache[c];
  LogFig f;
  char a[64], b[64], o[64];
  snprintf(a, sizeof a, "over.lib.%s", kLogWith[c]);
  snprintf(b, sizeof b, "over.lib.%s", kLogCfg[c]);
  snprintf(o, sizeof o, "logdelta.mix.%s", kLogWith[c]);
  f.with_mix = child_median(a);
  f.without_mix = child_median(b);
  f.d_mix = paired_delta(a, b, o);
  snprintf(a, sizeof a, "brk.lib.lat.%s", kLogWith[c]);
  snprintf(b, sizeof b, "brk.lib.lat.%s", kLogCfg[c]);
  snprintf(o, sizeof o, "logdelta.lat.%s", kLogWith[c]);
  f.with_lat = child_median(a);
  f.without_lat = child_median(b);
  f.d_lat = paired_delta(a, b, o);
  f.per_sampled = f.d_lat.median * (c == 0 ? 1 : 16);
  snprintf(a, sizeof a, "lp.with.%s", kLogWith[c]);
  f.ip_with = child_median(a);
  snprintf(a, sizeof a, "lp.without.%s", kLogWith[c]);
  f.ip_without = child_median(a);
  snprintf(a, sizeof a, "lp.added.%s", kLogWith[c]);
  snprintf(b, sizeof b, "cm.lp.added.%s", kLogWith[c]);
  f.ip_child = stats(b);
  f.ip_all = stats(a);
  f.ip_per_sampled = f.ip_child.median * (c == 0 ? 1 : 16);
  snprintf(a, sizeof a, "cm.lp.none.%s", kLogWith[c]);
  Series* sn = series(a);
  Series* sa = series(b);
  double lo = INFINITY;
  for (int i = 0; i < sn->n; i++)
    if (sn->v[i] < lo) lo = sn->v[i];
  double* sel = malloc(sizeof(double) * (size_t)(sa->n > 0 ? sa->n : 1));
  if (!sel) die("malloc");
  f.ip_normal_n = 0;
  for (int i = 0; i < sa->n && i < sn->n; i++)
    if (sn->v[i] <= 1.1 * lo) sel[f.ip_normal_n++] = sa->v[i];
  if (f.ip_normal_n) qsort(sel, (size_t)f.ip_normal_n, sizeof(double), cmp_double);
  f.ip_normal = f.ip_normal_n ? quantile(sel, f.ip_normal_n, 0.5) : NAN;
  f.ip_normal_per_sampled = f.ip_normal * (c == 0 ? 1 : 16);
  free(sel);
  done[c] = 1;
  cache[c] = f;
  return f;
}

void loghist_print(void) {
  printf("\nLog-scale completion histogram: both histograms (the default) against the seed's alone\n"
         "(RCCL_TELEMETRY_LOG_HISTOGRAM=0), same run. ns per WQE above the no-hook loop, median of child\n"
         "medians; 'added' is the median of per-round paired differences [quartiles]:\n");
  printf("  %-34s %8s %9s %8s %-22s %s\n", "", "both", "seed only", "added", "", "added per sampled completion");
  for (int c = 0; c < 2; c++) {
    LogFig f = loghist_figures(c);
    const char* n = c == 0 ? "N=1 " : "N=16";
    printf("  %s full hook mix                  %8.2f %9.2f %+8.2f [%+.2f .. %+.2f]\n", n, f.with_mix, f.without_mix,
           f.d_mix.median, f.d_mix.p25, f.d_mix.p75);
    printf("  %s PostTs + QpWqeComplete         %8.2f %9.2f %+8.2f [%+.2f .. %+.2f]  %+.2f ns%s\n", n, f.with_lat,
           f.without_lat, f.d_lat.median, f.d_lat.p25, f.d_lat.p75, f.per_sampled,
           c == 0 ? " (every completion sampled)" : " (x16: 1 in 16 sampled; noise x16 too)");
  }
  printf("  the same family paired batch by batch in one process (child_logpair: a channel whose slots record\n"
         "  the log-scale histogram and one whose slots do not, as with RCCL_TELEMETRY_LOG_HISTOGRAM=0):\n");
  for (int c = 0; c < 2; c++) {
    LogFig f = loghist_figures(c);
    printf("  %s PostTs + QpWqeComplete, 1 process %8.2f %9.2f %+8.2f children [%+.2f .. %+.2f], all pairs [%+.2f .. "
           "%+.2f]  %+.2f ns\n",
           c == 0 ? "N=1 " : "N=16", f.ip_with, f.ip_without, f.ip_child.median, f.ip_child.min, f.ip_child.max,
           f.ip_all.p25, f.ip_all.p75, f.ip_per_sampled);
  }
  for (int c = 0; c < 2; c++) {
    LogFig f = loghist_figures(c);
    printf("  %s the children at normal speed (no-hook loop within 10%% of the fastest): %+.2f (%d of %d)  %+.2f ns\n",
           c == 0 ? "N=1 " : "N=16", f.ip_normal, f.ip_normal_n, f.ip_child.n, f.ip_normal_per_sampled);
  }
  LogFig f1 = loghist_figures(0);
  printf("  target: added cost per sampled completion <= 1 ns (N=1, PostTs + QpWqeComplete, paired in one\n"
         "  process, normal-speed children): %.2f ns, %s (all children: %.2f ns; separate children: %.2f ns)\n",
         f1.ip_normal_per_sampled,
         !isfinite(f1.ip_normal_per_sampled) ? "NOT MEASURED" : f1.ip_normal_per_sampled <= 1.0 ? "met" : "MISSED",
         f1.ip_per_sampled, f1.per_sampled);
  const char* sz[2][2] = {{"small", "small_nolog"}, {"big", "big_nolog"}};
  const char* names[2] = {"8x64x16", "32x512x16"};
  for (int s = 0; s < 2; s++) {
    char a[64], b[64], c[64], d[64];
    snprintf(a, sizeof a, "%s.flush_ms", sz[s][0]);
    snprintf(b, sizeof b, "%s.flush_ms", sz[s][1]);
    snprintf(c, sizeof c, "%s.rss_per_slot", sz[s][0]);
    snprintf(d, sizeof d, "%s.rss_per_slot", sz[s][1]);
    printf("  Flush %-9s both %8.2f ms, seed only %8.2f ms; RSS per QP slot both %7.1f B, seed only %7.1f B\n",
           names[s], stats(a).median, stats(b).median, stats(c).median, stats(d).median);
  }
}

void loghist_json(Json* j) {
  j_open(j, "log_histogram", '{');
  for (int c = 0; c < 2; c++) {
    LogFig f = loghist_figures(c);
    j_open(j, c == 0 ? "enabled_n1" : "enabled_n16", '{');
    j_num(j, "mix_both_ns_per_wqe", f.with_mix);
    j_num(j, "mix_seed_only_ns_per_wqe", f.without_mix);
    j_stats(j, "mix_added_ns_per_wqe_paired", f.d_mix);
    j_num(j, "lat_both_ns_per_wqe", f.with_lat);
    j_num(j, "lat_seed_only_ns_per_wqe", f.without_lat);
    j_stats(j, "lat_added_ns_per_wqe_paired", f.d_lat);
    j_num(j, "added_ns_per_sampled_completion", f.per_sampled);
    j_open(j, "one_process", '{');
    j_num(j, "lat_both_ns_per_wqe", f.ip_with);
    j_num(j, "lat_seed_only_ns_per_wqe", f.ip_without);
    j_stats(j, "lat_added_ns_per_wqe_child_medians", f.ip_child);
    j_stats(j, "lat_added_ns_per_wqe_all_pairs", f.ip_all);
    j_num(j, "added_ns_per_sampled_completion", f.ip_per_sampled);
    j_num(j, "normal_speed_children", f.ip_normal_n);
    j_num(j, "normal_speed_added_ns_per_sampled_completion", f.ip_normal_per_sampled);
    j_close(j, '}');
    j_close(j, '}');
  }
  LogFig f1 = loghist_figures(0);
  j_num(j, "target_added_ns_per_sampled_completion", 1.0);
  j_str(j, "target_measured_by", "enabled_n1.one_process.normal_speed_added_ns_per_sampled_completion");
  j_bool(j, "target_met", isfinite(f1.ip_normal_per_sampled) && f1.ip_normal_per_sampled <= 1.0);
  const char* sz[4] = {"small", "small_nolog", "big", "big_nolog"};
  for (int s = 0; s < 4; s++) {
    char k[64], name[64];
    j_open(j, sz[s], '{');
    snprintf(k, sizeof k, "%s.flush_ms", sz[s]);
    snprintf(name, sizeof name, "flush_ms");
    j_stats(j, name, stats(k));
    snprintf(k, sizeof k, "%s.rss_per_slot", sz[s]);
    j_stats(j, "rss_bytes_per_qp_slot", stats(k));
    snprintf(k, sizeof k, "%s.file_bytes", sz[s]);
    j_stats(j, "file_bytes", stats(k));
    j_close(j, '}');
  }
  j_close(j, '}');
}
