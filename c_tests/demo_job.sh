#!/bin/sh
# demo_job.sh: the workload `make demo` shows and tools/rccl-telemetry/tests/it/demo_job.rs
# checks: a small IB-CAST job run by c_tests/ibcast_sim against the real library.
#
#   8 ranks on two hosts (node-a: ranks 0-3, node-b: ranks 4-7), one NIC each (mlx5_0..3 on
#   each host), 4 channels: channel c connects rank i of node-a with rank 4 + (i + c) mod 4 of
#   node-b, so every NIC talks to the 4 NICs of the other host. Completions take a modelled
#   2 us plus the WQE's bytes at 100 Gb/s, spread log-normally with a tail, reported through
#   rcclTelemetryQpWqeCompleteAt with constructed ns tokens (RCCL_TELEMETRY_CLOCK=monotonic).
#   ONE planted problem: rank 5's NIC (node-b:mlx5_1) is 6x slower on every link it is an end
#   of, and only it has CQ errors.
#
# Each half runs in its own UTS namespace (unshare --uts, or with --user when not root) named
# node-a / node-b: the library takes the host name from gethostname(). Where no namespace can
# be made, every rank keeps this host's name and node-b's ranks drive mlx5_4..7 instead, so the
# NICs stay distinct (one line says so).
#
# Usage: demo_job.sh SIM OUTDIR TALLYDIR [REQUESTS]   (exit 0 when every rank passed its checks)
set -u

if [ "${1:-}" = "--half" ]; then
  # --half HOST FIRST_RANK FIRST_NIC SIM OUTDIR TALLYDIR REQUESTS: the four ranks of one host.
  host=$2 first=$3 nic=$4 sim=$5 out=$6 tallies=$7 requests=$8
  if [ -n "$host" ]; then
    hostname "$host" 2>/dev/null || printf '%s\n' "$host" >/proc/sys/kernel/hostname || exit 1
  fi
  pids=""
  for i in 0 1 2 3; do
    rank=$((first + i))
    set -- --ranks 8 --rank "$rank" --devices 1 --channels 4 --data-qps 2 --requests "$requests" \
      --latency-us 2 --sizes log --slow-nic 5:0 --slow-factor 6 --cq-errors slow
    if [ "$nic" -ge 0 ]; then set -- "$@" --first-nic $((nic + i)); fi
    RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR="$out" RCCL_TELEMETRY_LATENCY_SAMPLE=4 \
      RCCL_TELEMETRY_CLOCK=monotonic "$sim" "$tallies/tally_$rank.json" "$@" &
    pids="$pids $!"
  done
  rc=0
  for p in $pids; do wait "$p" || rc=1; done
  exit $rc
fi

if [ $# -lt 3 ]; then
  echo "usage: $0 SIM OUTDIR TALLYDIR [REQUESTS]" >&2
  exit 2
fi
sim=$1 out=$2 tallies=$3 requests=${4:-400}
mkdir -p "$out" "$tallies" || exit 2

if unshare --uts true 2>/dev/null; then
  ns="unshare --uts"
elif unshare --user --map-root-user --uts true 2>/dev/null; then
  ns="unshare --user --map-root-user --uts"
else
  ns=""
fi

if [ -n "$ns" ]; then
  $ns sh "$0" --half node-a 0 -1 "$sim" "$out" "$tallies" "$requests" &
  a=$!
  $ns sh "$0" --half node-b 4 -1 "$sim" "$out" "$tallies" "$requests" &
  b=$!
else
  echo "demo_job: no UTS namespace here (unshare --uts failed): all 8 ranks keep this host's name; node-b's ranks drive mlx5_4..7"
  sh "$0" --half "" 0 -1 "$sim" "$out" "$tallies" "$requests" &
  a=$!
  sh "$0" --half "" 4 4 "$sim" "$out" "$tallies" "$requests" &
  b=$!
fi
rc=0
wait $a || rc=1
wait $b || rc=1
[ $rc -eq 0 ] || echo "demo_job: a rank failed (see above)" >&2
exit $rc
