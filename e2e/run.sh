#!/bin/bash
# make e2e: build the library, the IB-CAST-shaped verbs program, the verbs_loader
# programs, the verbs interposer and a Soft-RoCE guest image; boot one guest (the
# ibcast scenarios, then third-party verbs programs bare and under the interposer) and
# then two wired-together guests (the same across the wire), and check everything they
# bring out. Ends with "N passed, M failed".
# Every stage that cannot run is a failure, never a skip (E2E_NO_PRELOAD=1 skips the
# interposer runs, visibly). E2E_STAGES (default "single pair trio") picks the guest stages
# while developing; any other selection says so in a SKIP line.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${E2E_BUILD:-e2e/build}
mkdir -p "$B"
T0=$(date +%s%N)
PASSED=0; FAILED=0; SKIPPED=0
elapsed() { local d=$(( ($(date +%s%N) - T0) / 100000000 )); echo "$((d/10)).$((d%10))s"; }
stage() { echo "== [$(elapsed)] $*"; }
pass() { PASSED=$((PASSED+1)); echo "PASS $*"; }
fail() { FAILED=$((FAILED+1)); echo "FAIL $*"; }
finish() {
  stage "done"
  [ "$SKIPPED" = 0 ] || echo "$SKIPPED checks skipped by the checkers (their SKIP lines above say why)"
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" = 0 ]
  exit
}
count() { # add check.py's PASS/FAIL (and SKIP) lines from a log to the totals
  PASSED=$((PASSED + $(grep -c '^PASS ' "$1"))); FAILED=$((FAILED + $(grep -c '^FAIL ' "$1")))
  SKIPPED=$((SKIPPED + $(grep -c '^SKIP ' "$1")))
}

stage "host tools"
missing=""
for t in qemu-system-x86_64 gcc cargo python3 cpio modinfo dpkg-deb apt-get rdma ethtool objdump timeout \
         ibv_devinfo ibv_rc_pingpong ib_write_bw ib_send_bw ib_read_bw rping ucx_perftest; do
  command -v $t >/dev/null || missing="$missing $t"
done
[ -x /bin/busybox ] || missing="$missing busybox-static"
[ -e /usr/include/infiniband/verbs.h ] || missing="$missing libibverbs-dev"
python3 -c 'import jsonschema' 2>/dev/null || missing="$missing python3-jsonschema"
if [ -n "$missing" ]; then fail "host tools present: missing$missing (see e2e/README.md for the apt list)"; finish; fi
pass "host tools present"

stage "library (make lib: cargo builds it, make links it with its symbol versions)"
if make --no-print-directory lib >"$B/cargo.err" 2>&1; then
  LIB=target/release/librccl_telemetry.so
  soname=$(objdump -p "$LIB" | awk '/SONAME/ {print $2}')
  if [ "$soname" = librccl_telemetry.so.0 ]; then pass "library builds with SONAME $soname"
  else fail "library SONAME is '$soname', want librccl_telemetry.so.0"; finish; fi
else
  fail "library builds: $(tail -5 "$B/cargo.err")"; finish
fi
if objdump -p "$LIB" | grep 'NEEDED.*libibverbs' >/dev/null; then fail "library does not need libibverbs at run time"
else pass "library does not need libibverbs at run time"; fi

