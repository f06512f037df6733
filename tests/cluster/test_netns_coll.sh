#!/bin/sh
# test_netns_coll.sh: the all-reduce matrix across 2 simulated nodes x 2 ranks (tests/cluster/netns.sh:
# network namespaces, 1 Gbit/s tbf per node), over TCP between the nodes and shared memory inside them.
# Both `--algo hier` (pipelined hierarchical, src/comm/hier.c) and `--algo ring` (flat ring over the 4 ranks)
# run every dtype and op, in and out of place, uneven counts (1, 13, 1000, 70001: under and over the
# pipelined path's threshold, 262145: one f32 segment and one element, 1,000,003), every element checked
# against a brute-force reference (tests/prog_coll.c); auto picks hier; a collective that disagrees across
# the nodes fails on every rank instead of hanging; nodes of 2 and 1 ranks work too. Needs root. Every step has a hard timeout, and the
# cluster is torn down whatever happens (trap), so `ip netns list` is left as it was.
. "$(dirname "$0")/netns_lib.sh"
name="baton-sim$$"
outf=
cleanup() { sh $NETNS down "$name" >/dev/null 2>&1; [ -n "$outf" ] && rm -f "$outf"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
if ! sh $NETNS up 2 --name "$name" >/dev/null; then
    echo "FAIL netns_cluster_up"; echo "0 passed, 1 failed"; exit 1
fi
# A hung collective fails the test within BATON_TIMEOUT instead of the outer timeout.
export BATON_TIMEOUT=30

launch() { # port, timeout, prog args...
    port=$1 t=$2
    shift 2
    timeout -k 5 "$t" sh $NETNS launch "$name" -n 2 --port "$port" -- "$@" 2>&1
}

matrix() { # algo, port
    out=$(launch "$2" 240 "$BUILD/tests/prog_coll" --algos "$1" --colls allreduce \
        --counts 1,13,1000,70001,262145,1000003 --dtypes f32,f64,f16,bf16,i32,i64 --ops sum,avg,min,max,prod)
    rc=$?
    st=0
    [ $rc = 0 ] || st=1
    [ "$(echo "$out" | grep -c 'checks passed')" = 4 ] || st=1
    [ $st = 0 ] || { echo "exit $rc"; echo "$out" | tail -20; }
    return $st
}

# 1-2. the matrix, hierarchical and flat ring
matrix hier 29501; check allreduce_matrix_2x2_hier_every_dtype_op_place_count $?
matrix ring 29502; check allreduce_matrix_2x2_ring_every_dtype_op_place_count $?

# 3. auto across nodes is the hierarchical algorithm, small and large
out=$(launch 29503 120 "$BUILD/tests/prog_coll" --algos auto --expect-algo hier --colls allreduce \
    --counts 1,70001,1000003 --dtypes f32,bf16 --ops sum); rc=$?
st=0; [ $rc = 0 ] && [ "$(echo "$out" | grep -c 'checks passed')" = 4 ] || st=1
[ $st = 0 ] || { echo "exit $rc"; echo "$out" | tail -20; }
check auto_across_2_nodes_is_hier $st

# 4. a count or op that differs on rank 1 (node 0) fails on every rank, across the nodes too, in the
#    pipelined path (300000 f32: 5 segments); nobody hangs.
for kind in count op; do
    out=$(BATON_TIMEOUT=10 launch 29504 90 "$BUILD/tests/prog_mismatch" "$kind" 300000); rc=$?
    st=0
    [ "$(echo "$out" | grep -c 'rank [0-3]: error:')" = 4 ] || st=1
    echo "$out" | grep -q 'no error' && st=1
    echo "$out" | grep -q 'mismatch' || st=1
    [ $st = 0 ] || { echo "exit $rc"; echo "$out" | tail -20; }
    check "hier_${kind}_mismatch_fails_on_every_rank" $st
done

# 5. nodes with different numbers of ranks (2 + 1, started by hand with torchrun's variables; baton run
#    gives every node as many): hier takes the leaders' path, every element still checked
secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
outf=$(mktemp /tmp/baton-netns-coll.XXXXXX)
for r in 0 1 2; do
    node=0 lr=$r lws=2
    [ $r = 2 ] && node=1 lr=0 lws=1
    ip netns exec "$name-n$node" env WORLD_SIZE=3 RANK=$r LOCAL_RANK=$lr LOCAL_WORLD_SIZE=$lws GROUP_RANK=$node \
        MASTER_ADDR=10.200.0.1 MASTER_PORT=29505 BATON_SECRET="$secret" timeout -k 5 120 \
        "$BUILD/tests/prog_coll" --algos hier,auto --expect-algo hier --colls allreduce --counts 1,70001,1000003 \
        --dtypes f32,bf16,i32 --ops sum,avg,max >> "$outf" 2>&1 &
done
wait
st=0; [ "$(grep -c 'checks passed' "$outf")" = 3 ] || { st=1; tail -20 "$outf"; }
rm -f "$outf"; outf=
check allreduce_uneven_nodes_2_plus_1_hier $st

cleanup
trap - EXIT
ip netns list 2>/dev/null | grep -q "^$name-" && { echo "FAIL namespaces_left_behind"; failed=$((failed + 1)); }
echo "$passed passed, $failed failed"
[ $failed = 0 ]
