# preload/preload.mk -- librccl_telemetry_preload.so, the LD_PRELOAD verbs interposer, and
# its host tests' programs; the top-level Makefile includes this file.
#
#   make preload        target/release/librccl_telemetry_preload.so: preload/c/*.c (one file a
#                       concern, preload/c/preload.h what they share; docs/preload.md) compiled
#                       against the system's <infiniband/verbs.h> (libibverbs-dev), linked with
#                       the engine (the preload crate's staticlib). No DT_NEEDED on libibverbs:
#                       the real entry points are found at run time. What the C calls in the
#                       engine, and the engine's per-QP counters it shares, are declared in
#                       build/preload/include/engine.h, generated from the Rust by cbindgen
#                       (preload/build.rs; written here, never into the source tree).
#   make preload-test-bins
#                       build/preload/: a fake libibverbs.so.1 (c_tests/preload/fake_verbs_*.c)
#                       and the test program (c_tests/preload/verbs_app*.c), linked against it
#                       (verbs_app) and loading it NCCL-style with dlopen + dlvsym
#                       (verbs_app_nccl); preload/tests/interposer/ runs them under the
#                       preload (part of `make test`).

PRELOAD_SO     := $(REL)/librccl_telemetry_preload.so
PRELOAD_ENGINE := $(REL)/librccl_telemetry_preload_engine.a
PB             := $(B)/preload
PRELOAD_GEN    := $(PB)/include
PRELOAD_ENGINE_H := $(PRELOAD_GEN)/engine.h
PRELOAD_SRCS   := $(sort $(wildcard preload/c/*.c))
PRELOAD_HDRS   := preload/c/preload.h $(PRELOAD_ENGINE_H) include/rccl_telemetry.h
PRELOAD_CFLAGS := -std=gnu11 -O2 -g -fPIC -fvisibility=hidden $(CWARN) -Iinclude -Ipreload/c -I$(PRELOAD_GEN)
FAKEVERBS      := $(PB)/fakeverbs/libibverbs.so.1

# The interposer's link, written once: $(call link_preload,output,extra cflags), or with another
# compiler driver, flags and engine, $(call link_preload_with,cc,cflags,output,engine archive)
# (make package's build for an older glibc).
link_preload_with = $(1) $(2) -shared -o $(3) $(PRELOAD_SRCS) $(4) \
  -Wl,--version-script=preload/c/exports.map -Wl,-z,defs -Wl,--gc-sections -Wl,--build-id \
  -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
link_preload = $(call link_preload_with,$(CC),$(PRELOAD_CFLAGS) $(2),$(1),$(PRELOAD_ENGINE))

.PHONY: preload preload-engine preload-test-bins

# The engine's build also generates engine.h (preload/build.rs, into cargo's OUT_DIR) and the
# program that prints it: written to $(PRELOAD_ENGINE_H) only when it changed, so that an
# unchanged header relinks nothing.
write_engine_h = mkdir -p $(PRELOAD_GEN) && $(REL)/rtp_engine_header > $(PRELOAD_ENGINE_H).new && \
  { cmp -s $(PRELOAD_ENGINE_H).new $(PRELOAD_ENGINE_H) && rm $(PRELOAD_ENGINE_H).new || mv $(PRELOAD_ENGINE_H).new $(PRELOAD_ENGINE_H); }

preload-engine:
	$(CARGO) build --release -p rccl-telemetry-preload
	@$(write_engine_h)

$(PRELOAD_ENGINE_H):
	$(CARGO) build --release -p rccl-telemetry-preload
	@$(write_engine_h)

preload: preload-engine
	@$(MAKE) --no-print-directory $(PRELOAD_SO)

# The engine's own symbols stay local (preload/c/exports.map); -z defs proves that nothing
# but libc, libgcc_s and the dynamic linker is needed.
$(PRELOAD_SO): $(PRELOAD_SRCS) $(PRELOAD_HDRS) preload/c/exports.map $(PRELOAD_ENGINE)
	$(call link_preload,$@,)
	@! readelf -d $@ | grep -q 'NEEDED.*ibverbs' || { echo "$@ must not need libibverbs"; exit 1; }

# The same interposer with test hooks (RTP_TEST_HOOKS in preload/c/preload.h: the fake
# provider's cues inside the interposer's own sections), for preload/tests/interposer/ only; never installed.
PRELOAD_HOOKS_SO := $(PB)/librccl_telemetry_preload_hooks.so
$(PRELOAD_HOOKS_SO): $(PRELOAD_SRCS) $(PRELOAD_HDRS) preload/c/exports.map $(PRELOAD_ENGINE)
	@mkdir -p $(dir $@)
	$(call link_preload,$@,-DRTP_TEST_HOOKS)

# The fake provider: one file a concern (c_tests/preload/fake_verbs.h says which), what they
# share in fake_verbs_internal.h.
FAKEVERBS_SRCS := $(sort $(wildcard c_tests/preload/fake_verbs_*.c))
FAKEVERBS_HDRS := c_tests/preload/fake_verbs.h c_tests/preload/fake_verbs_internal.h

$(FAKEVERBS): $(FAKEVERBS_SRCS) $(FAKEVERBS_HDRS) c_tests/preload/fake_verbs.map
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -fPIC -shared -fvisibility=hidden $(CWARN) -Wl,-soname,libibverbs.so.1 \
	  -Wl,--version-script=c_tests/preload/fake_verbs.map $(FAKEVERBS_SRCS) -o $@ -lpthread
	ln -sf libibverbs.so.1 $(dir $@)libibverbs.so

# The test program: verbs_app.c (load, main) and verbs_app_*.c (helpers, scenarios).
VERBS_APP_SRCS := $(sort $(wildcard c_tests/preload/verbs_app*.c))
VERBS_APP_HDRS := c_tests/preload/verbs_app.h c_tests/preload/fake_verbs.h

$(PB)/verbs_app: $(VERBS_APP_SRCS) $(VERBS_APP_HDRS) $(FAKEVERBS)
	$(CC) -std=gnu11 -O2 -g $(CWARN) $(VERBS_APP_SRCS) -o $@ -L$(PB)/fakeverbs -libverbs -Wl,-rpath,$(abspath $(PB)/fakeverbs) -lpthread

# No libibverbs at link time: dlopen finds the fake through LD_LIBRARY_PATH.
$(PB)/verbs_app_nccl: $(VERBS_APP_SRCS) $(VERBS_APP_HDRS)
	@mkdir -p $(PB)
	$(CC) -std=gnu11 -O2 -g $(CWARN) -DLOAD_LIKE_NCCL $(VERBS_APP_SRCS) -o $@ -ldl -lpthread

# Statically linked (with the fake as an archive): LD_PRELOAD cannot apply to it.
$(PB)/static/libibverbs.a: $(FAKEVERBS_SRCS) $(FAKEVERBS_HDRS)
	@mkdir -p $(dir $@)
	rm -f $@ $(PB)/static/fake_verbs*.o
	for f in $(FAKEVERBS_SRCS); do \
	  $(CC) -std=gnu11 -O2 -g $(CWARN) -c $$f -o $(PB)/static/$$(basename $$f .c).o || exit 1; \
	done
	ar rcs $@ $(patsubst c_tests/preload/%.c,$(PB)/static/%.o,$(FAKEVERBS_SRCS))

$(PB)/verbs_app_static: $(VERBS_APP_SRCS) $(VERBS_APP_HDRS) $(PB)/static/libibverbs.a
	$(CC) -std=gnu11 -O2 -g $(CWARN) -static $(VERBS_APP_SRCS) -o $@ -L$(PB)/static -libverbs -lpthread

preload-test-bins: $(FAKEVERBS) $(PRELOAD_HOOKS_SO) $(PB)/verbs_app $(PB)/verbs_app_nccl $(PB)/verbs_app_static