stage "program (gcc, include/rccl_telemetry.h, -lrccl_telemetry -libverbs)"
if gcc -std=c11 -O2 -Wall -Wextra -Werror -Iinclude -o "$B/ibcast_e2e" e2e/ibcast/*.c \
     -Ltarget/release -lrccl_telemetry -libverbs 2>"$B/gcc.err"; then
  pass "ibcast_e2e compiles against the generated header and links the library"
else
  fail "ibcast_e2e compiles: $(head -20 "$B/gcc.err")"; finish
fi
# the same program without the library (the header's stubs): a plain verbs program for the
# interposer's run of the traffic class scenario
if gcc -std=c11 -O2 -Wall -Wextra -Werror -DRCCL_TELEMETRY_STUBS -Iinclude -o "$B/ibcast_plain" e2e/ibcast/*.c \
     -libverbs 2>"$B/gcc.err"; then
  pass "ibcast_plain (RCCL_TELEMETRY_STUBS) compiles and links libibverbs only"
else
  fail "ibcast_plain compiles: $(head -20 "$B/gcc.err")"; finish
fi

stage "verbs_loader: linked (verbs_direct) and NCCL-ibvwrap style dlopen (verbs_dlopen)"
if gcc -std=c11 -O2 -Wall -Wextra -Werror -o "$B/verbs_direct" e2e/verbs_loader.c -libverbs 2>"$B/gcc.err" &&
   gcc -std=c11 -O2 -Wall -Wextra -Werror -DVL_DLOPEN -o "$B/verbs_dlopen" e2e/verbs_loader.c 2>>"$B/gcc.err"; then
  pass "verbs_loader compiles in both modes"
else
  fail "verbs_loader compiles: $(head -20 "$B/gcc.err")"; finish
fi
if objdump -p "$B/verbs_dlopen" | grep 'NEEDED.*libibverbs' >/dev/null; then fail "verbs_dlopen is not linked with libibverbs"
else pass "verbs_dlopen is not linked with libibverbs (it dlopens it)"; fi
EXTRA=("$B/verbs_direct" "$B/verbs_dlopen" "$B/ibcast_plain")

stage "verbs interposer (make preload)"
PRELOAD=target/release/librccl_telemetry_preload.so
if [ "${E2E_NO_PRELOAD:-0}" = 1 ]; then
  echo "SKIP interposer runs: E2E_NO_PRELOAD=1"
elif make --no-print-directory preload > "$B/preload.log" 2>&1 && [ -f "$PRELOAD" ]; then
  pass "librccl_telemetry_preload.so builds"
  EXTRA+=("$PRELOAD")
  export E2E_EXPECT_PRELOAD=1
else
  fail "librccl_telemetry_preload.so builds (make preload): $(tail -3 "$B/preload.log" 2>/dev/null || echo 'no preload target')" \
    "; the third-party programs run bare only"
fi

stage "guest image (kernel from apt, busybox initramfs)"
if bash e2e/build_image.sh "$B/image" "$B/ibcast_e2e" "$LIB" "${EXTRA[@]}" > "$B/image.log" 2>&1; then
  pass "guest image built ($(grep -o 'linux-image[^,]*' "$B/image.log" | head -1))"
else
  fail "guest image builds: $(tail -5 "$B/image.log")"; finish
fi

# scenario MODE WHAT CONSOLES: boot the guest(s) of MODE, then check what they brought out.
scenario() {
  if bash e2e/run_guest.sh "$1" "$B/image" "$B/result-$1"; then
    pass "$2"
    local only=${E2E_GUEST_ARGS:-}
    if [ "$only" != E2E_ONLY=tools ] && [ "$only" != E2E_ONLY=tclass ]; then
      python3 e2e/check.py "$1" "$B/result-$1" | tee "$B/check-$1.log"
      count "$B/check-$1.log"
    fi
    if [ "$1" = pair ] && [ "$only" != E2E_ONLY=tools ]; then
      python3 e2e/check_tclass.py "$B/result-$1" | tee "$B/check-tclass.log"
      count "$B/check-tclass.log"
    fi
    if [ "$only" != E2E_ONLY=ibcast ] && [ "$only" != E2E_ONLY=tclass ]; then
      python3 e2e/check_tools.py "$1" "$B/result-$1" | tee "$B/check-tools-$1.log"
      count "$B/check-tools-$1.log"
    fi
  else
    fail "$2 ($3)"
  fi
}

# the checkers read the files through rccl-telemetry (links, outliers, stalls)
stage "the analyser (cargo build -p rccl-telemetry-tool)"
if cargo build --release -p rccl-telemetry-tool -q 2>"$B/cargo-tool.err"; then pass "rccl-telemetry (the tool) builds"
else fail "rccl-telemetry (the tool) builds: $(tail -3 "$B/cargo-tool.err")"; fi

STAGES=${E2E_STAGES:-single pair trio}
want() { case " $STAGES " in *" $1 "*) return 0 ;; esac; echo "SKIP stage $1: not in E2E_STAGES=$STAGES"; return 1; }

stage "checker self-test (the models against canned real runs and doctored ones)"
python3 e2e/check_tools.py selftest | tee "$B/check-tools-selftest.log"
count "$B/check-tools-selftest.log"
python3 e2e/check_trio.py selftest | tee "$B/check-trio-selftest.log"
count "$B/check-trio-selftest.log"
python3 e2e/check_tclass.py selftest | tee "$B/check-tclass-selftest.log"
count "$B/check-tclass-selftest.log"

stage "single guest: main, LATENCY_SAMPLE=16, SAMPLE_MS=5, unwritable dir; verbs programs"
want single && scenario single "single guest booted, ran and powered off" "console: $B/result-single/single/console.log"

stage "two guests wired together: 2 ranks per host; one QP on a dropped traffic class; verbs programs across the wire"
want pair && scenario pair "both pair guests booted, ran and powered off" "consoles: $B/result-pair/*/console.log"

stage "three guests on one L2 segment: links (clean, delay), stalls, faults (dead path, frozen rank), verdicts (clean x3, one way, host-side, one slow NIC)"
if want trio; then
  if bash e2e/run_guest.sh trio "$B/image" "$B/result-trio"; then
    pass "the three trio guests booted, ran and powered off"
    python3 e2e/check_trio.py "$B/result-trio" | tee "$B/check-trio.log"
    count "$B/check-trio.log"
  else
    fail "the three trio guests booted, ran and powered off (consoles: $B/result-trio/*/console.log)"
  fi
fi
finish
