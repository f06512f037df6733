#!/bin/sh
# bench/bucket_auto.sh: --bucket-mb auto against a sweep of fixed caps (issue 12, item 6: within 5 % of the
# best fixed size), over shared memory and over TCP. The Fashion-MNIST MLP (784-1024-1024-10, 7.1 MiB of
# gradients), 2 ranks x batch 64, 1 thread each, STEPS steps; the figure is the median step time over the
# second half of the run (auto has finished trying caps by then: 4 caps x 6 steps), from the metrics file,
# interleaved, median over ROUNDS rounds.
# usage: flock /tmp/baton-bench.lock bench/bucket_auto.sh [ROUNDS (2)] [STEPS (120)]
set -eu
ROUNDS=${1:-2}
STEPS=${2:-120}
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ARGS="--model mlp --data fashion-mnist --batch 64 --threads 1 --steps $STEPS --json"
CAPS="0.25 1 4 25 auto"
one() {   # TRANSPORT CAP
    BATON_TRANSPORT=$1 OPENBLAS_NUM_THREADS=1 "$BUILD/baton" run -n 2 -- "$BUILD/baton" train $ARGS --bucket-mb $2 \
        --metrics "$TMP/m.jsonl" >"$TMP/out.json" 2>/dev/null
    /usr/bin/python3 - "$TMP/m.jsonl" "$TMP/out.json" "$STEPS" >>"$TMP/$1_$2" <<'PY'
import json, statistics, sys
steps = int(sys.argv[3]); per = {}
for j in map(json.loads, open(sys.argv[1])):
    if j["type"] == "step" and j["step"] >= steps // 2: per[j["step"]] = max(per.get(j["step"], 0), j["step_ms"])
out = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
print(statistics.median(per.values()), out["bucket_mb"])
PY
}
for r in $(seq 1 "$ROUNDS"); do
    for t in auto tcp; do
        for c in $CAPS; do one $t $c; done
    done
done
echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load: $(uptime | sed 's/.*load average: //'); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}"
echo "2 ranks; $ARGS; median step_ms of steps >= $((STEPS / 2)) (slowest rank per step), median of $ROUNDS rounds"
/usr/bin/python3 - "$TMP" "$CAPS" <<'PY'
import os, statistics, sys
d, caps = sys.argv[1], sys.argv[2].split()
print("| transport | " + " | ".join("%s MiB" % c for c in caps) + " | auto vs best fixed |")
print("|---|" + "---|" * (len(caps) + 1))
for t, name in (("auto", "shm"), ("tcp", "tcp")):
    rows = {c: [list(map(float, l.split())) for l in open(os.path.join(d, "%s_%s" % (t, c)))] for c in caps}
    med = {c: statistics.median(x[0] for x in rows[c]) for c in caps}
    chosen = " / ".join("%g" % x[1] for x in rows["auto"])
    best = min(med[c] for c in caps if c != "auto")
    cells = " | ".join("%.2f" % med[c] + (" (chose %s)" % chosen if c == "auto" else "") for c in caps)
    print("| %s | %s | %+.1f %% |" % (name, cells, 100 * (med["auto"] / best - 1)))
PY
