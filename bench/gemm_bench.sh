#!/bin/sh
# Builds bench/gemm_bench.c against build/libbaton.a (run `make` first) and runs it with OPENBLAS_CORETYPE unset
# and set to each kernel family this CPU can run, so OpenBLAS's autodetected kernel is compared with the others
# and with oneDNN (f32 and bf16) on the GPT's shapes. Extra arguments go to every run (-t THREADS, -m ROWS, -s SEC).
#   flock /tmp/baton-bench.lock bench/gemm_bench.sh -t 1
set -e
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
[ -f "$BUILD/libbaton.a" ] || { echo "gemm_bench.sh: $BUILD/libbaton.a is missing; run 'make' first" >&2; exit 1; }
mkdir -p bench/out
cc -std=c11 -O2 -g -Wall -Wextra -D_GNU_SOURCE -pthread -Iinclude -Isrc bench/gemm_bench.c \
    "$BUILD/libbaton.a" -lsodium -lcjson -lz -lm -lrt -pthread -o bench/out/gemm_bench
echo "# $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), nproc $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_bf16|avx512_vnni|amx_bf16|amx_tile)$' | tr '\n' ' ')"
echo "# OpenBLAS: $(cat /sys/devices/system/cpu/cpu0/cache/index0/size 2>/dev/null) L1d; autodetected core: \
$(OPENBLAS_VERBOSE=2 bench/out/gemm_bench -m 1 -s 0.001 2>&1 | grep -i 'core' | head -1)"
unset OPENBLAS_CORETYPE
bench/out/gemm_bench "$@"
for core in ${CORES:-Haswell SkylakeX Zen}; do
    OPENBLAS_CORETYPE=$core bench/out/gemm_bench "$@"
done
