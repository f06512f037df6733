#!/bin/sh
# startup.sh: how long the smallest job takes, start to finish, and how init grows with the job (issue 8,
# startup floor). Interleaved rounds, medians:
#   baton   `baton run -n 2 startup_baton`: launcher + baton_init + one 4-byte all-reduce (checked) + exit
#   launch  `baton run -n 2 /bin/true`: the launcher alone
#   mpich   `mpiexec.mpich -n 2 startup_mpi.mpich`: MPI_Init + one 4-byte MPI_Allreduce + MPI_Finalize
#   openmpi `mpirun.openmpi -np 2 startup_mpi.openmpi`: the same under Open MPI
# then, with --sizes "16 64 256", baton_init's time at each job size (from every rank's `joined` line: the
# slowest rank's init and its split into store, rendezvous, shm, tcp, barrier, cma) and the wall time of the
# whole `baton run -n N startup_baton`.
#
#   bench/startup.sh                    # 21 rounds, then 16 64 256 ranks (3 rounds each)
#   bench/startup.sh -r 31 --sizes ""   # only the 2-rank comparison
# Output: the tables on stdout and in bench/out/startup.md, raw times in bench/out/startup_*.txt,
# and bench/out/startup_init.svg (init time against ranks) when --svg FILE is not given.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=bench/out
rounds=21 sizes="16 64 256" size_rounds=3 svg=$OUT/startup_init.svg
while [ $# -gt 0 ]; do
    case "$1" in
    -r) rounds=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --size-rounds) size_rounds=$2; shift 2 ;;
    --svg) svg=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "startup.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$rounds" in ''|*[!0-9]*|0) echo "startup.sh: -r wants a positive integer, got '$rounds'" >&2; exit 2 ;; esac
mkdir -p "$OUT"
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" "$BUILD/libbaton.a" >/dev/null
LIBS=$(sed -n 's/^EXE_LDLIBS *:= *//p' Makefile)   # linked as build/baton is (static libsodium and zlib)
cc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -o "$OUT/startup_baton" bench/startup_baton.c "$BUILD/libbaton.a" $LIBS -pthread
have_mpich=0 have_ompi=0
command -v mpicc.mpich >/dev/null && mpicc.mpich -O2 -o "$OUT/startup_mpi.mpich" bench/startup_mpi.c && have_mpich=1
command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$OUT/startup_mpi.openmpi" bench/startup_mpi.c && have_ompi=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ompi_root=""; [ "$(id -u)" = 0 ] && ompi_root="--allow-run-as-root"

cc -std=c11 -O2 -D_GNU_SOURCE -o "$OUT/walltime" bench/walltime.c
ms() { # CMD...: runs it, prints its wall time in ms (fails the script when CMD fails); walltime spawns it
    "$OUT/walltime" "$@" || { echo "startup.sh: failed: $*" >&2; exit 1; }
}
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "# startup: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)," \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}, $rounds interleaved rounds"
for k in baton launch mpich openmpi; do : >"$OUT/startup_$k.txt"; done
i=0
while [ $i -lt "$rounds" ]; do
    ms "$BUILD/baton" run -n 2 -- "$OUT/startup_baton" >>"$OUT/startup_baton.txt"
    ms "$BUILD/baton" run -n 2 -- /bin/true >>"$OUT/startup_launch.txt"
    [ $have_mpich = 1 ] && ms mpiexec.mpich -n 2 "$OUT/startup_mpi.mpich" >>"$OUT/startup_mpich.txt"
    [ $have_ompi = 1 ] && ms mpirun.openmpi $ompi_root --oversubscribe -np 2 "$OUT/startup_mpi.openmpi" >>"$OUT/startup_openmpi.txt"
    i=$((i + 1))
done
{
    echo "| 2 ranks, start to exit | median ms | min ms |"
    echo "|---|---:|---:|"
    for k in baton launch mpich openmpi; do
        [ -s "$OUT/startup_$k.txt" ] || continue
        case $k in
        baton) what='`baton run -n 2` + init + 4-byte all-reduce' ;;
        launch) what='`baton run -n 2 /bin/true` (launcher alone)' ;;
        mpich) what='`mpiexec.mpich -n 2` + MPI_Init + MPI_Allreduce' ;;
        openmpi) what='`mpirun.openmpi -np 2` + MPI_Init + MPI_Allreduce' ;;
        esac
        echo "| $what | $(median <"$OUT/startup_$k.txt") | $(sort -n "$OUT/startup_$k.txt" | head -1) |"
    done
} | tee "$OUT/startup.md"

