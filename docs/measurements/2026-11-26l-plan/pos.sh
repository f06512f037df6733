#!/bin/sh
# exp/pos.sh TR K ALGOS B E W N SWEEPS OUT: one job with --runs, raw runs to OUT
tr=$1 k=$2 algos=$3 b=$4 e=$5 w=$6 n=$7 sw=$8 out=$9
export BATON_TUNING=${BATON_TUNING:-/work/wt-plan/docs/measurements/2026-11-26j-quiet/plan_cal.json}
echo "# $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) $*" >>"$out"
timeout 300 ${BB:-build}/baton run -n "$k" -- ${BB:-build}/baton bench allreduce --csv --runs --transport "$tr" --algo "$algos" --rounds 1 \
   --sweeps "$sw" -b "$b" -e "$e" -f 2 -w "$w" -n "$n" --min-time 0.02 2>>"$out" >>"$out.csv"
