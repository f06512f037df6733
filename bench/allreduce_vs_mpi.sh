#!/bin/sh
# allreduce_vs_mpi.sh: baton's all-reduce beside Open MPI and MPICH (shared memory, 2 local ranks) and
# beside Gloo (TCP on loopback, 2 ranks), f32 sum, out of place, the same sizes, iteration counts and
# timing rule for every library. Installs what it needs (Debian packages) when missing, builds its own
# harnesses into bench/out/, repeats everything R times and prints the medians as two tables with the
# ratio of baton to the faster peer, the floors from the issue, and a memcpy figure as the ceiling.
#
#   bench/allreduce_vs_mpi.sh                       # everything: 8 B..256 MiB (shm), 4 B..64 MiB (tcp), R=3
#   bench/allreduce_vs_mpi.sh -r 5 -n 20 -w 5 -e 64M
#   bench/allreduce_vs_mpi.sh --peers-only          # only the MPI / Gloo harnesses (no baton rows)
#   bench/allreduce_vs_mpi.sh --no-tcp | --no-shm
#
# Options: -b MIN -e MAX (shm sizes, default 8 and 256M), --tcp-b MIN --tcp-e MAX (default 4 and 64M),
# -f FACTOR (2), -n ITERS (20), -w WARMUP (5), -r REPEATS (3), --peers-only, --no-tcp, --no-shm,
# --ranks N (2: ranks of every run; more ranks than cores share them, e.g. --ranks 3 --no-tcp; the issue's
# floors are scored for 2 ranks only).
# Raw outputs: bench/out/runs/; the tables also go to bench/out/allreduce_vs_mpi.md.
# Every harness times the same way as `baton bench`: -w warm-up iterations, then up to 3 rounds of
# (barrier, time `iters` iterations, slowest rank's time), the first with -n iterations, the next sized to
# fill 22 ms when a round took less than 20 ms; time_us is the slowest rank's mean over the last round.
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=$ROOT/bench/out
BUILD=${BUILD:-build}

minb=8 maxb=256M tminb=4 tmaxb=64M factor=2 iters=20 warmup=5 reps=3
peers_only=0 do_tcp=1 do_shm=1 ranks=2
while [ $# -gt 0 ]; do
    case "$1" in
    -b) minb=$2; shift 2 ;;
    -e) maxb=$2; shift 2 ;;
    --tcp-b) tminb=$2; shift 2 ;;
    --tcp-e) tmaxb=$2; shift 2 ;;
    -f) factor=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    --peers-only) peers_only=1; shift ;;
    --no-tcp) do_tcp=0; shift ;;
    --no-shm) do_shm=0; shift ;;
    --ranks) ranks=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "allreduce_vs_mpi.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$reps" in ''|*[!0-9]*|0) echo "allreduce_vs_mpi.sh: -r wants a positive integer, got '$reps'" >&2; exit 2 ;; esac
case "$ranks" in ''|*[!0-9]*) ok=0 ;; *) ok=$((ranks >= 2 && ranks <= 64)) ;; esac
[ "$ok" = 1 ] || { echo "allreduce_vs_mpi.sh: --ranks wants a whole number from 2 to 64, got '$ranks'" >&2; exit 2; }

# ---- packages -------------------------------------------------------------------------------------------
PKGS="openmpi-bin libopenmpi-dev mpich libmpich-dev libgloo-dev g++ gcc make python3"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "allreduce_vs_mpi.sh: missing Debian packages:$missing; install them as root (apt-get install$missing)" >&2
        exit 1
    fi
    echo "installing:$missing"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi

# ---- builds ---------------------------------------------------------------------------------------------
mkdir -p "$OUT/runs"
if [ "$peers_only" = 0 ]; then make --no-print-directory BUILD="$BUILD" "$BUILD/baton" "$BUILD/libbaton.a" >/dev/null; fi
[ -f "$BUILD/libbaton.a" ] || make --no-print-directory BUILD="$BUILD" "$BUILD/libbaton.a" >/dev/null
mpicc.openmpi -O2 -o "$OUT/mpi_allreduce.openmpi" bench/mpi_allreduce.c -lm
mpicc.mpich -O2 -o "$OUT/mpi_allreduce.mpich" bench/mpi_allreduce.c -lm
g++ -std=c++17 -O2 -o "$OUT/gloo_allreduce" bench/gloo_allreduce.cc -lgloo -pthread
cc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -o "$OUT/reduce_bench" bench/reduce_bench.c "$BUILD/libbaton.a" -lm -lrt -pthread

