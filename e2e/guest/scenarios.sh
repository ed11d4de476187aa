# Sourced by /init. Each scenario writes into /out/<name>/:
#   telemetry/   the library's output directory
#   tally.json   the program's own tally      rc   its exit status
#   stdout.txt stderr.txt                     {rxe,ethtool,netdev}_{before,after}.txt
WORKLOAD="--channels 0,3,17 --index-channel 17 --reqs 24 --error-probe"
# Smaller across the virtual wire: two TCG guests share the host's cores.
PAIR_WORKLOAD="--channels 0,3,17 --index-channel 17 --reqs 16 --max-size 32768 --inflight 2 --error-probe"

snap() { # DIR LABEL: the raw counters the library reads, as the guest sees them
  for f in /sys/class/infiniband/rxe0/ports/1/hw_counters/*; do
    echo "$(basename $f) $(cat $f)"
  done > $1/rxe_$2.txt
  ethtool -S eth0 > $1/ethtool_$2.txt 2>&1
  for f in /sys/class/net/eth0/statistics/*; do echo "$(basename $f) $(cat $f)"; done > $1/netdev_$2.txt
  # for diagnosing retransmissions: where the guest's own stack dropped packets
  cat /proc/net/snmp /proc/net/softnet_stat > $1/netstack_$2.txt 2>&1
}

# run NAME OUTDIR [VAR=VALUE ...] -- [program args]
run() {
  name=$1; outdir=$2; shift 2
  d=/out/$name; mkdir -p $d
  vars=""
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do vars="$vars $1"; shift; done
  [ "$1" = "--" ] && shift
  snap $d before
  log "scenario $name:$vars"
  env RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR=$outdir $vars \
    /usr/local/bin/ibcast_e2e --tally $d/tally.json "$@" > $d/stdout.txt 2> $d/stderr.txt
  echo $? > $d/rc
  snap $d after
  echo "$vars" > $d/env
  log "scenario $name: rc=$(cat $d/rc) $(tail -1 $d/stdout.txt)"
}

run_single() {
  mkdir -p /out/main/telemetry /out/lat16/telemetry /out/sample/telemetry /out/rnr/telemetry
  run main /out/main/telemetry -- $WORKLOAD
  run lat16 /out/lat16/telemetry RCCL_TELEMETRY_LATENCY_SAMPLE=16 -- $WORKLOAD
  run sample /out/sample/telemetry RCCL_TELEMETRY_SAMPLE_MS=5 -- --channels 0,3,17 --reqs 100
  # RNR exhausted: from request 3 on the receiver publishes its CTS with no receive posted;
  # the sender's WRITE_WITH_IMMs meet RNR NAKs and, with rnr_retry 1, fail
  run rnr /out/rnr/telemetry -- --channels 0,17 --index-channel 17 --reqs 8 --rnr-after 3 --rnr-retry 1 \
    --expect-errors --hang-ms 3000
  # An output directory nobody can write, not even root: a read-only mount.
  mkdir -p /ro && mount -t tmpfs -o ro,size=1m ro /ro
  run unwritable /ro -- $WORKLOAD
  ls -A /ro > /out/unwritable/ro_listing.txt
  find / -xdev -name 'rccl_telemetry_*' > /out/unwritable/stray_files.txt 2>/dev/null
  find /tmp -name 'rccl_telemetry_*' >> /out/unwritable/stray_files.txt 2>/dev/null
}

# Two ranks per host; rank r of the server listens on port 18515+r, the client's
# rank r connects to it. Both ranks run at the same time.
run_pair() {
  peer=${E2E_PEER:?}
  mkdir -p /out/pair/telemetry
  d=/out/pair; snap $d before
  if [ "$E2E_ROLE" = server ]; then side=--listen; else side="--peer $peer"; fi
  # the peer must answer before the ranks try to connect (ARP across the wire)
  i=0; until ping -c1 -W1 $peer >/dev/null 2>&1; do i=$((i+1)); [ $i -gt 30 ] && break; done
  log "peer $peer reachable after $i retries"
  for r in 0 1; do
    ( env RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR=$d/telemetry \
        /usr/local/bin/ibcast_e2e --tally $d/tally_rank$r.json $side --port $((18515 + r)) --rank $r \
        $PAIR_WORKLOAD > $d/stdout_rank$r.txt 2> $d/stderr_rank$r.txt
      echo $? > $d/rc_rank$r ) &
  done
  wait
  snap $d after
  log "pair ranks: rc=$(cat $d/rc_rank0) $(cat $d/rc_rank1)"
}
