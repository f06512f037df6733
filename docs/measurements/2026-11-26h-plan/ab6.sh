#!/bin/sh
# tcp 2 ranks, one sweep from 4 B to 2 MiB: ring,rd vs rd,ring vs ring alone vs ring,rd from 1M, alternating
B=build/baton; O=$1; N=${2:-3}; mkdir -p $O; : > $O/rows
i=0
while [ $i -lt $N ]; do
  for L in ring,rd rd,ring ring; do
    $B run -n 2 -- $B bench allreduce --csv -b 4 -e 2M -f 2 --algo $L --rounds 1 --sweeps 1 --transport tcp -w 2 -n 5 --min-time 0.02 |
      awk -F, -v l=$L '$1+0>=262144 {print l, $5, $1, $6}' >> $O/rows
  done
  i=$((i+1))
done