[ -n "$sizes" ] || exit 0
echo
: >"$OUT/startup_sizes.txt"
: >"$OUT/startup_sizes_raw.txt"
{
    echo "| ranks | wall ms (median) | init ms, slowest rank | store | rendezvous | shm | tcp | barrier | cma |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for n in $sizes; do
        : >"$OUT/startup_n$n.txt"
        j=0
        while [ $j -lt "$size_rounds" ]; do
            t0=$(date +%s%N)
            BATON_LOG_LEVEL=info "$BUILD/baton" run -n "$n" -- "$OUT/startup_baton" >"$OUT/startup_n$n.log" 2>&1 ||
                { echo "startup.sh: $n ranks failed" >&2; tail -3 "$OUT/startup_n$n.log" >&2; exit 1; }
            t1=$(date +%s%N)
            # the slowest rank's init line: "init T ms (store a, rendezvous b, shm c, tcp d, barrier e, cma f)"
            sed -n 's/.*; init \([0-9.]*\) ms (store \([0-9.]*\), rendezvous \([0-9.]*\), shm \([0-9.]*\), tcp \([0-9.]*\), barrier \([0-9.]*\), cma \([0-9.]*\)).*/\1 \2 \3 \4 \5 \6 \7/p' \
                "$OUT/startup_n$n.log" | sort -n | tail -1 | awk -v w=$(( (t1 - t0) / 1000000 )) '{ print w, $0 }' >>"$OUT/startup_n$n.txt"
            j=$((j + 1))
        done
        # the round with the median wall time
        sort -n "$OUT/startup_n$n.txt" | awk -v n="$n" '{ a[NR] = $0 } END { print n, a[int((NR + 1) / 2)] }' \
            >>"$OUT/startup_sizes_raw.txt"
        sort -n "$OUT/startup_n$n.txt" | awk -v n="$n" '{ a[NR] = $0 } END { split(a[int((NR + 1) / 2)], f, " ");
            printf "| %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", n, f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8] }' |
            tee -a "$OUT/startup_sizes.txt"
    done
} | tee -a "$OUT/startup.md"

# the plot: init (slowest rank) and wall time against ranks
awk -v svg="$svg" '
    { n[NR] = $1; w[NR] = $2; it[NR] = $3; if ($2 > m) m = $2 }
    END {
        W = 560; H = 320; L = 70; B = 50; T = 30; R = 20
        print "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" W "\" height=\"" H "\" font-family=\"sans-serif\" font-size=\"12\">" > svg
        print "<text x=\"" L "\" y=\"18\">baton: time to init vs ranks (one node, 2 cores, oversubscribed)</text>" > svg
        print "<line x1=\"" L "\" y1=\"" H - B "\" x2=\"" W - R "\" y2=\"" H - B "\" stroke=\"black\"/>" > svg
        print "<line x1=\"" L "\" y1=\"" T "\" x2=\"" L "\" y2=\"" H - B "\" stroke=\"black\"/>" > svg
        if (m <= 0) m = 1
        for (k = 0; k <= 4; k++) { y = H - B - k * (H - B - T) / 4; printf "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.0f ms</text>\n", L - 4, y + 4, m * k / 4 > svg }
        for (i = 1; i <= NR; i++) {
            x[i] = L + (i - 0.5) * (W - L - R) / NR
            printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%d ranks</text>\n", x[i], H - B + 18, n[i] > svg
            yw = H - B - w[i] * (H - B - T) / m; yi = H - B - it[i] * (H - B - T) / m
            printf "<rect x=\"%d\" y=\"%d\" width=\"24\" height=\"%d\" fill=\"#9ab\"/>\n", x[i] - 26, yw, H - B - yw > svg
            printf "<rect x=\"%d\" y=\"%d\" width=\"24\" height=\"%d\" fill=\"#357\"/>\n", x[i] + 2, yi, H - B - yi > svg
            printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">%d</text>\n", x[i] - 14, yw - 3, w[i] > svg
            printf "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\">%d</text>\n", x[i] + 14, yi - 3, it[i] > svg
        }
        print "<rect x=\"" W - 200 "\" y=\"" T "\" width=\"10\" height=\"10\" fill=\"#9ab\"/><text x=\"" W - 185 "\" y=\"" T + 9 "\">baton run wall time</text>" > svg
        print "<rect x=\"" W - 200 "\" y=\"" T + 16 "\" width=\"10\" height=\"10\" fill=\"#357\"/><text x=\"" W - 185 "\" y=\"" T + 25 "\">baton_init, slowest rank</text>" > svg
        print "</svg>" > svg
    }' "$OUT/startup_sizes_raw.txt"
echo "plot: $svg"
