#!/bin/sh
# run.sh BUILD_DIR: runs the CMake consumer's programs built in BUILD_DIR: the header's checks
# (telemetry off), then RCCL's call sites with telemetry on, which compare the library's live
# totals with their own counts and write their file into BUILD_DIR/out.
set -eu
b=$1
"$b/consumer"
rm -rf "$b/out" && mkdir -p "$b/out"
RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR="$b/out" "$b/callsites"
ls "$b"/out/rccl_telemetry_*.json >/dev/null
