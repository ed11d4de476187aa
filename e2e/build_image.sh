#!/bin/bash
# Build the Soft-RoCE test guest: a stock Debian kernel (vmlinuz) plus a busybox
# initramfs holding the rxe modules, the verbs userland, the third-party verbs
# programs (ibverbs-utils, perftest, rdmacm-utils, ucx-utils), the e2e programs and
# librccl_telemetry.so.
#
# Usage: build_image.sh OUTDIR PROGRAM LIBRARY [EXTRA ...]
#   OUTDIR   receives vmlinuz, initrd.gz, kver (the kernel .deb is cached in OUTDIR/cache)
#   PROGRAM  the ibcast_e2e binary (copied to /usr/local/bin with its ldd closure)
#   LIBRARY  librccl_telemetry.so (installed in /usr/local/lib under its SONAME)
#   EXTRA    more files with their ldd closures: *.so* to /usr/local/lib, the rest to
#            /usr/local/bin (the verbs_loader programs, librccl_telemetry_preload.so)
#
# Needs (Debian bookworm): busybox-static cpio kmod libibverbs1 ibverbs-providers iproute2 ethtool
#   ibverbs-utils perftest rdmacm-utils librdmacm1 ucx-utils
set -euo pipefail
OUT=${1:?usage: build_image.sh OUTDIR PROGRAM LIBRARY [EXTRA ...]}
PROG=${2:?program}
LIB=${3:?library}
shift 3
EXTRA=("$@")
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/cache"
OUT=$(cd "$OUT" && pwd)
die() { echo "build_image: $*" >&2; exit 1; }

for tool in apt-cache apt-get dpkg-deb modinfo cpio gzip ldd; do
  command -v "$tool" >/dev/null || die "missing host tool '$tool' (install the packages listed in e2e/README section)"
done
[ -x /bin/busybox ] || die "/bin/busybox missing (apt-get install busybox-static)"
/bin/busybox --list | grep -x tar >/dev/null || die "/bin/busybox has no tar applet: it is not busybox-static"

# --- 1. kernel ------------------------------------------------------------
# The generic image (the cloud flavour lacks rdma_rxe). Its ABI name changes with
# every security upload, so it is resolved through the meta-package each time.
KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$KPKG" ] || die "cannot resolve the kernel package from linux-image-amd64 (apt-get update?)"
KVER=${KPKG#linux-image-}
DEB=$(ls "$OUT/cache/${KPKG}"_*.deb 2>/dev/null | head -1 || true)
if [ -z "$DEB" ]; then
  rm -f "$OUT"/cache/linux-image-*.deb
  (cd "$OUT/cache" && apt-get download "$KPKG" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
  DEB=$(ls "$OUT/cache/${KPKG}"_*.deb 2>/dev/null | head -1 || true)
  [ -n "$DEB" ] || die "apt-get download $KPKG failed"
fi
KROOT=$OUT/kroot
# The stamp names the extracted subtrees too: a cache from an older list is re-extracted.
STAMP="$KVER virtio,net,block,infiniband,net,crypto,lib,fs/configfs"
if [ "$(cat "$OUT/kroot.stamp" 2>/dev/null)" != "$STAMP" ] || [ "$(cat "$OUT/kver" 2>/dev/null)" != "$KVER" ] || [ ! -f "$OUT/vmlinuz" ] || [ ! -d "$KROOT" ]; then
  rm -rf "$KROOT"; mkdir -p "$KROOT"
  # Only the kernel image and the module subtrees the guest can need (the full
  # package unpacks to ~400 MB).
  dpkg-deb --fsys-tarfile "$DEB" | tar -x -C "$KROOT" --wildcards \
    "./boot/vmlinuz-$KVER" \
    "./lib/modules/$KVER/kernel/drivers/virtio/*" \
    "./lib/modules/$KVER/kernel/drivers/net/*" \
    "./lib/modules/$KVER/kernel/drivers/block/*" \
    "./lib/modules/$KVER/kernel/drivers/infiniband/*" \
    "./lib/modules/$KVER/kernel/net/*" \
    "./lib/modules/$KVER/kernel/crypto/*" \
    "./lib/modules/$KVER/kernel/lib/*" \
    "./lib/modules/$KVER/kernel/fs/configfs/*"
  cp "$KROOT/boot/vmlinuz-$KVER" "$OUT/vmlinuz"
  echo "$KVER" > "$OUT/kver"
  echo "$STAMP" > "$OUT/kroot.stamp"
fi
KM=$KROOT/lib/modules/$KVER/kernel

# --- 2. modules, in dependency order ----------------------------------------
# modinfo gives the hard dependencies. crc32_generic is a soft one: rdma_rxe asks
# the crypto API for "crc32" at 'rdma link add' time and fails without it.
# rdma_ucm (with rdma_cm, ib_cm, iw_cm, configfs) gives /dev/infiniband/rdma_cm to
# librdmacm (rping).
# sch_prio + cls_u32 + sch_netem + sch_tbf: the trio's fault injector (tc netem, or a tbf rate
# limit, on one destination).
WANT="virtio_pci virtio_net virtio_blk crc32_generic rdma_rxe rdma_ucm sch_prio cls_u32 sch_netem sch_tbf"
declare -A MODPATH=()
while IFS= read -r f; do
  b=${f##*/}; b=${b%%.ko*}; MODPATH[$b]=$f; MODPATH[${b//-/_}]=$f
done < <(find "$KM" -name '*.ko' -o -name '*.ko.xz' -o -name '*.ko.zst')
ORDER=()
declare -A SEEN=()
visit() {
  local m=${1//-/_}
  [ -n "${SEEN[$m]:-}" ] && return 0
  SEEN[$m]=1
  local p=${MODPATH[$m]:-}
  [ -n "$p" ] || die "module $m not found in $KPKG (or outside the extracted subtrees)"
  local deps d
  deps=$(modinfo -F depends "$p" | tr ',' ' ')
  for d in $deps; do visit "$d"; done
  ORDER+=("$m")
}
for m in $WANT; do visit "$m"; done
# virtio_pci pulls the virtio core; the legacy/modern helpers are hard deps of it.

# --- 3. staging tree ----------------------------------------------------------
R=$OUT/root
rm -rf "$R"
mkdir -p "$R"/{bin,dev,proc,sys,tmp,run,out,etc/libibverbs.d,usr/lib/modules,usr/lib/x86_64-linux-gnu,usr/lib64,usr/bin,usr/sbin,usr/local/bin,usr/local/lib}
ln -s usr/lib "$R/lib"; ln -s usr/lib64 "$R/lib64"; ln -s bin "$R/sbin"
cp /bin/busybox "$R/bin/busybox"
: > "$R/etc/modules.order"
for m in "${ORDER[@]}"; do
  p=${MODPATH[$m]}
  case $p in
    *.xz)  xz -dc "$p" > "$R/usr/lib/modules/$m.ko" ;;
    *.zst) zstd -dc "$p" > "$R/usr/lib/modules/$m.ko" ;;
    *)     cp "$p" "$R/usr/lib/modules/$m.ko" ;;
  esac
  echo "$m" >> "$R/etc/modules.order"
done

# A file and every library ldd names, at the same paths (merged /usr, like the host).
put() {
  local src=$1 dst=$2 lib real
  install -D -m 755 "$(readlink -f "$src")" "$R$dst"
  for lib in $(ldd "$src" 2>/dev/null | grep -oE '/[^ ]+' || true); do
    [ -e "$lib" ] || continue
    real=$(readlink -f "$lib")
    install -D -m 755 "$real" "$R$(dirname "$lib" | sed 's#^/lib#/usr/lib#')/$(basename "$lib")"
  done
}
for b in /usr/bin/rdma /usr/sbin/ip /usr/sbin/ethtool /usr/sbin/tc /usr/bin/nice; do
  [ -x "$b" ] || die "$b missing (iproute2 / ethtool / coreutils: busybox has no nice)"
  put "$b" "$b"
done
RXE=/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
[ -e "$RXE" ] || RXE=$(ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so 2>/dev/null | head -1)
[ -n "$RXE" ] && [ -e "$RXE" ] || die "rxe verbs provider missing (ibverbs-providers)"
put "$RXE" "$RXE"
cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"

# The library under its SONAME (what the program's DT_NEEDED names), then the program.
SONAME=$(objdump -p "$LIB" 2>/dev/null | awk '/SONAME/ {print $2}')
[ -n "$SONAME" ] || SONAME=$(basename "$LIB")
put "$LIB" "/usr/local/lib/$SONAME"
ln -sf "$SONAME" "$R/usr/local/lib/librccl_telemetry.so"
put "$PROG" /usr/local/bin/ibcast_e2e
for f in "${EXTRA[@]}"; do
  [ -e "$f" ] || die "extra file $f missing"
  case $(basename "$f") in
    *.so|*.so.*) put "$f" "/usr/local/lib/$(basename "$f")" ;;
    *)           put "$f" "/usr/local/bin/$(basename "$f")" ;;
  esac
