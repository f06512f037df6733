#!/bin/sh
# cluster_train.sh: data-parallel `baton train` on 2 simulated nodes x 2 ranks (tests/cluster/netns.sh, tbf
# at --rate per node; gradients through the hierarchical all-reduce), against the same 4 ranks on one node
# (shared memory only). Reports samples/s and the time split of a step (the JSON summary's step_ms, comm_ms:
# all-reduce time, comm_exposed_ms: the part of it the step waited for) for f32 gradients with and without
# overlap and bf16 gradients; interleaved rounds, medians. Needs root and Fashion-MNIST.
#
#   flock /tmp/baton-bench.lock sh bench/cluster_train.sh [--rounds R] [--steps S] [--batch B] [--hidden LIST]
#                                                         [--rate 1gbit]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
BUILD=${BUILD:-build}
NETNS=tests/cluster/netns.sh
rounds=3 steps=30 batch=32 hidden=1024,1024 rate=1gbit
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --hidden) hidden=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cluster_train.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in "$rounds" "$steps" "$batch"; do
    case "$v" in ''|*[!0-9]*|0) echo "cluster_train.sh: --rounds, --steps, --batch want positive integers, got '$v'" >&2; exit 2 ;; esac
done
[ "$(id -u)" = 0 ] || { echo "cluster_train.sh: needs root (network namespaces)" >&2; exit 1; }
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null || exit 1
export BATON="$BUILD/baton" OPENBLAS_NUM_THREADS=1
name="baton-sim$$"
runs=$(mktemp /tmp/baton-cluster-train.XXXXXX)
cleanup() { sh $NETNS down "$name" >/dev/null 2>&1; rm -f "$runs"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
sh $NETNS up 2 --rate "$rate" --name "$name" >/dev/null || exit 1
TO=${BENCH_TIMEOUT:-900}
ARGS="--data fashion-mnist --hidden $hidden --steps $steps --batch $batch --schedule const --warmup 0 --threads 1 --json"

one() {
    case "$1" in
    2x2_f32_overlap) timeout "$TO" sh $NETNS launch "$name" -n 2 -- "$BUILD/baton" train $ARGS 2>&1 ;;
    2x2_f32_no_overlap) timeout "$TO" sh $NETNS launch "$name" -n 2 -- "$BUILD/baton" train $ARGS --no-overlap 2>&1 ;;
    2x2_bf16_overlap) timeout "$TO" sh $NETNS launch "$name" -n 2 -- "$BUILD/baton" train $ARGS --grad-dtype bf16 2>&1 ;;
    1x4_f32_overlap) timeout "$TO" "$BUILD/baton" run -n 4 -- "$BUILD/baton" train $ARGS 2>&1 ;;
    esac
}
field() { grep -o "\"$1\":[0-9.e+-]*" | head -1 | cut -d: -f2; }

configs="2x2_f32_overlap 2x2_f32_no_overlap 2x2_bf16_overlap 1x4_f32_overlap"
echo "# cluster_train: MLP 784-$hidden-10, Fashion-MNIST, batch $batch per rank, $steps steps, $rate per node, $rounds rounds"
echo "# cpu $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores, OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE:-unset}"
echo "# load before $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
r=1
while [ $r -le "$rounds" ]; do
    for c in $configs; do
        out=$(one "$c")
        j=$(printf '%s\n' "$out" | grep '^{"model"' | head -1)
        if [ -n "$j" ]; then
            sps=$(echo "$j" | field samples_per_sec); step=$(echo "$j" | field step_ms)
            comm=$(echo "$j" | field comm_ms); exposed=$(echo "$j" | field comm_exposed_ms)
            bytes=$(echo "$j" | field bytes_per_step)
            echo "$c $sps $step $comm $exposed $bytes" >> "$runs"
            echo "round $r $c: $sps samples/s, step $step ms, all-reduce $comm ms, exposed $exposed ms"
        else
            echo "round $r $c FAILED"; printf '%s\n' "$out" | tail -5
        fi
    done
    r=$((r + 1))
done
echo "# load after $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-20s %10s %9s %14s %12s %14s\n' config samples/s step_ms allreduce_ms exposed_ms bytes/step
for c in $configs; do
    awk -v c="$c" 'BEGIN { n = 0 } function med(a, n,   i, j, x) {
            for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
            return n % 2 ? a[(n - 1) / 2] : (a[n / 2 - 1] + a[n / 2]) / 2 }
        $1 == c { s[n] = $2; t[n] = $3; m[n] = $4; e[n] = $5; b = $6; n++ }
        END { if (!n) { printf "%-20s %10s\n", c, "-"; exit }
              printf "%-20s %10.0f %9.1f %14.1f %12.1f %14d\n", c, med(s, n), med(t, n), med(m, n), med(e, n), b }' "$runs"
done
