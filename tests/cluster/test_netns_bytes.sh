#!/bin/sh
# test_netns_bytes.sh: the bytes each simulated node's link carries for an all-reduce (the node's tbf qdisc
# counter, tests/cluster/netns.sh bytes) against the model: 2(M-1)/M of the buffer per node link for the
# hierarchical all-reduce over M nodes, 2(K-1)/K for a flat ring over K ranks (ring order = rank order, so
# one rank per node sends across). 2 nodes x 2 ranks and 3 nodes x 2 ranks. Each case runs `baton bench`
# at 16 MiB twice, with 1 and with 5 iterations; the difference in each node's counter over 4 x 16 MiB is
# the measured share, free of start-up and bookkeeping traffic. The counters count whole frames (Ethernet,
# IP and TCP headers, and the ACKs of the traffic coming in), about 4-7 % over the payload: the share
# must lie in [model, 1.10 x model]. Needs root; the clusters are torn down whatever happens (trap).
. "$(dirname "$0")/netns_lib.sh"
name=
cleanup() { [ -n "$name" ] && sh $NETNS down "$name" >/dev/null 2>&1; name=; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
export BATON_TIMEOUT=60
BYTES=$((16 << 20))

counters() { # nodes -> "b0 b1 ..."
    i=0 s=
    while [ $i -lt "$1" ]; do s="$s $(sh $NETNS bytes "$name" $i)"; i=$((i + 1)); done
    echo $s
}

run_bench() { # algo, iterations, port
    timeout -k 5 120 sh $NETNS launch "$name" -n 2 --port "$3" -- "$BUILD/baton" bench allreduce \
        -b $BYTES -e $BYTES -n "$2" -w 0 --min-time 0 --algo "$1" >/dev/null 2>&1
}

# case: nodes, algo, model numerator, model denominator
measure() {
    nodes=$1 algo=$2 num=$3 den=$4
    b0=$(counters "$nodes")
    run_bench "$algo" 1 29511 || { echo "bench ($algo, 1 iteration) failed"; return 1; }
    b1=$(counters "$nodes")
    run_bench "$algo" 5 29512 || { echo "bench ($algo, 5 iterations) failed"; return 1; }
    b2=$(counters "$nodes")
    echo "$b0|$b1|$b2" | awk -F'|' -v nodes="$nodes" -v bytes=$BYTES -v num="$num" -v den="$den" -v algo="$algo" '{
        split($1, a, " "); split($2, b, " "); split($3, c, " ");
        model = num / den; bad = 0;
        for (i = 1; i <= nodes; i++) {
            share = ((c[i] - b[i]) - (b[i] - a[i])) / (4 * bytes);
            printf "%dx2 %s node %d: %.3f of the buffer per all-reduce (model %.3f, ratio %.3f)\n",
                   nodes, algo, i - 1, share, model, share / model;
            if (share < model || share > 1.10 * model) bad = 1;
        }
        exit bad }'
}

for nodes in 2 3; do
    name="baton-sim$$"
    if ! sh $NETNS up $nodes --name "$name" >/dev/null; then
        check "netns_cluster_up_$nodes" 1; continue
    fi
    K=$((2 * nodes))
    measure $nodes hier $((2 * (nodes - 1))) $nodes; check "bytes_per_node_link_${nodes}x2_hier_match_2(M-1)/M" $?
    measure $nodes ring $((2 * (K - 1))) $K; check "bytes_per_node_link_${nodes}x2_ring_match_2(K-1)/K" $?
    cleanup
done
trap - EXIT
ip netns list 2>/dev/null | grep -q "^baton-sim$$-" && { echo "FAIL namespaces_left_behind"; failed=$((failed + 1)); }
echo "$passed passed, $failed failed"
[ $failed = 0 ]
