cd /work/main
name=baton-simg$$
sh tests/cluster/netns.sh up 2 --name $name >/dev/null || exit 1
trap 'sh tests/cluster/netns.sh down $name >/dev/null 2>&1' EXIT
sh tests/cluster/netns.sh hosts $name 0 "127.0.1.1 node0"; sh tests/cluster/netns.sh hosts $name 1 "10.200.0.1 node0"
for n in 0 1; do
 (RANK=$n WORLD_SIZE=2 MASTER_ADDR=${MA:-node0} MASTER_PORT=29650 timeout 40 ip netns exec $name-n$n /usr/bin/python3 docs/measurements/2026-11-27h/gloo.py > ${O:-/tmp}/g$n 2>&1; echo rc=$? >> ${O:-/tmp}/g$n) &
done
wait; tail -n 3 ${O:-/tmp}/g0 ${O:-/tmp}/g1
