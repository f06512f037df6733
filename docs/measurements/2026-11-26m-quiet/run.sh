#!/bin/sh
# Quiet-slot floors, session of 2026-11-26 19:43-22:40 (main 504c1b8) (no helpers, sched_autogroup_enabled=0).
cd /work/main
export PATH=/work/main/build:$PATH
O=/work/quiet/s26
step() { name=$1; shift; echo "== $name $(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/index.txt;
  ( echo "# $(date -u) load $(cut -d' ' -f1-3 /proc/loadavg) OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset} $(git log --oneline -1 | cut -c1-7)"; echo "# $*"; "$@" ) > $O/$name.txt 2>&1;
  echo "   rc=$? end $(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/index.txt; }
lscpu | grep -E "Model name|^CPU\(s\)|Flags|family|Model:" > $O/lscpu.txt
cc -std=c11 -O2 -D_GNU_SOURCE -pthread -Iinclude -Isrc bench/attn_bench.c build/libbaton.a -lsodium -lcjson -lz -lm -lrt -pthread -o /work/quiet/attn_bench
step gpt timeout 900 sh bench/gpt_vs_torch.sh 3 3
step torch_dp env WITH_ENV="BATON_COMM_SLICE_US=0 BATON_SHM_WAKE=off" timeout 900 sh bench/torch_dp.sh 5 100
step attn env OMP_WAIT_POLICY=PASSIVE timeout 300 /work/quiet/attn_bench 2 20
step plan timeout 1800 sh bench/plan_floors.sh $O/plan
step plan_net timeout 600 sh bench/plan_floors_net.sh $O/plan_net
echo "== done $(date -u +%H:%M:%S)" >> $O/index.txt
