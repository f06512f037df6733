#!/bin/sh
# bench/metrics_overhead.sh: what the per-step metrics (on by default) cost (issue 12, floor: <= 1 % of the
# step on the MLP). The Fashion-MNIST MLP (784-1024-1024-10), 2 ranks x batch 128, STEPS steps, with
# --metrics none and with metrics on, interleaved, ROUNDS rounds; medians of step_ms, and the recorder's own
# time per step as measured inside the run (metrics_ms_per_step in --json).
# usage: flock /tmp/baton-bench.lock bench/metrics_overhead.sh [ROUNDS (5)] [STEPS (100)]
set -eu
ROUNDS=${1:-5}
STEPS=${2:-100}
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ARGS="--model mlp --data fashion-mnist --batch 128 --threads 1 --steps $STEPS --json"
one() {   # NAME FLAGS
    "$BUILD/baton" run -n 2 -- "$BUILD/baton" train $ARGS $2 2>/dev/null | tail -n 1 | /usr/bin/python3 -c \
        "import json,sys; j=json.loads(sys.stdin.read()); print(j['step_ms'], j.get('metrics_ms_per_step', 0))" >>"$TMP/$1"
}
for r in $(seq 1 "$ROUNDS"); do
    one off "--metrics none"
    one on "--metrics $TMP/m$r.jsonl"
done
echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load: $(uptime | sed 's/.*load average: //'); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}"
echo "2 ranks; $ARGS; medians of $ROUNDS interleaved rounds"
/usr/bin/python3 - "$TMP/off" "$TMP/on" <<'PY'
import statistics as s, sys
off = [list(map(float, l.split())) for l in open(sys.argv[1])]
on = [list(map(float, l.split())) for l in open(sys.argv[2])]
a, b = s.median(x[0] for x in off), s.median(x[0] for x in on)
inside = s.median(x[1] for x in on)
print("| metrics | step_ms (median) | recorder ms/step (inside the run) |")
print("|---|---|---|")
print("| none | %.3f | - |" % a)
print("| on | %.3f | %.4f (%.3f %% of the step) |" % (b, inside, 100 * inside / b))
print("side by side: on/off = %.4f (%+.2f %%); runs: off %s, on %s" % (b / a, 100 * (b / a - 1),
      " ".join("%.2f" % x[0] for x in off), " ".join("%.2f" % x[0] for x in on)))
PY
