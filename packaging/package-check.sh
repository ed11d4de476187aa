#!/bin/sh
# package-check.sh GLIBC DEB RPM WORKDIR DEB_LIBDIR RPM_LIBDIR: what `make package` built,
# checked without installing anything:
#   - the .rpm holds the .deb's files (rpm -qlp against dpkg-deb -c), with the same modes and
#     link targets and the same bytes, but for each distribution's library directory (and the
#     pkg-config file that names it);
#   - every ELF file in either needs at most GLIBC_<GLIBC> (glibc-ceiling.sh) and nothing but
#     glibc's own libraries (the .deb depends on libc6 alone; neither library needs libibverbs);
#   - the libraries' names and links as `make install` makes them: the SONAME, .so.0 and .so.
set -eu
[ $# -eq 6 ] || { echo "usage: $0 GLIBC DEB RPM WORKDIR DEB_LIBDIR RPM_LIBDIR" >&2; exit 2; }
glibc=$1 deb=$(realpath "$2") rpm=$(realpath "$3") work=$4 deb_libdir=$5 rpm_libdir=$6
here=$(dirname "$0")
passed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
fail() { echo "package-check: $1"; echo "package-check: $passed passed, 1 failed"; exit 1; }

rm -rf "$work" && mkdir -p "$work/deb" "$work/rpm"

# The file lists (files and links; directories differ by design: a .deb lists every one, an
# .rpm only its own), with RHEL's library directory written as Debian's.
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { print substr($6, 2) }' | LC_ALL=C sort > "$work/deb.list"
rpm -qp --dump "$rpm" | awk '$5 !~ /^04/ { print $1 }' | sed "s|^$rpm_libdir/|$deb_libdir/|" |
  LC_ALL=C sort > "$work/rpm.list"
rpm -qlp "$rpm" | sed "s|^$rpm_libdir/|$deb_libdir/|" | LC_ALL=C sort > "$work/rpm.all"
LC_ALL=C comm -23 "$work/rpm.list" "$work/rpm.all" | grep -q . && fail "rpm -qlp does not list what --dump does"
diff -u "$work/deb.list" "$work/rpm.list" || fail "the .rpm's files (+) are not the .deb's (-)"
ok "the .rpm lists the .deb's $(wc -l < "$work/deb.list") files and links"

# The contents, unpacked: every ELF file of both held to the glibc ceiling. The two files that name directories are first checked to name the
# package's own (the pkg-config file its libdir, the CMake package the header's directory,
# relative to itself), then compared as if the .rpm's library directory were Debian's.
dpkg-deb -x "$deb" "$work/deb"
(cd "$work/rpm" && rpm2cpio "$rpm" | cpio -idm --quiet)
sh "$here/glibc-ceiling.sh" "$glibc" "$work/deb" "$work/rpm" || fail "an ELF file needs more than GLIBC_$glibc"
ok "every ELF file of both needs at most GLIBC_$glibc"
cfg=cmake/rccl-telemetry/rccl-telemetryConfig.cmake
pc=pkgconfig/rccl-telemetry.pc
inc_rel() { sed -n 's|.*_rt_includedir "${CMAKE_CURRENT_LIST_DIR}/\(.*\)" ABSOLUTE.*|\1|p' "$1"; }
for t in "deb $deb_libdir" "rpm $rpm_libdir"; do
  set -- $t
  grep -qx "libdir=$2" "$work/$1$2/$pc" || fail "the .$1's $pc does not say libdir=$2"
  [ -f "$work/$1$2/cmake/rccl-telemetry/$(inc_rel "$work/$1$2/$cfg")/rccl_telemetry.h" ] ||
    fail "the .$1's CMake package does not find rccl_telemetry.h"
done
sed -i -e "s|^libdir=$rpm_libdir\$|libdir=$deb_libdir|" "$work/rpm$rpm_libdir/$pc"
sed -i -e "s|{CMAKE_CURRENT_LIST_DIR}/$(inc_rel "$work/rpm$rpm_libdir/$cfg")\"|{CMAKE_CURRENT_LIST_DIR}/$(inc_rel "$work/deb$deb_libdir/$cfg")\"|" \
  "$work/rpm$rpm_libdir/$cfg"
mkdir -p "$work/rpm$(dirname "$deb_libdir")"
mv "$work/rpm$rpm_libdir" "$work/rpm$deb_libdir.tmp" && mv "$work/rpm$deb_libdir.tmp" "$work/rpm$deb_libdir"
(cd "$work/deb" && find . -mindepth 1 ! -type d -printf '%M %P %l\n' | LC_ALL=C sort) > "$work/deb.modes"
(cd "$work/rpm" && find . -mindepth 1 ! -type d -printf '%M %P %l\n' | LC_ALL=C sort) > "$work/rpm.modes"
diff -u "$work/deb.modes" "$work/rpm.modes" || fail "the .rpm's modes or link targets (+) are not the .deb's (-)"
diff -r --no-dereference "$work/deb" "$work/rpm" >/dev/null ||
  { diff -r --no-dereference "$work/deb" "$work/rpm" | head -20; fail "the .rpm's contents are not the .deb's"; }
ok "the .rpm's files are the .deb's, byte for byte (but for the library directory), with the same modes"

# What they load: glibc's libraries only.
allowed='libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libutil.so.1 ld-linux-x86-64.so.2'
for f in $(find "$work/deb" -type f | LC_ALL=C sort); do
  [ "$(od -An -tx1 -N4 "$f" | tr -d ' \n')" = 7f454c46 ] || continue
  for n in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    case " $allowed " in *" $n "*) ;; *) fail "${f#"$work"/deb} needs $n, which the package does not depend on" ;; esac
  done
done
ok "the ELF files need nothing but glibc's libraries"

# The libraries as make install names them.
l=$work/deb$deb_libdir
real=$(cd "$l" && ls librccl_telemetry.so.*.*.*)
[ "$(readlink "$l/librccl_telemetry.so")" = librccl_telemetry.so.0 ] &&
  [ "$(readlink "$l/librccl_telemetry.so.0")" = "$real" ] &&
  readelf -d "$l/$real" | grep -q 'SONAME.*\[librccl_telemetry.so.0\]' ||
  fail "librccl_telemetry.so -> .so.0 -> $real with SONAME librccl_telemetry.so.0 does not hold"
[ -f "$l/.debug/$real.debug" ] && [ -f "$l/.debug/librccl_telemetry_preload.so.debug" ] ||
  fail "the libraries' debug files are not in $deb_libdir/.debug"
ok "librccl_telemetry.so -> .so.0 -> $real (SONAME .so.0), debug files beside them"

echo "package-check: $passed passed, 0 failed"
