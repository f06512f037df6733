#!/bin/sh
B=build/baton; O=$1; mkdir -p $O; : > $O/rows
for i in 1 2; do
 for kb in 0 256 4096; do
  for L in ring,rd rd,ring; do
    BATON_TCP_BUF_KB=$kb $B run -n 2 -- $B bench allreduce --csv -b 4 -e 2M -f 2 --algo $L --rounds 1 --sweeps 1 --transport tcp -w 2 -n 5 --min-time 0.02 |
      awk -F, -v l=$L -v kb=$kb '$1+0>=524288 {print "buf"kb, l, $10, $1, $6}' >> $O/rows
  done
 done
done
