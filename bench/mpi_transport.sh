#!/bin/sh
# mpi_transport.sh: the two floors of issue 8 for the MPI transport, side by side, interleaved rounds, medians.
#
#   bench/mpi_transport.sh [ROUNDS] [cluster|local|both|small]
#
# cluster: a simulated cluster of 2 nodes x 2 ranks (tests/cluster/netns.sh, tbf 1 Gbit/s per node), f32 sum
#          all-reduce of 16 and 64 MiB: baton over tcp (`netns.sh launch`: one `baton run --nnodes 2` per
#          node) against baton over --transport mpi (mpirun.openmpi inside node 0, each node's orted started
#          in its namespace by a launch agent). Floor: mpi within 10 % of tcp.
# local:   one machine, 2 ranks, 4 B and 1 MiB: `mpirun.openmpi -np 2 baton bench allreduce` (Open MPI's
#          default placement, one core per rank; shared memory, as baton finds it under mpirun) and the same
#          with `--bind-to none` (baton then places the ranks itself, as under baton run) against
#          `baton run -n 2 baton bench allreduce`. Floor: within 10 %.
# small:   one machine, baton over --transport mpi against Open MPI's own MPI_Allreduce (bench/mpi_allreduce.c),
#          8 B to 16 MiB (factor 8), f32 sum, in 4 shapes: 2 ranks over Open MPI's shared memory, 2 over its TCP
#          (--mca btl self,tcp), 3 and 4 ranks (more ranks than cores on a 2-core machine); `--bind-to none`.
#          No floor: it shows what the transport's waits cost (docs/cluster.md, "The wait before the naps").
# Each round runs every configuration once, in alternating order; the table has each one's median time_us.
# Needs root (namespaces). Run it under `flock /tmp/baton-bench.lock`. Prints CPU, load, OPENBLAS_CORETYPE.
set -u
ROUNDS=${1:-5}
WHAT=${2:-both}
case $ROUNDS in ''|*[!0-9]*|0) echo "ROUNDS='$ROUNDS': expected a positive whole number" >&2; exit 2 ;; esac
case $WHAT in cluster|local|both|small) ;; *) echo "'$WHAT': expected cluster, local, both or small" >&2; exit 2 ;; esac
BUILD=${BUILD:-build}
B=$(cd "$(dirname "$0")/.." && pwd)
cd "$B"
BATON="$B/$BUILD/baton"
MPIRUN="mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none"
[ -x "$BATON" ] && [ -f "$BUILD/libbaton-mpi.so" ] || { echo "build first (make; needs libopenmpi-dev)" >&2; exit 2; }
dir=$(mktemp -d /tmp/baton-mpibench-XXXXXX) || exit 1
name=
cleanup() { [ -n "$name" ] && tests/cluster/netns.sh down "$name"; rm -rf "$dir"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load: $(uptime | sed 's/.*load average: //')"
echo "# OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} (same for every side)"

# time_us of the row of SIZE bytes in a bench output
pick() { awk -v s="$1" '$1 == s { print $6; exit }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "NA"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

if [ "$WHAT" = cluster ] || [ "$WHAT" = both ]; then
    name=$(tests/cluster/netns.sh up 2 --name "baton-mpib$$") || exit 1
    printf '%s-n0 slots=2\n%s-n1 slots=2\n' "$name" "$name" > "$dir/hosts"
    ARGS="allreduce -b 16M -e 64M -f 4 -n 5 -w 2"
    run_tcp() { BATON="$BATON" tests/cluster/netns.sh launch "$name" -n 2 -- "$BATON" bench $ARGS 2>&1; }
    run_mpi() {
        timeout 300 ip netns exec "$name-n0" $MPIRUN --hostfile "$dir/hosts" -np 4 --mca plm_rsh_agent "$B/tests/cluster/netns_agent.sh" \
            --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 ${MPI_EXTRA:-} "$BATON" bench $ARGS \
            --transport mpi 2>&1
    }
    echo "# cluster: 2 nodes x 2 ranks, tbf 1gbit; baton bench $ARGS; MPI_EXTRA='${MPI_EXTRA:-}'"
    r=1
    while [ "$r" -le "$ROUNDS" ]; do
        if [ $((r % 2)) = 1 ]; then order="tcp mpi"; else order="mpi tcp"; fi
        for side in $order; do
            out=$(run_$side)
            echo "$out" | grep -q "transport $side" || { echo "$side round $r failed:"; echo "$out"; }
            for s in 16777216 67108864; do echo "$out" | pick $s >> "$dir/c-$side-$s"; done
        done
        r=$((r + 1))
    done
    printf '%-10s %14s %14s %8s\n' size tcp_us mpi_us mpi/tcp
    for s in 16777216 67108864; do
        t=$(median < "$dir/c-tcp-$s"); m=$(median < "$dir/c-mpi-$s")
        printf '%-10s %14s %14s %8s\n' "$s" "$t" "$m" "$(awk -v a="$m" -v b="$t" 'BEGIN { printf "%.3f", a / b }')"
    done
    echo "# per round (us): tcp 64M: $(tr '\n' ' ' < "$dir/c-tcp-67108864"); mpi 64M: $(tr '\n' ' ' < "$dir/c-mpi-67108864")"
fi

if [ "$WHAT" = local ] || [ "$WHAT" = both ]; then
    echo "# local: 2 ranks on one machine, shared memory under both launchers"
    for s in 4 1048576; do
        A="allreduce -b $s -e $s -n 2000 -w 100 --min-time 0.5"
        r=1
        while [ "$r" -le "$ROUNDS" ]; do
            if [ $((r % 2)) = 1 ]; then order="run mpirun nobind"; else order="nobind mpirun run"; fi
            for side in $order; do
                case $side in
                run) out=$("$BATON" run -n 2 -- "$BATON" bench $A 2>&1) ;;
                mpirun) out=$(timeout 120 mpirun.openmpi --allow-run-as-root -np 2 "$BATON" bench $A 2>&1) ;;
                nobind) out=$(timeout 120 mpirun.openmpi --allow-run-as-root --bind-to none -np 2 "$BATON" bench $A 2>&1) ;;
                esac
                echo "$out" | grep -q "2 ranks, 1 node(s), transport shm" || { echo "$side: not one node over shm:"; echo "$out"; }
                echo "$out" | pick $s >> "$dir/l-$side-$s"
            done
            r=$((r + 1))
        done
    done
    printf '%-10s %12s %12s %8s %12s %8s\n' size run_us mpirun_us ratio nobind_us ratio
    for s in 4 1048576; do
        a=$(median < "$dir/l-run-$s"); m=$(median < "$dir/l-mpirun-$s"); nb=$(median < "$dir/l-nobind-$s")
        printf '%-10s %12s %12s %8s %12s %8s\n' "$s" "$a" "$m" "$(awk -v a="$m" -v b="$a" 'BEGIN { printf "%.3f", a / b }')" \
            "$nb" "$(awk -v a="$nb" -v b="$a" 'BEGIN { printf "%.3f", a / b }')"
        for side in run mpirun nobind; do echo "# per round (us) $s $side: $(tr '\n' ' ' < "$dir/l-$side-$s")"; done
    done
