#!/bin/sh
# Builds bench/reduce_bench.c against build/libbaton.a (run `make` first) into bench/out/ and runs it for
# an L2-resident and a memory-resident buffer size. Extra arguments go to every run (e.g. -t 1).
#   bench/reduce_bench.sh            # 256 KiB and 64 MiB buffers
#   SIZES="32K 1M 256M" bench/reduce_bench.sh -t 1
set -e
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
[ -f "$BUILD/libbaton.a" ] || { echo "reduce_bench.sh: $BUILD/libbaton.a is missing; run 'make' first" >&2; exit 1; }
mkdir -p bench/out
cc -std=c11 -O2 -g -Wall -Wextra -D_GNU_SOURCE -pthread -Iinclude -Isrc bench/reduce_bench.c \
    "$BUILD/libbaton.a" -lm -lrt -pthread -o bench/out/reduce_bench
echo "# $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), nproc $(nproc)"
for s in ${SIZES:-256K 64M}; do
    bench/out/reduce_bench -s "$s" "$@"
done
