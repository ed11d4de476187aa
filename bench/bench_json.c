/*
 * bench_json.c -- the minimal JSON writer behind bench/results.json (objects, arrays,
 * numbers, booleans, strings, a Stats record).
 */

#include "bench.h"

static void j_sep(Json* j, const char* key) {
  if (j->depth > 0) {
    if (!j->first[j->depth]) fputc(',', j->f);
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
  }
  j->first[j->depth] = 0;
  if (key) fprintf(j->f, "\"%s\": ", key);
}

void j_open(Json* j, const char* key, char brace) {
  j_sep(j, key);
  fputc(brace, j->f);
  j->first[++j->depth] = 1;
}

void j_close(Json* j, char brace) {
  int empty = j->first[j->depth];
  j->depth--;
  if (!empty) {
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) fputs("  ", j->f);
  }
  fputc(brace, j->f);
  if (j->depth == 0) fputc('\n', j->f);
}

void j_num(Json* j, const char* key, double v) {
  j_sep(j, key);
  if (isfinite(v))
    fprintf(j->f, "%.6g", v);
  else
    fputs("null", j->f);
}

void j_bool(Json* j, const char* key, int v) {
  j_sep(j, key);
  fputs(v < 0 ? "null" : v ? "true" : "false", j->f);
}

void j_str(Json* j, const char* key, const char* s) {
  j_sep(j, key);
  fputc('"', j->f);
  for (; s && *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(j->f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(j->f, "\\u%04x", ch);
    else
      fputc(ch, j->f);
  }
  fputc('"', j->f);
}

void j_stats(Json* j, const char* key, Stats s) {
  j_open(j, key, '{');
  j_num(j, "median", s.median);
  j_num(j, "p25", s.p25);
  j_num(j, "p75", s.p75);
  j_num(j, "min", s.min);
  j_num(j, "max", s.max);
  j_num(j, "n", s.n);
  j_close(j, '}');
}
