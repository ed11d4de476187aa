#!/bin/sh
# Lists and counts the tests that skipped (rust_tests/skip.rs writes one line each to the
# log), and fails when one of them was required: this machine (or CI) could have run it.
log=${1:-build/skips.log}
if [ ! -s "$log" ]; then
  echo "skipped tests: 0"
  exit 0
fi
total=$(wc -l <"$log" | tr -d ' ')
required=$(grep -c '\[REQUIRED\]$' "$log" || true)
echo "skipped tests: $total ($required required)"
sed 's/^/  /' "$log"
if [ "$required" -gt 0 ]; then
  echo "FAIL: $required test(s) skipped that this machine can run"
  exit 1
fi
