#!/bin/sh
# bench/bench_position.sh: does the first algorithm of a round (the one that runs right after a size change) measure
# like the same algorithm in the round's later slots? (issue 9, docs/measurements/plan-history.md "Same algorithm,
# two times".)
# Until 2026-11-26 `baton bench` allocated fresh buffers for every size, and from 32 MiB (-w 1 -n 1, as the auto
# check runs) the first slot measured 1.2-1.45x slower; bench/plan_floors.sh's "same algorithm" cells leaned that way.
# Runs JOBS jobs per shape of `baton bench --runs` (every timed run printed) with SWEEPS sweeps of -w 1 -n 1, and per
# shape, size and algorithm prints the median of the runs in slot 0 over the median of the runs in the other slots,
# then `first slot (within 10 % of the later slots): met|MISSED (N of M)`.
#   Usage: sh bench/bench_position.sh [OUTDIR]
#   Env:   BUILD (build), JOBS (4), SWEEPS (6), SHAPES ("tcp:2:ring,rd:32M:64M shm:2:direct,ring,rd:64M:256M";
#          each TRANSPORT:RANKS:ALGOS:MIN:MAX)
# On a shared machine wrap it in `flock /tmp/baton-bench.lock`.
BUILD=${BUILD:-build}
JOBS=${JOBS:-4}
SWEEPS=${SWEEPS:-6}
SHAPES=${SHAPES:-"tcp:2:ring,rd:32M:64M shm:2:direct,ring,rd:64M:256M"}
T=$(mktemp -d "${TMPDIR:-/tmp}/baton-position-XXXXXX") || exit 1
O=${1:-$T}
mkdir -p "$O" || exit 1
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM HUP
mkdir "$T/tmp" && export TMPDIR="$T/tmp"
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null || exit 1
B="$BUILD/baton"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs; $(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$O/runs"
j=0
while [ $j -lt "$JOBS" ]; do
    for s in $SHAPES; do
        IFS=: read -r tr k algos lo hi <<EOF
$s
EOF
        timeout 600 "$B" run -n "$k" -- "$B" bench allreduce --csv --runs --transport "$tr" --algo "$algos" --rounds 1 \
            --sweeps "$SWEEPS" -b "$lo" -e "$hi" -f 2 -w 1 -n 1 --min-time 0.02 2>&1 >/dev/null |
            awk -v s="$tr $k" '/^run,/ {print s, $0}' >>"$O/runs" || echo "job $s failed" >&2
    done
    j=$((j + 1))
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$O/runs" <<'PYEOF'
import collections, statistics, sys
g = collections.defaultdict(lambda: ([], []))
for line in open(sys.argv[1]):
    tr, k, rec = line.split()
    w = rec.split(",")
    g[(tr, int(k), int(w[1]), w[5])][0 if w[4] == "0" else 1].append(float(w[7]))
ok = total = 0
print("%-4s %5s %10s %-7s %12s %12s %7s" % ("link", "ranks", "bytes", "algo", "first_us", "later_us", "ratio"))
for key in sorted(g):
    first, later = g[key]
    if not first or not later: continue
    r = statistics.median(first) / statistics.median(later)
    total += 1
    ok += r <= 1.10
    print("%-4s %5d %10d %-7s %12.1f %12.1f %7.3f%s  (n %d, %d)" % (key + (statistics.median(first), statistics.median(later), r,
          "" if r <= 1.10 else "  MISSED", len(first), len(later))))
print("\nfirst slot (within 10 %% of the later slots): %s (%d of %d)" % ("met" if total and ok == total else "MISSED", ok, total))
PYEOF
