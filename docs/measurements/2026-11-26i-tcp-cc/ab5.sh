#!/bin/sh
# usage: ab5.sh BIN NJOBS : 4 ranks, before (system) / after (auto), --algo ring,rd, 256 KiB-4 MiB, interleaved
B=$1; N=$2
for i in $(seq $N); do
  for arm in before after; do
    if [ $arm = before ]; then E=BATON_TCP_CC=system; else E=BATON_TCP_CC=auto; fi
    env $E $B run -n 4 -- $B bench allreduce --csv -b 256K -e 4M -f 2 --algo ring,rd --rounds 1 --sweeps 1 --transport tcp -w 2 -n 5 --min-time 0.02 2>&1 | awk -F, -v a=$arm '$1 ~ /^[0-9]+$/ {print a, "ring,rd", $5, $1, $6}'
  done
done
