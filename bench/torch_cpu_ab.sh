#!/bin/sh
# bench/torch_cpu_ab.sh: A/B of an environment setting by CPU time and wall time per training step, both ranks.
#   sh bench/torch_cpu_ab.sh MODE ROUNDS STEPS "A_ENV" "B_ENV"
# MODE: a bench/torch_profile.py mode (baton: unchanged DDP over the baton backend; hvd: DistributedOptimizer;
# noop, alone, gloo). Each round runs `baton run -n 2 -- python3 bench/torch_profile.py --all-ranks --mode MODE
# --steps STEPS` once with A_ENV and once with B_ENV set ("VAR=value ..."; "" = the defaults), the order
# swapped every second round. Per run and rank it prints the median step (ms), the process's CPU per step over
# all its threads (ms, the mean over the timed steps: the training thread, baton's comm thread, the backend's
# waiter thread, ...) and that of the threads other than the training thread (the busiest); at the end the medians over rounds and ranks of each side. CPU time per step is the
# figure to compare when other jobs share the machine (wall time then mostly measures them). Run it inside
# `flock /tmp/baton-bench.lock` for wall times worth reporting.
set -eu
MODE=$1 ROUNDS=$2 STEPS=$3 A_ENV=$4 B_ENV=$5
cd "$(dirname "$0")/.."
. bench/torch_env.sh   # PY, BUILD built, PYTHONPATH, TMP (removed at exit) and TMPDIR
echo "$(lscpu | sed -n 's/^Model name: *//p'); OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}; $(uptime | sed 's/.*load/load/')"
one() {   # side env -> lines "side rank step cpu_all cpu_main"
    (if [ -n "$2" ]; then export $2; fi
     timeout 300 "$BUILD/baton" run -n 2 -- "$PY" bench/torch_profile.py --all-ranks --mode "$MODE" --steps "$STEPS" 2>/dev/null) |
        "$PY" -c '
import json, sys
text, dec, i = sys.stdin.read(), json.JSONDecoder(), 0
while (i := text.find("{\"mode\"", i)) >= 0:   # the two ranks lines may arrive interleaved
    d, i = dec.raw_decode(text, i)
    t = d["threads_ms"].values()
    print(sys.argv[1], d["rank"], d["step"], round(sum(t), 2), round(sum(t) - max(t), 2))' "$1"
}
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then one A "$A_ENV"; one B "$B_ENV"; else one B "$B_ENV"; one A "$A_ENV"; fi
done | tee "$TMP/rows" | awk '{printf "%s rank %s: step %s ms, CPU %s ms (threads other than the training thread %s)\n", $1, $2, $3, $4, $5}'
"$PY" - "$TMP/rows" "$A_ENV" "$B_ENV" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for side, env in (("A", sys.argv[2]), ("B", sys.argv[3])):
    s = [r for r in rows if r[0] == side]
    if not s:
        print("%s (%s): no result" % (side, env or "defaults")); continue
    med = lambda i: statistics.median(float(r[i]) for r in s)
    print("%s (%s): median of %d rank-runs: step %.2f ms, CPU %.2f ms a step (threads other than the training thread %.2f)"
          % (side, env or "defaults", len(s), med(2), med(3), med(4)))
EOF
