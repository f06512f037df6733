#!/bin/sh
# usage: ab3.sh BIN NJOBS : arms "before" (BATON_TCP_CC=system: the kernel's default, bbr here, = main) and
# "after" (default: bbr replaced), both orders, interleaved; prints arm order algo size time_us
B=$1; N=$2
for i in $(seq $N); do
  for arm in before after; do
    for L in ring,rd rd,ring; do
      if [ $arm = before ]; then E=BATON_TCP_CC=system; else E=BATON_TCP_CC=auto; fi
      env $E $B run -n 2 -- $B bench allreduce --csv -b 256K -e 4M -f 2 --algo $L --rounds 1 --sweeps 1 --transport tcp -w 2 -n 5 --min-time 0.02 2>&1 | awk -F, -v a=$arm -v L=$L '$1 ~ /^[0-9]+$/ {print a, L, $5, $1, $6}'
    done
  done
done
