# Make targets for the analysis tool (tools/rccl-telemetry), included by the top-level Makefile.
#   make tool-test      its tests (unit, generated runs, check, fuzz, promtool, DuckDB, Chromium)
#   make tool-demo      a generated 64-rank run with planted anomalies, through every command
#   make tool-bench     times summary, outliers, check, report and the Parquet export on generated
#                       runs of RT_BENCH_RANKS ranks (1,024, 4,096, 16,384), with each child's peak
#                       RSS, and DuckDB's read_json of the same files, then runs with links
#                       (RT_BENCH_LINKS: topology:ranks, version 3) through outliers, links,
#                       stalls and summary, into bench/tool-results.json (bench/tool_bench.py;
#                       809 MB of input at most, under out/, deleted after each run)
#   make verdict-bench  the labelled verdict benchmark: generated runs of 3 to 512 NICs with one
#                       culprit planted (or none) under noise, through `outliers`; then the
#                       scenarios: every class on rail, ring, tree and all-to-all from 2 to 4,096
#                       ranks, planted by the generator or by editing healthy files, every row
#                       judged; prints precision and recall per class against the targets, writes
#                       bench/verdict-results.json (about 15 minutes; runs under out/verdict-bench)
#   make tool-ci-deps   installs what the tool's tests need (Debian: prometheus, node_exporter, systemd, chromium,
#                       Java 17; PyPI: duckdb, pyarrow, pyspark)

CARGO          ?= cargo
RT_TOOL        ?= target/release/rccl-telemetry
RT_DEMO        ?= out/tool-demo
RT_BENCH       ?= out/tool-bench
RT_BENCH_RANKS ?= 1024 4096 16384
RT_BENCH_JSON  ?= bench/tool-results.json
RT_VERDICT     ?= out/verdict-bench
RT_VERDICT_JSON ?= bench/verdict-results.json

.PHONY: tool-build tool-test tool-demo tool-bench tool-ci-deps verdict-bench

tool-build:
	$(CARGO) build --release -p rccl-telemetry-tool

tool-test:
	$(CARGO) test --release -p rccl-telemetry-tool

# Every external tool the tests use; without them those tests print SKIP instead of running.
tool-ci-deps:
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus prometheus-node-exporter systemd \
	  chromium fonts-dejavu-core openjdk-17-jre-headless >/dev/null
	python3 -m pip install -q duckdb pyarrow 'pyspark>=4,<5'

tool-demo: tool-build
	@rm -rf $(RT_DEMO) && mkdir -p $(RT_DEMO)
	$(RT_TOOL) generate --ranks 64 --samples 20 --plant cnp,tail,skew,cq_errors,unavailable,untracked $(RT_DEMO)/run
	$(RT_TOOL) check $(RT_DEMO)/run
	$(RT_TOOL) summary $(RT_DEMO)/run | head -n 20
	$(RT_TOOL) outliers $(RT_DEMO)/run || test $$? -eq 1
	$(RT_TOOL) export --format prometheus -o $(RT_DEMO)/run.prom $(RT_DEMO)/run
	$(RT_TOOL) export --format csv -o $(RT_DEMO)/run.csv $(RT_DEMO)/run
	$(RT_TOOL) report -o $(RT_DEMO)/report.html $(RT_DEMO)/run || test $$? -eq 1
	@echo "open $(RT_DEMO)/report.html (report exits 1 when a finding is critical: the planted CQ errors)"

tool-bench: tool-build
	@rm -rf $(RT_BENCH) && mkdir -p $(RT_BENCH)
	python3 bench/tool_bench.py $(RT_TOOL) $(RT_BENCH) $(RT_BENCH_JSON) $(RT_BENCH_RANKS)
	@rm -rf $(RT_BENCH)

verdict-bench:
	$(CARGO) build --release -p rccl-telemetry-tool --example verdict_bench
	@rm -rf $(RT_VERDICT) && mkdir -p $(RT_VERDICT)
	VERDICT_BENCH_DATE=$$(date -u +%Y-%m-%dT%H:%M:%SZ) VERDICT_BENCH_COMMIT=$$(git rev-parse --short=12 HEAD)$$(git diff --quiet || echo -dirty) \
	  target/release/examples/verdict_bench $(RT_VERDICT) --json $(RT_VERDICT_JSON)
	@rm -rf $(RT_VERDICT)
