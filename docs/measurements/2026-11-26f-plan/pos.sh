#!/bin/sh
cd /work/wt-plan
echo "# $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
i=0
while [ $i -lt 10 ]; do
  for L in ring,rd rd,ring; do
    TMPDIR=/tmp/plan_h/tmpd build/baton run -n 3 -- build/baton bench allreduce --csv --transport tcp --algo $L --rounds 1 --sweeps 1 -b 2M -e 16M -f 2 -w 2 -n 5 --min-time 0.02 2>/dev/null |
      awk -F, -v L=$L -v i=$i '$1 ~ /^[0-9]+$/ {print i, L, $10, $1, $6}'
  done
  i=$((i + 1))
done
echo "# $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
