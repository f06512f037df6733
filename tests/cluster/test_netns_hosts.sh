#!/bin/sh
# test_netns_hosts.sh: node 0's name maps to loopback in node 0's own /etc/hosts (the entry Debian's installer
# writes for the machine's own name, 127.0.1.1) and to its address on the other node: the usual
# `--rdzv $(hostname):PORT` or MASTER_ADDR=<first host of the allocation> set-up. Before, node 0's store listened
# on 127.0.1.1 only (the other nodes never reached it) and node 0's ranks published 127.0.0.1 for TCP; now the
# store listens on every interface and those ranks publish the address the other nodes reached the store at.
#   1. `baton run` on 2 nodes x 2 ranks, --rdzv node0:PORT on both: all-reduces checked element by element;
#   2. torchrun's variables by hand (MASTER_ADDR=node0: rank 0 hosts the store), 2 nodes x 1 rank: the same.
# Needs root; the cluster and the nodes' /etc/netns files go away whatever happens (trap; netns.sh gc/down).
. "$(dirname "$0")/netns_lib.sh"
fixture hosts
sh $NETNS up 2 --name "$name" >/dev/null && sh $NETNS hosts "$name" 0 "127.0.1.1 node0" &&
    sh $NETNS hosts "$name" 1 "10.200.0.1 node0" || { echo "FAIL netns_cluster_up"; echo "0 passed, 1 failed"; exit 1; }
secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
BENCH="$BATON bench allreduce -b 1K -e 256K -f 16 -w 1 -n 2 -c 1"

# rows_ok FILE: the three sizes measured, none with a wrong element (the last column)
rows_ok() { [ "$(awk '$1 ~ /^[0-9]+$/ && NF >= 9 && $NF == 0' "$1" | wc -l)" -ge 3 ] &&
    [ "$(awk '$1 ~ /^[0-9]+$/ && NF >= 9 && $NF != 0' "$1" | wc -l)" = 0 ]; }

# 1. baton run with node 0 named by its host name
for n in 0 1; do
    (BATON_LOG_LEVEL=info BATON_SECRET=$secret BATON_RDZV_TIMEOUT=20 timeout -k 5 60 ip netns exec "$name-n$n" \
        "$BATON" run --nnodes 2 --node-rank $n --rdzv node0:29541 -n 2 -- $BENCH >"$out/a$n" 2>&1
     echo $? >"$out/rca$n") &
done
wait
st=1
[ "$(cat "$out/rca0")" = 0 ] && [ "$(cat "$out/rca1")" = 0 ] && rows_ok "$out/a0" &&
    grep -q "4 ranks, 2 node(s), transport tcp" "$out/a0" &&
    grep -q "store: 'node0' resolves to loopback only on this machine" "$out/a0" &&
    grep -q "publishing 10.200.0.1, where the other nodes reach this machine" "$out/a0" && st=0
echo "    baton run --rdzv node0: launchers exit $(cat "$out/rca0") and $(cat "$out/rca1")"
[ $st = 0 ] || tail -n 4 "$out/a0" "$out/a1"
check baton_run_with_node0_named_by_a_loopback_host_name $st

# 2. torchrun's variables, rank 0 hosting the store at MASTER_ADDR=node0
for n in 0 1; do
    (RANK=$n WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=$n MASTER_ADDR=node0 MASTER_PORT=29542 \
        BATON_SECRET=$secret BATON_JOIN_TIMEOUT=20 BATON_LOG_LEVEL=info timeout -k 5 60 \
        ip netns exec "$name-n$n" $BENCH >"$out/b$n" 2>&1
     echo $? >"$out/rcb$n") &
done
wait
st=1
[ "$(cat "$out/rcb0")" = 0 ] && [ "$(cat "$out/rcb1")" = 0 ] && rows_ok "$out/b0" &&
    grep -q "2 ranks, 2 node(s), transport tcp" "$out/b0" && st=0
echo "    MASTER_ADDR=node0: ranks exit $(cat "$out/rcb0") and $(cat "$out/rcb1")"
[ $st = 0 ] || tail -n 4 "$out/b0" "$out/b1"
check master_addr_naming_node0_by_a_loopback_host_name $st

echo "$passed passed, $failed failed"
[ $failed = 0 ]
