# packaging/package.mk -- the prebuilt packages; the top-level Makefile includes this file.
#
#   make package        build/package/rccl-telemetry_<version>-<release>_amd64.deb and
#                       build/package/rccl-telemetry-<version>-<release>.x86_64.rpm: the library,
#                       its headers, pkg-config and CMake files, the analyser and the preload
#                       library, each ELF file needing glibc 2.28 (RHEL 8) or newer, whatever
#                       glibc builds them. docs/packages.md says what is inside and why zig.
#   make package-test   builds both, holds every ELF file in them to the glibc ceiling, the
#                       .rpm's files to the .deb's, installs the .deb (dpkg -i; as root, as CI
#                       runs it), builds and runs the CMake and pkg-config consumers against
#                       it, then removes it. Not part of `make test`: the second build of every
#                       crate for the old glibc takes minutes (docs/packages.md has the figures).
#
# Needs: zig (PyPI's ziglang: python3 -m ziglang), cargo-zigbuild, dpkg-deb, rpmbuild (Debian's
# rpm) and cpio; .ci/run installs them.

# The oldest glibc the packages run on: RHEL 8's.
PKG_GLIBC   := 2.28
# Bumped when the same version is packaged again.
PKG_RELEASE ?= 1
PKG_MAINTAINER ?= rccl-telemetry maintainers <rccl-telemetry@localhost>
PKG_PREFIX  ?= /usr
# Each distribution's library directory for x86-64 (Debian's multiarch, RHEL's lib64).
PKG_DEB_LIBDIR ?= $(PKG_PREFIX)/lib/x86_64-linux-gnu
PKG_RPM_LIBDIR ?= $(PKG_PREFIX)/lib64
PKGB        := $(B)/package
PKG_DEB     := $(PKGB)/rccl-telemetry_$(VERSION)-$(PKG_RELEASE)_amd64.deb
PKG_RPM     := $(PKGB)/rccl-telemetry-$(VERSION)-$(PKG_RELEASE).x86_64.rpm

# zig links against the symbol versions of the glibc named in its target, whatever glibc the
# build machine has; cargo-zigbuild makes it the linker (and C compiler) of cargo's target.
ZIG         ?= python3 -m ziglang
ZIG_CC      := $(ZIG) cc -target x86_64-linux-gnu.$(PKG_GLIBC)
ZIG_TARGET  := x86_64-unknown-linux-gnu.$(PKG_GLIBC)
ZIG_TARGET_DIR := target/zig
ZREL        := $(ZIG_TARGET_DIR)/x86_64-unknown-linux-gnu/release
PKG_ELF     := $(PKGB)/elf
PKG_SO      := $(PKG_ELF)/librccl_telemetry.so
PKG_PRELOAD := $(PKG_ELF)/librccl_telemetry_preload.so
PKG_TOOL    := $(ZREL)/rccl-telemetry
# Only <infiniband/*.h> comes from the build machine (libibverbs-dev): zig brings its own libc
# and kernel headers for the target, and the machine's glibc headers would not match them.
PKG_VERBS_INC := $(PKGB)/verbs-include

.PHONY: package package-build package-test

# The three crates, once, for the old glibc (a target directory of their own: the native build
# in target/release is left alone).
package-build:
	@$(CARGO) zigbuild --help >/dev/null 2>&1 || { echo "package: cargo-zigbuild not found (cargo install --locked cargo-zigbuild)"; exit 1; }
	@$(ZIG) version >/dev/null 2>&1 || { echo "package: zig not found ($(ZIG); pip install ziglang)"; exit 1; }
	$(CARGO) zigbuild --release --target $(ZIG_TARGET) --target-dir $(ZIG_TARGET_DIR) \
	  -p rccl-telemetry -p rccl-telemetry-preload -p rccl-telemetry-tool
	@mkdir -p $(PKG_ELF)/include $(PKG_VERBS_INC)
	$(call link_lib_with,$(ZIG_CC),$(ZREL)/librccl_telemetry.a,$(PKG_SO),$(LIB_DEFS))
	$(ZREL)/rtp_engine_header > $(PKG_ELF)/include/engine.h
	test -f /usr/include/infiniband/verbs.h || { echo "package: <infiniband/verbs.h> not found (libibverbs-dev)"; exit 1; }
	ln -sfn /usr/include/infiniband $(PKG_VERBS_INC)/infiniband
	$(call link_preload_with,$(ZIG_CC),$(subst -I$(PRELOAD_GEN),-I$(PKG_ELF)/include -isystem $(PKG_VERBS_INC),$(PRELOAD_CFLAGS)),$(PKG_PRELOAD),$(ZREL)/librccl_telemetry_preload_engine.a)
	@! readelf -d $(PKG_PRELOAD) | grep -q 'NEEDED.*ibverbs' || { echo "$(PKG_PRELOAD) must not need libibverbs"; exit 1; }

