# rccl-telemetry: `make` builds the library and its header, `make demo` runs a simulated
# 8-rank IB-CAST job on two hosts (one NIC planted slow) with telemetry on, `make test` runs
# every test.

CARGO   ?= cargo
CC      ?= cc
CXX     ?= c++
# Where `make install` puts things (DESTDIR prefixes them all, for staging a package).
# LIBDIR: lib64 on RHEL-family systems, lib/<multiarch> (lib/x86_64-linux-gnu) on Debian's.
PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR     ?= $(PREFIX)/bin
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
VERSION_MAJOR := $(firstword $(subst ., ,$(VERSION)))
# The ABI generation: the SONAME is librccl_telemetry.so.$(ABI). It changes only with an
# incompatible change of the C ABI (docs/integrators.md, "Versions and the ABI").
ABI     := 0
REL     := target/release
SO      := $(REL)/librccl_telemetry.so
LIB_A   := $(REL)/librccl_telemetry.a
LIB_MAP := src/librccl_telemetry.map
B       := build
CWARN   := -Wall -Wextra -Werror
# The header must also stay quiet under the stricter warnings C++ code bases often enable.
HDR_CWARN := -Wconversion -Wsign-conversion -Wshadow -Wcast-qual
HDR_CXXWARN := $(HDR_CWARN) -Wold-style-cast -Wuseless-cast -Wzero-as-null-pointer-constant
LINK    := -L$(REL) -lrccl_telemetry -Wl,-rpath,$(abspath $(REL)) -lpthread
TOOL    := $(REL)/rccl-telemetry
DEMO    := out/demo
# The highest glibc symbol version a native build's libraries may need (built on Debian 12;
# make package's are held to 2.28, PKG_GLIBC).
GLIBC_MAX := 2.34
# Nothing left undefined but what libc, libgcc_s and the loader provide (not for the
# ThreadSanitizer build, whose runtime comes with the program).
LIB_DEFS := -Wl,-z,defs

# The library's link, written once: $(call link_lib,staticlib,output,extra flags), or with
# another compiler driver $(call link_lib_with,cc,staticlib,output,extra flags) (make package's
# build for an older glibc). The Rust staticlib whole, the exports and their symbol versions
# from $(LIB_MAP) (everything else local), the SONAME, and -z nodelete (handles stay valid for
# the life of the process, and background threads and signal handlers run library code:
# dlclose must never unmap it).
link_lib_with = $(1) -shared -o $(3) -Wl,--whole-archive $(2) -Wl,--no-whole-archive \
  -Wl,--version-script=$(LIB_MAP) -Wl,--no-undefined-version -Wl,-soname,librccl_telemetry.so.$(ABI) \
  -Wl,-z,nodelete -Wl,--gc-sections -Wl,--build-id $(4) -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
link_lib = $(call link_lib_with,$(CC),$(1),$(2),$(3))

.PHONY: all
all: lib preload

include preload/preload.mk
include bench/bench.mk
include tools/tool.mk
include e2e/e2e.mk
include packaging/prometheus/prometheus.mk
include packaging/package.mk

.PHONY: lib header generate tool test-bins c-tests tsan header-check abi-check abi-baseline abi-test glibc-check \
  install install-files install-tool install-tool-files uninstall install-check demo lint test skips clean

# target/release/librccl_telemetry.so: cargo builds the staticlib, make links it (rustc's own
# export list for a cdylib would override the symbol versions).
lib:
	$(CARGO) build --release -p rccl-telemetry
	@$(MAKE) --no-print-directory $(SO)

$(SO): $(LIB_A) $(LIB_MAP)
	$(call link_lib,$(LIB_A),$@,$(LIB_DEFS))
	ln -sf librccl_telemetry.so $(REL)/librccl_telemetry.so.$(ABI)

# include/rccl_telemetry.h is generated and committed: build.rs writes cbindgen's declarations
# into cargo's OUT_DIR, the example appends the inline hooks (src/rccl_telemetry_inline.h) with
# the C mirrors of the library's layouts generated from the Rust structs (src/inline_abi.rs).
# This writes it (make generate runs it); header-check (part of make test) fails when the
# committed one is stale, or when a struct is written by hand into the hooks' C source instead
# of generated.
header:
	$(CARGO) run -q --release -p rccl-telemetry --example rccl_telemetry_header > include/rccl_telemetry.h.new
	mv include/rccl_telemetry.h.new include/rccl_telemetry.h

# Every generated file kept in the tree, regenerated from its source: the header (above); the
# file format's JSON Schema, the key and counter tables of docs/format.md and src/hw/README.md
# and schema/hw_counters.json (format/tests/contract/); the tool README's table of finding
# kinds (tools/rccl-telemetry/tests/it/); bench/README.md's latest figures (from
# bench/results.json). make test fails on any of them stale, and says to run this.
generate: header
	RCCL_TELEMETRY_REGENERATE=1 $(CARGO) test --release -p rccl-telemetry-format --test contract
	RCCL_TELEMETRY_REGENERATE=1 $(CARGO) test --release -p rccl-telemetry-tool --test it generated_docs
	python3 $(BENCH_DIR)/latest.py --write $(BENCH_DIR)/results.json $(BENCH_DIR)/README.md

