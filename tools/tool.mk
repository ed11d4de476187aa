# Make targets for the analysis tool (tools/rccl-telemetry), included by the top-level Makefile.
#   make tool-test      its tests (unit, generated runs, check, fuzz, promtool, DuckDB, Chromium)
#   make tool-demo      a generated 64-rank run with planted anomalies, through every command
#   make tool-bench     times every command on a generated run of RT_BENCH_RANKS ranks
#   make tool-ci-deps   installs what the tool's tests need (Debian: prometheus, chromium; PyPI: duckdb, pyarrow)

CARGO          ?= cargo
RT_TOOL        ?= target/release/rccl-telemetry
RT_DEMO        ?= out/tool-demo
RT_BENCH       ?= out/tool-bench
RT_BENCH_RANKS ?= 4096

.PHONY: tool-build tool-test tool-demo tool-bench tool-ci-deps

tool-build:
	$(CARGO) build --release -p rccl-telemetry-tool

tool-test:
	$(CARGO) test --release -p rccl-telemetry-tool

# Every external tool the tests use; without them those tests print SKIP instead of running.
tool-ci-deps:
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus chromium fonts-dejavu-core >/dev/null
	python3 -m pip install -q duckdb pyarrow

tool-demo: tool-build
	@rm -rf $(RT_DEMO) && mkdir -p $(RT_DEMO)
	$(RT_TOOL) generate --ranks 64 --samples 20 --plant cnp,tail,skew,cq_errors,unavailable,untracked $(RT_DEMO)/run
	$(RT_TOOL) check $(RT_DEMO)/run
	$(RT_TOOL) summary $(RT_DEMO)/run | head -n 20
	$(RT_TOOL) outliers $(RT_DEMO)/run || test $$? -eq 1
	$(RT_TOOL) export --format prometheus -o $(RT_DEMO)/run.prom $(RT_DEMO)/run
	$(RT_TOOL) export --format csv -o $(RT_DEMO)/run.csv $(RT_DEMO)/run
	$(RT_TOOL) report -o $(RT_DEMO)/report.html $(RT_DEMO)/run
	@echo "open $(RT_DEMO)/report.html"

tool-bench: tool-build
	@rm -rf $(RT_BENCH) && mkdir -p $(RT_BENCH)
	$(RT_TOOL) generate --ranks $(RT_BENCH_RANKS) --samples 20 --plant all $(RT_BENCH)/run
	@du -sh $(RT_BENCH)/run
	@for cmd in "summary --json" "check" "outliers --json" "export --format csv -o $(RT_BENCH)/run.csv" \
	            "export --format prometheus -o $(RT_BENCH)/run.prom" "export --format parquet -o $(RT_BENCH)/parquet" \
	            "report -o $(RT_BENCH)/report.html"; do \
	  start=$$(date +%s.%N); $(RT_TOOL) $$cmd $(RT_BENCH)/run >/dev/null 2>&1; rc=$$?; end=$$(date +%s.%N); \
	  awk -v c="$$cmd" -v r=$$rc -v s=$$start -v e=$$end 'BEGIN { printf "%-56s exit %d  %6.2f s\n", c, r, e - s }'; \
	done

# Included before the top-level Makefile's first rule, this file must not become its default goal.
ifeq ($(.DEFAULT_GOAL),tool-build)
.DEFAULT_GOAL :=
endif
