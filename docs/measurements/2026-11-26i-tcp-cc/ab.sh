#!/bin/sh
# usage: ab.sh BATON_BIN NJOBS SIZE_B SIZE_E ORDERS...   prints order, ring time at 1MiB per job
B=$1; N=$2; SB=$3; SE=$4; shift 4
for i in $(seq $N); do
  for L in "$@"; do
    t=$($B run -n 2 -- $B bench allreduce --csv -b $SB -e $SE -f 2 --algo $L --rounds 1 --sweeps 1 --transport tcp -w 2 -n 5 --min-time 0.02 2>&1 | awk -F, '$1==1048576 && $5=="ring"{print $6}')
    echo "$L $t"
  done
done
