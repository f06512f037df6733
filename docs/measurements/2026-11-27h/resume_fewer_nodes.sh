#!/bin/sh
# A job on 3 simulated nodes x 2 ranks saves checkpoints and is stopped (as a preempted allocation); it resumes on
# 1 node x 2 ranks, then on 3 nodes x 1 rank, and finishes; each leg's position and loss are printed.
cd /work/main
B=${B:-$PWD/build/baton}
name=baton-simr$$
O=${O:-/tmp/resume-out}; rm -rf $O; mkdir -p $O
sh tests/cluster/netns.sh up 3 --name $name >/dev/null || exit 1
trap 'sh tests/cluster/netns.sh down $name >/dev/null 2>&1' EXIT
T="train --data synthetic --train-samples 4096 --hidden 64 --batch 32 --threads 1 --warmup 0 --checkpoint $O/ck --checkpoint-every 20 --json"
export OPENBLAS_NUM_THREADS=1 BATON_LOG_LEVEL=warn
echo "== 3 nodes x 2 ranks, 60 steps"
timeout 200 sh tests/cluster/netns.sh launch $name -n 2 --port 29701 -- $B $T --steps 60 > $O/leg1 2>&1; echo "rc=$?"; grep -h '"step"\|steps\|loss' $O/leg1 | tail -2 | cut -c1-300
ls $O/ck
echo "== 1 node x 2 ranks (no namespace), resume to 100 steps"
timeout 200 $B run -n 2 -- $B $T --steps 100 --resume > $O/leg2 2>&1; echo "rc=$?"; grep -h "resum" $O/leg2 | head -3 | cut -c1-300; tail -n 2 $O/leg2 | cut -c1-300
echo "== 3 nodes x 1 rank, resume to 140 steps"
timeout 200 sh tests/cluster/netns.sh launch $name -n 1 --port 29702 -- $B $T --steps 140 --resume > $O/leg3 2>&1; echo "rc=$?"; grep -h "resum" $O/leg3 | head -3 | cut -c1-300; tail -n 2 $O/leg3 | cut -c1-300
