#!/bin/sh
# nodefail.sh MODE: 2 nodes x 2 ranks, a long all-reduce loop; then MODE: kill (SIGKILL one rank of node 1),
# stop (SIGSTOP one rank of node 1), linkdown (node 1's veth down), launcher (SIGKILL node 1's launcher)
cd /work/main
MODE=$1; SZ=${SZ:-1048576}
name=$(tests/cluster/netns.sh up 2) || exit 1
out=/work/quiet/s32/nodefail.$MODE.out
BATON_TIMEOUT=${TO:-15} BATON_LOG_LEVEL=info timeout ${LT:-120} tests/cluster/netns.sh launch $name -n 2 -- build/baton bench allreduce -b $SZ -e $SZ -w 1 -n 100000000 --min-time 3000 ${ALGO:+--algo $ALGO} >$out 2>&1 &
L=$!
i=0; while [ $i -lt 60 ]; do [ "$(grep -c 'joined:' $out)" -ge 4 ] && break; sleep 1; i=$((i+1)); done
sleep 3
ns1pids=$(ip netns pids $name-n1)
ranks=$(for p in $ns1pids; do tr '\0' ' ' </proc/$p/cmdline | grep -q '^build/baton bench' && echo $p; done)
victim=$(echo $ranks | awk '{print $NF}')
launcher1=$(for p in $ns1pids; do tr '\0' ' ' </proc/$p/cmdline | grep -q '^build/baton run' && echo $p; done)
t0=$(date +%s.%N)
case $MODE in
kill) kill -9 $victim ;;
stop) kill -STOP $victim ;;
launcher) kill -9 $launcher1 ;;
linkdown) ip -n $name-n1 link set dev $(ip -n $name-n1 -o link | awk -F': ' '$2 !~ /^lo/ {sub(/@.*/, "", $2); print $2; exit}') down ;;
esac
echo "$MODE at $(date +%T) (victim $victim, launcher1 $launcher1)"
wait $L; rc=$?
echo "launch rc=$rc after $(echo "$(date +%s.%N) - $t0" | bc) s"
sleep 1
echo "left in namespaces: $(ip netns pids $name-n0 | wc -l) $(ip netns pids $name-n1 | wc -l)"
tests/cluster/netns.sh down $name
grep -v 'joined\|flight recorder' $out | cut -c1-400 | head -30
