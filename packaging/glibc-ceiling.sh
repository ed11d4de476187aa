#!/bin/sh
# glibc-ceiling.sh MAX PATH...: every ELF file among PATH (directories are searched) may need
# glibc symbol versions up to GLIBC_MAX and no newer. Prints each file's highest version, and
# for a file above the ceiling every symbol that puts it there; exits 1 if any file is.
#
# The versions come from the dynamic symbol table (objdump -T): the references the dynamic
# linker binds at load time, which are what a too-old glibc refuses ("version `GLIBC_2.34' not
# found"). A separate debug file (objcopy --only-keep-debug) has no loadable code and no
# dynamic symbols: it is listed as such, never loaded, so never checked.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 MAX PATH..." >&2; exit 2; }
max=$1
shift

# Is version $1 above the ceiling?
above() { [ "$1" != "$max" ] && [ "$(printf '%s\n%s\n' "$1" "$max" | sort -V | tail -1)" = "$1" ]; }

passed=0
failed=0
files=$(find "$@" -type f | sort)
for f in $files; do
  [ "$(od -An -tx1 -N4 "$f" | tr -d ' \n')" = 7f454c46 ] || continue
  if ! syms=$(objdump -T "$f" 2>/dev/null); then
    if readelf -S -W "$f" | grep -E ' \.text ' | grep -q NOBITS; then
      echo "$f: debug info only (not loaded)"
      continue
    fi
    echo "glibc-ceiling: $f: objdump -T cannot read its dynamic symbols"
    failed=$((failed + 1))
    continue
  fi
  # "(GLIBC_2.34) pthread_key_create" or " GLIBC_2.2.5  memcpy": version, then the name.
  vers=$(printf '%s\n' "$syms" | sed -n 's/.*[ (]GLIBC_\([0-9][0-9.]*\))\{0,1\}[[:space:]]\{1,\}\([^ ]*\)$/\1 \2/p')
  top=$(printf '%s\n' "$vers" | cut -d' ' -f1 | grep . | sort -V | tail -1)
  if [ -z "$top" ]; then
    echo "$f: no glibc symbol"
    passed=$((passed + 1))
    continue
  fi
  echo "$f: GLIBC_$top"
  bad=
  for v in $(printf '%s\n' "$vers" | cut -d' ' -f1 | sort -uV); do
    if above "$v"; then
      bad="$bad $(printf '%s\n' "$vers" | awk -v v="$v" '($1 "") == (v "") { printf "%s@GLIBC_%s ", $2, $1 }')"
    fi
  done
  if [ -n "$bad" ]; then
    echo "glibc-ceiling: $f needs more than GLIBC_$max: $(echo $bad)"
    failed=$((failed + 1))
  else
    passed=$((passed + 1))
  fi
done
[ $((passed + failed)) -gt 0 ] || { echo "glibc-ceiling: no ELF file with dynamic symbols in $*"; exit 1; }
echo "glibc-ceiling: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
