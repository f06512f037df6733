#!/bin/sh
# Debian's own-name trap: node0 is 127.0.1.1 in node 0's /etc/hosts, 10.200.0.1 in node 1's
cd /work/main
name=baton-simh$$; B=${B:-$PWD/build/baton}; mkdir -p ${O:-/tmp}
sh tests/cluster/netns.sh up 2 --name $name >/dev/null || exit 1
trap 'sh tests/cluster/netns.sh down $name >/dev/null 2>&1' EXIT   # down also removes the nodes' /etc/netns files
sh tests/cluster/netns.sh hosts $name 0 "127.0.1.1 node0"
sh tests/cluster/netns.sh hosts $name 1 "10.200.0.1 node0"
S=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
for n in 0 1; do
(BATON_LOG_LEVEL=info BATON_SECRET=$S BATON_RDZV_TIMEOUT=8 timeout 30 ip netns exec $name-n$n $B run --nnodes 2 --node-rank $n --rdzv node0:29600 -n 2 -- $B bench allreduce -b 1K -e 64K -f 8 -n 2 -w 1 > ${O:-/tmp}/H$n 2>&1; echo rc$n=$? >> ${O:-/tmp}/H$n) &
done
wait; grep -v "^ *[0-9]" ${O:-/tmp}/H0 | tail -n 8; tail -n 3 ${O:-/tmp}/H1