# $(call pkg_stage,root,libdir): the tree `make install install-tool` makes, with these builds.
pkg_stage = rm -rf $(1) && $(MAKE) --no-print-directory install-files install-tool-files DESTDIR=$(abspath $(1)) \
  PREFIX=$(PKG_PREFIX) LIBDIR=$(2) INCLUDEDIR=$(PKG_PREFIX)/include BINDIR=$(PKG_PREFIX)/bin \
  SO=$(PKG_SO) PRELOAD_SO=$(PKG_PRELOAD) TOOL=$(PKG_TOOL)

# What the packages say of themselves.
pkg_subst = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@RELEASE@|$(PKG_RELEASE)|g' -e 's|@ABI@|$(ABI)|g' \
  -e 's|@GLIBC@|$(PKG_GLIBC)|g' -e 's|@MAINTAINER@|$(PKG_MAINTAINER)|g'

package: package-build
	@command -v dpkg-deb >/dev/null && command -v rpmbuild >/dev/null || \
	  { echo "package: dpkg-deb and rpmbuild are needed (Debian packages dpkg, rpm)"; exit 1; }
	$(call pkg_stage,$(PKGB)/deb/root,$(PKG_DEB_LIBDIR))
	mkdir -p $(PKGB)/deb/root/DEBIAN
	$(pkg_subst) -e "s|@SIZE@|$$(du -sk --exclude=DEBIAN $(PKGB)/deb/root | cut -f1)|" packaging/deb/control.in \
	  > $(PKGB)/deb/root/DEBIAN/control
	$(pkg_subst) packaging/deb/shlibs.in > $(PKGB)/deb/root/DEBIAN/shlibs
	cp packaging/deb/triggers $(PKGB)/deb/root/DEBIAN/triggers
	cd $(PKGB)/deb/root && find . -path ./DEBIAN -prune -o -type f -printf '%P\n' | LC_ALL=C sort | \
	  xargs md5sum > DEBIAN/md5sums
	chmod 644 $(PKGB)/deb/root/DEBIAN/*
	dpkg-deb --root-owner-group -Zxz --build $(PKGB)/deb/root $(PKG_DEB)
	$(call pkg_stage,$(PKGB)/rpm/root,$(PKG_RPM_LIBDIR))
	sh packaging/rpm/files.sh $(PKGB)/rpm/root > $(PKGB)/rpm/files
	rm -rf $(PKGB)/rpm/top
	rpmbuild -bb --quiet --define '_topdir $(abspath $(PKGB)/rpm/top)' \
	  --define 'stage $(abspath $(PKGB)/rpm/root)' --define 'filelist $(abspath $(PKGB)/rpm/files)' \
	  --define 'pkg_version $(VERSION)' --define 'pkg_release $(PKG_RELEASE)' \
	  --define 'pkg_maintainer $(PKG_MAINTAINER)' --define 'pkg_glibc $(PKG_GLIBC)' \
	  packaging/rpm/rccl-telemetry.spec
	mv $(PKGB)/rpm/top/RPMS/x86_64/$(notdir $(PKG_RPM)) $(PKG_RPM)
	@ls -l $(PKG_DEB) $(PKG_RPM)

# The ceiling's check itself, on a program zig links for glibc 2.34: it must fail and name the
# symbol (__libc_start_main has a GLIBC_2.34 version from 2.34 on).
.PHONY: glibc-ceiling-selftest
glibc-ceiling-selftest:
	@mkdir -p $(PKGB)/selftest
	printf 'int main(void) { return 0; }\n' > $(PKGB)/selftest/main.c
	$(ZIG) cc -target x86_64-linux-gnu.2.34 $(PKGB)/selftest/main.c -o $(PKGB)/selftest/needs_2.34
	! sh packaging/glibc-ceiling.sh $(PKG_GLIBC) $(PKGB)/selftest/needs_2.34 > $(PKGB)/selftest/out
	grep -q 'needs more than GLIBC_$(PKG_GLIBC): .*__libc_start_main@GLIBC_2.34' $(PKGB)/selftest/out
	sh packaging/glibc-ceiling.sh 2.34 $(PKGB)/selftest/needs_2.34 >/dev/null
	@echo "glibc-ceiling-selftest: 1 passed, 0 failed"

package-test: package glibc-ceiling-selftest
	sh packaging/package-check.sh $(PKG_GLIBC) $(PKG_DEB) $(PKG_RPM) $(PKGB)/check $(PKG_DEB_LIBDIR) $(PKG_RPM_LIBDIR)
	CC="$(CC)" sh packaging/package-install-test.sh $(PKG_DEB) $(PKGB)/install-test
