#!/bin/sh
# ab.sh TR K PAIRS OUT: interleaved A/B of BATON_TUNING_PROBE=0.25 against off, the auto check of one shape, the same calibration
cd /work/wt-plan
TR=$1 K=$2 PAIRS=$3 OUT=$4
mkdir -p $OUT
i=0
while [ $i -lt $PAIRS ]; do
  if [ $((i % 2)) = 0 ]; then order="0.25 off"; else order="off 0.25"; fi
  flock /tmp/baton-bench.lock sh -c "
  for p in $order; do
    echo \"== pair $i probe \$p \$(date -u +%H:%M:%S) load \$(cut -d' ' -f1-3 /proc/loadavg)\"
    BATON_TUNING_PROBE=\$p CAL=/tmp/plan_h/cal23.json PARTS=auto TRANSPORTS=$TR RANKS_AUTO=$K sh bench/plan_floors.sh $OUT/\$p.$i | grep -E 'MISSED|floor auto|total time'
  done"
  i=$((i + 1))
done
