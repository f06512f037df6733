#!/bin/sh
# bench/tcp_order.sh: does a tcp all-reduce's time depend on what ran before it in the job (issue 9)?
# On a host whose kernel defaults to BBR it did: ring at 1 MiB 2x slower right after rd (docs/algorithms.md,
# "TCP congestion control"). Runs `baton run -n 2 -- baton bench allreduce --csv -b 256K -e 4M -f 2
# --algo L --rounds 1 --sweeps 1 --transport tcp -w 2 -n 5 --min-time 0.02` with L = ring,rd and rd,ring, under
# BATON_TCP_CC=system (the kernel's default) and the default (auto), the four arms interleaved, JOBS jobs
# each; prints the median time of ring and rd per size and arm, the load before and after, and last:
#   `ring 1 MiB order: met|MISSED (after rd X us / first Y us = R)`: met when R <= 1.25 under the default;
#   `no slower than system at 2-4 MiB: met|MISSED`: the default's ring and rd medians at 2 and 4 MiB are at
#   most 1.10x the system arm's.
#   Usage: sh bench/tcp_order.sh      Env: BUILD (build), JOBS (5). Wrap in `flock /tmp/baton-bench.lock`.
BUILD=${BUILD:-build}
JOBS=${JOBS:-5}
B=$BUILD/baton
[ -x "$B" ] || { echo "tcp_order.sh: $B not found (build first, or set BUILD)" >&2; exit 2; }
TMP=$(mktemp -d) || exit 2
trap 'rm -rf "$TMP"' EXIT INT TERM
export TMPDIR="$TMP"   # the runs' per-user directory (baton-UID) lands here, not in /tmp, and is removed at exit
OUT=$TMP/rows
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
i=0
while [ $i -lt "$JOBS" ]; do
    for arm in system auto; do
        for L in ring,rd rd,ring; do
            BATON_TCP_CC=$arm "$B" run -n 2 -- "$B" bench allreduce --csv -b 256K -e 4M -f 2 --algo $L --rounds 1 \
                --sweeps 1 --transport tcp -w 2 -n 5 --min-time 0.02 2>&1 |
                awk -F, -v a=$arm -v L=$L '$1 ~ /^[0-9]+$/ {print a, L, $5, $1, $6}' >> "$OUT"
        done
    done
    i=$((i + 1))
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    arm, order, algo, size, t = line.split()
    d[(arm, order, algo, int(size))].append(float(t))
if not d:
    print("tcp_order.sh: no rows (did baton bench fail?)"); sys.exit(1)
sizes = sorted({k[3] for k in d})
med = lambda *k: statistics.median(d[k]) if d.get(k) else float("nan")
print("median time_us; arm (BATON_TCP_CC), --algo order, algorithm:", " ".join(f"{s >> 10}K" for s in sizes))
for algo in ("ring", "rd"):
    for arm in ("system", "auto"):
        for order in ("ring,rd", "rd,ring"):
            print(f"{arm:6} {order:7} {algo:4}", " ".join(f"{med(arm, order, algo, s):7.0f}" for s in sizes))
M = 1 << 20
first, after = med("auto", "ring,rd", "ring", M), med("auto", "rd,ring", "ring", M)
r = after / first
print(f"ring 1 MiB order: {'met' if r <= 1.25 else 'MISSED'} (after rd {after:.0f} us / first {first:.0f} us = {r:.2f})")
worst = max(med("auto", o, a, s) / med("system", o, a, s) for o in ("ring,rd", "rd,ring") for a in ("ring", "rd")
            for s in (2 * M, 4 * M))
print(f"no slower than system at 2-4 MiB: {'met' if worst <= 1.10 else 'MISSED'} (worst auto/system {worst:.2f})")
PY
