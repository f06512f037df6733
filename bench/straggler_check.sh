#!/bin/sh
# bench/straggler_check.sh: the straggler floor of issue 12: with one rank slowed by 50 % (the debug knob
# BATON_TEST_SLOW_RANK=1 BATON_TEST_SLOW_PCT=50: rank 1 sleeps half of each step's compute) the diagnosis
# names rank 1 in every one of RUNS runs; with none slowed it names none in RUNS runs. 2 ranks, 1 thread each,
# an MLP 784-512-512-10 at batch 64 on synthetic data, STEPS steps, the two cases interleaved. Prints each
# run's ratio and how often the rank most often last to the all-reduces was last (docs/observe.md), then the
# floor met or MISSED. A run takes a few seconds on a quiet machine; BUDGET_S (270) stops starting new rounds
# (the rounds not run count as misses).
# usage: flock /tmp/baton-bench.lock bench/straggler_check.sh [RUNS (5)] [STEPS (60)] [BUDGET_S (270)]
set -eu
RUNS=${1:-5}
STEPS=${2:-60}
BUDGET=${3:-270}
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null
ARGS="--data synthetic --train-samples 8192 --hidden 512,512 --batch 64 --threads 1 --steps $STEPS --json"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
named_slow=0
named_none=0
start=$(date +%s)
done_runs=0
for r in $(seq 1 "$RUNS"); do
    if [ $(($(date +%s) - start)) -ge "$BUDGET" ]; then
        echo "budget of $BUDGET s spent: rounds $r to $RUNS not run"
        break
    fi
    for pct in 50 0; do
        line=$(BATON_TEST_SLOW_RANK=1 BATON_TEST_SLOW_PCT=$pct OPENBLAS_NUM_THREADS=1 "$BUILD/baton" run -n 2 -- \
            "$BUILD/baton" train $ARGS --metrics "$TMP/m.jsonl" 2>/dev/null | tail -n 1)
        got=$(printf '%s' "$line" | /usr/bin/python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print(j['straggler_rank'], round(j['straggler_ratio'], 3), round(j['straggler_last_pct'], 1))" 2>/dev/null || echo "failed")
        echo "run $r slowdown $pct %: straggler_rank ratio last_pct = $got"
        case "$pct:$got" in 50:"1 "*) named_slow=$((named_slow + 1)) ;; 0:"-1 "*) named_none=$((named_none + 1)) ;; esac
    done
    done_runs=$r
done
echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load: $(uptime | sed 's/.*load average: //'); $done_runs rounds in $(($(date +%s) - start)) s"
echo "rank 1 slowed 50 %: named in $named_slow of $RUNS runs; none slowed: none named in $named_none of $RUNS runs"
if [ "$named_slow" -eq "$RUNS" ] && [ "$named_none" -eq "$RUNS" ]; then verdict=met; else verdict=MISSED; fi
echo "floor (slowed rank named in every run, none named without a slowdown): $verdict"
