#!/bin/sh
# A/B: baton train (mlp, synthetic, 300 steps) on 2 simulated nodes x L ranks over --transport mpi, main vs wt-base
set -u
L=${1:-2}; R=${2:-3}
cd /work/main
name=$(tests/cluster/netns.sh up 2 --name "baton-mpitr$$") || exit 1
d=$(mktemp -d /tmp/baton-mpitr-XXXXXX)
trap 'tests/cluster/netns.sh down "$name"; rm -rf "$d"' EXIT
trap 'exit 130' INT TERM
printf '%s-n0 slots=%s\n%s-n1 slots=%s\n' "$name" $L "$name" $L > "$d/hosts"
for r in $(seq 1 $R); do
  for w in main wt-base; do
    printf "r$r $w: "
    timeout 600 ip netns exec "$name-n0" mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none --hostfile "$d/hosts" -np $((2*L)) \
      --mca plm_rsh_agent /work/main/tests/cluster/netns_agent.sh --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
      -x BATON_TRANSPORT=mpi /work/$w/build/baton train --model mlp --data synthetic --train-samples 20000 --steps 150 --json 2>/dev/null | tail -n 1 | grep -o "\"samples_per_sec\":[0-9.e+]*\|\"step_ms_after_first\":[0-9.e+]*\|\"comm_exposed_ms\":[0-9.e+]*" | tr "\n" " "
    echo
  done
done
