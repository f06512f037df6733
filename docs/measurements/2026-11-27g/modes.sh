#!/bin/sh
# modes.sh N [ENV...]: N jobs of tcp 2-rank ring all-reduce at 256K..4M, prints per job the 1M and 4M medians
B=/work/main/build/baton
n=$1; shift
i=0
while [ $i -lt $n ]; do
  env "$@" timeout 60 $B run -n 2 -- $B bench allreduce --transport tcp --algo ring -b 256K -e 4M -f 2 -w 2 -n 5 --min-time 0.02 --csv 2>/dev/null |
    awk -F, '$1 ~ /^[0-9]+$/ {printf "%s=%.0f ", $1/1024 "K", $6} END {print ""}'
  i=$((i+1))
done