# ---- runners --------------------------------------------------------------------------------------------
TO=${BENCH_TIMEOUT:-1800}   # seconds per run
ARGS_SHM="-b $minb -e $maxb -f $factor -n $iters -w $warmup"
ARGS_TCP="-b $tminb -e $tmaxb -f $factor -n $iters -w $warmup"
ompi_root=""
[ "$(id -u)" = 0 ] && ompi_root="--allow-run-as-root"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

run_openmpi() { timeout "$TO" mpirun.openmpi $ompi_root --oversubscribe -np "$ranks" "$OUT/mpi_allreduce.openmpi" $ARGS_SHM; }
run_mpich() { timeout "$TO" mpirun.mpich -launcher fork -np "$ranks" "$OUT/mpi_allreduce.mpich" $ARGS_SHM; }
run_baton_shm() { timeout "$TO" "$BUILD/baton" run -n "$ranks" -- "$BUILD/baton" bench allreduce $ARGS_SHM; }
run_baton_tcp() { timeout "$TO" "$BUILD/baton" run -n "$ranks" -- "$BUILD/baton" bench allreduce --transport tcp $ARGS_TCP; }
run_gloo() {  # $1: ring | chunked; ranks 1.. in the background, rank 0 prints
    d=$(mktemp -d "${TMPDIR:-/tmp}/gloo_store.XXXXXX")
    pids=""
    for k in $(seq 1 $((ranks - 1))); do
        RANK=$k WORLD_SIZE=$ranks GLOO_STORE=$d timeout "$TO" "$OUT/gloo_allreduce" $ARGS_TCP --algo "$1" >/dev/null &
        pids="$pids $!"
    done
    rc=0
    RANK=0 WORLD_SIZE=$ranks GLOO_STORE=$d timeout "$TO" "$OUT/gloo_allreduce" $ARGS_TCP --algo "$1" || rc=$?
    for p in $pids; do wait "$p" || rc=$?; done
    rm -rf "$d"
    return $rc
}
run_gloo_ring() { run_gloo ring; }
run_gloo_chunked() { run_gloo chunked; }

shm_runs="openmpi mpich"
tcp_runs="gloo_ring gloo_chunked"
if [ "$peers_only" = 0 ]; then shm_runs="$shm_runs baton_shm"; tcp_runs="$tcp_runs baton_tcp"; fi
[ "$do_shm" = 1 ] || shm_runs=""
[ "$do_tcp" = 1 ] || tcp_runs=""

stamp=$(date -u +%Y-%m-%dT%H:%M:%SZ)
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
{
    echo "date $stamp"
    echo "cpu $cpu"
    echo "nproc $(nproc)"
    echo "OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE:-unset}"
    echo "load_before $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "args_shm $ARGS_SHM"
    echo "args_tcp $ARGS_TCP"
    echo "reps $reps"
    echo "ranks $ranks"
} >"$OUT/runs/meta.txt"

