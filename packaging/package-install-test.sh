#!/bin/sh
# package-install-test.sh DEB WORKDIR: installs the .deb on this machine (dpkg -i, as root),
# uses it as a consumer would, from the system's own paths with no hint where it is, then
# removes it (also when a check fails) and checks that nothing of it is left:
#   - the dynamic linker finds librccl_telemetry.so.0 (the package's ldconfig trigger ran);
#   - the CMake consumer (c_tests/cmake_consumer: find_package, the header's checks, RCCL's call
#     sites through "net_telemetry.h" with telemetry on) builds and runs;
#   - a pkg-config consumer builds and runs with no rpath;
#   - a panic inside the library unwinds to its C boundary and is contained there;
#   - the analyser runs from PATH and checks the file the call sites wrote;
#   - the preload library loads into a program (LD_PRELOAD) without a word from the loader.
# CI runs it on a fresh machine; it refuses to touch an rccl-telemetry package already there.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 DEB WORKDIR" >&2; exit 2; }
deb=$(realpath "$1") work=$2
src=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "package-install-test: installs the .deb with dpkg -i: run as root (CI does)"; exit 1; }
if dpkg-query -W -f '${Status}' rccl-telemetry 2>/dev/null | grep -q 'ok installed'; then
  echo "package-install-test: rccl-telemetry is already installed here; remove it first (dpkg -r rccl-telemetry)"
  exit 1
fi
rm -rf "$work" && mkdir -p "$work"
work=$(realpath "$work")
passed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }

dpkg -i "$deb"
removed=
remove() { [ -n "$removed" ] || { removed=1; dpkg -r rccl-telemetry >/dev/null; }; }
trap remove EXIT
dpkg-query -L rccl-telemetry > "$work/files"

ldconfig -p | grep -q 'librccl_telemetry.so.0 ' || { echo "package-install-test: ldconfig does not know librccl_telemetry.so.0"; exit 1; }
ok "installed; the dynamic linker finds librccl_telemetry.so.0"

cmake -S "$src/c_tests/cmake_consumer" -B "$work/cmake" >/dev/null
cmake --build "$work/cmake" >/dev/null
sh "$src/c_tests/cmake_consumer/run.sh" "$work/cmake"
ok "the CMake consumer builds against the installed package and runs"

${CC:-cc} -std=c11 -Wall -Wextra -Werror "$src/c_tests/header_check.c" -o "$work/pc_consumer" \
  $(pkg-config --cflags --libs rccl-telemetry)
"$work/pc_consumer"
ok "a pkg-config consumer builds and runs (no rpath)"

# A panic inside the library is caught at its C boundary: the unwinder zig linked in works.
printf '#include "rccl_telemetry.h"\nint main(void) { return rcclTelemetryInit() == -1 ? 0 : 1; }\n' > "$work/unwind.c"
${CC:-cc} "$work/unwind.c" -o "$work/unwind" $(pkg-config --cflags --libs rccl-telemetry)
RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR="$work" RCCL_TELEMETRY_TEST_FAULT=init_panic "$work/unwind" 2> "$work/unwind.err" ||
  { cat "$work/unwind.err"; echo "package-install-test: a panic in Init was not contained"; exit 1; }
grep -q 'internal error: forced by RCCL_TELEMETRY_TEST_FAULT=init_panic' "$work/unwind.err" ||
  { cat "$work/unwind.err"; echo "package-install-test: Init's contained panic was not reported"; exit 1; }
ok "a panic inside the library is contained at its C boundary (Init returns -1)"

rccl-telemetry --version
rccl-telemetry check "$work/cmake/out"
ok "the analyser runs and checks the call sites' file"

preload=$(pkg-config --variable=preload rccl-telemetry)
env -u RCCL_TELEMETRY_ENABLE LD_PRELOAD="$preload" sh -c 'grep -q librccl_telemetry_preload /proc/$$/maps' \
  2> "$work/preload.err" || { echo "package-install-test: LD_PRELOAD=$preload is not loaded"; exit 1; }
! grep . "$work/preload.err" || { echo "package-install-test: LD_PRELOAD=$preload printed the above"; exit 1; }
ok "the preload library loads into a program"

remove
left=
while read -r f; do
  case $f in /usr | /usr/* ) ;; *) continue ;; esac
  if [ -L "$f" ] || [ -f "$f" ]; then left="$left $f"; fi
  case $f in *rccl*telemetry*) [ ! -d "$f" ] || left="$left $f" ;; esac
done < "$work/files"
[ -z "$left" ] || { echo "package-install-test: dpkg -r left$left"; exit 1; }
ok "dpkg -r removes every file and directory of the package"
echo "package-install-test: $passed passed, 0 failed"