fi

if [ "$WHAT" = small ]; then
    mpicc.openmpi -O2 -o "$dir/mpi_allreduce" bench/mpi_allreduce.c -lm || exit 1
    SIZES="8 64 512 4096 32768 262144 2097152 16777216"
    SHAPES="2:shm 2:tcp 3:shm 4:shm"
    # size:us pairs of one run, from baton bench's CSV or mpi_allreduce's table
    pairs_baton() { awk -F, 'NR > 1 && $1 ~ /^[0-9]+$/ { printf "%s:%s ", $1, $6 }'; }
    pairs_ompi() { awk '$1 ~ /^[0-9]+$/ { printf "%s:%s ", $1, $6 }'; }
    r=1
    while [ "$r" -le "$ROUNDS" ]; do
        if [ $((r % 2)) = 1 ]; then order="baton ompi"; else order="ompi baton"; fi
        for shape in $SHAPES; do
            n=${shape%%:*}; btl=; [ "${shape#*:}" = tcp ] && btl="--mca btl self,tcp"
            for side in $order; do
                if [ $side = baton ]; then
                    out=$(timeout 300 $MPIRUN $btl -np "$n" "$BATON" bench allreduce --transport mpi -b 8 -e 16M -f 8 --csv 2>&1 | pairs_baton)
                else
                    out=$(timeout 300 $MPIRUN $btl -np "$n" "$dir/mpi_allreduce" -b 8 -e 16M -f 8 -n 20 -w 5 2>&1 | pairs_ompi)
                fi
                echo "# round $r $shape $side: ${out:-no result}"
                for p in $out; do echo "${p#*:}" >> "$dir/s-$shape-$side-${p%%:*}"; done
            done
        done
        r=$((r + 1))
    done
    printf '%-7s %10s %12s %12s %8s\n' ranks size baton_mpi_us openmpi_us ratio
    for shape in $SHAPES; do
        for s in $SIZES; do
            b=NA; o=NA
            [ -f "$dir/s-$shape-baton-$s" ] && b=$(median < "$dir/s-$shape-baton-$s")
            [ -f "$dir/s-$shape-ompi-$s" ] && o=$(median < "$dir/s-$shape-ompi-$s")
            printf '%-7s %10s %12s %12s %8s\n' "$shape" "$s" "$b" "$o" \
                "$(awk -v a="$b" -v b="$o" 'BEGIN { if (a == "NA" || b == "NA" || b == 0) print "NA"; else printf "%.2f", a / b }')"
        done
    done
fi
