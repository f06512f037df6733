#!/bin/sh
# bench/large_batch.sh: does a large batch lose accuracy, and does LAMB win it back? (issue 12, item 5)
# The Fashion-MNIST MLP (784-1024-1024-10) for EPOCHS epochs (default 5), one process (the global batch is what
# matters: 2 ranks x B/2 trains the same weights as 1 x B, tests/test_ddp_train.c), three ways:
#   batch 128,  SGD momentum 0.9, lr 0.05, 100 warmup steps          (the baseline)
#   batch 2048, SGD, lr 0.05 x 16 = 0.8 (linear scaling), 2 epochs (58 steps) of warmup (Goyal et al.)
#   batch 2048, LAMB lr LAMB_LR (default 0.015), weight decay 0.01, 15 warmup steps, cosine down to lr / 10
#   (the recipe of the sweep in docs/observe.md)
# A run that diverges is reported as such (baton train stops on a non-finite loss).
# Each writes its metrics (one evaluation per epoch); the test-accuracy curves go to docs/large_batch.svg and
# the final accuracies to stdout as a Markdown table.
# usage: nice -n 19 bench/large_batch.sh [EPOCHS] [THREADS]   (accuracy needs no lock; the wall times then
# say nothing about speed)
set -eu
EPOCHS=${1:-5}
THREADS=${2:-2}
LAMB_LR=${LAMB_LR:-0.015}
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
COMMON="--model mlp --data fashion-mnist --epochs $EPOCHS --threads $THREADS --json"
run() {   # NAME FLAGS
    /usr/bin/time -f "%e" -o "$TMP/$1.time" "$BUILD/baton" train $COMMON $2 --metrics "$TMP/$1.jsonl" \
        >"$TMP/$1.json" 2>"$TMP/$1.err" || { tail -n 1 "$TMP/$1.err" >&2; echo '{"diverged": true}' >"$TMP/$1.json"; }
}
run sgd128 "--batch 128 --optim sgd --lr 0.05 --warmup 100"
run sgd2048 "--batch 2048 --optim sgd --lr 0.8 --warmup 58"
run lamb2048 "--batch 2048 --optim lamb --lr $LAMB_LR --warmup 15 --min-lr $(/usr/bin/python3 -c "print($LAMB_LR / 10)")"
echo "$(lscpu | sed -n 's/^Model name: *//p'); load: $(uptime | sed 's/.*load average: //'); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}"
echo "| run | global batch | optimizer | lr | test accuracy after $EPOCHS epochs | wall s |"
echo "|---|---|---|---|---|---|"
for n in sgd128 sgd2048 lamb2048; do
    /usr/bin/python3 - "$TMP/$n.json" "$n" "$(tail -n 1 "$TMP/$n.time")" <<'PY'
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
if j.get("diverged"):
    print("| %s | - | - | - | diverged (non-finite loss) | %s |" % (sys.argv[2], sys.argv[3])); sys.exit(0)
print("| %s | %d | %s | %g | %.2f %% | %s |" % (sys.argv[2], j["effective_batch"], {"sgd128": "sgd", "sgd2048": "sgd (linear scaling)", "lamb2048": "lamb"}[sys.argv[2]], j["lr"], 100 * j["test_accuracy"], sys.argv[3]))
PY
done
/usr/bin/python3 bench/curves_svg.py docs/large_batch.svg "Fashion-MNIST MLP: test accuracy per epoch" \
    "batch 128 SGD=$TMP/sgd128.jsonl" "batch 2048 SGD+linear scaling=$TMP/sgd2048.jsonl" "batch 2048 LAMB=$TMP/lamb2048.jsonl"
echo "curves: docs/large_batch.svg"
