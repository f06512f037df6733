#!/bin/sh
# Quiet-slot floors, session of 2026-11-27 01:46-04:46 (no helpers, sched_autogroup_enabled=0).
cd /work/main
export PATH=/work/main/build:$PATH
O=/work/quiet/s28
mkdir -p $O
step() { name=$1; shift; echo "== $name $(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/index.txt;
  ( echo "# $(date -u) load $(cut -d' ' -f1-3 /proc/loadavg) OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset} $(git log --oneline -1 | cut -c1-7)"; echo "# $*"; "$@" ) > $O/$name.txt 2>&1;
  echo "   rc=$? end $(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/index.txt; }
lscpu | grep -E "Model name|^CPU\(s\)|Flags|family|Model:" > $O/lscpu.txt
step torch_dp env WITH_ENV="BATON_TORCH_GROUP=python" timeout 1200 sh bench/torch_dp.sh 5 300
step plan timeout 1800 sh bench/plan_floors.sh $O/plan
step plan_net timeout 600 sh bench/plan_floors_net.sh $O/plan_net
echo "== done $(date -u +%H:%M:%S)" >> $O/index.txt
