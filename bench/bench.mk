# bench/bench.mk -- the benchmark's make targets; the top-level Makefile includes this file.
#
#   make bench            build + install the library into bench/build/prefix, build the bench
#                         against the installed header and rccl-telemetry.pc (as RCCL would link
#                         it), run it (~2-3 min on 2 cores), print the table, write bench/results.json
#                         and render its "Latest figures" section into bench/README.md (latest.py)
#   make bench-latest-check  fails when bench/README.md's latest figures are not results.json's
#   make bench-quick      the same with a few reps only (smoke test, ~10 s; figures are noisy);
#                         writes bench/build/results-quick.json. Fit for CI: the exit status says
#                         whether the hooks counted every WQE and every child ran, never
#                         anything about time.
#   make bench-prom       the live Prometheus textfile's write cost (benches/prom_write.rs),
#                         also run by bench and bench-quick
#   make bench-stall      the stall detector's cost per tick at 8x64x16 and 32x512x16 QP slots
#                         (benches/stall_tick.rs), also run by bench and bench-quick
#   make bench-callgrind  instructions per WQE of every library function on the hot path
#                         (valgrind --tool=callgrind), to find which hook is expensive
#   make parser-bench     serde_json (the tool's parser) against simd-json and sonic-rs, each
#                         parsing the same generated runs into the tool's model, one thread
#                         (bench/parsers/, a crate outside the workspace; ~2 min with its build)
#
# Everything built goes to bench/build/ (gitignored); only bench/results.json is committed.

BENCH_DIR     := bench
BENCH_BUILD   := $(BENCH_DIR)/build
BENCH_PREFIX  := $(abspath $(BENCH_BUILD)/prefix)
BENCH_PKGPATH := $(BENCH_PREFIX)/lib/pkgconfig:$(BENCH_PREFIX)/lib64/pkgconfig:$(BENCH_PREFIX)/share/pkgconfig
BENCH_PC      = PKG_CONFIG_PATH=$(BENCH_PKGPATH) pkg-config
BENCH_CC      ?= cc
BENCH_CFLAGS  ?= -std=c11 -O3 -g -Wall -Wextra -Werror
BENCH_SRCS    := $(addprefix $(BENCH_DIR)/,bench.c bench_loops.c bench_util.c bench_hot.c bench_threads.c bench_flush.c \
                   bench_callgrind.c bench_stats.c bench_children.c bench_json.c bench_machine.c \
                   bench_report.c bench_loghist.c bench_monitor.c reference_telemetry.c fake_provider.c bench_loop_prev.c \
                   bench_loop_dlopen.c)
BENCH_HDRS    := c_tests/abi/0.1.0/rccl_telemetry.h $(BENCH_DIR)/bench.h $(BENCH_DIR)/bench_loop.h $(BENCH_DIR)/reference_telemetry.h $(BENCH_DIR)/fake_provider.h
BENCH_BIN     := $(BENCH_BUILD)/bench
# the last commit that changed the library itself (+ -dirty for uncommitted library changes)
BENCH_REV      = $(shell git log -1 --format=%h -- src include build.rs Cargo.toml 2>/dev/null)$(shell git diff --quiet HEAD -- src include build.rs Cargo.toml 2>/dev/null || echo -dirty)

.PHONY: parser-bench bench bench-latest-check bench-quick bench-prom bench-stall bench-build bench-install bench-callgrind bench-clean bench-preload bench-preload-build

# Installs the library (release build) exactly where the bench will find it.
bench-install:
	$(MAKE) install PREFIX=$(BENCH_PREFIX)

bench-build: bench-install
	@mkdir -p $(BENCH_BUILD)
	$(BENCH_CC) $(BENCH_CFLAGS) $$($(BENCH_PC) --cflags rccl-telemetry) $(BENCH_SRCS) -o $(BENCH_BIN) \
	  $$($(BENCH_PC) --libs rccl-telemetry) \
	  -Wl,-rpath,$$($(BENCH_PC) --variable=libdir rccl-telemetry) -ldl -lpthread -lm

bench: bench-build bench-preload
	BENCH_LIB_REV=$(BENCH_REV) $(BENCH_BIN) --json $(BENCH_DIR)/results.json
	python3 $(BENCH_DIR)/latest.py --write $(BENCH_DIR)/results.json $(BENCH_DIR)/README.md
	$(MAKE) --no-print-directory bench-prom
	$(MAKE) --no-print-directory bench-stall

