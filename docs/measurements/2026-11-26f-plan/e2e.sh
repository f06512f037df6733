#!/bin/sh
# e2e.sh TR K OUT: a fresh calibration of one shape with this branch, then the auto check of that shape against it
cd /work/wt-plan
TR=$1 K=$2 OUT=$3
mkdir -p $OUT
echo "== $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
TMPDIR=$OUT build/baton plan calibrate --ranks $K --transports $TR --rounds 3 --max-bytes 268435456 --out $OUT/cal.json 2>$OUT/cal.log | head -3
grep "as many jobs" $OUT/cal.log
echo "== calibrated $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
CAL=$OUT/cal.json PARTS=auto TRANSPORTS=$TR RANKS_AUTO=$K sh bench/plan_floors.sh $OUT/check | grep -E 'MISSED|floor auto|total time'