header-check:
	@mkdir -p $(B)
	$(CARGO) run -q --release -p rccl-telemetry --example rccl_telemetry_header > $(B)/rccl_telemetry.h
	@diff -u include/rccl_telemetry.h $(B)/rccl_telemetry.h || \
	  { echo "header-check: include/rccl_telemetry.h is not what the sources generate: run make generate"; exit 1; }
	@! grep -n '# Safety' include/rccl_telemetry.h || \
	  { echo "header-check: a Rust '# Safety' heading in the C header: say the caller's contract in a sentence (src/capi.rs)"; exit 1; }
	@! grep -nE '^[[:space:]]*(typedef[[:space:]]+)?struct[[:space:]]+[A-Za-z_0-9]*[[:space:]]*\{' src/rccl_telemetry_inline.h || \
	  { echo "header-check: a struct written by hand in src/rccl_telemetry_inline.h: mirror the Rust one (src/inline_abi.rs)"; exit 1; }
	@! grep -nE 'make [a-z]|cbindgen|[a-z_]\.rs\b|src/|examples/|[Ee]arlier versions' include/rccl_telemetry.h || \
	  { echo "header-check: build-system or history text in the installed header: say it in the sources or docs/"; exit 1; }
	@echo "header-check: 4 passed, 0 failed"

tool:
	$(CARGO) build --release -p rccl-telemetry-tool

# --- C test programs, one set of rules: make builds every one (the Rust integration tests run
# them from build/, and refuse one older than its source or the header). The header as RCCL
# includes it, warnings as errors; c_tests/<name>.c -> build/<name> with the inline hooks,
# build/<name>_calls without them (every hook a call).
C_PROGS := ibcast_sim ibcast_sim_calls survive prom_rank inline_equiv complete_at complete_at_calls dlclose comm_sim \
  memory_limit logger wqe_monitor wqe_monitor_calls
C_HDRS  := include/rccl_telemetry.h c_tests/proc_threads.h
C_FLAGS := -std=c11 $(CWARN) -O2 -g -Iinclude

$(B)/%: c_tests/%.c $(C_HDRS) | lib
	@mkdir -p $(B)
	$(CC) $(C_FLAGS) $< -o $@ $(LINK)

$(B)/%_calls: c_tests/%.c $(C_HDRS) | lib
	@mkdir -p $(B)
	$(CC) $(C_FLAGS) -DRCCL_TELEMETRY_NO_INLINE $< -o $@ $(LINK)

# dlclose loads the library itself (dlopen), so it is not linked with it.
$(B)/dlclose: c_tests/dlclose.c $(C_HDRS)
	@mkdir -p $(B)
	$(CC) $(C_FLAGS) $< -o $@ -ldl -lpthread

test-bins: $(addprefix $(B)/,$(C_PROGS)) preload-test-bins

# --- The ABI. abi-check compares the built library's ABI (its ELF symbols and versions, and
# the types of the C API from its debug info; abidw/abidiff, Debian's abigail-tools) with the
# committed baseline of this ABI generation, and fails on any change but an added symbol: a
# removed or changed one needs a new SONAME (ABI above, then make abi-baseline). The
# baseline is rewritten at each release (make abi-baseline), so additions since are listed.
ABI_BASELINE := packaging/abi/librccl_telemetry.so.$(ABI).abi
ABI_SUPPR    := packaging/abi/suppressions.abignore
ABIDW        := abidw --no-corpus-path --no-show-locs

abi-baseline: lib
	$(ABIDW) $(SO) > $(ABI_BASELINE)

abi-check: lib
	@command -v abidiff >/dev/null || { echo "abi-check: abidiff not found (Debian package abigail-tools)"; exit 1; }
	@test -f $(ABI_BASELINE) || { echo "abi-check: no baseline for SONAME librccl_telemetry.so.$(ABI) ($(ABI_BASELINE)): make abi-baseline"; exit 1; }
	@mkdir -p $(B)
	$(ABIDW) $(SO) > $(B)/librccl_telemetry.abi
	@abidiff --suppressions $(ABI_SUPPR) --no-added-syms $(ABI_BASELINE) $(B)/librccl_telemetry.abi > $(B)/abidiff.txt; rc=$$?; \
	  abidiff --suppressions $(ABI_SUPPR) $(ABI_BASELINE) $(B)/librccl_telemetry.abi > $(B)/abidiff-all.txt; \
	  if [ $$((rc & 3)) -ne 0 ]; then cat $(B)/abidiff.txt; echo "abi-check: abidiff failed ($$rc)"; exit 1; fi; \
	  if [ $$rc -ne 0 ]; then cat $(B)/abidiff.txt; \
	    echo "abi-check: librccl_telemetry.so.$(ABI) changed incompatibly against $(ABI_BASELINE): keep the old symbols and types (add, do not change), or bump ABI in the Makefile (a new SONAME) and make abi-baseline"; exit 1; fi; \
	  grep -E '^Functions changes summary|^Variables changes summary|added function|added variable' $(B)/abidiff-all.txt || true
	@echo "abi-check: 1 passed, 0 failed"

