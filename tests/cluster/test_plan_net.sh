#!/bin/sh
# test_plan_net.sh: `baton plan calibrate --transports net` on the simulated cluster (tests/cluster/netns.sh,
# 2 nodes x 2 ranks) writes "net" fits that `plan allreduce --calibrated --link net` reads, and with a
# calibration --algo auto across nodes takes the algorithm the net fits predict fastest (not the fixed
# hierarchical rule), every element checked. The cluster is torn down whatever happens.
BUILD=${BUILD:-build}
B=$(cd "$(dirname "$0")/../.." && pwd)
cd "$B"
dir=$(mktemp -d /tmp/baton-plannet-XXXXXX) || exit 1
passed=0; failed=0
name=
cleanup() { [ -n "$name" ] && sh tests/cluster/netns.sh down "$name" >/dev/null 2>&1; rm -rf "$dir"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
check() { if [ "$2" = 0 ]; then echo "PASS $1"; passed=$((passed + 1)); else echo "FAIL $1"; failed=$((failed + 1)); fi; }

if ! name=$(BATON_NETNS_PREFIX=baton-pn timeout 60 sh tests/cluster/netns.sh up 2); then
    name=; echo "FAIL netns_cluster_starts"; echo "0 passed, 1 failed"; exit 1
fi
export BATON="$BUILD/baton"
launch="sh tests/cluster/netns.sh launch $name -n 2 --"

# 1. calibrate the cluster's link (tiny sizes: this checks the plumbing, not the numbers)
out=$(timeout 240 "$BUILD/baton" plan calibrate --transports net --net-ranks 4 --net-launch "$launch" --max-bytes 256 \
      --rounds 1 --out "$dir/net.json" 2>&1); rc=$?
pred=$(timeout 30 "$BUILD/baton" plan allreduce --calibrated "$dir/net.json" --link net --ranks 4 --bytes 64 --json 2>&1)
st=1
[ $rc = 0 ] && echo "$pred" | grep -q '"algo":[[:space:]]*"hier"' && echo "$pred" | grep -q '"algo":[[:space:]]*"ring"' &&
    echo "$pred" | grep -q '"measured_us"' && st=0
[ $st = 0 ] || echo "$out$pred"
check calibrate_net_fits_hier_ring_rd_on_2_nodes $st

# 2. auto follows net fits: ring up to 444 B, rd above; hier (the fixed rule) is never predicted fastest
#    (the model alone: BATON_TUNING_PROBE=off, no online confirmation of the close sizes)
cat > "$dir/t.json" <<JSON
{"version":1,"about":"synthetic","links":[],"fits":[
{"transport":"net","algo":"hier","ranks":4,"lo":4,"hi":1e6,"a_us":100000,"b_us_per_byte":0},
{"transport":"net","algo":"ring","ranks":4,"lo":4,"hi":1e6,"a_us":1,"b_us_per_byte":0.01},
{"transport":"net","algo":"rd","ranks":4,"lo":4,"hi":1e6,"a_us":5,"b_us_per_byte":0.001}],"points":[]}
JSON
out=$(BATON_TUNING_PROBE=off BATON_TUNING="$dir/t.json" timeout 120 sh tests/cluster/netns.sh launch "$name" -n 2 -- \
      "$B/$BUILD/baton" bench allreduce --csv -b 8 -e 4096 -f 8 -c 1 -w 1 -n 1 --min-time 0 2>&1); rc=$?
algos=$(echo "$out" | awk -F, '$1 ~ /^[0-9]+$/ { printf "%s%s", sep, $5; sep = "," }')
wrong=$(echo "$out" | awk -F, '$1 ~ /^[0-9]+$/ && $9 != 0 { n++ } END { print n + 0 }')
st=1; [ $rc = 0 ] && [ "$algos" = "ring,ring,rd,rd" ] && [ "$wrong" = 0 ] && st=0
[ $st = 0 ] || echo "algos '$algos' wrong $wrong: $out"
check auto_across_nodes_follows_the_net_fits $st

echo "$passed passed, $failed failed"
[ $failed = 0 ]
