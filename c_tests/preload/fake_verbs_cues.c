/*
 * c_tests/preload/fake_verbs_cues.c: the fake libibverbs' cues (fake_verbs.h): a named point
 * that the next call reaching it blocks at until the test releases it, so that a test can stop
 * a thread inside a provider call (or, through fakeverbs_cue, inside the interposer's test
 * build) and act meanwhile. A file of its own: test synchronisation, no verbs.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>

#include "fake_verbs_internal.h"

/* Cues (fake_verbs.h). The blocked call waits on a condition variable of its own, holding no
 * lock of the fake's. */
static pthread_mutex_t g_cue_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cue_cv = PTHREAD_COND_INITIALIZER;
#define CUES 8 /* points 1..7, each armed, held and released on its own */
static int g_cue_armed[CUES], g_cue_held[CUES], g_cue_go[CUES];

EXPORT void fakeverbs_cue(int point) {
  if (point <= 0 || point >= CUES || !__atomic_load_n(&g_cue_armed[point], __ATOMIC_ACQUIRE)) return;
  pthread_mutex_lock(&g_cue_mu);
  if (g_cue_armed[point]) {
    __atomic_store_n(&g_cue_armed[point], 0, __ATOMIC_RELEASE);
    g_cue_held[point] = 1;
    pthread_cond_broadcast(&g_cue_cv);
    while (!g_cue_go[point]) pthread_cond_wait(&g_cue_cv, &g_cue_mu);
    g_cue_go[point] = 0;
    g_cue_held[point] = 0;
  }
  pthread_mutex_unlock(&g_cue_mu);
}
EXPORT void fakeverbs_hold(int point) {
  if (point <= 0 || point >= CUES) return;
  pthread_mutex_lock(&g_cue_mu);
  g_cue_go[point] = 0;
  __atomic_store_n(&g_cue_armed[point], 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g_cue_mu);
}
EXPORT int fakeverbs_wait_held(int point, int seconds) {
  struct timespec end;
  clock_gettime(CLOCK_REALTIME, &end);
  end.tv_sec += seconds;
  int rc = 0;
  pthread_mutex_lock(&g_cue_mu);
  if (point <= 0 || point >= CUES) return -1;
  while (!g_cue_held[point] && rc == 0) rc = pthread_cond_timedwait(&g_cue_cv, &g_cue_mu, &end);
  int held = g_cue_held[point];
  pthread_mutex_unlock(&g_cue_mu);
  return held ? 0 : -1;
}
EXPORT void fakeverbs_release(int point) {
  if (point <= 0 || point >= CUES) return;
  pthread_mutex_lock(&g_cue_mu);
  g_cue_go[point] = 1;
  pthread_cond_broadcast(&g_cue_cv);
  pthread_mutex_unlock(&g_cue_mu);
}