# --- Old and mismatched headers (c_tests/abi/consumer.c, a program of the 0.1.0 API): rebuilt
# from 0.1.0's header against this library; a binary of 0.1.0 (linked against a stub with
# 0.1.0's unversioned names and SONAME) run with this library; a header whose inline layout
# number the library does not provide, which must leave telemetry off with one line.
ABI_PREV := 0.1.0
ABIB     := $(B)/abi

$(ABIB)/consumer_now: c_tests/abi/consumer.c include/rccl_telemetry.h | lib
	@mkdir -p $(ABIB)
	$(CC) $(C_FLAGS) $< -o $@ $(LINK)

$(ABIB)/consumer_prev: c_tests/abi/consumer.c c_tests/abi/$(ABI_PREV)/rccl_telemetry.h | lib
	@mkdir -p $(ABIB)
	$(CC) $(subst -Iinclude,-Ic_tests/abi/$(ABI_PREV),$(C_FLAGS)) $< -o $@ $(LINK)

# The previous release's library as a link-time stub: every name its header declares (no
# version nodes, as 0.1.0 had none) and its hot block, under the same SONAME.
$(ABIB)/stub/librccl_telemetry.so: c_tests/abi/$(ABI_PREV)/rccl_telemetry.h
	@mkdir -p $(ABIB)/stub
	sed -n 's/^[A-Za-z].*[ *]\(rcclTelemetry[A-Za-z0-9_]*\)(.*);$$/void \1(void) {}/p' $< > $(ABIB)/stub/fns.c
	printf '#include "rccl_telemetry.h"\nrcclTelemetryHot_ rcclTelemetryHotV3;\n' > $(ABIB)/stub/data.c
	$(CC) -shared -fPIC -Ic_tests/abi/$(ABI_PREV) $(ABIB)/stub/fns.c $(ABIB)/stub/data.c -o $@ \
	  -Wl,-soname,librccl_telemetry.so.$(ABI)

$(ABIB)/consumer_prev_binary: c_tests/abi/consumer.c $(ABIB)/stub/librccl_telemetry.so
	$(CC) $(subst -Iinclude,-Ic_tests/abi/$(ABI_PREV),$(C_FLAGS)) $< -o $@ \
	  -L$(ABIB)/stub -lrccl_telemetry -Wl,-rpath,$(abspath $(REL)) -lpthread

$(ABIB)/other_layout/rccl_telemetry.h: include/rccl_telemetry.h
	@mkdir -p $(dir $@)
	sed 's/^#define RCCL_TELEMETRY_INLINE_LAYOUT .*/#define RCCL_TELEMETRY_INLINE_LAYOUT 99/' $< > $@
	grep -q 'INLINE_LAYOUT 99' $@

$(ABIB)/consumer_other_layout: c_tests/abi/consumer.c $(ABIB)/other_layout/rccl_telemetry.h | lib
	$(CC) $(subst -Iinclude,-I$(ABIB)/other_layout,$(C_FLAGS)) $< -o $@ $(LINK)

ABI_RUN = rm -rf $(ABIB)/out && mkdir -p $(ABIB)/out && RCCL_TELEMETRY_OUTPUT_DIR=$(ABIB)/out

abi-test: lib $(ABIB)/consumer_now $(ABIB)/consumer_prev $(ABIB)/consumer_prev_binary $(ABIB)/consumer_other_layout
	$(ABI_RUN) RCCL_TELEMETRY_ENABLE=1 $(ABIB)/consumer_now on
	ls $(ABIB)/out/rccl_telemetry_*.json >/dev/null
	$(ABI_RUN) RCCL_TELEMETRY_ENABLE=1 $(ABIB)/consumer_prev on
	ls $(ABIB)/out/rccl_telemetry_*.json >/dev/null
	@# a 0.1.0 binary: unversioned references, bound at run time to this library's versions
	! readelf -V $(ABIB)/consumer_prev_binary | grep -q 'File: librccl_telemetry'
	$(ABI_RUN) RCCL_TELEMETRY_ENABLE=1 $(ABIB)/consumer_prev_binary on 2>$(ABIB)/stderr
	@# a normal start says nothing
	@! grep . $(ABIB)/stderr
	ls $(ABIB)/out/rccl_telemetry_*.json >/dev/null
	$(ABI_RUN) RCCL_TELEMETRY_ENABLE=1 $(ABIB)/consumer_other_layout off 2>$(ABIB)/stderr
	@cat $(ABIB)/stderr; test "$$(wc -l < $(ABIB)/stderr)" = 1 && grep -q 'layout 99' $(ABIB)/stderr
	! ls $(ABIB)/out/rccl_telemetry_*.json 2>/dev/null
	$(ABI_RUN) env -u RCCL_TELEMETRY_ENABLE $(ABIB)/consumer_other_layout off 2>$(ABIB)/stderr
	@! grep . $(ABIB)/stderr
	@echo "abi-test: 5 passed, 0 failed"

