#!/bin/sh
cd /work/wt-48
export OPENBLAS_CORETYPE=Haswell
N=${1:-6}
echo "# $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
i=0
while [ $i -lt $N ]; do
  build/baton run -n 2 -- build/baton bench allreduce --csv --transport shm --algo direct,ring --rounds 2 -b 32M -e 256M -f 2 -w 1 -n 3 --min-time 0 2>/dev/null |
   awk -F, -v j=$i '$1 ~ /^[0-9]+$/ {v[$10]=v[$10] sprintf(" %8.0f", $6)} END {printf "job%d direct%s | ring%s\n", j, v["direct"], v["ring"]}'
  i=$((i+1))
done
echo "# $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
