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
LDLIBS  += -lsodium -lcjson -lz -lm -lrt
# Programs (baton, the tests, anything linking libbaton.a through EXE_LDLIBS) take libsodium and zlib from their
# static archives: two libraries fewer for the dynamic loader to map and relocate at every start of the launcher
# and of every rank (issue 8, startup floor). libbaton.so and the Python extension link them dynamically.
EXE_LDLIBS := -Wl,-Bstatic -lsodium -lz -Wl,-Bdynamic -lcjson -lm -lrt

# Debian packages the build and the tests need (the benchmarks install their own heavier peers).
DEB_PKGS := gcc make pkg-config libopenblas-dev libdnnl-dev libsodium-dev libcjson-dev zlib1g-dev dataset-fashion-mnist python3
DEB_PKGS += python3-dev python3-numpy python3-torch g++
DEB_PKGS += openmpi-bin mpich libopenmpi-dev
DEB_PKGS += slurmctld slurmd slurm-client munge
DEB_PKGS += iproute2
DEB_PKGS += fortunes
DEB_PKGS += chromium

LIB_SRC   := $(filter-out src/transport/mpi_plugin.c,$(shell find src -name '*.c' | sort))
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

# The MPI transport (--transport mpi) is a plugin, $(BUILD)/libbaton-mpi.so, built with Open MPI's compiler
# wrapper when it and mpi.h are installed (libopenmpi-dev); libbaton dlopens it on first use, so nothing else
# links libmpi. `make MPICC=` builds without it (--transport mpi then says how to get it).
MPICC      ?= $(shell command -v mpicc.openmpi 2>/dev/null)
MPI_INC    := $(if $(strip $(MPICC)),$(shell $(MPICC) --showme:incdirs 2>/dev/null))
MPI_PLUGIN := $(if $(strip $(MPICC)),$(if $(wildcard $(addsuffix /mpi.h,$(MPI_INC))),$(BUILD)/libbaton-mpi.so))
all: $(MPI_PLUGIN)
$(BUILD)/libbaton-mpi.so: src/transport/mpi_plugin.c src/transport/mpi.h src/transport/transport.h include/baton/status.h
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -shared -fvisibility=hidden -o $@ $< $(LDFLAGS)
# Where the loader looks after the plugin's usual places (next to the program or library; docs/cluster.md).
$(BUILD)/obj/src/transport/mpi_load.o: CFLAGS += -DBATON_LIBDIR='"$(PREFIX)/lib"'
# The engine's row loops (LayerNorm, GELU, softmax, attention heads, AdamW) run on OpenMP's threads, the same
# pool (libgomp) oneDNN's matrix multiplies use; baton_set_threads sizes it. Rows are split, never a
# reduction, so results do not depend on the thread count (docs/gpt.md).
# clang's OpenMP code calls libomp's entry points (__kmpc_*), which the libgomp that src/nn/libs.c loads does not
# have: built with clang the row loops go without OpenMP and run on one thread (the same results: rows are split,
# never reduced).
NN_OMP := $(if $(findstring clang,$(shell $(CC) --version 2>/dev/null | head -n 1)),,-fopenmp)
$(BUILD)/obj/src/nn/%.o: CFLAGS += $(NN_OMP)

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
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(BUILD)/libbaton.a $(EXE_LDLIBS)

