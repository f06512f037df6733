#!/bin/sh
# bench/plan_vs_measured.sh: after `baton plan calibrate`, how close are `baton plan allreduce --calibrated`
# predictions to fresh `baton bench` measurements? Issue 9's floor: within 25 % for 1 MiB and larger on shm
# and tcp with 2 and 4 ranks. Every (transport, ranks, algorithm) runs once per round, rounds interleaved,
# medians over rounds; a table with the error of each cell, the spread of its rounds (slowest / fastest:
# the machine's noise), and how many cells are within 25 %.
#   Usage: sh bench/plan_vs_measured.sh [CALIBRATION.json]   (none: calibrate first, into a temporary file)
#   Env: ROUNDS (3), RANKS ("2 4"), TRANSPORTS ("shm tcp"), MIN (1M), MAX (16M), BUILD (build),
#        RAW (a file to keep every measured row in: transport ranks algo bytes us)
#   net (the simulated cluster, root): run it inside one, from the repository's root, e.g.
#        TRANSPORTS=net sh tests/cluster/netns.sh with 2 -- sh bench/plan_vs_measured.sh
#        NET_LOCAL ranks per node (2); hier, ring and rd over all nodes x NET_LOCAL ranks.
# Wrap it in `flock /tmp/baton-bench.lock` on a shared machine.
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-3}
RANKS=${RANKS:-"2 4"}
TRANSPORTS=${TRANSPORTS:-"shm tcp"}
MIN=${MIN:-1M}
MAX=${MAX:-16M}
PY=/usr/bin/python3
T=$(mktemp -d "${TMPDIR:-/tmp}/baton-planvm-XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT INT TERM HUP
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null || exit 1
B="$BUILD/baton"
NET_LOCAL=${NET_LOCAL:-2}
NET_RANKS=0 launch=
if echo " $TRANSPORTS " | grep -q ' net '; then
    [ -n "${BATON_CLUSTER:-}" ] || { echo "plan_vs_measured.sh: TRANSPORTS net runs inside a cluster: sh tests/cluster/netns.sh with 2 -- sh $0" >&2; exit 2; }
    nodes=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -c "^$BATON_CLUSTER-n[0-9]*$")
    NET_RANKS=$((nodes * NET_LOCAL))
    launch="sh tests/cluster/netns.sh launch $BATON_CLUSTER -n $NET_LOCAL --"
    export BATON="$B"
fi
CAL=${1:-}
if [ -z "$CAL" ]; then
    CAL="$T/cal.json"
    if [ -n "$launch" ]; then
        "$B" plan calibrate --ranks "$(echo $RANKS | tr ' ' ,)" --transports "$(echo $TRANSPORTS | tr ' ' ,)" --out "$CAL" \
            --net-launch "$launch" --net-ranks "$NET_RANKS" || exit 1
    else
        "$B" plan calibrate --ranks "$(echo $RANKS | tr ' ' ,)" --transports "$(echo $TRANSPORTS | tr ' ' ,)" --out "$CAL" || exit 1
    fi
fi
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); load before: $(cut -d' ' -f1-3 /proc/loadavg); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
for r in $(seq 1 "$ROUNDS"); do
    for tr in $TRANSPORTS; do
        algos="ring rd" ks=$RANKS; [ "$tr" = shm ] && algos="direct ring rd"; [ "$tr" = net ] && algos="hier ring rd" ks=$NET_RANKS
        for k in $ks; do
            for a in $algos; do
                if [ "$tr" = net ]; then
                    timeout 900 $launch "$B" bench allreduce --csv -b "$MIN" -e "$MAX" -f 4 --algo "$a" -w 2 -n 5 2>/dev/null
                else
                    timeout 900 "$B" run -n "$k" -- "$B" bench allreduce --csv -b "$MIN" -e "$MAX" -f 4 --algo "$a" \
                        --transport "$tr" -w 2 -n 5 2>/dev/null
                fi | awk -F, -v tr="$tr" -v k="$k" -v a="$a" '$1 ~ /^[0-9]+$/ {print tr, k, a, $1, $6}' >>"$T/meas"
            done
        done
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "${RAW:-}" ] && cp "$T/meas" "$RAW"
"$PY" - "$T/meas" "$CAL" "$B" <<'PYEOF'
import json, statistics, subprocess, sys
meas, cal, baton = sys.argv[1:4]
cells = {}
for line in open(meas):
    tr, k, a, b, us = line.split()
    cells.setdefault((tr, int(k), a, int(b)), []).append(float(us))
ok = total = 0
print("%-4s %5s %-7s %10s %14s %14s %8s %9s" % ("link", "ranks", "algo", "bytes", "predicted_us", "measured_us", "error", "max/min"))
for (tr, k, a, b), v in sorted(cells.items()):
    out = subprocess.run([baton, "plan", "allreduce", "--calibrated", cal, "--link", tr, "--ranks", str(k),
                          "--bytes", str(b), "--json"], capture_output=True, text=True, check=True).stdout
    pred = [x["predicted_us"] for x in json.loads(out)["algos"] if x["algo"] == a][0]
    m = statistics.median(v)
    err = (pred - m) / m
    total += 1
    ok += abs(err) <= 0.25
    print("%-4s %5d %-7s %10d %14.1f %14.1f %+7.1f%% %9.2f%s" % (tr, k, a, b, pred, m, 100 * err, max(v) / min(v),
          "" if abs(err) <= 0.25 else "  > 25 %"))
print("within 25 %%: %d of %d cells (medians of %d rounds)" % (ok, total, len(next(iter(cells.values()))) if cells else 0))
PYEOF
