#!/bin/sh
# bench/torch_dp.sh: baton for PyTorch users, side by side (issue 10's floors).
#  1. examples/torch_mnist.py (MLP 784-1024-1024-10, Fashion-MNIST, per-rank batch 128, SGD momentum 0.9,
#     2 workers x 1 thread, under `baton run -n 2`) four ways, interleaved run by run, REPS runs each:
#       no communication (--alone: the ceiling) | PyTorch DDP over gloo | PyTorch DDP over the "baton"
#       backend | baton.torch DistributedOptimizer
#     floors: each baton way >= 1.4 x DDP over gloo (samples/s, medians). The ceiling is the same 2 processes
#     (same binding, one CPU each on 2 cores) training with no communication at all: if it is below 1.4 x
#     gloo, no backend can meet the floor on this machine, and the script says so. Each way is also
#     printed as a fraction of the ceiling.
#  2. all-reduce (sum, in place) of a torch tensor through baton.torch (bench/torch_allreduce.py) against
#     `baton bench allreduce --inplace` at the same size, interleaved: 64 MiB within 10 %; 4 bytes
#     at most 3 us over the C call.
# usage: bench/torch_dp.sh [REPS (default 5)] [STEPS per training run (default 300)]
# Environment: OPENBLAS_CORETYPE applies to every side (unset = autodetect); BUILD (default build);
# BASE=DIR: also runs the two baton ways from another built checkout DIR (its DIR/build), interleaved in
# the same rounds, to measure a change against the code before it. WITH_ENV="VAR=value ...": also runs the two
# baton ways with those variables set, interleaved in the same rounds (e.g. WITH_ENV=BATON_CMA=0: DDP's
# buckets through the staged shared-memory path instead of process_vm_readv until they are attached;
# WITH_ENV=BATON_TORCH_ATTACH_MIN=off: DDP's buckets never attached, i.e. the backend before zero-copy
# buckets; WITH_ENV=BATON_TORCH_INLINE=off: DDP's last bucket asynchronous too, the backend before it ran
# that one inline; WITH_ENV=BATON_TORCH_INLINE=on: every all-reduce inline; WITH_ENV=BATON_COMM_WAIT=yield: the
# comm thread yields before it naps while it waits for a peer, the way before naps; docs/python.md).
set -eu
REPS=${1:-5}
STEPS=${2:-300}
cd "$(dirname "$0")/.."
. bench/torch_env.sh   # PY, BUILD built, PYTHONPATH, TMP (removed at exit) and TMPDIR
median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }
train() {   # extra flags -> samples/s
    timeout 600 "$BUILD/baton" run -n 2 -- "$PY" examples/torch_mnist.py --steps "$STEPS" --warmup 20 --json "$@" \
        2>/dev/null | sed -n 's/.*"samples_per_sec": \([0-9.e+]*\).*/\1/p' | tail -n 1
}
train_base() {   # the same from $BASE
    (cd "$BASE" && PYTHONPATH="$BASE/build/python" timeout 600 build/baton run -n 2 -- "$PY" examples/torch_mnist.py --steps "$STEPS" --warmup 20 --json "$@" \
        2>/dev/null | sed -n 's/.*"samples_per_sec": \([0-9.e+]*\).*/\1/p' | tail -n 1)
}
echo "$(lscpu | sed -n 's/^Model name: *//p'); $(nproc --all) cores; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}; $(uptime | sed 's/.*load/load/')"
echo "$REPS runs x $STEPS steps (20 warm-up); per-rank batch 128; 2 workers x 1 thread"
# One run of each way per round, the order rotated by one way each round: a run's place in the round
# matters (the same DistributedOptimizer runs were faster in the later WITH_ENV place in 5 of 6 rounds,
# 2026-11-26), so every way takes every place in turn instead of gloo always running second.
run_way() {
    case $1 in
    alone) train --alone ;; gloo) train --ddp gloo ;; ddp_baton) train --ddp baton ;; hvd) train ;;
    env_ddp) (export $WITH_ENV && train --ddp baton) ;; env_hvd) (export $WITH_ENV && train) ;;
    base_ddp) train_base --ddp baton ;; base_hvd) train_base ;;
    esac
}
WAYS="alone gloo ddp_baton hvd${WITH_ENV:+ env_ddp env_hvd}${BASE:+ base_ddp base_hvd}"
NWAYS=$(echo $WAYS | wc -w)
for r in $(seq 1 "$REPS"); do
    # rotated by one way each round, and reversed every second round: rotation alone keeps the cyclic order, so
    # a WITH_ENV way would run after its default way in every round of a short run
    order=$(echo $WAYS | awk -v k=$(( (r - 1) % NWAYS )) -v rev=$(( r % 2 == 0 )) '{
        for (i = 0; i < NF; i++) o[i] = $((i + k) % NF + 1)
        for (i = 0; i < NF; i++) printf "%s ", rev ? o[NF - 1 - i] : o[i] }')
    for w in $order; do run_way "$w" >> "$TMP/$w"; done
    printf 'run %d (%s): alone %s ddp-gloo %s ddp-baton %s hvd %s\n' "$r" "$(echo $order)" "$(tail -n1 "$TMP/alone")" \
        "$(tail -n1 "$TMP/gloo")" "$(tail -n1 "$TMP/ddp_baton")" "$(tail -n1 "$TMP/hvd")" >&2
    [ -z "${WITH_ENV:-}" ] || printf 'run %d, %s: ddp-baton %s hvd %s\n' "$r" "$WITH_ENV" "$(tail -n1 "$TMP/env_ddp")" \
        "$(tail -n1 "$TMP/env_hvd")" >&2
    [ -z "${BASE:-}" ] || printf 'run %d, BASE: ddp-baton %s hvd %s\n' "$r" "$(tail -n1 "$TMP/base_ddp")" \
        "$(tail -n1 "$TMP/base_hvd")" >&2
