#!/bin/sh
# netns_agent.sh: Open MPI's launch agent for the simulated cluster (tests/cluster/netns.sh). Open MPI calls
# it as it would call ssh, `netns_agent.sh HOST COMMAND...`, with HOST a node's namespace from the hostfile
# (NAME-n0, NAME-n1, ...). It runs COMMAND (the node's orted) inside that namespace, under HOST as its host
# name (a UTS namespace of its own), so Open MPI and baton both see distinct machines:
#   ip netns exec NAME-n0 mpirun --hostfile HOSTS --mca plm_rsh_agent tests/cluster/netns_agent.sh \
#       --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 ...
ns=$1; shift
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$ns" "$*"
