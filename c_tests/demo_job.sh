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
#   Hardware counters: each host gets a small fixture sysfs tree (WORKDIR/sysfs/<host>: mlx5
#   devices on PCI functions bound to mlx5_core, their counter files at 0) that the library
#   reads through RCCL_TELEMETRY_SYSFS_ROOT, and the sim counts its traffic into it
#   (--nic-counters): bytes and packets, a background of ECN marks and CNPs, and on the slow
#   NIC 32x the CNPs and ECN marks. (Ethtool keys read the real kernel's netdevs, which do not
#   exist here: -1.)
#
# Each half runs in its own UTS namespace (unshare --uts, or with --user when not root) named
# node-a / node-b: the library takes the host name from gethostname(). Where no namespace can
# be made, every rank keeps this host's name and node-b's ranks drive mlx5_4..7 instead, so the
# NICs stay distinct (one line says so).
#
# Usage: demo_job.sh SIM OUTDIR WORKDIR [REQUESTS]   (exit 0 when every rank passed its checks;
# WORKDIR gets the ranks' tallies and the sysfs trees)
set -u

# mlx5 raw counter names (IB hw_counters and PMA counters), as the kernel's mlx5_ib lists them.
HW_NAMES="rx_write_requests rx_read_requests rx_atomic_requests rx_dct_connect out_of_buffer
out_of_sequence duplicate_request rnr_nak_retry_err packet_seq_err implied_nak_seq_err
local_ack_timeout_err resp_local_length_error resp_cqe_error req_cqe_error
req_remote_invalid_request req_remote_access_errors resp_remote_access_errors
resp_cqe_flush_error req_cqe_flush_error req_transport_retries_exceeded
req_rnr_retries_exceeded roce_adp_retrans roce_adp_retrans_to roce_slow_restart
roce_slow_restart_cnps roce_slow_restart_trans rp_cnp_ignored rp_cnp_handled
np_ecn_marked_roce_packets np_cnp_sent rx_icrc_encapsulated"
PMA_NAMES="symbol_error link_error_recovery link_downed port_rcv_errors
port_rcv_remote_physical_errors port_rcv_switch_relay_errors port_xmit_discards
port_xmit_constraint_errors port_rcv_constraint_errors local_link_integrity_errors
excessive_buffer_overrun_errors VL15_dropped port_xmit_data port_rcv_data port_xmit_packets
port_xmit_wait port_rcv_packets unicast_rcv_packets unicast_xmit_packets multicast_rcv_packets
multicast_xmit_packets"

# make_tree ROOT FIRST COUNT: devices mlx5_FIRST.. under ROOT, as /sys lays out a PCI mlx5 NIC.
make_tree() {
  root=$1 n=$2 end=$(($2 + $3))
  mkdir -p "$root/bus/pci/drivers/mlx5_core" || return 1
  while [ "$n" -lt "$end" ]; do
    pci=$root/devices/pci0000:00/0000:$(printf %02x $((0x17 + n))):00.0
    ib=$root/class/infiniband/mlx5_$n
    mkdir -p "$pci/net/demonet$n" "$ib/ports/1/gid_attrs/ndevs" "$ib/ports/1/hw_counters" \
      "$ib/ports/1/counters" "$root/class/net/demonet$n/statistics" || return 1
    ln -sfn "$root/bus/pci/drivers/mlx5_core" "$pci/driver"
    ln -sfn "$pci" "$ib/device"
    echo Ethernet >"$ib/ports/1/link_layer"
    echo "demonet$n" >"$ib/ports/1/gid_attrs/ndevs/0"
    for c in $HW_NAMES; do echo 0 >"$ib/ports/1/hw_counters/$c"; done
    for c in $PMA_NAMES; do echo 0 >"$ib/ports/1/counters/$c"; done
    n=$((n + 1))
  done
}

if [ "${1:-}" = "--half" ]; then
  # --half HOST FIRST_RANK FIRST_NIC SIM OUTDIR WORKDIR REQUESTS SYSFS: the four ranks of one host.
  host=$2 first=$3 nic=$4 sim=$5 out=$6 tallies=$7 requests=$8 sysfs=$9
  if [ -n "$host" ]; then
    hostname "$host" 2>/dev/null || printf '%s\n' "$host" >/proc/sys/kernel/hostname || exit 1
  fi
  pids=""
  for i in 0 1 2 3; do
    rank=$((first + i))
    set -- --ranks 8 --rank "$rank" --devices 1 --channels 4 --data-qps 2 --requests "$requests" \
      --latency-us 2 --sizes log --slow-nic 5:0 --slow-factor 6 --cq-errors slow --nic-counters
    if [ "$nic" -ge 0 ]; then set -- "$@" --first-nic $((nic + i)); fi
    RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR="$out" RCCL_TELEMETRY_LATENCY_SAMPLE=4 \
      RCCL_TELEMETRY_CLOCK=monotonic RCCL_TELEMETRY_SYSFS_ROOT="$sysfs" "$sim" "$tallies/tally_$rank.json" "$@" &
    pids="$pids $!"
  done
  rc=0
  for p in $pids; do wait "$p" || rc=1; done
  exit $rc
fi

if [ $# -lt 3 ]; then
  echo "usage: $0 SIM OUTDIR WORKDIR [REQUESTS]" >&2
  exit 2
fi
sim=$1 out=$2 tallies=$3 requests=${4:-400}
mkdir -p "$out" "$tallies" || exit 2
tallies=$(cd "$tallies" && pwd)
rm -rf "$tallies/sysfs"

if unshare --uts true 2>/dev/null; then
  ns="unshare --uts"
elif unshare --user --map-root-user --uts true 2>/dev/null; then
  ns="unshare --user --map-root-user --uts"
else
  ns=""
fi

if [ -n "$ns" ]; then
  make_tree "$tallies/sysfs/node-a" 0 4 && make_tree "$tallies/sysfs/node-b" 0 4 || exit 2
  $ns sh "$0" --half node-a 0 -1 "$sim" "$out" "$tallies" "$requests" "$tallies/sysfs/node-a" &
  a=$!
  $ns sh "$0" --half node-b 4 -1 "$sim" "$out" "$tallies" "$requests" "$tallies/sysfs/node-b" &
  b=$!
else
  echo "demo_job: no UTS namespace here (unshare --uts failed): all 8 ranks keep this host's name; node-b's ranks drive mlx5_4..7"
  make_tree "$tallies/sysfs/host" 0 8 || exit 2
  sh "$0" --half "" 0 -1 "$sim" "$out" "$tallies" "$requests" "$tallies/sysfs/host" &
  a=$!
  sh "$0" --half "" 4 4 "$sim" "$out" "$tallies" "$requests" "$tallies/sysfs/host" &
  b=$!
fi
rc=0
wait $a || rc=1
wait $b || rc=1
[ $rc -eq 0 ] || echo "demo_job: a rank failed (see above)" >&2
exit $rc
