#!/usr/bin/env bash
# profile_hooks.sh BENCH_BIN -- which library function costs what on the benchmark's hot path,
# in instructions per WQE counted by callgrind (exact, and free of the noise that time has on a
# shared machine).
#
# Runs `BENCH_BIN --child profile NREQ` under callgrind for telemetry disabled, enabled N=1 and
# enabled N=16. That child runs every benchmark loop (NREQ requests of 4 WQEs each) and dumps
# each loop's counts separately (callgrind client requests). Printed per configuration:
#   - instructions per WQE of the library loop and of the reference loop above the no-hook loop;
#   - every function executed inside the library loop with its own instructions per WQE
#     (code inlined into a function is counted in that function).
# Under valgrind clock_gettime does not take the vDSO fast path, and a locked read-modify-write
# counts as one instruction however many cycles it takes: compare functions and
# configurations, not nanoseconds.
set -euo pipefail
bin=${1:?usage: profile_hooks.sh BENCH_BIN}
nreq=${NREQ:-20000}
command -v valgrind >/dev/null || { echo "profile_hooks.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
wqes=$((nreq * 4))

dump_of() { # label loopname -> the dump file of that loop
  grep -l -x "desc: Trigger: Client Request: $2" "$tmp/$1".cg.* | head -1
}
totals_of() { # dump file -> total instructions
  sed -n 's/^totals: *//p' "$1" | head -1
}

run() { # label env...
  local label=$1; shift
  env -u RCCL_TELEMETRY_ENABLE -u RCCL_TELEMETRY_LATENCY_SAMPLE RCCL_TELEMETRY_OUTPUT_DIR="$tmp" "$@" \
    valgrind --tool=callgrind --compress-strings=no --callgrind-out-file="$tmp/$label.cg.%p" \
    "$bin" --child profile "$nreq" >/dev/null 2>"$tmp/log" \
    || { echo "profile_hooks.sh: callgrind run '$label' failed:" >&2; cat "$tmp/log" >&2; exit 1; }
  local none lib ref
  none=$(dump_of "$label" none); lib=$(dump_of "$label" lib); ref=$(dump_of "$label" ref)
  echo "== $label"
  awk -v n="$(totals_of "$none")" -v l="$(totals_of "$lib")" -v r="$(totals_of "$ref")" -v w="$wqes" 'BEGIN {
    printf "  no-hook loop                 %7.1f instructions per WQE\n", n / w
    printf "  library   above no-hook loop %7.1f\n", (l - n) / w
    printf "  reference above no-hook loop %7.1f\n", (r - n) / w }'
  echo "  inside the library loop, self instructions per WQE, by function:"
  callgrind_annotate --auto=no --threshold=100 "$lib" 2>/dev/null | awk -v w="$wqes" '
    /^ *[0-9,]+ .*:/ && !/PROGRAM TOTALS/ {
      n = $1; gsub(",", "", n)
      f = $0; sub(/^ *[0-9,]+ +(\([^)]*\) +)?/, "", f); sub(/ \[.*$/, "", f); sub(/^.*:/, "", f)
      if (f ~ /^\(below main\)$|^__libc_start_main|^0x[0-9a-f]+$|^main$/) next  # frames above the loop
      sum[f] += n }
    END { for (f in sum) if (sum[f] / w >= 0.05) printf "    %8.2f  %s\n", sum[f] / w, f }' | sort -rn
}

run disabled
run enabled_n1 RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_LATENCY_SAMPLE=1
run enabled_n16 RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_LATENCY_SAMPLE=16
