#!/bin/sh
# usage: ab4.sh BIN NJOBS : plain --algo ring sweep 4 B-16 MiB, before/after interleaved
B=$1; N=$2
for i in $(seq $N); do
  for arm in before after; do
    if [ $arm = before ]; then E=BATON_TCP_CC=system; else E=BATON_TCP_CC=auto; fi
    env $E $B run -n 2 -- $B bench allreduce --csv -b 4 -e 16M -f 2 --algo ring --rounds 1 --sweeps 1 --transport tcp -w 2 -n 5 --min-time 0.02 2>&1 | awk -F, -v a=$arm '$1 ~ /^[0-9]+$/ {print a, "ring", $5, $1, $6}'
  done
done
