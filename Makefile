# baton: one Makefile. `make` builds build/baton, build/libbaton.a and the tests.
# `make run` installs missing Debian packages, builds, and runs the main job.
# `make test` installs missing Debian packages, builds, and runs every test.
# `make asan` / `make tsan` build into build-asan / build-tsan and run the suite there.

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
SAN     ?=
WERROR  ?= $(if $(CI),-Werror,)
CFLAGS  ?=
CFLAGS  += -std=c11 $(OPT) -g -Wall -Wextra $(WERROR) -D_GNU_SOURCE -pthread -Iinclude -Isrc $(SAN)
LDFLAGS += -pthread $(SAN)
LDLIBS  += -lopenblas -lsodium -lcjson -lz -lm -lrt

# Debian packages the build and the tests need (the benchmarks install their own heavier peers).
DEB_PKGS := gcc make pkg-config libopenblas-dev libsodium-dev libcjson-dev zlib1g-dev dataset-fashion-mnist python3

LIB_SRC   := $(shell find src -name '*.c' | sort)
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_SRC  := $(wildcard tools/*.c)
TOOL_OBJ  := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC  := $(wildcard tests/test_*.c)
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
PROG_SRC  := $(wildcard tests/prog_*.c)
PROG_BIN  := $(PROG_SRC:tests/%.c=$(BUILD)/tests/%)
HARNESS   := $(BUILD)/obj/tests/harness.o

.PHONY: all deps run test test-cluster asan tsan clean install
.SECONDARY:
all: $(BUILD)/baton $(TEST_BIN) $(PROG_BIN)

# Installs whatever of DEB_PKGS is missing, once (apt-get update only when something is missing).
deps:
	@missing=""; for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing missing Debian packages:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "error: missing packages:$$missing; run 'make deps' as root or apt-get install them" >&2; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	fi

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libbaton.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/baton: $(TOOL_OBJ) $(BUILD)/libbaton.a
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(BUILD)/libbaton.a $(LDLIBS)

# tests/prog_*.c are standalone programs (own main) that multi-process tests start under `baton run`.
$(BUILD)/tests/prog_%: $(BUILD)/obj/tests/prog_%.o $(BUILD)/libbaton.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libbaton.a $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(HARNESS) $(BUILD)/libbaton.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(HARNESS) $(BUILD)/libbaton.a $(LDLIBS)

run: deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/baton run -n 2 -- $(BUILD)/baton train --model mlp --data fashion-mnist --epochs 5

test: deps
	@$(MAKE) --no-print-directory all
	BUILD=$(BUILD) sh tests/run.sh

# The heavy fixtures (simulated nodes in network namespaces, a real Slurm): tests/cluster/test_*.sh.
test-cluster: deps
	@$(MAKE) --no-print-directory all
	BUILD=$(BUILD) SUITE=cluster sh tests/run.sh

asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" all
	BUILD=build-asan TH_TIMEOUT_SCALE=3 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 sh tests/run.sh

# The threaded parts under ThreadSanitizer: the store's server thread, the launcher, the communicator's comm
# thread and watchdog, the DDP engine's comm thread, in-process TCP ranks as threads. (The collective matrix
# runs single-threaded processes: TSan has nothing to watch there, and it is checked under ASan.)
TSAN_TESTS := test_util test_store test_launcher test_algo_tcp test_reduce test_ddp test_ddp_train \
              test_coll:async test_reliability:stall test_reliability:sigstop
tsan: deps
	@$(MAKE) --no-print-directory BUILD=build-tsan OPT=-O1 SAN="-fsanitize=thread" all
	BUILD=build-tsan TH_TIMEOUT_SCALE=4 TSAN_OPTIONS=halt_on_error=1 RUN_ONLY="$(TSAN_TESTS)" sh tests/run.sh

install: all
	install -m 755 $(BUILD)/baton /usr/local/bin/baton

clean:
	rm -rf build build-asan build-tsan build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---- fuzzing: `make fuzz` (not part of `make test`; see docs/fuzzing.md) --------------------------------
# Builds the libFuzzer targets fuzz/fuzz_*.c with clang under ASan + UBSan, against the library sources
# compiled the same way into build-fuzz/, then runs each target (one at a time) for FUZZ_RUNS inputs,
# starting from its checked-in corpus fuzz/corpus/<target>/ (read-only; new inputs go to
# build-fuzz/corpus/<target>/, crashes to build-fuzz/<target>-crash-*). A finding fails the target.
#   make fuzz FUZZ_RUNS=100000 FUZZ_ONLY=fuzz_frame FUZZ_FLAGS=-max_total_time=60
# `make test` replays every corpus file through the same targets (tests/test_fuzz_corpus.c, gcc, no libFuzzer).
FUZZ_CC       ?= clang
FUZZ_RUNS     ?= 1000000
FUZZ_FLAGS    ?=
FUZZ_BUILD    := build-fuzz
FUZZ_DEB_PKGS := clang libclang-rt-14-dev
FUZZ_SAN      := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS   := -std=c11 -O1 -g -Wall -Wextra -D_GNU_SOURCE -pthread -Iinclude -Isrc $(FUZZ_SAN)
FUZZ_TARGETS  := $(patsubst fuzz/%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_ONLY     ?= $(FUZZ_TARGETS)
# The code the targets reach, compiled with clang + sanitizers + coverage; the rest of the library (SIMD
# kernels clang 14 does not build as written) is linked uninstrumented from the ordinary $(BUILD)/libbaton.a.
FUZZ_LIB_SRC  := $(filter src/util/% src/rendezvous/% src/comm/desc.c src/ckpt/%,$(LIB_SRC))
FUZZ_LIB_OBJ  := $(FUZZ_LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_ENV      := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: fuzz fuzz-deps fuzz-build
fuzz: fuzz-deps
	@$(MAKE) --no-print-directory fuzz-build
	@set -e; for t in $(FUZZ_ONLY); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  dict=""; [ -f fuzz/$$t.dict ] && dict="-dict=fuzz/$$t.dict"; \
	  echo "== $$t: $(FUZZ_RUNS) runs"; \
	  $(FUZZ_ENV) $(FUZZ_BUILD)/$$t -runs=$(FUZZ_RUNS) -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/$$t- $$dict $(FUZZ_FLAGS) $(FUZZ_BUILD)/corpus/$$t fuzz/corpus/$$t; \
	done

fuzz-deps:
	@missing=""; for p in $(FUZZ_DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing missing Debian packages:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "error: missing packages:$$missing; apt-get install them as root" >&2; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	fi
	@$(MAKE) --no-print-directory deps

fuzz-build: $(BUILD)/libbaton.a $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/%)

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/libbaton.a: $(FUZZ_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/obj/fuzz/fuzz_%.o $(FUZZ_BUILD)/libbaton.a $(BUILD)/libbaton.a
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -pthread -o $@ $< $(FUZZ_BUILD)/libbaton.a $(BUILD)/libbaton.a $(LDLIBS)

-include $(shell find $(FUZZ_BUILD)/obj -name '*.d' 2>/dev/null)
