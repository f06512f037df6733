#!/bin/sh
# The zero-copy all-reduce before (BASE: a built checkout of c4c67e8, pull after a wait per chunk) and after (NEW, default .:
# push), 2 ranks, buffers from baton_buffer_alloc, interleaved rounds; medians of time_us per size.
R=${1:-3}
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
for r in $(seq 1 $R); do
  for d in base main; do
    [ $d = base ] && B=${BASE:-/work/wt-base}/build/baton || B=${NEW:-.}/build/baton
    $B run -n 2 -- $B bench allreduce -b 256K -e 64M -f 2 -n 20 -w 5 --buffers shm --inplace 2>/dev/null | awk '$1 ~ /^[0-9]+$/ {print $1, $6}' > $T/$d.$r
    echo "round $r $d: $(tr '\n' ' ' < $T/$d.$r)"
  done
done
/usr/bin/python3 - "$T" "$R" <<'PY'
import sys, statistics as S
T, R = sys.argv[1], int(sys.argv[2])
t = {d: {} for d in ("base", "main")}
for d in t:
    for r in range(1, R + 1):
        for l in open("%s/%s.%d" % (T, d, r)):
            s, us = l.split(); t[d].setdefault(int(s), []).append(float(us))
print("| bytes | pull (before) us | push (now) us | now / before |")
print("| --- | --- | --- | --- |")
for s in sorted(t["base"]):
    b, m = S.median(t["base"][s]), S.median(t["main"][s])
    print("| %d | %.1f | %.1f | %.2f |" % (s, b, m, m / b))
PY
