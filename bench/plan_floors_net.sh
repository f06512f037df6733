#!/bin/sh
# bench/plan_floors_net.sh: issue 9's prediction floor on the simulated cluster (tests/cluster/netns.sh,
# 2 nodes x 2 ranks, 1 Gbit/s per node; needs root): `baton plan calibrate --transports net`, then fresh
# `baton bench` of hier (hierarchical), ring and rd (flat) at 1, 4 and 16 MiB, every algorithm interleaved
# in one run, the sizes swept ROUNDS times, medians: predicted within 25 % of measured? Prints `within 25 %: N of M`, the
# load before and after and the total time (about 4 minutes). The cluster is torn down whatever happens.
#   Usage: sh bench/plan_floors_net.sh [OUTDIR]      Env: BUILD (build), CAL_ROUNDS (3), ROUNDS (3)
BUILD=${BUILD:-build}
CAL_ROUNDS=${CAL_ROUNDS:-3}
ROUNDS=${ROUNDS:-3}
start=$(date +%s)
cd "$(dirname "$0")/.." || exit 1
if [ -n "${1:-}" ]; then O=$1; mkdir -p "$O" || exit 1; else O=; fi
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null || exit 1
export BATON="$BUILD/baton" CAL_ROUNDS ROUNDS O start
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs; $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
BATON_NETNS_PREFIX=baton-fl timeout 600 sh tests/cluster/netns.sh with 2 -- sh -c '
    T=$(mktemp -d "${TMPDIR:-/tmp}/baton-floorsnet-XXXXXX") || exit 1
    trap "rm -rf \"$T\"" EXIT
    [ -n "$O" ] || O=$T
    launch="sh tests/cluster/netns.sh launch $BATON_CLUSTER -n 2 --"
    "$BATON" plan calibrate --transports net --net-ranks 4 --net-launch "$launch" --rounds "$CAL_ROUNDS" \
        --out "$O/net.json" 2>"$O/calibrate_net.log" | sed -n 1,2p || exit 1
    [ -s "$O/net.json" ] || { cat "$O/calibrate_net.log"; exit 1; }
    echo "calibrated at $(($(date +%s) - start)) s, load $(cut -d" " -f1-3 /proc/loadavg)"
    $launch "$BATON" bench allreduce --csv -b 1M -e 16M -f 4 --algo hier,ring,rd --rounds 1 --sweeps "$ROUNDS" -w 2 -n 5 \
        --min-time 0.02 2>"$O/errors_net" | awk -F, "\$1 ~ /^[0-9]+\$/ {print \$10, \$1, \$6}" >"$O/net_rows"
    echo "load after: $(cut -d" " -f1-3 /proc/loadavg)"
    /usr/bin/python3 - "$O/net_rows" "$O/net.json" "$BATON" <<"PYEOF"
import json, subprocess, sys
rows, cal, baton = sys.argv[1:4]
print("%-4s %5s %-7s %10s %14s %14s %8s" % ("link", "ranks", "algo", "bytes", "predicted_us", "measured_us", "error"))
ok = total = 0
for line in open(rows):
    a, b, us = line.split()
    b, us = int(b), float(us)
    out = subprocess.run([baton, "plan", "allreduce", "--calibrated", cal, "--link", "net", "--ranks", "4", "--bytes", str(b),
                          "--json"], capture_output=True, text=True, check=True).stdout
    pred = [x["predicted_us"] for x in json.loads(out)["algos"] if x["algo"] == a][0]
    err = (pred - us) / us
    total += 1
    ok += abs(err) <= 0.25
    print("%-4s %5d %-7s %10d %14.1f %14.1f %+7.1f%%%s" % ("net", 4, a, b, pred, us, 100 * err, "" if abs(err) <= 0.25 else "  MISSED"))
print("within 25 %%: %d of %d%s" % (ok, total, "  (met)" if ok == total and total else "  (MISSED)"))
PYEOF
'
rc=$?
echo "total time: $(($(date +%s) - start)) s"
exit $rc
