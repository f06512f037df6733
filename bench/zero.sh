#!/bin/sh
# bench/zero.sh: ZeRO against plain data parallelism on the wide MLP of issue 14 (784-4096x4-10, about 54 M
# parameters, AdamW: 16 bytes per parameter of state without ZeRO), 2 workers, 1 thread each, synthetic data.
# Interleaved plain / --zero 1 / --zero 2, REPS runs each; medians of step_ms, and per rank: optimizer bytes,
# gradient bytes (kept + staging) and peak RSS (rank 0, from getrusage); then what `baton plan memory`
# predicts for each stage against what the run reports. Run it under flock /tmp/baton-bench.lock.
#
# usage: bench/zero.sh [REPS (default 3)] [STEPS (default 10)]
set -eu
REPS=${1:-3}
STEPS=${2:-10}
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null
TMP=$(mktemp -d)
export TMPDIR="$TMP"   # the runs' metrics land here, removed at exit
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM HUP
ARGS="--data synthetic --train-samples 4096 --hidden 4096,4096,4096,4096 --optim adamw --batch 16 --threads 1 \
--steps $STEPS --warmup 0 --json"
one() {   # STAGE
    OPENBLAS_NUM_THREADS=1 "$BUILD/baton" run -n 2 -- "$BUILD/baton" train $ARGS --zero "$1" 2>/dev/null | tail -n 1 |
        /usr/bin/python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print(j['step_ms'], j['optim_bytes'], \
j['grad_bytes'], j['peak_rss_bytes'], j['params'], j['param_bytes'])" >> "$TMP/z$1"
}
for r in $(seq 1 "$REPS"); do
    for z in 0 1 2; do one "$z"; done
done
echo "$(lscpu | sed -n 's/^Model name: *//p'); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg);" \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}; 2 workers; $ARGS; medians of $REPS interleaved runs"
echo "| ZeRO | step_ms | vs plain | optimizer MiB/rank | gradients MiB/rank | peak RSS MiB (rank 0) | RSS saved MiB |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
P=$(head -n 1 "$TMP/z0" | cut -d' ' -f5)
for z in 0 1 2; do
    "$BUILD/baton" plan memory --params "$P" --ranks 2 --zero $z --largest-param 16777216 --json |
        /usr/bin/python3 -c "import json,sys; j=json.load(sys.stdin); print(j['params_bytes'], j['grads_bytes'], j['optimizer_bytes'])" \
        > "$TMP/p$z"
done
/usr/bin/python3 - "$TMP" <<'PY'
import statistics as S, sys
med = {}
for z in range(3):
    rows = [list(map(float, l.split())) for l in open("%s/z%d" % (sys.argv[1], z))]
    med[z] = [S.median(c) for c in zip(*rows)]
    med[z].append([r[0] for r in rows])
M = 1048576.0
for z in range(3):
    step, opt, grad, rss, _, par, runs = med[z]
    print("| %d | %.0f (runs: %s) | %+.1f %% | %.1f | %.1f | %.0f | %.0f |" % (z, step, " ".join("%.0f" % x for x in runs),
          100 * (step / med[0][0] - 1), opt / M, grad / M, rss / M, (med[0][3] - rss) / M))
print()
print("| ZeRO | plan: params / gradients / optimizer MiB | run: params / gradients / optimizer MiB | worst plan error |")
print("| --- | --- | --- | --- |")
for z in range(3):
    plan = list(map(float, open("%s/p%d" % (sys.argv[1], z)).read().split()))
    run = [med[z][5], med[z][2], med[z][1]]
    err = max(abs(p - r) / r for p, r in zip(plan, run))
    print("| %d | %s | %s | %.2f %% |" % (z, " / ".join("%.1f" % (x / M) for x in plan), " / ".join("%.1f" % (x / M) for x in run), 100 * err))
PY