# ThreadSanitizer sees the library's own atomics and locks only if the library is
# instrumented too: it is built with nightly's -Zsanitizer=thread (std stays uninstrumented).
TSAN_REL := target/tsan/x86_64-unknown-linux-gnu/release
$(B)/ibcast_sim_tsan: c_tests/ibcast_sim.c c_tests/tsan_shim.c include/rccl_telemetry.h | lib
	RUSTFLAGS="-Zsanitizer=thread -Cunsafe-allow-abi-mismatch=sanitizer" \
	  $(CARGO) +nightly build --release --target x86_64-unknown-linux-gnu --target-dir target/tsan -p rccl-telemetry
	@mkdir -p $(B)/tsanlib
	$(call link_lib,$(TSAN_REL)/librccl_telemetry.a,$(B)/tsanlib/librccl_telemetry.so,)
	ln -sf librccl_telemetry.so $(B)/tsanlib/librccl_telemetry.so.$(ABI)
	$(CC) -std=c11 $(CWARN) -O1 -g -fsanitize=thread -Iinclude c_tests/ibcast_sim.c c_tests/tsan_shim.c -o $@ \
	  -L$(B)/tsanlib -lrccl_telemetry -Wl,-rpath,$(abspath $(B)/tsanlib) -lpthread

$(B)/ibcast_sim_cxx17: c_tests/ibcast_sim.c include/rccl_telemetry.h | lib
	@mkdir -p $(B)
	$(CXX) -std=c++17 $(CWARN) -x c++ -O2 -Iinclude $< -o $@ $(LINK)

$(B)/header_c11: c_tests/header_check.c c_tests/proc_threads.h include/rccl_telemetry.h | lib
	@mkdir -p $(B)
	$(CC) -std=c11 -pedantic $(CWARN) $(HDR_CWARN) -Iinclude $< -o $@ $(LINK)

$(B)/header_cxx17: c_tests/header_check.c c_tests/proc_threads.h include/rccl_telemetry.h | lib
	@mkdir -p $(B)
	$(CXX) -std=c++17 -pedantic $(CWARN) $(HDR_CXXWARN) -x c++ -Iinclude $< -o $@ $(LINK)

$(B)/header_cxx14: c_tests/header_check.c c_tests/proc_threads.h include/rccl_telemetry.h | lib
	@mkdir -p $(B)
	$(CXX) -std=c++14 -pedantic $(CWARN) $(HDR_CXXWARN) -x c++ -Iinclude $< -o $@ $(LINK)

# The header with its inline hooks off: every hook is a call.
$(B)/header_c11_calls: c_tests/header_check.c c_tests/proc_threads.h include/rccl_telemetry.h | lib
	@mkdir -p $(B)
	$(CC) -std=c11 -pedantic $(CWARN) $(HDR_CWARN) -DRCCL_TELEMETRY_NO_INLINE -Iinclude $< -o $@ $(LINK)

# RCCL's call sites as RCCL writes them (a uint64_t token handed back as is), warning-free
# under -Wsign-conversion too.
CALLSITES_WARN := $(CWARN) -Wsign-conversion

$(B)/rccl_callsites: c_tests/rccl_callsites.cc include/net_telemetry.h include/rccl_telemetry.h | lib
	@mkdir -p $(B)
	$(CXX) -std=c++17 $(CALLSITES_WARN) -O2 -Iinclude $< -o $@ $(LINK)

$(B)/rccl_callsites_calls: c_tests/rccl_callsites.cc include/net_telemetry.h include/rccl_telemetry.h | lib
	@mkdir -p $(B)
	$(CXX) -std=c++17 $(CALLSITES_WARN) -O2 -DRCCL_TELEMETRY_NO_INLINE -Iinclude $< -o $@ $(LINK)

c-tests: $(B)/ibcast_sim $(B)/ibcast_sim_cxx17 $(B)/header_c11 $(B)/header_cxx17 $(B)/header_cxx14 $(B)/header_c11_calls \
	  $(B)/rccl_callsites $(B)/rccl_callsites_calls $(B)/complete_at $(B)/complete_at_calls $(B)/comm_sim \
	  $(B)/wqe_monitor $(B)/wqe_monitor_calls
	@rm -rf $(B)/callsites && mkdir -p $(B)/callsites
	RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR=$(B)/callsites $(B)/rccl_callsites
	RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR=$(B)/callsites $(B)/rccl_callsites_calls
	env -u RCCL_TELEMETRY_ENABLE $(B)/rccl_callsites
	env -u RCCL_TELEMETRY_ENABLE $(B)/rccl_callsites_calls
	RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR=$(B)/callsites $(B)/comm_sim lifetimes >/dev/null
	RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_CLOCK=monotonic RCCL_TELEMETRY_OUTPUT_DIR=$(B)/callsites $(B)/complete_at
	RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_CLOCK=monotonic RCCL_TELEMETRY_OUTPUT_DIR=$(B)/callsites $(B)/complete_at_calls
	@rm -rf $(B)/wqe && mkdir -p $(B)/wqe
	for m in on noreport off; do for p in wqe_monitor wqe_monitor_calls; do \
	  RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_CLOCK=monotonic RCCL_TELEMETRY_STALL_MS=100 \
	    RCCL_TELEMETRY_OUTPUT_DIR=$(B)/wqe $(B)/$$p $$m || exit 1; done; done
	$(B)/header_c11
	$(B)/header_c11_calls
	$(B)/header_cxx17
	$(B)/header_cxx14
	@rm -rf $(B)/cxx && mkdir -p $(B)/cxx
	RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR=$(B)/cxx $(B)/ibcast_sim_cxx17 $(B)/cxx/tally.json --bad-calls 2>/dev/null
	@echo "ibcast_sim as C++17: ok"

