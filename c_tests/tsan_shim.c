/*
 * The Rust library is instrumented by a newer LLVM than gcc's libtsan: these entry points
 * of newer runtimes are missing there. Forwarding to the intercepted libc functions
 * keeps their checking.
 */
#include <string.h>

void *__tsan_memcpy(void *dst, const void *src, size_t n);
void *__tsan_memset(void *dst, int c, size_t n);
void *__tsan_memmove(void *dst, const void *src, size_t n);

void *__tsan_memcpy(void *dst, const void *src, size_t n) { return memcpy(dst, src, n); }
void *__tsan_memset(void *dst, int c, size_t n) { return memset(dst, c, n); }
void *__tsan_memmove(void *dst, const void *src, size_t n) { return memmove(dst, src, n); }
