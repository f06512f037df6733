#!/bin/sh
# test_scale.sh: hundreds of ranks on this 2-core machine (issue 8, item 7), heavily oversubscribed:
#   1. 512 local ranks over shared memory (BATON_SHM_MAX_LOCAL): init, all-reduce and broadcast checked element
#      by element (prog_coll), a clean exit of every rank, nothing of the job left in /dev/shm;
#   2. 256 ranks as 4 simulated nodes x 64 (tests/cluster/netns.sh): init, all-reduce checked element by
#      element, a clean exit, and the TCP sockets each rank held (its debug report): a few, not 255.
# Small buffers keep it near a minute. Every step has a hard timeout; the namespaces go away whatever happens
# (netns.sh with: trap), and so do the job's processes (they die with their launcher).
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.." || exit 2
B=$BUILD/baton
out=$(mktemp /tmp/baton-scale-XXXXXX) || exit 2
passed=0; failed=0
trap 'rm -f "$out"' EXIT
trap 'exit 130' INT TERM

check() { # name, status
    if [ "$2" = 0 ]; then echo "PASS $1"; passed=$((passed + 1)); else echo "FAIL $1"; failed=$((failed + 1)); fi
}

# 1. 512 local ranks, one node, shared memory
t0=$(date +%s)
BATON_LOG_LEVEL=info timeout 400 "$B" run -n 512 -- "$BUILD/tests/prog_coll" --colls allreduce,broadcast \
    --counts 1,37 --dtypes f32 --ops sum --algos auto --roots 3 >"$out" 2>&1
rc=$?
t1=$(date +%s)
job=$(sed -n 's/.*joined: rank 0 of 512.*job \([0-9a-f]*\);.*/\1/p' "$out" | head -1)
ok=$(grep -c "checks passed" "$out")
joined=$(grep -c "joined: rank .* of 512, node 0 of 1, local rank .* of 512, transport shm" "$out")
left=$( [ -n "$job" ] && ls /dev/shm 2>/dev/null | grep -c -- "$job" )
st=0
[ $rc = 0 ] && [ "$ok" = 512 ] && [ "$joined" = 512 ] && [ -n "$job" ] && [ "${left:-0}" = 0 ] || st=1
echo "    512 local ranks: exit $rc, $joined joined over shm, $ok checked, ${left:-?} segment(s) left, $((t1 - t0)) s"
[ $st = 0 ] || { grep -v "checks passed\|info: joined" "$out" | head -20; }
check shm_512_local_ranks_allreduce_broadcast_checked_clean_exit $st

# 2. 256 ranks as 4 simulated nodes x 64
t0=$(date +%s)
BATON_LOG_LEVEL=debug timeout 200 tests/cluster/netns.sh with 4 -- sh -c \
    'tests/cluster/netns.sh launch "$BATON_CLUSTER" -n 64 -- "$0" --colls allreduce --counts 1,37,4099 --dtypes f32 \
     --ops sum --algos auto' "$BUILD/tests/prog_coll" >"$out" 2>&1
rc=$?
t1=$(date +%s)
ok=$(grep -c "checks passed" "$out")
joined=$(grep -c "joined: rank .* of 256, node .* of 4, local rank .* of 64, transport tcp" "$out")
# "tcp: rank R used K socket(s) of 255 peers": every rank reports when it closes
socks=$(sed -n 's/.*tcp: rank [0-9]* used \([0-9]*\) socket.* of 255 peers.*/\1/p' "$out")
reports=$(echo "$socks" | grep -c .)
most=$(echo "$socks" | sort -n | tail -1)
mean=$(echo "$socks" | awk '{ s += $1 } END { if (NR) printf "%.2f", s / NR }')
st=0
[ $rc = 0 ] && [ "$ok" = 256 ] && [ "$joined" = 256 ] && [ "$reports" = 256 ] && [ "${most:-99}" -le 8 ] || st=1
echo "    256 ranks on 4 nodes x 64: exit $rc, $joined joined, $ok checked, $reports socket reports, sockets per rank:" \
     "at most ${most:-?}, mean ${mean:-?} (of 255 peers), $((t1 - t0)) s"
[ $st = 0 ] || { grep -v "checks passed\|info: joined\|debug:" "$out" | head -20; }
check netns_256_ranks_4_nodes_x_64_allreduce_checked_few_sockets $st
ip netns list 2>/dev/null | grep -q "^baton-sim$$-" && { echo "FAIL namespaces left behind"; failed=$((failed + 1)); }

echo "$passed passed, $failed failed"
[ $failed = 0 ]
