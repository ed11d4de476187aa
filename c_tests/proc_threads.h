/* Threads of the calling process, as entries of /proc/self/task (-1 if unreadable). */
#ifndef C_TESTS_PROC_THREADS_H
#define C_TESTS_PROC_THREADS_H
#include <dirent.h>
#include <string.h>

static int thread_count(void) {
  int n = 0;
  struct dirent *e;
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}
#endif
