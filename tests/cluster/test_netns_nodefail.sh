#!/bin/sh
# test_netns_nodefail.sh: a node lost in the middle of a multi-node job (2 simulated nodes x 1 rank, a long
# all-reduce loop). The launchers beat a heartbeat into node 0's store (tools/run_alive.c); with
# BATON_NODE_TIMEOUT=3 every surviving launcher must stop within seconds, say which node was lost, exit non-zero
# and leave no process behind, where before node 0's launcher waited up to 600 s for the lost node to report
# done, and a node cut off from node 0 waited out the store's 300 s I/O timeout. The collective timeout is left
# at 300 s, so it is not what stops anybody.
#   1. node 1's launcher is SIGKILLed (its worker dies with it): node 0's launcher stops waiting for it;
#   2. node 1's link goes down (a partition: nothing answers, no reset): both launchers stop, node 0 naming
#      node 1 and node 1 naming the store it lost;
#   3. no false alarm: a job of about 4 s with BATON_NODE_TIMEOUT=1 succeeds on both nodes;
#   4. a node whose workers are done may leave (its launcher stopped in its wait at the end) while node 0's
#      worker works on alone: node 0 finishes, exit 0.
# Needs root; the cluster is torn down whatever happens (trap), which also kills anything left in it.
. "$(dirname "$0")/netns_lib.sh"
fixture nodefail
export BATON_TIMEOUT=300 BATON_FLIGHT_DIR="$out"   # the failing ranks' flight records stay in $out
LIMIT=40   # seconds a surviving launcher may take to stop (3 s of silence, plus start-up on a loaded machine)