# --- Telemetry optional at build and at run time: the header's RCCL_TELEMETRY_STUBS (no
# library at all) and RCCL_TELEMETRY_DLOPEN (the header loads the library at Init; no DT_NEEDED
# on it). c_tests/header_modes.c is built linked, with stubs and with the loader (the Rust
# tests in rust_tests/c_abi/modes.rs run each with the library absent, present, older and
# newer); RCCL's call sites (c_tests/rccl_callsites.cc) are built both ways and run here. Each
# build is warning-free under the header's strict flags, C11 and C++17, and a stubs build links
# with -z defs and nothing but libc.
DL_CFLAGS   := -std=c11 -pedantic $(CWARN) $(HDR_CWARN) -O2 -g -Iinclude
DL_CXXFLAGS := -std=c++17 -pedantic $(CWARN) $(HDR_CXXWARN) -O2 -g -Iinclude
DL_LIBS     := -ldl -lpthread
# No reference to the library, no DT_NEEDED on it.
dl_unlinked = ! readelf -d $(1) | grep -q 'NEEDED.*rccl_telemetry' && ! nm -D --undefined-only $(1) | grep -q rcclTelemetry
DL_BINS := $(addprefix $(B)/,header_modes header_modes_stubs header_modes_dlopen header_modes_dlopen_calls \
  header_modes_cxx_stubs.o header_modes_cxx_dlopen.o rccl_callsites_stubs librccl_callsites_stubs.so rccl_callsites_dlopen)

$(B)/header_modes: c_tests/header_modes.c include/rccl_telemetry.h | lib
	@mkdir -p $(B)
	$(CC) $(DL_CFLAGS) $< -o $@ $(LINK)

$(B)/header_modes_stubs: c_tests/header_modes.c include/rccl_telemetry.h
	@mkdir -p $(B)
	$(CC) $(DL_CFLAGS) -DRCCL_TELEMETRY_STUBS $< -o $@ -Wl,-z,defs
	$(call dl_unlinked,$@)

$(B)/header_modes_dlopen: c_tests/header_modes.c include/rccl_telemetry.h
	@mkdir -p $(B)
	$(CC) $(DL_CFLAGS) -DRCCL_TELEMETRY_DLOPEN $< -o $@ -Wl,-z,defs $(DL_LIBS)
	$(call dl_unlinked,$@)

$(B)/header_modes_dlopen_calls: c_tests/header_modes.c include/rccl_telemetry.h
	@mkdir -p $(B)
	$(CC) $(DL_CFLAGS) -DRCCL_TELEMETRY_DLOPEN -DRCCL_TELEMETRY_NO_INLINE $< -o $@ -Wl,-z,defs $(DL_LIBS)
	$(call dl_unlinked,$@)

$(B)/header_modes_cxx_%.o: c_tests/header_modes.c include/rccl_telemetry.h
	@mkdir -p $(B)
	$(CXX) $(DL_CXXFLAGS) -x c++ -DRCCL_TELEMETRY_$(shell echo $* | tr a-z A-Z) -c $< -o $@

$(B)/rccl_callsites_stubs: c_tests/rccl_callsites.cc include/net_telemetry.h include/rccl_telemetry.h
	@mkdir -p $(B)
	$(CXX) -std=c++17 $(CALLSITES_WARN) -O2 -Iinclude -DRCCL_TELEMETRY_STUBS $< -o $@ -Wl,-z,defs
	$(call dl_unlinked,$@)

# As RCCL links librccl: a shared object, -z defs, no library.
$(B)/librccl_callsites_stubs.so: c_tests/rccl_callsites.cc include/net_telemetry.h include/rccl_telemetry.h
	@mkdir -p $(B)
	$(CXX) -std=c++17 $(CALLSITES_WARN) -O2 -fPIC -shared -Iinclude -DRCCL_TELEMETRY_STUBS $< -o $@ -Wl,-z,defs
	$(call dl_unlinked,$@)

$(B)/rccl_callsites_dlopen: c_tests/rccl_callsites.cc include/net_telemetry.h include/rccl_telemetry.h
	@mkdir -p $(B)
	$(CXX) -std=c++17 $(CALLSITES_WARN) -O2 -Iinclude -DRCCL_TELEMETRY_DLOPEN $< -o $@ -Wl,-z,defs $(DL_LIBS)
	$(call dl_unlinked,$@)

test-bins: $(DL_BINS)
c-tests: dl-tests

# RCCL's call sites: stubs (telemetry off, nothing loaded), the loader with the library present
# (every count exact, the file as a linked build writes it) and absent (off, one line).
.PHONY: dl-tests
dl-tests: $(DL_BINS) | lib
	@rm -rf $(B)/dl && mkdir -p $(B)/dl
	env -u RCCL_TELEMETRY_ENABLE $(B)/rccl_callsites_stubs
	RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR=$(B)/dl LD_LIBRARY_PATH=$(abspath $(REL)) $(B)/rccl_callsites_dlopen
	env -u RCCL_TELEMETRY_ENABLE -u LD_LIBRARY_PATH $(B)/rccl_callsites_dlopen 2>$(B)/dl/stderr
	@! grep . $(B)/dl/stderr
	@echo "dl-tests: 3 passed, 0 failed"

