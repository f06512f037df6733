#!/bin/sh
# bench/check_overhead.sh: `baton bench -c 1` must time the collective only (issue 11, item 3): the
# all-reduce time_us with -c 1 and with -c 0 on 2 ranks, interleaved over REPS rounds (default 5), medians.
# The two should agree within noise; before the fix -c 1 timed the fill and the check too (256 KiB: 930 us
# against 53 us).   Usage: sh bench/check_overhead.sh [SIZE (default 256K)] [REPS]
BUILD=${BUILD:-build}
SIZE=${1:-256K}
REPS=${2:-5}
T=$(mktemp -d "${TMPDIR:-/tmp}/baton-checkovh-XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT INT TERM HUP
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null || exit 1
for r in $(seq 1 "$REPS"); do
    for c in 0 1; do
        timeout 120 "$BUILD/baton" run -n 2 -- "$BUILD/baton" bench allreduce -b "$SIZE" -e "$SIZE" -c $c --csv |
            tail -n 1 | cut -d, -f6 >>"$T/c$c"
    done
done
med() { sort -g "$1" | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); load: $(cut -d' ' -f1-3 /proc/loadavg); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
echo "allreduce $SIZE, 2 ranks, median of $REPS: -c 0 $(med "$T/c0") us, -c 1 $(med "$T/c1") us"
