#!/bin/bash
# Refresh the checker's canned runs (e2e/testdata/tools) from a single-guest result
# (make e2e leaves it in e2e/build/result-single), keeping only what check_tools.py reads:
# cmd, the preload marker, the rxe counters, each side's stdout/rc/pid, verbs_loader's
# tally and the telemetry files. Run it when the programs, the models or the file format
# change, then check `python3 e2e/check_tools.py selftest`.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${1:-e2e/build/result-single}/single/out/tools
DST=e2e/testdata/tools
[ -d "$SRC" ] || { echo "refresh_testdata: no $SRC (run make e2e first)" >&2; exit 1; }
rm -rf "$DST"; mkdir -p "$DST"
for d in "$SRC"/*/; do
  n=$(basename "$d"); mkdir -p "$DST/$n"
  for f in cmd preload rxe_before.txt rxe_after.txt; do [ -e "$d/$f" ] && cp "$d/$f" "$DST/$n/"; done
  for sd in "$d"*/; do
    s=$(basename "$sd"); mkdir -p "$DST/$n/$s"
    for f in stdout rc pid tally.json; do [ -f "$sd/$f" ] && cp "$sd/$f" "$DST/$n/$s/"; done
    if ls "$sd"telemetry/*.json >/dev/null 2>&1; then
      mkdir -p "$DST/$n/$s/telemetry"; cp "$sd"telemetry/*.json "$DST/$n/$s/telemetry/"
    fi
  done
done
echo "refresh_testdata: $(ls "$DST" | wc -l) runs from $SRC"