# --- Every function that hands out a handle (it returns a pointer) checks the inline layout
# in the header before it calls the library, as rcclTelemetryResolveQp does: a wrapper in
# src/rccl_telemetry_inline.h and its #define line. rcclTelemetryGetApi is the loader's: the
# header's loader calls it, then hands out handles only through those wrappers.
header-check: header-wrappers-check
.PHONY: header-wrappers-check
header-wrappers-check:
	@fns=$$(sed -n 's/^[A-Za-z].*\*\(rcclTelemetry[A-Za-z0-9]*\)(.*);$$/\1/p' include/rccl_telemetry.h | grep -vx rcclTelemetryGetApi); \
	  missing=; for f in $$fns; do grep -q "^#define $$f(" include/rccl_telemetry.h || missing="$$missing $$f"; done; \
	  [ -z "$$missing" ] || { echo "header-wrappers-check: these hand out a handle without the layout check (a wrapper in src/rccl_telemetry_inline.h):$$missing"; exit 1; }; \
	  echo "header-wrappers-check: $$(echo $$fns | wc -w) functions hand out handles, each behind the layout check"

# Two components of one process built against headers of different layouts
# (c_tests/layout_mix.c; run by rust_tests/c_abi/modes.rs).
$(B)/layout_mix: c_tests/layout_mix.c include/rccl_telemetry.h $(ABIB)/other_layout/rccl_telemetry.h | lib
	@mkdir -p $(B)
	$(CC) $(subst -Iinclude,-I$(ABIB)/other_layout,$(C_FLAGS)) -DLAYOUT_MIX_OTHER -c $< -o $(B)/layout_mix_other.o
	$(CC) $(C_FLAGS) $< $(B)/layout_mix_other.o -o $@ $(LINK)
test-bins: $(B)/layout_mix

# The concurrent C stress test under ThreadSanitizer: hooks on 8 threads while the main
# thread captures and flushes, and raises the snapshot signal (signal-driven writes).
tsan: $(B)/ibcast_sim_tsan
	@rm -rf $(B)/tsan && mkdir -p $(B)/tsan
	RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR=$(B)/tsan TSAN_OPTIONS=halt_on_error=1 \
	  RCCL_TELEMETRY_SNAPSHOT_SIGNAL=SIGUSR1 \
	  $(B)/ibcast_sim_tsan $(B)/tsan/tally.json --threads --signal-snapshots --devices 2 --channels 4 --requests 2000
	@echo "tsan: 1 passed, 0 failed"

# --- Install. The libraries go in stripped, each with its debug info in a file of its own
# beside it, in .debug/ (GDB and perf find it through the library's .gnu_debuglink); the
# CMake package finds everything relative to itself, so a staged or moved tree still works.
# No static archive: see docs/integrators.md ("Packaging"). net_telemetry.h, the name RCCL's
# transport includes, goes in a directory of its own (INCLUDEDIR/rccl_telemetry/), which only
# consumers of this package have on their include path (pkg-config and CMake add it), so it
# never shadows another project's header of that name.
# $(call install_so,built,dir,name)
install_so = objcopy --only-keep-debug $(1) $(2)/.debug/$(3).debug && chmod 644 $(2)/.debug/$(3).debug && \
  objcopy --strip-debug --strip-unneeded --add-gnu-debuglink=$(2)/.debug/$(3).debug $(1) $(2)/$(3) && chmod 755 $(2)/$(3)
D_LIB  = $(DESTDIR)$(LIBDIR)
D_CMAKE = $(D_LIB)/cmake/rccl-telemetry
D_INC  = $(DESTDIR)$(INCLUDEDIR)
D_INC_OWN = $(D_INC)/rccl_telemetry
# The first release of this ABI generation (SONAME librccl_telemetry.so.$(ABI)): the CMake
# package accepts a request for any version from it to this one.
ABI_SINCE := 0.1.0

install: lib preload
	@$(MAKE) --no-print-directory install-files

# What install copies, with no build first: SO and PRELOAD_SO name the libraries (make package
# stages its builds for an older glibc through them).
install-files:
	install -d $(D_LIB)/.debug $(D_LIB)/pkgconfig $(D_CMAKE) $(D_INC_OWN)
	$(call install_so,$(SO),$(D_LIB),librccl_telemetry.so.$(VERSION))
	$(call install_so,$(PRELOAD_SO),$(D_LIB),librccl_telemetry_preload.so)
	ln -sf librccl_telemetry.so.$(VERSION) $(D_LIB)/librccl_telemetry.so.$(ABI)
	ln -sf librccl_telemetry.so.$(ABI) $(D_LIB)/librccl_telemetry.so
	install -m 644 include/rccl_telemetry.h $(D_INC)/
	install -m 644 include/net_telemetry.h $(D_INC_OWN)/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	  -e 's|@VERSION@|$(VERSION)|' packaging/rccl-telemetry.pc.in > $(D_LIB)/pkgconfig/rccl-telemetry.pc
	chmod 644 $(D_LIB)/pkgconfig/rccl-telemetry.pc
	for f in rccl-telemetryConfig rccl-telemetryConfigVersion; do \
	  sed -e 's|@VERSION@|$(VERSION)|' -e 's|@ABI@|$(ABI)|' -e 's|@ABI_SINCE@|$(ABI_SINCE)|' \
	    -e "s|@LIBDIR_REL@|$$(realpath -m --relative-to=$(LIBDIR)/cmake/rccl-telemetry $(LIBDIR))|" \
	    -e "s|@INCLUDEDIR_REL@|$$(realpath -m --relative-to=$(LIBDIR)/cmake/rccl-telemetry $(INCLUDEDIR))|" \
	    packaging/$$f.cmake.in > $(D_CMAKE)/$$f.cmake && chmod 644 $(D_CMAKE)/$$f.cmake || exit 1; done