rm -f "$OUT"/runs/*.out "$OUT"/runs/*.err
for rep in $(seq 1 "$reps"); do
    for r in $shm_runs $tcp_runs; do
        echo "run $rep/$reps: $r" >&2
        if ! "run_$r" >"$OUT/runs/$r.$rep.out" 2>"$OUT/runs/$r.$rep.err"; then
            echo "allreduce_vs_mpi.sh: $r (repeat $rep) failed; see $OUT/runs/$r.$rep.err" >&2
            tail -n 5 "$OUT/runs/$r.$rep.err" >&2
        fi
    done
    # memcpy ceiling: one core, 64 MiB buffers, median of passes
    "$OUT/reduce_bench" -m -s 64M -t 0.5 | awk '$2 == "memcpy" {print $8, $9}' >"$OUT/runs/memcpy.$rep.out"
done
echo "load_after $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/runs/meta.txt"

python3 - "$OUT/runs" "$reps" "$shm_runs" "$tcp_runs" <<'PY' | tee "$OUT/allreduce_vs_mpi.md"
import statistics, sys
runs_dir, reps, shm_runs, tcp_runs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()

def load(name):
    """size -> list of time_us over the repeats (rows whose first field is a number)."""
    t = {}
    for rep in range(1, reps + 1):
        try:
            lines = open(f"{runs_dir}/{name}.{rep}.out").read().splitlines()
        except OSError:
            continue
        for line in lines:
            f = line.replace(",", " ").split()
            if len(f) >= 9 and f[0].isdigit():
                if f[8] not in ("0", "N/A"):  # N/A: baton bench without -c checks nothing
                    print(f"WARNING: {name} repeat {rep} size {f[0]}: {f[8]} wrong elements")
                t.setdefault(int(f[0]), []).append(float(f[5]))
    return t

meta = dict(l.split(" ", 1) for l in open(f"{runs_dir}/meta.txt").read().splitlines() if " " in l)
ranks = int(meta.get("ranks", "2"))
scored = ranks == 2  # the issue's floors are for 2 ranks

def busbw(size, us):  # busbw = algbw x 2(n-1)/n
    return size / (us * 1e-6) / 1e9 * (2 * (ranks - 1) / ranks) if us > 0 else 0.0

def human(b):
    for unit, s in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= s and b % s == 0:
            return f"{b // s}{unit}"
    return str(b)

mc = []
for rep in range(1, reps + 1):
    try:
        mc += [float(open(f"{runs_dir}/memcpy.{rep}.out").read().split()[0])]
    except (OSError, IndexError, ValueError):
        pass
print(f"machine: {meta.get('cpu')}, nproc {meta.get('nproc')}, OPENBLAS_CORETYPE={meta.get('OPENBLAS_CORETYPE')}")
print(f"date: {meta.get('date')}; load average before {meta.get('load_before')}, after {meta.get('load_after')}")
print(f"medians of {reps} repeats; f32 sum, out of place, {ranks} ranks; busbw = algbw x 2(n-1)/n")
if mc:
    print(f"memcpy ceiling (one core, 64 MiB, bytes copied per second): {statistics.median(mc):.2f} GB/s")
print()

def table(title, names, labels, floors):
    data = {n: load(n) for n in names}
    data = {n: d for n, d in data.items() if d}
    if not data:
        return
    sizes = sorted(set().union(*[set(d) for d in data.values()]))
    peers = [n for n in data if not n.startswith("baton")]
    mine = [n for n in data if n.startswith("baton")]
    print(f"### {title}")
    print()
    hdr = ["size"] + [f"{labels[n]} us" for n in data] + [f"{labels[n]} busbw GB/s" for n in data]
    if mine:
        hdr += ["baton/best peer busbw", "baton/best peer time"] + (["floor"] if scored else [])
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for s in sizes:
        med = {n: statistics.median(d[s]) for n, d in data.items() if s in d}
        row = [human(s)] + [f"{med[n]:.2f}" if n in med else "-" for n in data]
        row += [f"{busbw(s, med[n]):.3f}" if n in med else "-" for n in data]
        if mine:
            b = med.get(mine[0])
            pt = [med[n] for n in peers if n in med]
            if b and pt:
                best = min(pt)
                ratio_bw, ratio_t = best / b, b / best
                row += [f"{ratio_bw:.2f}x", f"{ratio_t:.2f}x"] + ([floors(s, b, best)] if scored else [])
            else:
                row += ["-", "-"] + (["-"] if scored else [])
        print("| " + " | ".join(row) + " |")
    print()

def shm_floor(size, t_baton, t_best):
    if size in (64 << 20, 256 << 20):
        return "PASS (>= 2x busbw)" if t_best / t_baton >= 2 else "FAIL (< 2x busbw)"
    if size == 16 << 20:
        return "PASS (>= 1.3x busbw)" if t_best / t_baton >= 1.3 else "FAIL (< 1.3x busbw)"
    if size <= 1024:
        return "PASS (time <= 1.5x)" if t_baton <= 1.5 * t_best else "FAIL (time > 1.5x)"
    return ""

def tcp_floor(size, t_baton, t_best):
    if size == 4:
        return "PASS (<= 30 us)" if t_baton <= 30 else "FAIL (> 30 us)"
    if size == 64 << 20:
        return "PASS (>= 1.3x busbw)" if t_best / t_baton >= 1.3 else "FAIL (< 1.3x busbw)"
    return ""

labels = {"openmpi": "Open MPI", "mpich": "MPICH", "baton_shm": "baton", "gloo_ring": "Gloo ring",
          "gloo_chunked": "Gloo ring-chunked", "baton_tcp": "baton tcp"}
table(f"Shared memory, {ranks} local ranks: baton vs Open MPI and MPICH", shm_runs, labels, shm_floor)
table(f"TCP loopback, {ranks} ranks: baton --transport tcp vs Gloo", tcp_runs, labels, tcp_floor)
PY
