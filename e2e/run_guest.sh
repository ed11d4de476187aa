#!/bin/bash
# Boot the e2e guest(s) under qemu TCG and bring their /out trees back.
# Usage: run_guest.sh single IMAGEDIR RESULTDIR
#        run_guest.sh pair   IMAGEDIR RESULTDIR     (RESULTDIR/server, RESULTDIR/client)
#        run_guest.sh trio   IMAGEDIR RESULTDIR     (RESULTDIR/a, RESULTDIR/b, RESULTDIR/c)
# Exit status 0 only when every guest powered off after printing E2E_GUEST_DONE and
# left a readable result disk; otherwise the console tail is printed and the status is 1.
set -uo pipefail
MODE=${1:?single|pair|trio}; IMG=${2:?imagedir}; RES=${3:?resultdir}
# A fail-safe, not a budget: unloaded, the single guest takes ~2.5 min and the pair ~2 min,
# but TCG under a loaded host runs several times slower (seen: 5x, with guest soft lockups).
TIMEOUT=${E2E_GUEST_TIMEOUT:-900}
EXTRA_ARGS=${E2E_GUEST_ARGS:-}   # more kernel command-line variables, e.g. E2E_ONLY=tools
rm -rf "$RES"; mkdir -p "$RES"
[ -f "$IMG/vmlinuz" ] && [ -f "$IMG/initrd.gz" ] || { echo "run_guest: no image in $IMG" >&2; exit 1; }
command -v qemu-system-x86_64 >/dev/null || { echo "run_guest: qemu-system-x86_64 missing (apt-get install qemu-system-x86)" >&2; exit 1; }

# One guest. $1 name, $2 kernel args, $3.. the netdev/nic options.
# The KVM device on these hosts cannot run a stock kernel, so TCG only.
boot() {
  local name=$1 args=$2; shift 2
  local dir; dir=$RES/$name; mkdir -p "$dir"
  truncate -s 64M "$dir/result.img"
  timeout --kill-after=10 "$TIMEOUT" qemu-system-x86_64 -accel tcg -cpu max -m "${E2E_GUEST_MEM:-768}" -smp 1 \
    -kernel "$IMG/vmlinuz" -initrd "$IMG/initrd.gz" \
    -append "console=ttyS0 quiet panic=-1 $args $EXTRA_ARGS" \
    -drive "file=$dir/result.img,format=raw,if=virtio" \
    "$@" \
    -nographic -no-reboot -nodefaults -serial stdio -monitor none > "$dir/console.raw" 2>&1
  echo $? > "$dir/qemu_rc"
}

collect() { # name -> 0 if the guest finished and its results are readable
  local name=$1; local dir=$RES/$name
  tr -d '\r' < "$dir/console.raw" > "$dir/console.log"
  local rc; rc=$(cat "$dir/qemu_rc")
  if ! grep -q '^E2E_GUEST_DONE' "$dir/console.log"; then
    echo "run_guest: guest '$name' did not finish (qemu exit $rc$([ "$rc" = 124 ] && echo ', timed out after '"$TIMEOUT"' s')); console tail:" >&2
    tail -n 30 "$dir/console.log" | sed 's/^/    | /' >&2
    return 1
  fi
  mkdir -p "$dir/out"
  if ! tar -xf "$dir/result.img" -C "$dir/out" 2>"$dir/untar.err" || [ ! -f "$dir/out/guest_status" ]; then
    echo "run_guest: guest '$name' finished but its result disk is unreadable: $(head -c 300 "$dir/untar.err")" >&2
    return 1
  fi
  rm -f "$dir/result.img"
  if [ -s "$dir/out/guest_status" ]; then
    echo "run_guest: guest '$name' setup failed: $(cat "$dir/out/guest_status")" >&2
    tail -n 30 "$dir/console.log" | sed 's/^/    | /' >&2
    return 1
  fi
  return 0
}

case $MODE in
single)
  # NIC on a qemu hub with no other port: nothing leaves the guest.
  boot single "E2E_MODE=single E2E_IP=192.0.2.1" \
    -netdev hubport,id=n0,hubid=0 -device virtio-net-pci,netdev=n0,mac=52:54:00:e2:e0:01
  collect single ;;
pair)
  # Two guests whose NICs are joined by a datagram socket pair (unix sockets, no host IP).
  S=$(mktemp -d "${TMPDIR:-/tmp}/e2e-pair.XXXXXX")
  boot server "E2E_MODE=pair E2E_ROLE=server E2E_IP=192.0.2.1 E2E_PEER=192.0.2.2 E2E_PEER_MAC=52:54:00:e2:e0:12" \
    -netdev "dgram,id=n0,local.type=unix,local.path=$S/a,remote.type=unix,remote.path=$S/b" \
    -device virtio-net-pci,netdev=n0,mac=52:54:00:e2:e0:11 &
  P1=$!
  boot client "E2E_MODE=pair E2E_ROLE=client E2E_IP=192.0.2.2 E2E_PEER=192.0.2.1 E2E_PEER_MAC=52:54:00:e2:e0:11" \
    -netdev "dgram,id=n0,local.type=unix,local.path=$S/b,remote.type=unix,remote.path=$S/a" \
    -device virtio-net-pci,netdev=n0,mac=52:54:00:e2:e0:12 &
  P2=$!
  wait $P1; wait $P2
  rm -rf "$S"
  ok=0
  collect server || ok=1
  collect client || ok=1
  exit $ok ;;
trio)
  # Three guests on one L2 segment: e2e/l2hub.py, a learning switch relaying unix datagrams
  # between their dgram netdevs (no IP socket on the host, no host address in any guest).
  S=$(mktemp -d "${TMPDIR:-/tmp}/e2e-trio.XXXXXX")
  python3 "$(dirname "$0")/l2hub.py" "$S" 3 > "$RES/hub.log" 2>&1 &
  HUB=$!
  i=0; while [ ! -e "$S/hub.ready" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
  [ -e "$S/hub.ready" ] || { echo "run_guest: l2hub did not start: $(cat "$RES/hub.log")" >&2; kill $HUB; exit 1; }
  NEIGH="192.0.2.1@52:54:00:e2:e0:21,192.0.2.2@52:54:00:e2:e0:22,192.0.2.3@52:54:00:e2:e0:23"
  PIDS=()
  k=0
  for g in a b c; do
    boot $g "E2E_MODE=trio E2E_ROLE=$g E2E_IP=192.0.2.$((k+1)) E2E_NEIGH=$NEIGH" \
      -netdev "dgram,id=n0,local.type=unix,local.path=$S/g$k,remote.type=unix,remote.path=$S/hub$k" \
      -device virtio-net-pci,netdev=n0,mac=52:54:00:e2:e0:2$((k+1)) &
    PIDS+=($!)
    k=$((k+1))
  done
  for p in "${PIDS[@]}"; do wait "$p"; done
  kill "$HUB" 2>/dev/null; wait "$HUB" 2>/dev/null
  rm -rf "$S"
  ok=0
  for g in a b c; do collect $g || ok=1; done
  exit $ok ;;
*) echo "run_guest: unknown mode $MODE" >&2; exit 1 ;;
esac
