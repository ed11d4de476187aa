#!/usr/bin/env bash
# profile_hooks.sh BENCH_BIN -- instructions per WQE on the benchmark's hot path, counted by
# callgrind (exact and free of the noise that time has on a shared machine), to find which
# library hook is expensive.
#
# Runs `BENCH_BIN --child profile NREQ` (no-hook loop, library loop, reference loop, NREQ
# requests of 4 WQEs each) under callgrind with collection switched on only inside one loop,
# for telemetry disabled, enabled N=1 and enabled N=16, and prints per configuration:
#   - instructions per WQE of the library loop and of the reference loop above the no-hook loop;
#   - every function executed inside the library loop with its own instructions per WQE.
# Under valgrind clock_gettime does not take the vDSO fast path, so clock reads count more
# instructions than they cost natively; compare functions and configurations, not nanoseconds.
set -euo pipefail
bin=${1:?usage: profile_hooks.sh BENCH_BIN}
nreq=${NREQ:-20000}
command -v valgrind >/dev/null || { echo "profile_hooks.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
wqes=$((nreq * 4))

total() { # callgrind out file -> total Ir
  callgrind_annotate --auto=no "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ && !done { gsub(",","",$1); print $1; done = 1 }'
}

collect() { # label loopfn env... -> callgrind out file path
  local label=$1 fn=$2; shift 2
  local out="$tmp/cg.$label.$fn"
  env -u RCCL_TELEMETRY_ENABLE -u RCCL_TELEMETRY_LATENCY_SAMPLE RCCL_TELEMETRY_OUTPUT_DIR="$tmp" "$@" \
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect="$fn" --callgrind-out-file="$out" \
    "$bin" --child profile "$nreq" >/dev/null 2>"$tmp/log" \
    || { echo "profile_hooks.sh: callgrind run '$label' failed:" >&2; cat "$tmp/log" >&2; exit 1; }
  echo "$out"
}

run() { # label env...
  local label=$1; shift
  local none lib ref
  none=$(collect "$label" loop_none "$@")
  lib=$(collect "$label" loop_lib "$@")
  ref=$(collect "$label" loop_ref "$@")
  local n l r
  n=$(total "$none"); l=$(total "$lib"); r=$(total "$ref")
  echo "== $label"
  awk -v n="$n" -v l="$l" -v r="$r" -v w="$wqes" 'BEGIN {
    printf "  no-hook loop                 %7.1f instructions per WQE\n", n / w
    printf "  library   above no-hook loop %7.1f\n", (l - n) / w
    printf "  reference above no-hook loop %7.1f\n", (r - n) / w }'
  echo "  inside the library loop, self instructions per WQE:"
  callgrind_annotate --auto=no --threshold=100 "$lib" 2>/dev/null | awk -v w="$wqes" '
    /^ *[0-9,]+ .*:/ && !/PROGRAM TOTALS/ {
      n = $1; gsub(",", "", n)
      f = $0; sub(/^ *[0-9,]+ +(\([^)]*\) +)?/, "", f); sub(/ \[.*$/, "", f); sub(/^\?\?\?:/, "", f)
      if (n / w >= 0.05) printf "    %8.2f  %s\n", n / w, f }'
}

run disabled
run enabled_n1 RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_LATENCY_SAMPLE=1
run enabled_n16 RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_LATENCY_SAMPLE=16
