#!/bin/sh
# N jobs back to back of tcp 2 ranks ring,rd as the calibration runs them; print 1-16 MiB per job
cd /work/wt-48
export OPENBLAS_CORETYPE=Haswell
N=${1:-4}; SW=${2:-4}
echo "# $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
i=0
while [ $i -lt $N ]; do
  s=$(date +%s.%N)
  build/baton run -n 2 -- build/baton bench allreduce --csv --transport tcp --algo ring,rd --rounds 1 --sweeps $SW -b 4 -e 16M -f 2 -w 2 -n 5 --min-time 0.02 2>/dev/null |
   awk -F, -v j=$i '$1>=1048576 {printf "job%d %s %s %s\n", j, $10, $1, $6}' | sort -k2,2 -k3n | awk '{a[$2]=a[$2] " " $4} END {for (k in a) print $1, k, a[k]}'
  e=$(date +%s.%N); echo "job$i took $(echo "$e - $s" | bc) s"
  i=$((i+1))
done
echo "# $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
