/*
 * bench_loop_prev.c -- loop_lib again, compiled against the previous release's header
 * (c_tests/abi/0.1.0/rccl_telemetry.h: the same inline hooks, whose layout was assumed, not
 * negotiated). child_pollts times it beside loop_lib in the same process, so the row
 * "negotiated - 0.1.0 header" is what the layout negotiation costs the data path.
 */

#define _GNU_SOURCE /* as bench.h, before any system header */
#include "../c_tests/abi/0.1.0/rccl_telemetry.h"
#define BENCH_LOOPS_PREV 1
#include "bench_loops.c"
