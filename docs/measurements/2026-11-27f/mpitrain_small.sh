#!/bin/sh
# small-model training on 2 simulated nodes x 2 ranks: over --transport mpi (mpirun) vs tcp (baton run per node)
set -u
R=${1:-3}; shift; EXTRA="$*"
cd /work/main
name=$(tests/cluster/netns.sh up 2 --name "baton-mpits$$") || exit 1
d=$(mktemp -d /tmp/baton-mpits-XXXXXX)
trap 'tests/cluster/netns.sh down "$name"; rm -rf "$d"' EXIT
trap 'exit 130' INT TERM
printf '%s-n0 slots=2\n%s-n1 slots=2\n' "$name" "$name" > "$d/hosts"
T="train --model mlp --hidden ${HID:-64,64} --data synthetic --train-samples 20000 --steps 300 --json"
pick() { tail -n 1 | grep -o '"samples_per_sec":[0-9.e+]*\|"step_ms_after_first":[0-9.e+]*\|"comm_exposed_ms":[0-9.e+]*' | tr '\n' ' '; }
for r in $(seq 1 $R); do
  printf "r$r mpi: "
  timeout 600 ip netns exec "$name-n0" mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none --hostfile "$d/hosts" -np 4 \
      --mca plm_rsh_agent /work/main/tests/cluster/netns_agent.sh --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
      -x BATON_TRANSPORT=mpi $EXTRA /work/main/build/baton $T 2>/dev/null | pick; echo
  printf "r$r tcp: "
  BATON=/work/main/build/baton timeout 600 tests/cluster/netns.sh launch "$name" -n 2 -- /work/main/build/baton $T 2>/dev/null | pick; echo
done
