#!/bin/sh
# bench/metrics_overhead.sh: what the per-step metrics (on by default) cost (issue 12, floor: <= 1 % of the
# step on the MLP). The Fashion-MNIST MLP (784-1024-1024-10), 2 ranks x batch 128, STEPS steps, with
# --metrics none and with metrics on, in ROUNDS rounds of one pair each (the order inside a pair alternates, so
# a drift of the machine's load does not favour one side). Each pair gives a ratio on/off of the runs' mean
# step times; the summary is the median ratio over all pairs with its spread (quartiles, min, max) and a 95 %
# interval of the median (bootstrap), next to the recorder's own time per step as measured inside the run
# (metrics_ms_per_step in --json). RAWFILE (optional) keeps the pairs: a later call appends to it and
# summarises every pair in it, so the measurement can be split into pieces that each hold the lock briefly.
# usage: flock /tmp/baton-bench.lock bench/metrics_overhead.sh [ROUNDS (5)] [STEPS (100)] [RAWFILE]
set -eu
ROUNDS=${1:-5}
STEPS=${2:-100}
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
RAW=${3:-$TMP/raw}
ARGS="--model mlp --data fashion-mnist --batch 128 --threads 1 --steps $STEPS --json"
one() {   # FLAGS: prints "step_ms metrics_ms_per_step"
    "$BUILD/baton" run -n 2 -- "$BUILD/baton" train $ARGS $1 2>/dev/null | tail -n 1 | /usr/bin/python3 -c \
        "import json,sys; j=json.loads(sys.stdin.read()); print(j['step_ms'], j.get('metrics_ms_per_step', 0))"
}
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) -eq 1 ]; then
        off=$(one "--metrics none"); on=$(one "--metrics $TMP/m.jsonl")
    else
        on=$(one "--metrics $TMP/m.jsonl"); off=$(one "--metrics none")
    fi
    echo "$off $on" >>"$RAW"
done
echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load: $(uptime | sed 's/.*load average: //'); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}"
echo "2 ranks; $ARGS; $ROUNDS new pairs"
/usr/bin/python3 - "$RAW" <<'PY'
import random, statistics as s, sys
pairs = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
off = [p[0] for p in pairs]; on = [p[2] for p in pairs]; inside = s.median(p[3] for p in pairs)
ratio = sorted(b / a for a, b in zip(off, on))
q = s.quantiles(ratio, n=4) if len(ratio) > 1 else [ratio[0]] * 3
random.seed(1)
boot = sorted(s.median(random.choice(ratio) for _ in ratio) for _ in range(2000))
print("| metrics | step_ms (median of %d runs) | recorder ms/step (inside the run) |" % len(pairs))
print("|---|---|---|")
print("| none | %.3f | - |" % s.median(off))
print("| on | %.3f | %.4f (%.3f %% of the step) |" % (s.median(on), inside, 100 * inside / s.median(on)))
print("on/off per pair: median %+.2f %%, quartiles %+.2f / %+.2f %%, min %+.2f %%, max %+.2f %%; "
      "95 %% interval of the median %+.2f .. %+.2f %% (%d pairs)" % tuple(
      [100 * (x - 1) for x in (s.median(ratio), q[0], q[2], ratio[0], ratio[-1], boot[50], boot[1949])] + [len(ratio)]))
PY