# tests/prog_*.c are standalone programs (own main) that multi-process tests start under `baton run`.
$(BUILD)/tests/prog_%: $(BUILD)/obj/tests/prog_%.o $(BUILD)/libbaton.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libbaton.a $(EXE_LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(HARNESS) $(BUILD)/libbaton.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(HARNESS) $(BUILD)/libbaton.a $(EXE_LDLIBS)

# test_observe also checks the trainer's diagnosis directly (tools/train_metrics.c, no process started).
$(BUILD)/tests/test_observe: $(BUILD)/obj/tests/test_observe.o $(HARNESS) $(BUILD)/obj/tools/train_metrics.o $(BUILD)/libbaton.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(HARNESS) $(BUILD)/obj/tools/train_metrics.o $(BUILD)/libbaton.a $(EXE_LDLIBS)

# test_blame also checks the launcher's verdict on made-up outcomes (tools/run_group.c, no process started).
$(BUILD)/tests/test_blame: $(BUILD)/obj/tests/test_blame.o $(HARNESS) $(BUILD)/obj/tools/run_group.o $(BUILD)/libbaton.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(HARNESS) $(BUILD)/obj/tools/run_group.o $(BUILD)/libbaton.a $(EXE_LDLIBS)

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

# Python and the host programs of test_install.sh load the sanitized library: Python gets the ASan runtime
# preloaded (leak checking off: the interpreter keeps its objects at exit), with libstdc++ so that ASan can
# intercept the C++ exceptions torch throws; the C and C++ programs are built with it.
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 SAN="$(ASAN_FLAGS)" all
	BUILD=build-asan TH_TIMEOUT_SCALE=3 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	BATON_TEST_SAN="$(ASAN_FLAGS)" \
	BATON_TEST_PY="env LD_PRELOAD=$$($(CC) -print-file-name=libasan.so):$$($(CC) -print-file-name=libstdc++.so) ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 /usr/bin/python3" \
	sh tests/run.sh

# The threaded parts under ThreadSanitizer: the store's server thread, the launcher, the communicator's comm
# thread and watchdog, the DDP engine's comm thread, in-process TCP ranks as threads. (The collective matrix
# runs single-threaded processes: TSan has nothing to watch there, and it is checked under ASan.)
TSAN_TESTS := test_util test_store test_launcher test_algo_tcp test_reduce test_ddp test_ddp_train \
              test_coll:async test_reliability:stall test_reliability:sigstop
tsan: deps
	@$(MAKE) --no-print-directory BUILD=build-tsan OPT=-O1 SAN="-fsanitize=thread" all
	BUILD=build-tsan TH_TIMEOUT_SCALE=4 TSAN_OPTIONS=halt_on_error=1 RUN_ONLY="$(TSAN_TESTS)" sh tests/run.sh

# Installs the command, the libraries, the headers, baton.pc and the Python package under $(DESTDIR)$(PREFIX).
install: all
	@$(MAKE) --no-print-directory install-files

clean:
	rm -rf build build-asan build-tsan build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---- the installable library and the Python package (issue 10; docs/python.md) -------------------------
# One set of objects serves both libraries: -fPIC, and -fno-semantic-interposition so calls inside the
# library stay direct. libbaton.so exports only the public baton_* names (src/libbaton.map).
BATON_VERSION := 0.1.0
BATON_SOMAJOR := 0
PREFIX  ?= /usr/local
DESTDIR ?=
CFLAGS  += -fPIC -fno-semantic-interposition
SO_REAL := $(BUILD)/libbaton.so.$(BATON_VERSION)
# `baton --version`; main.o is rebuilt when the version changes (the Makefile is among its prerequisites)
$(BUILD)/obj/tools/main.o: CFLAGS += -DBATON_VERSION_STRING='"$(BATON_VERSION)"'
$(BUILD)/obj/tools/main.o: Makefile
# The Python package is built for Debian's interpreter (the one python3-numpy and python3-torch belong to).
PY       := /usr/bin/python3
PY_INC   := $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
PY_EXT   := $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
PY_VER   := $(shell $(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PY_SRC   := $(shell find python/baton -name '*.py' | sort)
PY_OUT   := $(PY_SRC:python/%=$(BUILD)/python/%) $(BUILD)/python/baton/_baton$(PY_EXT)
PY_DEST  := $(PREFIX)/lib/python$(PY_VER)/dist-packages

all: $(BUILD)/libbaton.so $(PY_OUT)

$(SO_REAL): $(LIB_OBJ) src/libbaton.map
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libbaton.so.$(BATON_SOMAJOR) -Wl,--version-script=src/libbaton.map \
	  -Wl,--no-undefined -o $@ $(LIB_OBJ) $(LDLIBS)

$(BUILD)/libbaton.so: $(SO_REAL)
	ln -sf libbaton.so.$(BATON_VERSION) $(BUILD)/libbaton.so.$(BATON_SOMAJOR)
	ln -sf libbaton.so.$(BATON_VERSION) $@

# The extension module links the library statically (PIC objects), so the package needs no libbaton.so
# at run time; it exports only PyInit__baton.
$(BUILD)/obj/python/%.o: CFLAGS += -I$(PY_INC) -fvisibility=hidden
PY_OBJ   := $(BUILD)/obj/python/_baton.o $(BUILD)/obj/python/_baton_args.o
$(BUILD)/python/baton/_baton$(PY_EXT): $(PY_OBJ) $(BUILD)/libbaton.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -Wl,--exclude-libs,ALL -o $@ $(PY_OBJ) $(BUILD)/libbaton.a $(LDLIBS)

# baton.torch's C++ work layer (python/baton/torch/_work.cpp; docs/python.md): built when Debian's libtorch-dev
# headers are there (TORCH_EXT=0 skips it); without it the backend completes its futures in Python.
TORCH_DIR ?= /usr/lib/python3/dist-packages/torch
TORCH_EXT ?= $(if $(and $(wildcard $(TORCH_DIR)/include/torch/csrc/distributed/c10d/Work.hpp),$(shell command -v $(CXX))),1,0)
ifeq ($(TORCH_EXT),1)
PY_OUT   += $(BUILD)/python/baton/torch/_work$(PY_EXT)
all: $(BUILD)/python/baton/torch/_work$(PY_EXT)
endif
$(BUILD)/python/baton/torch/_work$(PY_EXT): python/baton/torch/_work.cpp python/baton_capi.h include/baton/comm.h
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 $(OPT) -g -Wall -Wextra $(WERROR) -fPIC -shared -fvisibility=hidden \
	  -DPYBIND11_COMPILER_TYPE='"_gcc"' -DPYBIND11_STDLIB='"_libstdcpp"' \
	  -DPYBIND11_BUILD_ABI='"'"$$($(PY) -c 'import torch; print(torch._C._PYBIND11_BUILD_ABI)' 2>/dev/null)"'"' \
	  -isystem $(TORCH_DIR)/include -isystem $(TORCH_DIR)/include/torch/csrc/api/include -isystem $(PY_INC) \
	  -Iinclude -Ipython -o $@ $< -L$(TORCH_DIR)/lib -ltorch_python -ltorch -ltorch_cpu -lc10

$(BUILD)/python/%.py: python/%.py
	@mkdir -p $(dir $@)
	cp $< $@

.PHONY: install-files
install-files:
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/baton
	install -m 755 $(BUILD)/baton $(DESTDIR)$(PREFIX)/bin/baton
	install -m 644 $(BUILD)/libbaton.a $(DESTDIR)$(PREFIX)/lib/libbaton.a
	install -m 755 $(SO_REAL) $(DESTDIR)$(PREFIX)/lib/
	if [ -f $(BUILD)/libbaton-mpi.so ]; then install -m 755 $(BUILD)/libbaton-mpi.so $(DESTDIR)$(PREFIX)/lib/; fi
	ln -sf libbaton.so.$(BATON_VERSION) $(DESTDIR)$(PREFIX)/lib/libbaton.so.$(BATON_SOMAJOR)
	ln -sf libbaton.so.$(BATON_VERSION) $(DESTDIR)$(PREFIX)/lib/libbaton.so
	install -m 644 include/baton/*.h $(DESTDIR)$(PREFIX)/include/baton/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(BATON_VERSION)|g' src/baton.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/baton.pc
	cd $(BUILD)/python && find baton -type d -exec install -d '$(DESTDIR)$(PY_DEST)/{}' \; \
	  && find baton -type f \( -name '*.py' -o -name '*.so' \) -exec install -m 644 '{}' '$(DESTDIR)$(PY_DEST)/{}' \;

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
