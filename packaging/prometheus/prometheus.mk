# The shipped Prometheus rules (packaging/prometheus/), included by the top-level Makefile:
#   make prom-rules-test   promtool check rules (every lint, fatal) and promtool test rules on
#                          the unit tests in packaging/prometheus/tests/ (part of make test)

PROMTOOL   ?= promtool
PROM_RULES := packaging/prometheus/rccl-telemetry.rules.yml
PROM_TESTS := $(wildcard packaging/prometheus/tests/*.test.yml)

.PHONY: prom-rules-test

prom-rules-test:
	@command -v $(PROMTOOL) >/dev/null || { echo "prom-rules-test: promtool not found (Debian package prometheus)"; exit 1; }
	$(PROMTOOL) check rules --lint=all --lint-fatal $(PROM_RULES)
	$(PROMTOOL) test rules $(PROM_TESTS)
	@echo "prom-rules-test: $$((1 + $(words $(PROM_TESTS)))) passed, 0 failed"
