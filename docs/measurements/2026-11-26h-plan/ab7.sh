#!/bin/sh
# auto check of one shape after old vs new calibration of that shape (to 256 MiB). Usage: ab7.sh OUT TR K arm...
O=$1; TR=$2; K=$3; shift 3; mkdir -p $O
for arm in "$@"; do
  case $arm in old) B=MAIN_BATON ;; new) B=build/baton ;; esac
  i=$(ls $O | grep -c "^$TR$K-$arm")
  D=$O/$TR$K-$arm$i; mkdir -p $D
  echo "== $TR $K $arm $i $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  $B plan calibrate --ranks $K --transports $TR --rounds 3 --max-bytes 268435456 --out $D/cal.json 2>$D/cal.log | head -1
  (cd /work/wt-plan && CAL=$D/cal.json PARTS=auto TRANSPORTS=$TR RANKS_AUTO=$K sh bench/plan_floors.sh $D/check > $D/check.txt 2>&1)
  grep -E "MISSED|floor|measured at" $D/check.txt
done
