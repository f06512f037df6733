#!/bin/sh
# usage: ab2.sh BIN NJOBS CCS... ; runs both orders per cc, interleaved, prints cc order algo size time
B=$1; N=$2; shift 2
for i in $(seq $N); do
  for cc in "$@"; do
    for L in ring,rd rd,ring; do
      if [ "$cc" = default ]; then E=""; else E="BATON_TCP_CC=$cc"; fi
      env $E $B run -n 2 -- $B bench allreduce --csv -b 256K -e 4M -f 2 --algo $L --rounds 1 --sweeps 1 --transport tcp -w 2 -n 5 --min-time 0.02 2>&1 | awk -F, -v cc=$cc -v L=$L '$1 ~ /^[0-9]+$/ {print cc, L, $5, $1, $6}'
    done
  done
done
