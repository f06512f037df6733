#!/bin/sh
# A/B of the GPT step (forward + backward) between main before this session's colsum change (OLD) and after (NEW)
# usage: sh ab_colsum.sh OLD_LIBDIR NEW_LIBDIR ROUNDS
set -eu
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT INT TERM
for v in old new; do
  d=$1; [ $v = new ] && d=$2
  cc -std=c11 -O2 -D_GNU_SOURCE -pthread -I/work/main/include -I/work/main/src /work/main/bench/gpt_step_bench.c $d/libbaton.a -lsodium -lcjson -lz -lm -lrt -pthread -o $T/gsb_$v
done
export OMP_WAIT_POLICY=PASSIVE
for r in $(seq 1 $3); do
  for v in old new; do for p in 0 1; do
    [ $((r % 2)) = 0 ] && v2=$([ $v = old ] && echo new || echo old) || v2=$v
    echo "round $r $v2 $($T/gsb_$v2 $p 2 16 4 2>&1 | tail -1) load $(cut -d' ' -f1 /proc/loadavg)"
  done; done
done
