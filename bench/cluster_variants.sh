#!/bin/sh
# cluster_variants.sh: baton against itself on the simulated cluster (tests/cluster/netns.sh: 2 nodes, tbf
# 1 Gbit/s per node): variants of settings or builds of the same all-reduce, in interleaved rounds, each
# variant's time per round and its median. Needs root. Run it under `flock /tmp/baton-bench.lock`.
#
#   sh bench/cluster_variants.sh [--rounds R] [--local L] [--size 64M] VARIANT...
#
# A VARIANT is one argument of space-separated words: NAME=VALUE words are set in the environment of that
# variant's ranks (e.g. "BATON_HIER_SEGMENT=512K", "BATON_ALGO=ring"), a word bin=PATH runs that baton
# binary instead of build/baton (e.g. a build of main), and "-" is the default. Each run: `netns.sh launch
# NAME -n L -- BIN bench allreduce -b SIZE -e SIZE -n 3 -w 1 --min-time 0` (f32 sum), its time the slowest
# rank's mean.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
rounds=3 local_n=2 size=64M
while [ $# -gt 0 ]; do
    case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --local) local_n=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "cluster_variants.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || { echo "cluster_variants.sh: name at least one variant (\"-\" for the default)" >&2; exit 2; }
for v in "$rounds" "$local_n"; do
    case "$v" in ''|*[!0-9]*|0) echo "cluster_variants.sh: --rounds and --local want positive integers, got '$v'" >&2; exit 2 ;; esac
done
[ "$(id -u)" = 0 ] || { echo "cluster_variants.sh: needs root (network namespaces)" >&2; exit 1; }
name="baton-var$$"
runs=$(mktemp /tmp/baton-variants.XXXXXX) || exit 1
cleanup() { sh tests/cluster/netns.sh down "$name" >/dev/null 2>&1; rm -f "$runs"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
sh tests/cluster/netns.sh up 2 --name "$name" >/dev/null || exit 1
echo "# cluster_variants: 2 nodes x $local_n ranks, 1gbit per node, $size f32 sum, $rounds rounds"
echo "# cpu $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores, OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE:-unset}"
echo "# load before $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
r=1
while [ "$r" -le "$rounds" ]; do
    i=0
    for v in "$@"; do
        i=$((i + 1))
        bin=build/baton envs=
        for w in $v; do
            case "$w" in -) ;; bin=*) bin=${w#bin=} ;; *=*) envs="$envs $w" ;;
                *) echo "cluster_variants.sh: '$w' in variant '$v' is neither NAME=VALUE nor bin=PATH" >&2; exit 2 ;;
            esac
        done
        [ -x "$bin" ] || { echo "cluster_variants.sh: no baton binary at '$bin'" >&2; exit 2; }
        out=$(env $envs BATON="$bin" timeout 300 sh tests/cluster/netns.sh launch "$name" -n "$local_n" -- "$bin" bench \
              allreduce -b "$size" -e "$size" -n 3 -w 1 --min-time 0 2>&1)
        if t=$(printf '%s\n' "$out" | awk '$1 ~ /^[0-9]+$/ && NF >= 9 { t = $6 } END { if (t == "") exit 1; printf "%.1f", t / 1000 }'); then
            echo "round $r [$v] $t ms"; echo "$i $t" >> "$runs"
        else
            echo "round $r [$v] FAILED"; printf '%s\n' "$out" | tail -5
        fi
    done
    r=$((r + 1))
done
echo "# load after $(cut -d' ' -f1-3 /proc/loadavg)"
i=0
for v in "$@"; do
    i=$((i + 1))
    awk -v i="$i" -v v="$v" '$1 == i { t[n++] = $2 } END {
        if (!n) { printf "%-50s %10s\n", v, "-"; exit }
        for (a = 0; a < n; a++) for (b = a + 1; b < n; b++) if (t[b] < t[a]) { x = t[a]; t[a] = t[b]; t[b] = x }
        printf "%-50s %10.1f ms median\n", v, n % 2 ? t[(n - 1) / 2] : (t[n / 2 - 1] + t[n / 2]) / 2 }' "$runs"
done
