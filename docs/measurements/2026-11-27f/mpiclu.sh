#!/bin/sh
# A/B: 2 nodes x L ranks over --transport mpi, base vs main, interleaved
set -u
L=${1:-4}; R=${2:-3}
cd /work/main
name=$(tests/cluster/netns.sh up 2 --name "baton-mpiab$$") || exit 1
d=$(mktemp -d /tmp/baton-mpiab-XXXXXX)
trap 'tests/cluster/netns.sh down "$name"; rm -rf "$d"' EXIT
trap 'exit 130' INT TERM
printf '%s-n0 slots=%s\n%s-n1 slots=%s\n' "$name" $L "$name" $L > "$d/hosts"
for r in $(seq 1 $R); do
  for w in main wt-base; do
    printf "r$r $w: "
    timeout 300 ip netns exec "$name-n0" mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none --hostfile "$d/hosts" -np $((2*L)) \
      --mca plm_rsh_agent /work/main/tests/cluster/netns_agent.sh --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
      /work/$w/build/baton bench allreduce -b 8 -e 64M -f 8 -n 5 -w 2 --transport mpi --csv 2>&1 | awk -F, 'NR>1 && $1 ~ /^[0-9]/ {printf "%s:%s ", $1, $6} NR>1 && $1 !~ /^[0-9]/ {print} END{print ""}'
  done
done