done

# Third-party verbs programs, run unmodified in the guest (e2e/guest/tools.sh).
TOOLS="/usr/bin/ibv_devinfo /usr/bin/ibv_rc_pingpong /usr/bin/ib_write_bw /usr/bin/ib_send_bw
  /usr/bin/ib_read_bw /usr/bin/rping /usr/bin/ucx_perftest"
for b in $TOOLS; do
  [ -x "$b" ] || die "$b missing (apt-get install ibverbs-utils perftest rdmacm-utils ucx-utils)"
  put "$b" "$b"
done
# ldd does not list libgcc_s, which glibc dlopens for pthread_exit/cancel (rping aborts
# at exit without it).
GCC_S=$(ls /usr/lib/x86_64-linux-gnu/libgcc_s.so.1 /lib/x86_64-linux-gnu/libgcc_s.so.1 2>/dev/null | head -1)
[ -n "$GCC_S" ] || die "libgcc_s.so.1 missing"
put "$GCC_S" /usr/lib/x86_64-linux-gnu/libgcc_s.so.1
# UCX dlopens its transports from its module directory (libuct_ib brings libmlx5 along).
UCXMOD=/usr/lib/x86_64-linux-gnu/ucx
ls "$UCXMOD"/libuct_ib.so.0 >/dev/null 2>&1 || die "UCX modules missing in $UCXMOD (ucx-utils / libucx0)"
for m in "$UCXMOD"/*.so.0; do put "$m" "$m"; done
echo /usr/local/lib > "$R/etc/ld.so.conf"
echo "root:x:0:0:root:/:/bin/sh" > "$R/etc/passwd"

install -m 755 "$HERE/guest/init" "$R/init"
install -m 644 "$HERE/guest/scenarios.sh" "$R/scenarios.sh"
install -m 644 "$HERE/guest/tools.sh" "$R/tools.sh"
install -m 644 "$HERE/guest/trio.sh" "$R/trio.sh"
install -m 644 "$HERE/guest/tclass.sh" "$R/tclass.sh"

(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1 > "$OUT/initrd.gz.tmp") && mv "$OUT/initrd.gz.tmp" "$OUT/initrd.gz"
echo "build_image: $KPKG, modules: ${ORDER[*]}"
echo "build_image: $(du -h "$OUT/vmlinuz" | cut -f1) vmlinuz, $(du -h "$OUT/initrd.gz" | cut -f1) initrd.gz"
