#!/bin/sh
# 2 simulated nodes with 3 ranks and 1 rank (an uneven Slurm-like placement), torchrun's variables by hand,
# MASTER_ADDR = node 0's address: every algorithm of the all-reduce, checked element by element (prog_coll).
cd /work/main
B=${B:-$PWD/build}
name=baton-simu$$
sh tests/cluster/netns.sh up 2 --name $name >/dev/null || exit 1
trap 'sh tests/cluster/netns.sh down $name >/dev/null 2>&1' EXIT
S=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
O=${O:-/tmp/uneven-out}; mkdir -p $O
for r in 0 1 2 3; do
  if [ $r -lt 3 ]; then node=0; lr=$r; ls=3; else node=1; lr=0; ls=1; fi
  (RANK=$r WORLD_SIZE=4 LOCAL_RANK=$lr LOCAL_WORLD_SIZE=$ls GROUP_RANK=$node MASTER_ADDR=10.200.0.1 MASTER_PORT=29690 \
   BATON_SECRET=$S BATON_JOIN_TIMEOUT=30 BATON_TIMEOUT=60 timeout 120 ip netns exec $name-n$node \
   $B/tests/prog_coll --colls allreduce,broadcast,allgather --counts ${COUNTS:-1,37,4099,300000} --dtypes f32,f64 --ops sum,max \
   --algos ${ALGOS:-auto,hier,ring,rd} --roots 3 > $O/r$r 2>&1; echo rc=$? >> $O/r$r) &
done
wait
for r in 0 1 2 3; do echo "rank $r: $(tail -n 2 $O/r$r | tr '\n' ' ')"; done