# The analyser (an operator's tool, often wanted where the library is not): its own target.
install-tool: tool
	@$(MAKE) --no-print-directory install-tool-files

install-tool-files:
	install -d $(DESTDIR)$(BINDIR)
	install -m 755 -s $(TOOL) $(DESTDIR)$(BINDIR)/rccl-telemetry

# Removes what install and install-tool put in; the SONAME and development links only while
# they still point at this version's files. Then the directories: its own (the CMake package's,
# the include directory of net_telemetry.h), and those it may have created that are left empty
# (.debug, pkgconfig, cmake); never the prefix's lib, include or bin.
uninstall:
	rm -f $(D_LIB)/librccl_telemetry.so.$(VERSION) $(D_LIB)/.debug/librccl_telemetry.so.$(VERSION).debug \
	  $(D_LIB)/librccl_telemetry_preload.so $(D_LIB)/.debug/librccl_telemetry_preload.so.debug \
	  $(D_LIB)/pkgconfig/rccl-telemetry.pc $(D_CMAKE)/rccl-telemetryConfig.cmake \
	  $(D_CMAKE)/rccl-telemetryConfigVersion.cmake \
	  $(D_INC)/rccl_telemetry.h $(D_INC_OWN)/net_telemetry.h $(DESTDIR)$(BINDIR)/rccl-telemetry
	[ "$$(readlink $(D_LIB)/librccl_telemetry.so.$(ABI))" != librccl_telemetry.so.$(VERSION) ] || \
	  rm -f $(D_LIB)/librccl_telemetry.so.$(ABI)
	[ "$$(readlink $(D_LIB)/librccl_telemetry.so)" != librccl_telemetry.so.$(ABI) ] || \
	  [ -e $(D_LIB)/librccl_telemetry.so.$(ABI) ] || rm -f $(D_LIB)/librccl_telemetry.so
	rm -df $(D_CMAKE) $(D_INC_OWN)
	for d in $(D_LIB)/.debug $(D_LIB)/pkgconfig $(D_LIB)/cmake; do \
	  [ ! -d $$d ] || rmdir --ignore-fail-on-non-empty $$d || exit 1; done

# The glibc the libraries of this build need: no symbol version above GLIBC_MAX (what a build
# on Debian 12 needs; make package builds for glibc 2.28, docs/packages.md). Each file's
# highest version is printed; one above names the symbols that need it.
glibc-check: lib preload
	sh packaging/glibc-ceiling.sh $(GLIBC_MAX) $(SO) $(PRELOAD_SO)