# node_launch NODE PORT ARGS...: node NODE's launcher in the background (2 nodes x 1 rank); its exit code lands in
# $out/rcNODE
node_launch() {
    node=$1 port=$2
    shift 2
    rm -f "$out/rc$node"
    (BATON_SECRET=$secret timeout -k 5 300 ip netns exec "$name-n$node" "$BATON" run --nnodes 2 --node-rank "$node" \
        --rdzv "10.200.0.1:$port" -n 1 -- "$@" >"$out/n$node" 2>&1; echo $? >"$out/rc$node") &
}
# the launcher of node NODE (a `baton run` process inside the node's namespace)
launcher_of() { for p in $(ip netns pids "$name-n$1"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "^$BATON run " && echo "$p"; done | head -1; }
# wait_joined: until both ranks joined (the info line), at most 60 s; 1 if they did not
wait_joined() { i=0; while [ $i -lt 600 ]; do
    [ "$(cat "$out/n0" "$out/n1" | grep -c 'joined: rank')" -ge 2 ] && return 0; sleep 0.1; i=$((i + 1)); done; return 1; }
# reaped NODE LIMIT: waits at most LIMIT s for node NODE's launcher; prints its exit code, or "running"
reaped() { i=0; while [ $i -lt $(($2 * 10)) ]; do
    [ -s "$out/rc$1" ] && { cat "$out/rc$1"; return; }; sleep 0.1; i=$((i + 1)); done; echo running; }
# launch_both PORT ARGS...: a fresh secret, both nodes' launchers running ARGS
launch_both() {
    port=$1
    shift
    secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
    node_launch 0 "$port" "$@"
    node_launch 1 "$port" "$@"
}
# start_job PORT: both nodes running LOOP; 1 if the ranks did not join
start_job() { launch_both "$1" $LOOP; wait_joined && sleep 1; }
LOOP="$BATON bench allreduce -b 256K -e 256K -w 1 -n 100000000 --min-time 3000"

sh $NETNS up 2 --name "$name" >/dev/null || { echo "FAIL netns_cluster_up"; echo "0 passed, 1 failed"; exit 1; }
export BATON_LOG_LEVEL=info BATON_NODE_TIMEOUT=3

# 1. node 1's launcher killed
st=1
if start_job 29531; then
    kill -9 "$(launcher_of 1)"
    t0=$(date +%s)
    rc0=$(reaped 0 $LIMIT)
    t1=$(date +%s)
    grep -q "not waiting for the other nodes any more: node 1's launcher has not been heard from" "$out/n0" &&
        [ "$rc0" != running ] && [ "$rc0" != 0 ] && [ -z "$(ip netns pids "$name-n0")" ] && st=0
    echo "    launcher killed: node 0's launcher exit ${rc0}, $((t1 - t0)) s after"
else
    echo "    the ranks did not join"
fi
[ $st = 0 ] || { tail -n 5 "$out/n0"; pkill -f "rdzv 10.200.0.1:2953"; }
check node_launcher_killed_node0_stops_waiting_names_it $st
wait 2>/dev/null

# 2. node 1's link down
st=1
if start_job 29532; then
    ip -n "$name-n1" link set dev eth0 down   # netns.sh names every node's veth end eth0
    t0=$(date +%s)
    rc0=$(reaped 0 $LIMIT)
    rc1=$(reaped 1 10)
    t1=$(date +%s)
    grep -q "node 1's launcher has not been heard from" "$out/n0" && grep -q "lost the rendezvous store" "$out/n1" &&
        [ "$rc0" != running ] && [ "$rc0" != 0 ] && [ "$rc1" != running ] && [ "$rc1" != 0 ] &&
        [ -z "$(ip netns pids "$name-n0")$(ip netns pids "$name-n1")" ] && st=0
    echo "    link down: launchers exit ${rc0} and ${rc1}, $((t1 - t0)) s after"
else
    echo "    the ranks did not join"
fi
[ $st = 0 ] || { tail -n 3 "$out/n0" "$out/n1"; pkill -f "rdzv 10.200.0.1:2953"; }
check node_link_down_both_launchers_stop_within_seconds $st
wait 2>/dev/null

# 3. no false alarm with a 1 s timeout
sh $NETNS down "$name" >/dev/null 2>&1   # a fresh cluster: node 1's link is down since case 2
sh $NETNS up 2 --name "$name" >/dev/null || { echo "FAIL netns_cluster_up"; echo "$passed passed, $((failed + 1)) failed"; exit 1; }
BATON_NODE_TIMEOUT=1 timeout -k 5 120 sh $NETNS launch "$name" -n 1 --port 29533 -- "$BATON" bench allreduce \
    -b 64K -e 64K -w 1 -n 1 --min-time 4 >"$out/ok" 2>&1
rc=$?
st=1
[ $rc = 0 ] && grep -q '^ *65536 ' "$out/ok" && ! grep -q 'not been heard from\|lost the rendezvous store' "$out/ok" && st=0
echo "    4 s job, BATON_NODE_TIMEOUT=1: exit $rc"
[ $st = 0 ] || tail -n 5 "$out/ok"
check short_node_timeout_no_false_alarm_in_a_4s_job $st

# 4. a node whose workers are done may leave: node 1's worker exits at once and its launcher is stopped (SIGTERM) in
# its wait at the end, while node 0's worker works on alone for 8 s (as a rank 0 that saves or evaluates last):
# node 0 must not take node 1's silence for a loss
launch_both 29534 sh -c 'if [ "$BATON_NODE_RANK" = 0 ]; then sleep 8; fi'
rc1=$(reaped 1 3)
[ "$rc1" = running ] && kill -TERM "$(launcher_of 1)" 2>/dev/null
rc0=$(reaped 0 $LIMIT)
rc1=$(reaped 1 10)
st=1
[ "$rc0" = 0 ] && ! grep -q 'not been heard from' "$out/n0" && st=0
echo "    node 1 done and gone, node 0 at work for 8 s: launchers exit $rc0 and $rc1"
[ $st = 0 ] || tail -n 3 "$out/n0" "$out/n1"
check node_done_and_gone_is_not_lost_while_node0_works_on $st

echo "$passed passed, $failed failed"
[ $failed = 0 ]
