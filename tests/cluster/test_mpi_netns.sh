#!/bin/sh
# test_mpi_netns.sh: --transport mpi across simulated nodes (tests/cluster/netns.sh: network namespaces, veth
# pairs, tbf 1 Gbit/s). Open MPI's mpirun runs inside node 0 with a hostfile naming the nodes; its launch agent
# (tests/cluster/netns_agent.sh) starts each node's orted inside that node's namespace, under a host name of its
# own (a UTS namespace), so Open MPI and baton both see distinct machines; MPI's TCP traffic is held to the
# veth interface (btl_tcp_if_include, oob_tcp_if_include). Checks the topology baton finds (2 nodes x 2 ranks,
# transport mpi, no BATON_HOST_ID), the collective matrix across the nodes, and that a 64 MiB all-reduce
# really crosses node 0's rate-limited link (its tbf byte counter). Leaves nothing behind (trap).
BUILD=${BUILD:-build}
B=$(cd "$(dirname "$0")/../.." && pwd)
cd "$B"
passed=0; failed=0
check() { # name, status
    if [ "$2" = 0 ]; then echo "PASS $1"; passed=$((passed + 1)); else echo "FAIL $1"; failed=$((failed + 1)); fi
}
if [ ! -f "$BUILD/libbaton-mpi.so" ]; then
    echo "FAIL mpi_plugin_built ($BUILD/libbaton-mpi.so missing: apt-get install libopenmpi-dev; make)"
    echo "0 passed, 1 failed"; exit 1
fi
dir=$(mktemp -d /tmp/baton-mpins-XXXXXX) || exit 1
name=
cleanup() {
    [ -n "$name" ] && tests/cluster/netns.sh down "$name"
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! name=$(tests/cluster/netns.sh up 2 --name "baton-mpins$$"); then
    name=; echo "FAIL cluster_up"; echo "0 passed, 1 failed"; exit 1
fi
printf '%s-n0 slots=2\n%s-n1 slots=2\n' "$name" "$name" > "$dir/hosts"

# mpi_run TIMEOUT PROG ARGS...: 4 ranks, 2 per node, --transport mpi
mpi_run() {
    t=$1; shift
    timeout "$t" ip netns exec "$name-n0" mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none \
        --hostfile "$dir/hosts" -np 4 --mca plm_rsh_agent "$B/tests/cluster/netns_agent.sh" --mca btl_tcp_if_include eth0 \
        --mca oob_tcp_if_include eth0 -x BATON_TRANSPORT=mpi -x BATON_TIMEOUT=60 "$@" 2>&1
}

# 1. the topology: two machines to baton (host names), shared memory inside each, MPI between them
out=$(mpi_run 60 "$B/$BUILD/tests/prog_topo"); rc=$?
st=0; [ $rc = 0 ] || st=1
for r in 0 1 2 3; do
    echo "$out" | grep -q "topo: rank $r/4 local $((r % 2))/2 node $((r / 2))/2 transport mpi launcher openmpi sum OK" || st=1
done
[ $st = 0 ] || echo "$out"
check topology_2_nodes_x_2_ranks_transport_mpi $st

# 2. the collective matrix across the two nodes (hierarchical and flat)
out=$(mpi_run 200 "$B/$BUILD/tests/prog_coll" --algos auto,hier --counts 0,1,37W+1,70001 --dtypes f32,bf16 \
    --ops sum,avg); rc=$?
st=0; [ $rc = 0 ] && [ "$(echo "$out" | grep -c 'checks passed')" = 4 ] || st=1
[ $st = 0 ] || echo "$out"
check collective_matrix_2x2_across_namespaces $st

# 3. a 64 MiB all-reduce, every element checked, crosses node 0's rate-limited link: with 2 nodes each node
#    link carries 2(M-1)/M = 1 buffer per all-reduce (reduce-scatter half out, all-gather half out)
before=$(tests/cluster/netns.sh bytes "$name" 0)
out=$(mpi_run 200 "$B/$BUILD/baton" bench allreduce -b 64M -e 64M -n 1 -w 1 -c 1 --min-time 0); rc=$?
after=$(tests/cluster/netns.sh bytes "$name" 0)
st=0; [ $rc = 0 ] || st=1
echo "$out" | grep -q "^# baton bench allreduce: 4 ranks, 2 node(s), transport mpi" || st=1
echo "$out" | awk '$1 ~ /^[0-9]+$/ { rows++; if ($9 != 0) bad = 1 } END { exit !(rows == 1 && !bad) }' || st=1
sent=$((after - before))
# warm-up + timed + checked iteration: at least 3 all-reduces of 64 MiB left node 0 (plus headers)
[ "$sent" -ge $((3 * 64 * 1024 * 1024)) ] || st=1
[ $st = 0 ] || { echo "node 0 sent $sent bytes"; echo "$out"; }
check allreduce_64mib_crosses_the_node_link $st

echo "$passed passed, $failed failed"
[ $failed = 0 ]