# Installs into a scratch prefix (LIBDIR lib/<multiarch>, as Debian has it) and checks what a packager
# and an integrator rely on: consumers through pkg-config (its run-time step: the rpath to
# libdir) and CMake, the stripped libraries and their debug files, the SONAME and no
# libibverbs, the analyser, then uninstall leaving no file behind.
IC := $(abspath $(B)/prefix)
IC_LIB := lib/$(shell $(CC) -print-multiarch 2>/dev/null || echo multiarch)
install-check: glibc-check
	rm -rf $(IC) $(B)/cmake-consumer
	mkdir -p $(IC)/bin $(IC)/include $(IC)/$(IC_LIB)
	$(MAKE) --no-print-directory install install-tool PREFIX=$(IC) LIBDIR=$(IC)/$(IC_LIB)
	PKG_CONFIG_PATH=$(IC)/$(IC_LIB)/pkgconfig sh -c '$(CC) -std=c11 $(CWARN) c_tests/header_check.c -o $(B)/pc_consumer \
	  $$(pkg-config --cflags --libs rccl-telemetry) -Wl,-rpath,$$(pkg-config --variable=libdir rccl-telemetry) && \
	  $(CXX) -std=c++17 $(CWARN) c_tests/rccl_callsites.cc -o $(B)/pc_callsites \
	  $$(pkg-config --cflags --libs rccl-telemetry) -Wl,-rpath,$$(pkg-config --variable=libdir rccl-telemetry)'
	$(B)/pc_consumer
	@# RCCL's "net_telemetry.h" comes from the package's own include directory, never the prefix's
	test -f $(IC)/include/rccl_telemetry/net_telemetry.h && ! test -e $(IC)/include/net_telemetry.h
	@rm -rf $(B)/pc_callsites.out && mkdir -p $(B)/pc_callsites.out
	RCCL_TELEMETRY_ENABLE=1 RCCL_TELEMETRY_OUTPUT_DIR=$(B)/pc_callsites.out $(B)/pc_callsites
	readelf -d $(IC)/$(IC_LIB)/librccl_telemetry.so | grep -q 'SONAME.*librccl_telemetry.so.$(ABI)'
	! readelf -d $(IC)/$(IC_LIB)/librccl_telemetry.so | grep -q 'NEEDED.*ibverbs'
	! readelf -d $(IC)/$(IC_LIB)/librccl_telemetry_preload.so | grep -q 'NEEDED.*ibverbs'
	for f in librccl_telemetry.so.$(VERSION) librccl_telemetry_preload.so; do \
	  ! readelf -S $(IC)/$(IC_LIB)/$$f | grep -q '\.debug_info' && \
	  readelf -S $(IC)/$(IC_LIB)/.debug/$$f.debug | grep -q '\.debug_info' && \
	  readelf --string-dump=.gnu_debuglink $(IC)/$(IC_LIB)/$$f | grep -q "$$f.debug" && \
	  [ "$$(readelf -n $(IC)/$(IC_LIB)/$$f | grep 'Build ID')" = "$$(readelf -n $(IC)/$(IC_LIB)/.debug/$$f.debug | grep 'Build ID')" ] \
	  || { echo "install-check: $$f is not stripped with its debug info beside it"; exit 1; }; done
	test "$$(PKG_CONFIG_PATH=$(IC)/$(IC_LIB)/pkgconfig pkg-config --variable=preload rccl-telemetry)" = \
	  "$(IC)/$(IC_LIB)/librccl_telemetry_preload.so"
	cmake -S c_tests/cmake_consumer -B $(B)/cmake-consumer -DCMAKE_PREFIX_PATH=$(IC) >/dev/null
	cmake --build $(B)/cmake-consumer >/dev/null
	sh c_tests/cmake_consumer/run.sh $(B)/cmake-consumer
	$(IC)/bin/rccl-telemetry --version
	$(MAKE) --no-print-directory uninstall PREFIX=$(IC) LIBDIR=$(IC)/$(IC_LIB)
	@# nothing left but the prefix's own directories, made above
	@left=$$(cd $(IC) && find . -mindepth 1 | LC_ALL=C sort | tr '\n' ' '); \
	  [ "$$left" = "./bin ./include ./lib ./$(IC_LIB) " ] || { echo "install-check: uninstall left $$left"; exit 1; }
	@echo "install-check: 5 passed, 0 failed"

# A simulated 8-rank IB-CAST job (8 processes, one NIC each, on two simulated hosts) with
# telemetry on and one NIC planted slow (c_tests/demo_job.sh); then what the tool says about it.
demo: lib tool $(B)/ibcast_sim
	@rm -rf $(DEMO) $(B)/demo_work && mkdir -p $(DEMO)
	@sh c_tests/demo_job.sh $(B)/ibcast_sim $(DEMO) $(B)/demo_work
	@echo "telemetry files written by the 8 ranks (rank 5's NIC, node-b:mlx5_1, is planted slow):"
	@ls -1 $(DEMO)/rccl_telemetry_*.json
	@echo
	$(TOOL) check $(DEMO)
	$(TOOL) summary $(DEMO)
	@echo '$(TOOL) outliers $(DEMO)'; $(TOOL) outliers $(DEMO); rc=$$?; \
	  if [ $$rc -gt 1 ]; then exit $$rc; fi; echo "(outliers exits 1 when it finds something, as here)"
	$(TOOL) links --top 10 $(DEMO)
	$(TOOL) report -o $(DEMO)/report.html $(DEMO) || test $$? -eq 1
	@echo "report: $(DEMO)/report.html (report exits 1 when a finding is critical: the slow NIC's CQ errors)"
	@echo
	@echo "What next:"
	@echo "  file://$(abspath $(DEMO))/report.html      in a browser: the slow NIC first, then its evidence"
	@echo "  $(TOOL) stalls $(DEMO)      what is stuck and the root of a hang (nothing here: the job ended)"
	@echo "  $(TOOL) export --format csv -o $(DEMO)/run.csv $(DEMO)      rows for pandas or DuckDB (also parquet, prometheus)"
	@echo "  $(TOOL) outliers --json $(DEMO)      the findings for scripts"
	@echo "  RCCL_TELEMETRY_PROMETHEUS_DIR=DIR      the live textfile for node_exporter (rules: packaging/README.md)"
	@echo "  docs/operators.md: the workflow; tools/rccl-telemetry/README.md: every command with its output"

# The Rust tree stays rustfmt-clean and clippy-quiet (every target, warnings as errors).
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	@echo "lint: 2 passed, 0 failed"

# Tests whose environment is missing record a visible skip (rust_tests/skip.rs) in
# $(B)/skips.log; the list and count end the run, and a required skip fails it.
test: lint lib preload test-bins c-tests header-check abi-check abi-test tsan install-check bench-quick bench-latest-check \
	  e2e-selftest prom-rules-test
	@mkdir -p $(B) && rm -f $(B)/skips.log
	RCCL_TELEMETRY_SKIP_LOG=$(abspath $(B))/skips.log $(CARGO) test --release --workspace; rc=$$?; \
	  sh .ci/skips.sh $(B)/skips.log || rc=1; exit $$rc

skips:
	@sh .ci/skips.sh $(B)/skips.log

clean:
	$(CARGO) clean
	rm -rf $(B) out
