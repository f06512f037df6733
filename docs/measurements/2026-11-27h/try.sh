#!/bin/sh
# usage: [B=path/to/baton] [O=outdir] sh try.sh A|B|C|D|E|F|G   (A: -n mismatch, B: wrong secret on node 1, C: node rank 1 twice of 3, D: node 1 alone, E: node 0 alone, F: different sizes, G: node 1 runs /bin/true)
# user-error scenarios on a 2-node simulated cluster
cd /work/main
B=${B:-/work/main/build/baton}; O=${O:-/tmp/try-out}; mkdir -p $O
name=baton-simtry$$
sh tests/cluster/netns.sh up 3 --name $name >/dev/null || exit 1
trap 'sh tests/cluster/netns.sh down $name >/dev/null 2>&1' EXIT
S=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
S2=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
P=29600
L() { node=$1; nn=$2; n=$3; sec=$4; shift 4; BATON_SECRET=$sec BATON_RDZV_TIMEOUT=${RT:-6} timeout -k 3 60 ip netns exec $name-n$node $B run --nnodes $nn --node-rank $node --rdzv 10.200.0.1:$P -n $n -- "$@"; }
run() { t=$(date +%s.%N); echo "=== $1"; shift; "$@"; }
J="$B bench allreduce -b 1K -e 1K -n 5 -w 1"
case "$1" in
A) # nproc mismatch
 (L 0 2 2 $S $J > $O/A0 2>&1; echo rc0=$? >> $O/A0) &
 (L 1 2 1 $S $J > $O/A1 2>&1; echo rc1=$? >> $O/A1) &
 wait; tail -n 5 $O/A0 $O/A1;;
B) # wrong secret on node 1
 (L 0 2 1 $S $J > $O/B0 2>&1; echo rc0=$? >> $O/B0) &
 (L 1 2 1 $S2 $J > $O/B1 2>&1; echo rc1=$? >> $O/B1) &
 wait; tail -n 5 $O/B0 $O/B1;;
C) # duplicate node rank 1 on nodes 1 and 2, nnodes 3
 (L 0 3 1 $S $J > $O/C0 2>&1; echo rc0=$? >> $O/C0) &
 (L 1 3 1 $S $J > $O/C1 2>&1; echo rc1=$? >> $O/C1) &
 (BATON_SECRET=$S BATON_RDZV_TIMEOUT=6 timeout -k 3 60 ip netns exec $name-n2 $B run --nnodes 3 --node-rank 1 --rdzv 10.200.0.1:$P -n 1 -- $J > $O/C2 2>&1; echo rc2=$? >> $O/C2) &
 wait; tail -n 5 $O/C0 $O/C1 $O/C2;;
D) # node 1 alone, no node 0
 (L 1 2 1 $S $J > $O/D1 2>&1; echo rc1=$? >> $O/D1) &
 wait; tail -n 5 $O/D1;;
E) # node 0 alone
 (L 0 2 1 $S $J > $O/E0 2>&1; echo rc0=$? >> $O/E0) &
 wait; tail -n 5 $O/E0;;
F) # different program sizes
 (L 0 2 1 $S $B bench allreduce -b 1K -e 1K -n 5 -w 1 > $O/F0 2>&1; echo rc0=$? >> $O/F0) &
 (L 1 2 1 $S $B bench allreduce -b 2K -e 2K -n 5 -w 1 > $O/F1 2>&1; echo rc1=$? >> $O/F1) &
 wait; tail -n 5 $O/F0 $O/F1;;
G) # different binaries: node 1 runs 'true'
 (L 0 2 1 $S $J > $O/G0 2>&1; echo rc0=$? >> $O/G0) &
 (L 1 2 1 $S /bin/true > $O/G1 2>&1; echo rc1=$? >> $O/G1) &
 wait; tail -n 5 $O/G0 $O/G1;;
esac