# bench/README.md's "Latest figures" must be what bench/results.json holds (latest.py renders it).
bench-latest-check:
	python3 $(BENCH_DIR)/latest.py --check $(BENCH_DIR)/results.json $(BENCH_DIR)/README.md

bench-quick: bench-build bench-preload-build
	BENCH_LIB_REV=$(BENCH_REV) $(BENCH_BIN) --quick --json $(BENCH_BUILD)/results-quick.json
	$(BENCH_BUILD)/preload_bench $(abspath $(PRELOAD_SO)) $(abspath $(PRELOAD_CC_SO)) --quick
	$(MAKE) --no-print-directory bench-prom BENCH_PROM_ARGS=--quick
	$(MAKE) --no-print-directory bench-stall BENCH_PROM_ARGS=--quick

# The LD_PRELOAD interposer over the fake libibverbs (see bench/README.md). PRELOAD_CC_SO is
# the same interposer with a counter for a clock (RTP_BENCH_COUNTER_CLOCK in
# preload/c/preload.h), built for the bench only: the difference tells the cost of an N=1
# WQE's clock reads in the loop.
PRELOAD_CC_SO := $(BENCH_BUILD)/librccl_telemetry_preload_counterclock.so
$(PRELOAD_CC_SO): $(PRELOAD_SRCS) $(PRELOAD_HDRS) preload/c/exports.map $(PRELOAD_ENGINE)
	@mkdir -p $(BENCH_BUILD)
	$(call link_preload,$@,-DRTP_BENCH_COUNTER_CLOCK)
bench-preload-build: preload $(FAKEVERBS)
	@$(MAKE) --no-print-directory $(PRELOAD_CC_SO)
	@mkdir -p $(BENCH_BUILD)
	$(BENCH_CC) $(BENCH_CFLAGS) $(BENCH_DIR)/preload_bench.c -o $(BENCH_BUILD)/preload_bench \
	  -L$(dir $(FAKEVERBS)) -libverbs -Wl,-rpath,$(abspath $(dir $(FAKEVERBS))) -lpthread

bench-preload: bench-preload-build
	$(BENCH_BUILD)/preload_bench $(abspath $(PRELOAD_SO)) $(abspath $(PRELOAD_CC_SO))

# The live Prometheus textfile: one write at 8x64x16 slots, against the JSON snapshot of the
# same slots in the same run (benches/prom_write.rs; the writer thread's cost, not the hot path).
bench-prom:
	$(CARGO) bench -p rccl-telemetry --bench prom_write -- $(BENCH_PROM_ARGS)

# The stall detector: one tick over every QP slot at 8x64x16 and 32x512x16 (benches/stall_tick.rs;
# the writer thread's cost every RCCL_TELEMETRY_STALL_MS / 2, not the hot path).
bench-stall:
	$(CARGO) bench -p rccl-telemetry --bench stall_tick -- $(BENCH_PROM_ARGS)

bench-callgrind: bench-build
	$(BENCH_DIR)/profile_hooks.sh $(BENCH_BIN)

# Two generated runs of 143 MB each (4,096 ranks without links; 16,384 rail-shaped ranks with
# one QP per peer), parsed by each parser in turn; under out/parser-bench, deleted afterwards.
PARSER_BENCH_OUT := out/parser-bench
parser-bench: tool-build
	CARGO_TARGET_DIR=$(abspath target/parser-bench) $(CARGO) build --release --manifest-path $(BENCH_DIR)/parsers/Cargo.toml
	@rm -rf $(PARSER_BENCH_OUT) && mkdir -p $(PARSER_BENCH_OUT)
	$(RT_TOOL) generate --samples 20 --plant all --ranks 4096 $(PARSER_BENCH_OUT)/plain > /dev/null
	target/parser-bench/release/rccl-telemetry-parser-bench $(PARSER_BENCH_OUT)/plain 5
	@rm -rf $(PARSER_BENCH_OUT)/plain
	$(RT_TOOL) generate --peers --qps-per-peer 1 --ranks 16384 $(PARSER_BENCH_OUT)/rail > /dev/null
	target/parser-bench/release/rccl-telemetry-parser-bench $(PARSER_BENCH_OUT)/rail 5
	@rm -rf $(PARSER_BENCH_OUT)

bench-clean:
	rm -rf $(BENCH_BUILD)
