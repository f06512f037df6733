#!/bin/sh
# tcp 2 ranks: jobs of --sweeps 4 (the calibration's) and --sweeps 6 (the check's), alternating; 1-16 MiB and 8 B per job
cd /work/wt-48
export OPENBLAS_CORETYPE=Haswell
N=${1:-3}
echo "# $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
i=0
while [ $i -lt $N ]; do
  for sw in 4 6; do
  build/baton run -n 2 -- build/baton bench allreduce --csv --transport tcp --algo ring,rd --rounds 1 --sweeps $sw -b 4 -e 16M -f 2 -w 2 -n 5 --min-time 0.02 2>/dev/null |
   awk -F, -v j=$i -v sw=$sw '$1==8 || $1>=1048576 {v[$10]=v[$10] sprintf(" %7.1f", $6)} END {printf "pair%d sweeps%d ring%s | rd%s\n", j, sw, v["ring"], v["rd"]}'
  done
  i=$((i+1))
done
echo "# $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
