#!/bin/sh
# cluster_allreduce.sh: all-reduce across 2 simulated nodes (tests/cluster/netns.sh: network namespaces,
# tbf at --rate per node), baton against Open MPI on the same cluster, side by side in interleaved rounds;
# prints the median time of every contender and the model. Needs root.
#
#   flock /tmp/baton-bench.lock sh bench/cluster_allreduce.sh [--local L] [--rounds R] [--size BYTES]
#                                                             [--rate 1gbit] [--nodes M] [-n ITERS]
#                                                             [--only "baton_hier baton_ring ..."]
#
#   baton hier       baton's default across nodes (auto picks the pipelined hierarchical all-reduce)
#   baton ring       `--algo ring`: a flat ring over all M x L ranks (TCP between every neighbour pair)
#   ompi han         Open MPI, HAN forced: --mca coll_han_priority 100
#   ompi ring        Open MPI, tuned ring: --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4
#   ompi default     Open MPI's own choice
# Every Open MPI run has --mca mpi_yield_when_idle 1 (spinning ranks starve each other with more ranks than
# cores); mpirun runs in node 0 with a hostfile of the nodes' namespaces and starts each node's orted
# through tests/cluster/netns_agent.sh (its launch agent enters the node's namespace). f32 sum, out of place; each run: 1 warm-up, then -n 3 timed iterations; its time is
# the slowest rank's mean. Model: the node link carries 2(M-1)/M of the buffer (hier), 2(K-1)/K (flat ring
# over K ranks), at rate/8 bytes per second.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
BUILD=${BUILD:-build}
OUT=$ROOT/bench/out
NETNS=tests/cluster/netns.sh
local_n=2 rounds=3 size=64M rate=1gbit nodes=2 iters=3 only=
while [ $# -gt 0 ]; do
    case "$1" in
    --local) local_n=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cluster_allreduce.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for v in "$local_n" "$rounds" "$nodes" "$iters"; do
    case "$v" in ''|*[!0-9]*|0) echo "cluster_allreduce.sh: --local, --rounds, --nodes, -n want positive integers, got '$v'" >&2; exit 2 ;; esac
done
case "$rate" in *gbit) rate_bps=$((${rate%gbit} * 1000000000)) ;; *mbit) rate_bps=$((${rate%mbit} * 1000000)) ;;
    *) echo "cluster_allreduce.sh: --rate wants Ngbit or Nmbit, got '$rate'" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "cluster_allreduce.sh: needs root (network namespaces)" >&2; exit 1; }
command -v mpicc.openmpi >/dev/null || { echo "cluster_allreduce.sh: needs Open MPI (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 1; }
mkdir -p "$OUT"
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null || exit 1
mpicc.openmpi -O2 -o "$OUT/mpi_allreduce.openmpi" bench/mpi_allreduce.c -lm || exit 1

export BATON="$BUILD/baton" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
name="baton-sim$$"
hosts=$(mktemp /tmp/baton-cluster-hosts.XXXXXX)
runs=$(mktemp /tmp/baton-cluster-runs.XXXXXX)
cleanup() { sh $NETNS down "$name" >/dev/null 2>&1; rm -f "$hosts" "$runs"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
sh $NETNS up "$nodes" --rate "$rate" --name "$name" >/dev/null || exit 1
export BATON_CLUSTER="$name"
i=0
while [ $i -lt "$nodes" ]; do echo "$name-n$i slots=$local_n"; i=$((i + 1)); done > "$hosts"
TO=${BENCH_TIMEOUT:-600}

row_time() { awk '$1 ~ /^[0-9]+$/ && NF >= 9 { t = $6 } END { if (t == "") exit 1; printf "%.1f\n", t / 1000 }'; }

run_baton() { # extra args...
    timeout "$TO" sh $NETNS launch "$name" -n "$local_n" -- "$BUILD/baton" bench allreduce -b "$size" -e "$size" \
        -n "$iters" -w 1 --min-time 0 "$@" 2>&1
}
run_ompi() { # mca args...
    timeout "$TO" ip netns exec "$name-n0" mpirun.openmpi --allow-run-as-root --bind-to none --hostfile "$hosts" \
        -np $((nodes * local_n)) --mca plm_rsh_agent "$ROOT/tests/cluster/netns_agent.sh" \
        --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 --mca mpi_yield_when_idle 1 "$@" \
        "$OUT/mpi_allreduce.openmpi" -b "$size" -e "$size" -n "$iters" -w 1 2>&1
}

contenders="baton_hier baton_ring ompi_han ompi_ring ompi_default"
[ -n "$only" ] && contenders=$only
one() {
    case "$1" in
    baton_hier) run_baton ;;
    baton_ring) run_baton --algo ring ;;
    ompi_han) run_ompi --mca coll_han_priority 100 ;;
    ompi_ring) run_ompi --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4 ;;
    ompi_default) run_ompi ;;
    esac
}

echo "# cluster_allreduce: $nodes nodes x $local_n ranks, $rate per node, $size f32 sum, $rounds rounds, -n $iters"
echo "# cpu $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores, OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE:-unset}"
echo "# load before $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
r=1
while [ $r -le "$rounds" ]; do
    for c in $contenders; do
        out=$(one "$c")
        if t=$(printf '%s\n' "$out" | row_time); then
            echo "$c $t" >> "$runs"
            echo "round $r $c ${t} ms"
            # with BATON_LOG_LEVEL=debug: the time split of the last pipelined calls
            printf '%s\n' "$out" | grep 'hier allreduce:' | tail -4
        else
            echo "round $r $c FAILED"; printf '%s\n' "$out" | tail -5
        fi
    done
    r=$((r + 1))
done
echo "# load after $(cut -d' ' -f1-3 /proc/loadavg)"
bytes=$(echo "$size" | awk '{ n = $1 + 0; u = substr($1, length($1)); if (u == "K") n *= 1024; if (u == "M") n *= 1048576; if (u == "G") n *= 1073741824; print n }')
K=$((nodes * local_n))
printf '%-14s %10s %8s\n' contender median_ms vs_model
model_h=$(awk -v b="$bytes" -v m="$nodes" -v r="$rate_bps" 'BEGIN { printf "%.1f", 2 * (m - 1) / m * b / (r / 8) * 1000 }')
model_r=$(awk -v b="$bytes" -v k="$K" -v r="$rate_bps" 'BEGIN { printf "%.1f", 2 * (k - 1) / k * b / (r / 8) * 1000 }')
for c in $contenders; do
    awk -v c="$c" -v mh="$model_h" '$1 == c { t[n++] = $2 } END {
        if (!n) { printf "%-14s %10s\n", c, "-"; exit }
        for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (t[j] < t[i]) { x = t[i]; t[i] = t[j]; t[j] = x }
        med = n % 2 ? t[(n - 1) / 2] : (t[n / 2 - 1] + t[n / 2]) / 2
        printf "%-14s %10.1f %8.2f\n", c, med, med / mh }' "$runs"
done
printf '%-14s %10s\n' model_hier "$model_h"
printf '%-14s %10s\n' model_ring "$model_r"
awk '{ t[$1] = t[$1] " " $2 } END { for (c in t) print "# runs " c ":" t[c] }' "$runs" | sort
