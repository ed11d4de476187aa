/*
 * bench_stats.c -- the driver's samples: named series of doubles the children's lines feed,
 * and their statistics (median, quartiles, min, max).
 */

#include "bench.h"

Series g_series[BENCH_MAX_SERIES];
int g_nseries;

Series* series(const char* key) {
  for (int i = 0; i < g_nseries; i++)
    if (strcmp(g_series[i].key, key) == 0) return &g_series[i];
  if (g_nseries == (int)(sizeof g_series / sizeof g_series[0])) {
    fprintf(stderr, "bench: too many series\n");
    exit(2);
  }
  Series* s = &g_series[g_nseries++];
  snprintf(s->key, sizeof s->key, "%s", key);
  return s;
}

void add_sample(const char* key, double v) {
  Series* s = series(key);
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 64;
    s->v = realloc(s->v, sizeof(double) * (size_t)s->cap);
    if (!s->v) die("realloc");
  }
  s->v[s->n++] = v;
}


int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

double quantile(const double* sorted, int n, double q) {
  double pos = q * (n - 1);
  int lo = (int)floor(pos), hi = (int)ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

Stats stats(const char* key) {
  Stats st = {0, NAN, NAN, NAN, NAN, NAN};
  for (int i = 0; i < g_nseries; i++) {
    Series* s = &g_series[i];
    if (strcmp(s->key, key) != 0 || s->n == 0) continue;
    double* v = malloc(sizeof(double) * (size_t)s->n);
    if (!v) die("malloc");
    memcpy(v, s->v, sizeof(double) * (size_t)s->n);
    qsort(v, (size_t)s->n, sizeof(double), cmp_double);
    st.n = s->n;
    st.median = quantile(v, s->n, 0.5);
    st.p25 = quantile(v, s->n, 0.25);
    st.p75 = quantile(v, s->n, 0.75);
    st.min = v[0];
    st.max = v[s->n - 1];
    free(v);
  }
  return st;
}

double last(const char* key) {
  for (int i = 0; i < g_nseries; i++)
    if (strcmp(g_series[i].key, key) == 0 && g_series[i].n) return g_series[i].v[g_series[i].n - 1];
  return NAN;
}

double sum(const char* key) {
  double t = 0;
  for (int i = 0; i < g_nseries; i++)
    if (strcmp(g_series[i].key, key) == 0)
      for (int k = 0; k < g_series[i].n; k++) t += g_series[i].v[k];
  return t;
}
