/*
 * net_telemetry.h: the name RCCL's IB-CAST transport includes (common_cast.h, p2p.cc,
 * connect.cc, init.cc). It forwards to rccl_telemetry.h, so switching RCCL from its in-tree
 * engine to librccl_telemetry needs no edit in those files: delete the in-tree
 * net_telemetry.{h,cc}, add this include directory and link the library.
 *
 * The in-tree header also made <stddef.h>, <limits.h> and <time.h> visible to the files that
 * include it; this one does too, so nothing that relied on that stops compiling.
 */
#ifndef RCCL_NET_TELEMETRY_FORWARD_H
#define RCCL_NET_TELEMETRY_FORWARD_H
#include <limits.h>
#include <stddef.h>
#include <time.h>
#include "rccl_telemetry.h"
#endif /* RCCL_NET_TELEMETRY_FORWARD_H */
