#!/bin/sh
# bench/plan_auto.sh: `baton bench --algo auto` following a calibration (BATON_TUNING) against the best
# forced algorithm at every size. Issue 9's floor: auto within 5 % of the best, 8 B to 256 MiB, on 2, 3 and
# 4 ranks, shm and tcp. Auto and every forced algorithm run once per round, interleaved, medians over rounds.
#   Usage: sh bench/plan_auto.sh CALIBRATION.json
#   Env: ROUNDS (3), RANKS ("2 3 4"), TRANSPORTS ("shm tcp"), MIN (8), MAX (256M), FACTOR (4), BUILD (build)
# Wrap it in `flock /tmp/baton-bench.lock` on a shared machine.
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-3}
RANKS=${RANKS:-"2 3 4"}
TRANSPORTS=${TRANSPORTS:-"shm tcp"}
MIN=${MIN:-8}
MAX=${MAX:-256M}
FACTOR=${FACTOR:-4}
CAL=${1:?usage: sh bench/plan_auto.sh CALIBRATION.json}
T=$(mktemp -d "${TMPDIR:-/tmp}/baton-planauto-XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT INT TERM HUP
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null || exit 1
B="$BUILD/baton"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); load before: $(cut -d' ' -f1-3 /proc/loadavg); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
for r in $(seq 1 "$ROUNDS"); do
    for tr in $TRANSPORTS; do
        algos="auto ring rd"; [ "$tr" = shm ] && algos="auto direct ring rd"
        for k in $RANKS; do
            for a in $algos; do
                BATON_TUNING="$CAL" timeout 1800 "$B" run -n "$k" -- "$B" bench allreduce --csv -b "$MIN" -e "$MAX" \
                    -f "$FACTOR" --algo "$a" --transport "$tr" -w 2 -n 5 2>/dev/null |
                    awk -F, -v tr="$tr" -v k="$k" -v a="$a" '$1 ~ /^[0-9]+$/ {print tr, k, a, $1, $6, $5}' >>"$T/meas"
            done
        done
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$T/meas" <<'PYEOF'
import statistics, sys
cells, took = {}, {}
for line in open(sys.argv[1]):
    tr, k, a, b, us, used = line.split()
    cells.setdefault((tr, int(k), int(b)), {}).setdefault(a, []).append(float(us))
    if a == "auto": took.setdefault((tr, int(k), int(b)), set()).add(used)
ok = total = 0
print("%-4s %5s %10s %12s %12s %-7s %-7s %8s" % ("link", "ranks", "bytes", "auto_us", "best_us", "best", "auto", "auto/best"))
for key in sorted(cells):
    c = cells[key]
    if "auto" not in c: continue
    med = {a: statistics.median(v) for a, v in c.items()}
    forced = {a: t for a, t in med.items() if a != "auto"}
    best = min(forced, key=forced.get)
    ratio = med["auto"] / forced[best]
    total += 1
    ok += ratio <= 1.05
    print("%-4s %5d %10d %12.1f %12.1f %-7s %-7s %8.3f%s" % (key[0], key[1], key[2], med["auto"], forced[best], best,
          ",".join(sorted(took.get(key, []))), ratio, "" if ratio <= 1.05 else "  > 5 %"))
print("auto within 5 %% of the best forced algorithm: %d of %d cells" % (ok, total))
PYEOF
