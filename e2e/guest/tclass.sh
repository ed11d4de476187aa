# Sourced by /init for E2E_MODE=pair: one connection on the wrong traffic class (the public
# NVIDIA/nccl #2383 case, docs/qp_lint.md). One rank per guest, every QP on GRH traffic class
# TCLASS_OK except the client's first data QP of channel TCLASS_CH's send comm, on
# TCLASS_ODD. rxe writes a QP's traffic class into the IP TOS byte of the packets it sends, so
# the client's egress qdisc (tc prio, a u32 match on the TOS byte of RoCE v2 packets, netem
# loss 100% on that band) drops that QP's requests and nothing else: it gets no ACK, and
# after its retries fails with RETRY_EXC_ERR while every other QP completes. --timeout 19
# (2.1 s, ibcast's default) and --retry-cnt 1: the transport gives up after two tries, 4.3 s,
# and a healthy QP would fail only if its peer's guest answered nothing for that long (a vCPU
# of a loaded TCG host is descheduled for up to 2.8 s, seen in the trio). A rank stops 10 s
# after nothing moved (--hang-ms), well after the odd QP's error (with 4 s a rank once stopped
# before the transport gave up: its QP still retrying, stalled, with no error). Run twice: the library's hooks (ibcast_e2e, --tclass: each QP's
# settings told with rcclTelemetryQpSetAttrs) and the verbs interposer (ibcast_plain, the same
# program built without the library, under LD_PRELOAD: the settings from its ibv_modify_qp).
# Results in /out/tclass/<mode>/ (mode hooks | preload):
#   telemetry/ tally.json stdout.txt stderr.txt rc env   the rank
#   tc_stats.txt        (client) the qdisc's and the filter's counters after the run
#   {rxe,ethtool,netdev,netstack}_{before,after}.txt
TCLASS_OK=106     # DSCP 26 (AF31) << 2 | ECT(0): the job's class
TCLASS_ODD=0      # the one connection's class: DSCP 0, the default priority
TCLASS_CH=3       # channel 3 has 3 data QPs: two of its send comm's data QPs still complete
TCLASS_WORKLOAD="--channels 0,3,17 --index-channel 17 --reqs 16 --max-size 32768 --inflight 2 \
  --timeout 19 --retry-cnt 1 --expect-errors --hang-ms 10000"

# tclass_drop: the client's egress: prio with a fourth band that only the filter fills (the
# default priomap keeps everything else in bands 1-3), netem loss 100% on it, and a u32 filter
# sending RoCE v2 packets (UDP to 4791) whose DSCP (the TOS byte's upper six bits) is
# TCLASS_ODD's there
tclass_drop() {
  /usr/sbin/tc qdisc del dev eth0 root 2>/dev/null
  /usr/sbin/tc qdisc add dev eth0 root handle 1: prio bands 4 &&
    /usr/sbin/tc qdisc add dev eth0 parent 1:4 handle 40: netem loss 100% &&
    /usr/sbin/tc filter add dev eth0 parent 1:0 protocol ip prio 1 u32 \
      match ip tos $(printf '0x%02x' $TCLASS_ODD) 0xfc match ip protocol 17 0xff match ip dport 4791 0xffff flowid 1:4
}

# tclass_run MODE PORT: the rank of this guest (server listens, client connects)
tclass_run() {
  d=/out/tclass/$1; mkdir -p $d/telemetry
  args="$TCLASS_WORKLOAD --gid $(roce_gid) --tclass $TCLASS_OK --port $2"
  if [ "$E2E_ROLE" = server ]; then args="$args --listen"
  else args="$args --peer ${E2E_PEER:?} --odd-tclass $TCLASS_CH:$TCLASS_ODD"; fi
  vars="RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR=$d/telemetry"
  prog=/usr/local/bin/ibcast_e2e
  if [ $1 = preload ]; then vars="$vars LD_PRELOAD=$PRELOAD_SO"; prog=/usr/local/bin/ibcast_plain; fi
  echo "$vars" > $d/env
  echo "$prog $args" > $d/cmd
  snap $d before
  [ "$E2E_ROLE" = client ] && { tclass_drop || log "tclass: tc setup failed"; }
  env $vars $prog --tally $d/tally.json $args > $d/stdout.txt 2> $d/stderr.txt
  echo $? > $d/rc
  if [ "$E2E_ROLE" = client ]; then
    /usr/sbin/tc -s qdisc show dev eth0 > $d/tc_stats.txt 2>&1
    /usr/sbin/tc -s filter show dev eth0 >> $d/tc_stats.txt 2>&1
    /usr/sbin/tc qdisc del dev eth0 root 2>/dev/null
  fi
  snap $d after
  log "tclass $1: rc=$(cat $d/rc) $(tail -1 $d/stdout.txt)"
}

run_tclass_pair() {
  mkdir -p /out/tclass
  tclass_run hooks 18615
  if [ -e $PRELOAD_SO ] && [ -x /usr/local/bin/ibcast_plain ]; then tclass_run preload 18625
  else log "no $PRELOAD_SO or ibcast_plain: no interposer run of the traffic class scenario"; fi
}
