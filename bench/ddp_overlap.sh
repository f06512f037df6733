#!/bin/sh
# bench/ddp_overlap.sh: how much of the gradient all-reduce the overlap hides. A wide MLP (3 x 2048 hidden,
# 10 M parameters, 40 MB of gradients) with small per-rank batches, so the all-reduce is a large part of
# the step; 2 workers, 1 thread each; with overlap (buckets of 4 MB all-reduced from the gradient hook
# during backward) and with --no-overlap; over shared memory and over TCP. Interleaved, REPS runs each,
# medians of step_ms, comm_ms (all-reduce time per step) and comm_exposed_ms (main thread waiting).
# Then one traced run (overlap, shm) drawn as docs/ddp_timeline.svg.
#
# usage: bench/ddp_overlap.sh [REPS (default 3)] [STEPS (default 40)]
set -eu
REPS=${1:-3}
STEPS=${2:-40}
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ARGS="--hidden 2048,2048,2048 --batch 32 --bucket-mb 4 --threads 1 --steps $STEPS --json"
one() {   # NAME ENV FLAGS
    env $2 "$BUILD/baton" run -n 2 -- "$BUILD/baton" train $ARGS $3 2>/dev/null | tail -n 1 | /usr/bin/python3 -c \
        "import json,sys; j=json.loads(sys.stdin.read()); print(j['step_ms'], j['comm_ms'], j['comm_exposed_ms'])" >> "$TMP/$1"
}
for r in $(seq 1 "$REPS"); do
    one shm_overlap "BATON_TRANSPORT=auto" ""
    one shm_no_overlap "BATON_TRANSPORT=auto" "--no-overlap"
    one tcp_overlap "BATON_TRANSPORT=tcp" ""
    one tcp_no_overlap "BATON_TRANSPORT=tcp" "--no-overlap"
done
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}; $(nproc) cores; 2 workers; $ARGS; medians of $REPS runs"
echo "| transport | mode | step_ms | comm_ms | comm_exposed_ms |"
echo "| --- | --- | --- | --- | --- |"
for t in shm tcp; do
    for m in overlap no_overlap; do
        /usr/bin/python3 - "$TMP/${t}_$m" "$t" "$m" <<'PY'
import statistics as S, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = [S.median(c) for c in zip(*rows)]
print("| %s | %s | %.1f | %.1f | %.1f |" % (sys.argv[2], sys.argv[3].replace("_", "-"), *med))
PY
    done
done
"$BUILD/baton" run -n 2 -- "$BUILD/baton" train $ARGS --trace "$TMP/trace.json" >/dev/null 2>&1
/usr/bin/python3 bench/trace_to_svg.py "$TMP/trace.json" docs/ddp_timeline.svg 20 3
echo "timeline: docs/ddp_timeline.svg"
