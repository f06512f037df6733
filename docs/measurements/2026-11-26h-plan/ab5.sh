#!/bin/sh
# end to end on one transport, ranks 2 and 4: old = main's calibration + main's prediction check,
# new = this branch's calibration (passes) + check (passes from 4 B). Usage: ab5.sh OUT TR arm...
O=$1; TR=$2; shift 2; mkdir -p $O
for arm in "$@"; do
  case $arm in old) B=MAIN_BATON; S=MAIN_PLAN_FLOORS_SH ;; new) B=build/baton; S=bench/plan_floors.sh ;; esac
  i=$(ls $O | grep -c "^$TR-$arm" || true)
  D=$O/$TR-$arm$i; mkdir -p $D
  echo "== $TR $arm $i $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  $B plan calibrate --ranks 2,4 --transports $TR --rounds 3 --max-bytes 16777216 --out $D/cal.json 2>$D/cal.log | head -1
  (cd /work/wt-plan && CAL=$D/cal.json PARTS=pred TRANSPORTS=$TR sh $S $D/check > $D/check.txt 2>&1)
  grep -E "MISSED|within 25|measured at" $D/check.txt
done
