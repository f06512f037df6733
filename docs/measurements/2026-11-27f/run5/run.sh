#!/bin/sh
# Quiet-slot floors, session of 2026-11-27 10:15-13:15 UTC (no helpers running, sched_autogroup_enabled=0).
cd /work/main
export PATH=/work/main/build:$PATH
O=/work/quiet/s31/run5
mkdir -p $O
step() { name=$1; shift; echo "== $name $(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/index.txt;
  ( echo "# $(date -u) load $(cut -d' ' -f1-3 /proc/loadavg) OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset} $(git log --oneline -1 | cut -c1-7)"; echo "# $*"; "$@" ) > $O/$name.txt 2>&1;
  echo "   rc=$? end $(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/index.txt; }
lscpu | grep -E "Model name|^CPU\(s\)|Flags|family|Model:" > $O/lscpu.txt
rm -rf /tmp/baton-0
step plan timeout 2400 sh bench/plan_floors.sh $O/plan
step plan_net timeout 600 sh bench/plan_floors_net.sh $O/plan_net
echo "== done $(date -u +%H:%M:%S)" >> $O/index.txt
step torch_dp timeout 1200 sh bench/torch_dp.sh 7 300
echo "== done2 $(date -u +%H:%M:%S)" >> $O/index.txt
