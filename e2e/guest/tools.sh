# Sourced by /init after scenarios.sh: unmodified third-party verbs programs (and our
# verbs_loader), bare and under librccl_telemetry_preload.so when the image has it.
# Each run writes /out/tools/<name>/:
#   cmd                 "<side> <argv...>" per process (what e2e/check_tools.py models)
#   <side>/{stdout,stderr,rc,pid}   side = server | client | proc
#   <side>/telemetry/   RCCL_TELEMETRY_OUTPUT_DIR of that process (preload runs)
#   <side>/tally.json   verbs_loader's own tally
#   {rxe,ethtool,netdev,netstack}_{before,after}.txt   around the whole run (snap)
#   preload             present when the run was under the interposer
PRELOAD_SO=/usr/local/lib/librccl_telemetry_preload.so
TOOL_TIMEOUT=90
# A tool still there TOOL_KILL_S after its SIGTERM is killed: a hung tool then costs its own
# check, not every later one (in the pair stage the two guests would fall out of step).
TOOL_KILL_S=15

# The IPv4-mapped RoCE v2 GID of rxe0 (the first ::ffff: entry of the GID table).
roce_gid() {
  for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
    case $(cat $g 2>/dev/null) in 0000:0000:0000:0000:0000:ffff:*) basename $g; return ;; esac
  done
  echo 1
}

# tcp_listening PORT: a socket in LISTEN on PORT (IPv4 or IPv6)
tcp_listening() {
  p=$(printf '%04X' $1)
  awk -v p=":$p" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# wait_ready KIND PORT: the server side is accepting (tcp port, or an rdma_cm listener)
wait_ready() {
  i=0
  while [ $i -lt 150 ]; do
    case $1 in
      tcp) tcp_listening $2 && return 0 ;;
      cm)  rdma res show cm_id 2>/dev/null | grep -q LISTEN && return 0 ;;
    esac
    sleep 0.1; i=$((i+1))
  done
  log "server not ready on $1 $2 after 15 s"
  return 1
}

# launch DIR SIDE PRELOAD(0|1) ENVVARS -- ARGV: run one process in the foreground, its pid,
# exit status and output into DIR/SIDE. ENVVARS is one word list ("" or "A=1 B=2").
launch() {
  ld=$1/$2; mkdir -p $ld/telemetry
  cmdf=$1/cmd; side=$2; pre=$3; vars=$4; shift 5
  echo "$side $*" >> $cmdf
  if [ "$pre" = 1 ]; then
    vars="$vars RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR=$ld/telemetry LD_PRELOAD=$PRELOAD_SO"
  fi
  # exec keeps the pid that the telemetry file is named after
  timeout -k $TOOL_KILL_S $TOOL_TIMEOUT sh -c 'echo $$ > "$0/pid"; exec env "$@"' $ld $vars "$@" < /dev/null > $ld/stdout 2> $ld/stderr
  echo $? > $ld/rc
}

# tool_single NAME PRELOAD READY PORT ENVVARS -- SERVER_ARGS -- CLIENT_ARGS
# Server and client in this guest (rxe loopback).
tool_single() {
  name=$1; pre=$2; ready=$3; port=$4; vars=$5; shift 6
  sargs=""; while [ "$1" != "--" ]; do sargs="$sargs $1"; shift; done; shift
  d=/out/tools/$name; mkdir -p $d; : > $d/cmd
  [ "$pre" = 1 ] && : > $d/preload
  snap $d before
  launch $d server $pre "$vars" -- $sargs &
  sp=$!
  wait_ready $ready $port
  launch $d client $pre "$vars" -- "$@"
  wait $sp
  snap $d after
  log "tool $name: server rc=$(cat $d/server/rc) client rc=$(cat $d/client/rc)"
}

# tool_proc NAME PRELOAD ENVVARS -- ARGS: one process (verbs_loader)
tool_proc() {
  name=$1; pre=$2; vars=$3; shift 4
  d=/out/tools/$name; mkdir -p $d; : > $d/cmd
  [ "$pre" = 1 ] && : > $d/preload
  snap $d before
  launch $d proc $pre "$vars" -- "$@" --tally $d/proc/tally.json
  snap $d after
  log "tool $name: rc=$(cat $d/proc/rc) $(tail -1 $d/proc/stdout)"
}