done
a=$(median < "$TMP/alone"); g=$(median < "$TMP/gloo"); d=$(median < "$TMP/ddp_baton"); h=$(median < "$TMP/hvd")
awk -v a="$a" -v g="$g" -v d="$d" -v h="$h" 'BEGIN {
    printf "| training (2 workers x 1 thread) | samples/s (median) | vs DDP over gloo | of the ceiling |\n| --- | --- | --- | --- |\n"
    printf "| no communication (the ceiling) | %.0f | %.2fx | 100 %% |\n", a, a / g
    printf "| PyTorch DDP, gloo | %.0f | 1.00x | %.0f %% |\n", g, 100 * g / a
    printf "| PyTorch DDP, baton backend | %.0f | %.2fx (floor 1.4x: %s) | %.0f %% |\n", d, d / g, (d >= 1.4 * g ? "met" : "MISSED"), 100 * d / a
    printf "| baton.torch DistributedOptimizer | %.0f | %.2fx (floor 1.4x: %s) | %.0f %% |\n", h, h / g, (h >= 1.4 * g ? "met" : "MISSED"), 100 * h / a
    if (a < 1.4 * g)
        printf "the ceiling is %.2fx gloo: below 1.4x, so no backend can meet the floor on this machine in this run\n", a / g
    else
        printf "the ceiling is %.2fx gloo: a way reaching %.0f %% of it meets the floor\n", a / g, 100 * 1.4 * g / a
}'
if [ -n "${WITH_ENV:-}" ]; then
    ed=$(median < "$TMP/env_ddp"); eh=$(median < "$TMP/env_hvd")
    awk -v g="$g" -v a="$a" -v d="$ed" -v h="$eh" -v e="$WITH_ENV" 'BEGIN {
        printf "| %s: PyTorch DDP, baton backend | %.0f | %.2fx | %.0f %% |\n", e, d, d / g, 100 * d / a
        printf "| %s: baton.torch DistributedOptimizer | %.0f | %.2fx | %.0f %% |\n", e, h, h / g, 100 * h / a
    }'
fi
if [ -n "${BASE:-}" ]; then
    bd=$(median < "$TMP/base_ddp"); bh=$(median < "$TMP/base_hvd")
    awk -v g="$g" -v d="$bd" -v h="$bh" 'BEGIN {
        printf "| BASE: PyTorch DDP, baton backend | %.0f | %.2fx |\n", d, d / g
        printf "| BASE: baton.torch DistributedOptimizer | %.0f | %.2fx |\n", h, h / g
    }'
fi
for r in $(seq 1 "$REPS"); do
    timeout 120 "$BUILD/baton" run -n 2 -- "$BUILD/baton" bench allreduce -b 4 -e 4 --inplace --csv | tail -n 1 | cut -d, -f6 >> "$TMP/c4"
    timeout 120 "$BUILD/baton" run -n 2 -- "$BUILD/baton" bench allreduce -b 64M -e 64M --inplace --csv | tail -n 1 | cut -d, -f6 >> "$TMP/c64"
    timeout 120 "$BUILD/baton" run -n 2 -- "$PY" bench/torch_allreduce.py 4 67108864 > "$TMP/py"
    sed -n 's/^4 //p' "$TMP/py" >> "$TMP/p4"
    sed -n 's/^67108864 //p' "$TMP/py" >> "$TMP/p64"
    printf 'run %d: C 4 B %s us, Python 4 B %s us, C 64 MiB %s us, Python 64 MiB %s us\n' "$r" "$(tail -n1 "$TMP/c4")" \
        "$(tail -n1 "$TMP/p4")" "$(tail -n1 "$TMP/c64")" "$(tail -n1 "$TMP/p64")" >&2
done
c4=$(median < "$TMP/c4"); p4=$(median < "$TMP/p4"); c64=$(median < "$TMP/c64"); p64=$(median < "$TMP/p64")
awk -v c4="$c4" -v p4="$p4" -v c64="$c64" -v p64="$p64" 'BEGIN {
    printf "\n| all-reduce, 2 ranks, in place | baton bench (C) us | baton.torch us | difference |\n| --- | --- | --- | --- |\n"
    printf "| 4 bytes | %.2f | %.2f | +%.2f us (ceiling 3 us: %s) |\n", c4, p4, p4 - c4, (p4 - c4 <= 3 ? "met" : "MISSED")
    printf "| 64 MiB | %.0f | %.0f | %+.1f %% (ceiling 10 %%: %s) |\n", c64, p64, (p64 / c64 - 1) * 100, (p64 <= 1.1 * c64 ? "met" : "MISSED")
}'
