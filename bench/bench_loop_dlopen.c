/*
 * bench_loop_dlopen.c -- loop_lib again, compiled with the header's loader
 * (RCCL_TELEMETRY_DLOPEN: the inline hooks read the library's hot block through the pointer
 * the loader keeps, every other call goes through the library's table). child_pollts times it
 * beside loop_lib in the same process, so the row "dlopen - linked" is what loading the
 * library at run time instead of linking it costs the data path.
 */

#define _GNU_SOURCE /* as bench.h, before any system header */
#define RCCL_TELEMETRY_DLOPEN 1
#include <rccl_telemetry.h>
#define BENCH_LOOPS_DLOPEN 1
#include "bench_loops.c"
