# The shipped Prometheus rules (packaging/prometheus/), included by the top-level Makefile:
#   make prom-rules-test   promtool check rules (every lint, fatal) and promtool test rules on
#                          the unit tests in packaging/prometheus/tests/ (part of make test)
#   make install-prom-gc   the rccl-telemetry tool into $(PREFIX)/bin, the rules into
#                          $(PREFIX)/share/rccl-telemetry/prometheus, and the prom-gc service
#                          and timer (packaging/systemd/) into SYSTEMD_UNIT_DIR, cleaning
#                          PROM_TEXTFILE_DIR (Debian's node_exporter directory by default)

PROMTOOL   ?= promtool
PROM_RULES := packaging/prometheus/rccl-telemetry.rules.yml
PROM_TESTS := $(wildcard packaging/prometheus/tests/*.test.yml)

SYSTEMD_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
PROM_TEXTFILE_DIR ?= /var/lib/prometheus/node-exporter

.PHONY: prom-rules-test install-prom-gc

prom-rules-test:
	@command -v $(PROMTOOL) >/dev/null || { echo "prom-rules-test: promtool not found (Debian package prometheus)"; exit 1; }
	$(PROMTOOL) check rules --lint=all --lint-fatal $(PROM_RULES)
	$(PROMTOOL) test rules $(PROM_TESTS)
	@echo "prom-rules-test: $$((1 + $(words $(PROM_TESTS)))) passed, 0 failed"

install-prom-gc: tool
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(SYSTEMD_UNIT_DIR) $(DESTDIR)$(PREFIX)/share/rccl-telemetry/prometheus
	install -m 755 target/release/rccl-telemetry $(DESTDIR)$(PREFIX)/bin/rccl-telemetry
	install -m 644 $(PROM_RULES) $(DESTDIR)$(PREFIX)/share/rccl-telemetry/prometheus/
	sed -e 's|@BINDIR@|$(PREFIX)/bin|g' -e 's|@TEXTFILE_DIR@|$(PROM_TEXTFILE_DIR)|g' \
	  packaging/systemd/rccl-telemetry-prom-gc.service.in > $(DESTDIR)$(SYSTEMD_UNIT_DIR)/rccl-telemetry-prom-gc.service
	install -m 644 packaging/systemd/rccl-telemetry-prom-gc.timer $(DESTDIR)$(SYSTEMD_UNIT_DIR)/
	@echo "then: systemctl daemon-reload && systemctl enable --now rccl-telemetry-prom-gc.timer rccl-telemetry-prom-gc.service"
