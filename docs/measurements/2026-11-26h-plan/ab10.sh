#!/bin/sh
# the same calibration, the prediction check from 4 B (this branch) against from 1 MiB (main), alternating
C=$1; O=$2; N=${3:-2}; mkdir -p $O
i=0
while [ $i -lt $N ]; do
  for arm in new old; do
    case $arm in new) S=bench/plan_floors.sh ;; old) S=MAIN_PLAN_FLOORS_SH ;; esac
    D=$O/$arm$i
    echo "== $arm $i $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    (cd /work/wt-plan && CAL=$C PARTS=pred TRANSPORTS=tcp sh $S $D > $D.txt 2>&1)
    grep -E "MISSED|within 25" $D.txt
  done
  i=$((i+1))
done