# The programs, with the options the checker reads back from cmd. $1 = server address
# (own IP on one guest), $2 = "" or "+preload" name suffix, $3 = 0|1 preload.
# Each line: NAME READY PORT ENV -- SERVER ARGV -- CLIENT ARGV
tool_table() {
  ip=$1; G=$(roce_gid)
  cat <<EOF
pingpong tcp 18601 - -- ibv_rc_pingpong -d rxe0 -g $G -n 64 -s 4096 -p 18601 -- ibv_rc_pingpong -d rxe0 -g $G -n 64 -s 4096 -p 18601 $ip
pingpong_event tcp 18602 - -- ibv_rc_pingpong -d rxe0 -g $G -n 64 -s 4096 -e -p 18602 -- ibv_rc_pingpong -d rxe0 -g $G -n 64 -s 4096 -e -p 18602 $ip
pingpong_new_send tcp 18603 - -- ibv_rc_pingpong -d rxe0 -g $G -n 64 -s 4096 -N -p 18603 -- ibv_rc_pingpong -d rxe0 -g $G -n 64 -s 4096 -N -p 18603 $ip
write_bw tcp 18604 - -- ib_write_bw -d rxe0 -x $G -s 4096 -n 200 -F -p 18604 -- ib_write_bw -d rxe0 -x $G -s 4096 -n 200 -F -p 18604 $ip
write_bw_q7 tcp 18605 - -- ib_write_bw -d rxe0 -x $G -s 4096 -n 200 -Q 7 -F -p 18605 -- ib_write_bw -d rxe0 -x $G -s 4096 -n 200 -Q 7 -F -p 18605 $ip
send_bw tcp 18606 - -- ib_send_bw -d rxe0 -x $G -s 4096 -n 200 -F -p 18606 -- ib_send_bw -d rxe0 -x $G -s 4096 -n 200 -F -p 18606 $ip
read_bw tcp 18607 - -- ib_read_bw -d rxe0 -x $G -s 4096 -n 200 -F -p 18607 -- ib_read_bw -d rxe0 -x $G -s 4096 -n 200 -F -p 18607 $ip
rping cm 18608 - -- rping -s -a $ip -p 18608 -S 100 -- rping -c -a $ip -p 18608 -S 100 -C 20 -v
ucx_put_bw tcp 18609 UCX_IB_GID_INDEX=$G -- ucx_perftest -p 18609 -- ucx_perftest $ip -p 18609 -t put_bw -x rc_verbs -d rxe0:1 -s 4096 -n 200 -D zcopy -w 0
EOF
}

# Both runs of every table line in this guest.
run_tools_single() {
  ip=${E2E_IP:-192.0.2.1}
  passes=0; [ -e $PRELOAD_SO ] && passes="0 1"
  [ -e $PRELOAD_SO ] || log "no $PRELOAD_SO in the image: bare runs only"
  for pre in $passes; do
    sfx=""; [ $pre = 1 ] && sfx="+preload"
    tool_table $ip | while read name ready port env rest; do
      [ "$env" = - ] && env=""
      # shellcheck disable=SC2086
      tool_single "$name$sfx" $pre $ready $port "$env" -- ${rest#-- }
    done
    for m in direct dlopen; do
      for c in poll ex; do
        tool_proc "verbs_${m}_$c$sfx" $pre "" -- verbs_$m --gid $(roce_gid) --cq $c --rounds 16
      done
    done
  done
}

# Across the wired pair: this guest runs one side of every table line; the server guest
# tells the client it is ready through a one-shot TCP handshake on port 19000 + line.
run_tools_pair() {
  peer=${E2E_PEER:?}
  if [ "$E2E_ROLE" = server ]; then sip=${E2E_IP}; else sip=$peer; fi
  passes=0; [ -e $PRELOAD_SO ] && passes="0 1"
  for pre in $passes; do
    sfx=""; [ $pre = 1 ] && sfx="+preload"
    k=0
    tool_table $sip | while read name ready port env rest; do
      k=$((k+1)); [ "$env" = - ] && env=""
      d=/out/tools/pair_$name$sfx; mkdir -p $d; : > $d/cmd
      [ "$pre" = 1 ] && : > $d/preload
      rest=${rest#-- }
      sargs=${rest%% -- *}; cargs=${rest#* -- }
      ctl=$((19000 + k + 20 * pre))
      snap $d before
      if [ "$E2E_ROLE" = server ]; then
        # shellcheck disable=SC2086
        launch $d server $pre "$env" -- $sargs &
        sp=$!
        wait_ready $ready $port
        echo ready | timeout 120 nc -l -p $ctl > /dev/null
        wait $sp
      else
        i=0
        until timeout 5 nc $peer $ctl < /dev/null 2>/dev/null | grep -q ready; do
          i=$((i+1)); [ $i -gt 200 ] && { log "no ready from $peer:$ctl"; break; }; sleep 0.2
        done
        # shellcheck disable=SC2086
        launch $d client $pre "$env" -- $cargs
      fi
      snap $d after
      log "tool pair_$name$sfx ($E2E_ROLE): rc=$(cat $d/*/rc)"
    done
  done
}
