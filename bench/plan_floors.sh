#!/bin/sh
# bench/plan_floors.sh: issue 9's two floors on one node, in one command, on a quiet machine.
#  1. `baton plan calibrate` (shm and tcp, 2, 3 and 4 ranks), then fresh `baton bench` measurements of every
#     algorithm at 1 to 16 MiB (factor 2) on 2 and 4 ranks: predicted within 25 % of measured?
#  2. `baton bench --algo auto` following that calibration (BATON_TUNING) against the best forced algorithm
#     at every size from 8 B to 256 MiB (factor 2), 2, 3 and 4 ranks, shm and tcp: auto within 5 % of the best?
# Every measurement is one `baton run -n K -- baton bench allreduce --algo A,B,.. --rounds R` per transport
# and world size: each size runs every algorithm in turn, R rounds over, and reports each algorithm's median
# (a burst of load lands on one round of every algorithm, not on all rounds of one; the same binary, buffers
# and CPUs for all). Every timed run of every algorithm follows its own warm-up (baton bench, since
# 2026-11-26), so no algorithm is timed in the state the one before it left. Up to 16 MiB every run is
# -w 2 -n 5 --min-time 0.02 (what `baton plan calibrate` measures with); from 32 MiB -w 1 -n 1 (one
# iteration is 20 ms to 0.5 s there). The prediction check's jobs run from 4 B (the rows from 1 MiB are scored),
# as the calibration's do; with more ranks than CPUs it runs ROUNDS passes over those shapes, one job of one
# sweep per shape and pass, and takes each row's median over the passes (as `baton plan calibrate` measures
# those shapes: what varies there is the job, docs/plan.md). Since 2026-11-27 every job of both checks runs JOBS
# times, in passes over the shapes (pass j: every shape's jobs in turn), except the auto check's jobs from 32 MiB
# with more ranks than CPUs (one job), and each row is the median over the jobs: on this VM a job can draw a mode
# that lasts for the job (shm 2 ranks, direct at 32 MiB: 3673-6439 us in four jobs back to back, ring 4486-4815),
# so one job per cell scored whichever mode it drew; auto and every forced algorithm share every job, measured the
# same way (docs/measurements/plan-history.md, "Per-job modes"). Prints both tables, `within 25 %: N of M`,
# `auto within 5 %: N of M`, the load average before and after each part and the total time, and last one line per floor:
# `floor prediction: met|MISSED (N of M)` and `floor auto: met|MISSED (N of M)`.
#   Usage: sh bench/plan_floors.sh [OUTDIR]     (OUTDIR keeps cal.json and the raw rows; default: a temp dir)
#   Env:   BUILD (build), CAL_ROUNDS (3: `baton plan calibrate --rounds`, which since 2026-11-26 20:40 UTC rounds it to
#          whole designs of each shape's algorithms as `balanced` below does: 4 sweeps or passes on tcp, 6 on shm), ROUNDS (5: sweeps or passes of the prediction check, sweeps of the auto check up to 1 MiB), BIG_ROUNDS (5: above;
#          both rounded to the nearest whole number of Williams designs of the job's algorithms since 2026-11-26 20:10 UTC:
#          6 for 2 or 3 algorithms, 4 for auto,direct,ring,rd, so each algorithm runs first equally often;
#          3 until 2026-11-26 15:00 UTC: a median of 3 single iterations from 32 MiB left same-algorithm pairs 1.06-1.3x apart),
#          JOBS (3: jobs per shape and size range, each row the median over them; 1: one job, as until 2026-11-27),
#          MAX (256M), RANKS_PRED ("2 4"), RANKS_AUTO ("2 3 4"), TRANSPORTS ("shm tcp"),
#          PARTS ("pred auto": which checks to run), CAL (a calibration file to use instead of calibrating;
#          for running the script in pieces, e.g. CAL=OUT/cal.json PARTS=auto TRANSPORTS=tcp RANKS_AUTO=3)
# The simulated cluster (2 nodes x 2 ranks, root): bench/plan_floors_net.sh. On a shared machine wrap it in
# `flock /tmp/baton-bench.lock`.
BUILD=${BUILD:-build}
CAL_ROUNDS=${CAL_ROUNDS:-3}
ROUNDS=${ROUNDS:-5}
BIG_ROUNDS=${BIG_ROUNDS:-5}
MAX=${MAX:-256M}
RANKS_PRED=${RANKS_PRED:-"2 4"}
RANKS_AUTO=${RANKS_AUTO:-"2 3 4"}
TRANSPORTS=${TRANSPORTS:-"shm tcp"}
JOBS=${JOBS:-3}
PARTS=${PARTS-"pred auto"}   # set but empty: refused below
CAL=${CAL:-}
case " $PARTS " in *" pred "*) do_pred=1 ;; *) do_pred=0 ;; esac
case " $PARTS " in *" auto "*) do_auto=1 ;; *) do_auto=0 ;; esac
case $JOBS in ''|*[!0-9]*|0) echo "JOBS='$JOBS': expected a positive whole number of jobs" >&2; exit 2 ;; esac
for p in $PARTS; do
    case $p in pred|auto) ;; *) echo "PARTS='$PARTS': expected pred, auto or both" >&2; exit 2 ;; esac
done
[ $do_pred = 1 ] || [ $do_auto = 1 ] || { echo "PARTS='$PARTS': expected pred, auto or both" >&2; exit 2; }
PY=/usr/bin/python3
start=$(date +%s)
if [ -n "${1:-}" ]; then
    O=$1; mkdir -p "$O" || exit 1; T=$(mktemp -d "${TMPDIR:-/tmp}/baton-floors-XXXXXX") || exit 1
else
    T=$(mktemp -d "${TMPDIR:-/tmp}/baton-floors-XXXXXX") || exit 1; O=$T
fi
trap 'rm -rf "$T"' EXIT
trap 'exit 130' INT TERM HUP
mkdir "$T/tmp" && export TMPDIR="$T/tmp"   # the runs' per-user directories land here (else /tmp/baton-UID stays behind)
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null || exit 1
B="$BUILD/baton"
algos_of() { if [ "$1" = shm ]; then echo direct,ring,rd; else echo ring,rd; fi; }
# round_order LIST R: LIST in the order of round R of baton bench's Williams design (baton__round_order): the
# prediction check's jobs of one sweep each take another round, as `baton plan calibrate` does (with one list for
# every job the first algorithm ran first at every size of every job)
round_order() {
    echo "$1" | awk -F, -v r="$2" '{ n = NF; p = n % 2 ? int(r / 2) : r; out = ""
        for (k = 0; k < n; k++) { j = (n % 2 && r % 2) ? n - 1 - k : k
            w = j == 0 ? 0 : (j % 2 ? (j + 1) / 2 : n - j / 2); out = out (k ? "," : "") $((w + p) % n + 1) }
        print out }'
}
# balanced LIST R: R sweeps (or passes) rounded to the nearest whole number of Williams designs for LIST's algorithms
# (n rounds for an even n, 2n for an odd n; a tie rounds up; at least one design), so that every algorithm runs in
# every position and after every other one equally often. With 5 sweeps and `auto,ring,rd` auto ran first in 2 of
# them and ring in 1; with `auto,direct,ring,rd`, auto first in 2, direct, ring and rd in 1
# (docs/measurements/plan-history.md, "Same algorithm, two times", 2026-11-26)
balanced() {
    echo "$1" | awk -F, -v r="$2" '{ d = NF % 2 ? 2 * NF : NF; k = int((r + d / 2) / d); if (k < 1) k = 1; print k * d }'
}
load() { cut -d' ' -f1-3 /proc/loadavg; }
elapsed() { echo $(($(date +%s) - start)); }
min() { if [ "$1" -lt "$2" ]; then echo "$1"; else echo "$2"; fi; }
maxb=$(numfmt --from=iec "$MAX") || exit 2
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "load before: $(load)"

# bench TR K ALGOS ROUNDS MIN MAX WARMUP ITERS: rows "tr k asked used bytes us" appended to $O/rows
bench() {
    timeout 900 "$B" run -n "$2" -- "$B" bench allreduce --csv --transport "$1" --algo "$3" --rounds 1 --sweeps "$4" \
        -b "$5" -e "$6" -f 2 -w "$7" -n "$8" --min-time 0.02 2>>"$O/errors" |
        awk -F, -v tr="$1" -v k="$2" '$1 ~ /^[0-9]+$/ {print tr, k, $10, $5, $1, $6}' >>"$O/rows" ||
        echo "bench $1 $2 $3 failed" >&2
}

# ---- 1. calibrate, then measure against the predictions -----------------------------------------------
if [ -n "$CAL" ]; then
    [ -s "$CAL" ] || { echo "CAL=$CAL: no such calibration file" >&2; exit 2; }
    [ "$CAL" -ef "$O/cal.json" ] || cp "$CAL" "$O/cal.json" || exit 1
    echo "calibration: $CAL (not measured again)"
else
    ranks_cal=$(echo $RANKS_PRED $RANKS_AUTO | tr ' ' '\n' | sort -un | paste -sd, -)
    "$B" plan calibrate --ranks "$ranks_cal" --transports "$(echo $TRANSPORTS | tr ' ' ,)" --rounds "$CAL_ROUNDS" \
        --max-bytes "$maxb" --out "$O/cal.json" 2>"$O/calibrate.log" | sed -n 1,3p || { cat "$O/calibrate.log"; exit 1; }
    [ -s "$O/cal.json" ] || { cat "$O/calibrate.log"; exit 1; }
    echo "calibrated at $(elapsed) s, load $(load)"
fi
: >"$O/rows"
if [ $do_pred = 1 ]; then
    # Every job from 4 B to 16 MiB, as `baton plan calibrate` measures, and only the rows from 1 MiB scored (the
    # awk below): until 2026-11-26 17:40 UTC the jobs started at 1 MiB, so the check timed sizes after a history
    # the calibration never has (a fresh job's first size; with several sweeps 1 MiB right after 16 MiB), and on
    # tcp that history moves a size by up to 2.3x (docs/measurements/plan-history.md, "Why the calibration came
    # out faster than the check"). Up to as many ranks as CPUs: JOBS jobs of ROUNDS
    # sweeps per shape, one per pass (as the calibration since 2026-11-27). More ranks than CPUs: ROUNDS passes, one
    # job of one sweep per shape and pass in the order of another round of the Williams design. Each row is the
    # median over its jobs (the python below): there a job's draw, not its sweeps, is what varies
    npass=$JOBS   # passes: JOBS, or the one-sweep jobs' whole designs (shm 6, tcp 6) if more
    for tr in $TRANSPORTS; do p=$(balanced "$(algos_of "$tr")" "$ROUNDS"); [ "$p" -gt $npass ] && npass=$p; done
    j=0
    while [ $j -lt $npass ]; do
        for tr in $TRANSPORTS; do
            for k in $RANKS_PRED; do
                if [ "$k" -le "$(nproc)" ]; then
                    [ $j -lt "$JOBS" ] && bench "$tr" "$k" "$(algos_of "$tr")" "$(balanced "$(algos_of "$tr")" "$ROUNDS")" 4 16M 2 5
                else
                    [ $j -lt "$(balanced "$(algos_of "$tr")" "$ROUNDS")" ] &&
                        bench "$tr" "$k" "$(round_order "$(algos_of "$tr")" $j)" 1 4 16M 2 5
                fi
            done
        done
        j=$((j + 1))
    done
    awk '$5 >= 1048576' "$O/rows" >"$O/rows.big" && mv "$O/rows.big" "$O/rows"
    echo "prediction check measured at $(elapsed) s, load $(load)"
fi
mv "$O/rows" "$O/pred_rows"

# ---- 2. auto against every forced algorithm -------------------------------------------------------------
export BATON_TUNING="$O/cal.json"
: >"$O/rows"
if [ $do_auto = 1 ]; then
    j=0
    while [ $j -lt "$JOBS" ]; do
        for tr in $TRANSPORTS; do
            for k in $RANKS_AUTO; do
                L="auto,$(algos_of "$tr")"
                bench "$tr" "$k" "$L" "$(balanced "$L" "$ROUNDS")" 8 "$(min "$maxb" 1048576)" 2 5
                [ "$maxb" -ge 2097152 ] && bench "$tr" "$k" "$L" "$(balanced "$L" "$BIG_ROUNDS")" 2M "$(min "$maxb" 16777216)" 2 5
                # from 32 MiB with more ranks than CPUs: one job (as the calibration; 3 or 4 ranks at 256 MiB take 0.1-0.6 s a call)
                [ "$maxb" -ge 33554432 ] && { [ "$k" -le "$(nproc)" ] || [ $j = 0 ]; } &&
                    bench "$tr" "$k" "$L" "$(balanced "$L" "$BIG_ROUNDS")" 32M "$maxb" 1 1
            done
        done
        j=$((j + 1))
    done
    echo "auto check measured at $(elapsed) s, load after: $(load)"
fi
unset BATON_TUNING
mv "$O/rows" "$O/auto_rows"

"$PY" - "$O/pred_rows" "$O/auto_rows" "$O/cal.json" "$B" $do_pred $do_auto "$O/verdicts" >"$O/tables" <<'PYEOF'
import json, math, subprocess, sys
pred_rows, auto_rows, cal, baton = sys.argv[1:5]
do_pred, do_auto = sys.argv[5] == "1", sys.argv[6] == "1"
verdicts = []
def rows(path):
    # a key measured by several jobs (JOBS, and the passes of one-sweep jobs with more ranks than CPUs): the median over the jobs
    runs = {}
    for line in open(path):
        tr, k, asked, used, b, us = line.split()
        runs.setdefault((tr, int(k), int(b), asked), []).append((float(us), used))
    out = {}
    for key, v in runs.items():
        v.sort()
        out[key] = v[(len(v) - 1) // 2] if len(v) % 2 else ((v[len(v) // 2 - 1][0] + v[len(v) // 2][0]) / 2, v[len(v) // 2][1])
    return out
say = print if do_pred else (lambda *x: None)
p = rows(pred_rows)
say("\nprediction (baton plan allreduce --calibrated) against baton bench, median of the rounds")
say("%-4s %5s %-7s %10s %14s %14s %8s" % ("link", "ranks", "algo", "bytes", "predicted_us", "measured_us", "error"))
ok = total = 0
for (tr, k, b, a), (us, used) in sorted(p.items()):
    out = subprocess.run([baton, "plan", "allreduce", "--calibrated", cal, "--link", tr, "--ranks", str(k), "--bytes", str(b),
                          "--json"], capture_output=True, text=True, check=True).stdout
    pred = [x["predicted_us"] for x in json.loads(out)["algos"] if x["algo"] == a][0]
    err = (pred - us) / us
    total += 1
    ok += abs(err) <= 0.25
    say("%-4s %5d %-7s %10d %14.1f %14.1f %+7.1f%%%s" % (tr, k, a, b, pred, us, 100 * err, "" if abs(err) <= 0.25 else "  MISSED"))
say("within 25 %%: %d of %d%s" % (ok, total, "  (met)" if ok == total and total else "  (MISSED)"))
if do_pred: verdicts.append("floor prediction (within 25 %%, 1-16 MiB): %s (%d of %d)" % ("met" if ok == total and total else "MISSED", ok, total))

say = print if do_auto else (lambda *x: None)
q = rows(auto_rows)
cells = {}
for (tr, k, b, a), v in q.items():
    cells.setdefault((tr, k, b), {})[a] = v
say("\n--algo auto against the best forced algorithm, median of the rounds")
say("%-4s %5s %10s %12s %12s %-7s %-7s %9s" % ("link", "ranks", "bytes", "auto_us", "best_us", "best", "auto", "auto/best"))
ok = total = same = 0
same_log = 0.0
wrong = []
for key in sorted(cells):
    c = cells[key]
    if "auto" not in c: continue
    forced = {a: v[0] for a, v in c.items() if a != "auto"}
    if not forced: continue
    best = min(forced, key=forced.get)
    ratio = c["auto"][0] / forced[best]
    # the algorithm auto ran ("ring", or "direct+shmbuf"): the same as the best forced one?
    chose_best = c["auto"][1].split("+")[0] == best
    total += 1
    ok += ratio <= 1.05
    if chose_best:
        same += 1
        same_log += math.log(ratio)
    elif ratio > 1.05:
        wrong.append(key)
    say("%-4s %5d %10d %12.2f %12.2f %-7s %-7s %9.3f%s" % (key[0], key[1], key[2], c["auto"][0], forced[best], best,
          c["auto"][1], ratio, "" if ratio <= 1.05 else "  MISSED (same algorithm)" if chose_best else "  MISSED"))
say("auto within 5 %%: %d of %d%s" % (ok, total, "  (met)" if ok == total and total else "  (MISSED)"))
# The floor's verdict: a cell is a miss when auto ran another algorithm than the fastest forced one and was more
# than 5 % slower. Where auto ran the fastest forced algorithm itself, the two figures are that algorithm measured
# twice in one job, and their ratio is noise plus auto's dispatch; the dispatch is held to the same 5 % over all
# such cells together (geometric mean of auto/best), so a systematic cost of auto still fails the floor.
gm = math.exp(same_log / same) if same else 1.0
say("auto chose another algorithm than the fastest forced one and was > 5 %% slower: %d of %d cells%s" %
    (len(wrong), total, "" if not wrong else " (" + ", ".join("%s %d ranks %d B" % k for k in wrong) + ")"))
say("auto ran the fastest forced algorithm itself: %d cells, auto/best geometric mean %.3f (at most 1.050)" % (same, gm))
met = total and not wrong and gm <= 1.05
# The machine's state (docs/measurements/plan-history.md, "shm 2 ranks: two machine states"): the 8-byte direct
# all-reduce of the
# calibration against the auto check's forced one; outside 1.6x the two ran in different states (auto then times
# every candidate, BATON_TUNING_STATE). Information only, not part of a floor.
try:
    cal_pts = {(x["transport"], x["ranks"], x["algo"], x["bytes"]): x["us"] for x in json.load(open(cal)).get("points", [])}
except (OSError, ValueError):
    cal_pts = {}
for (tr, k, b), c in sorted(cells.items()):
    if tr == "shm" and b == 8 and "direct" in c and (tr, k, "direct", 8) in cal_pts:
        r = c["direct"][0] / cal_pts[(tr, k, "direct", 8)]
        say("state: shm %d ranks, 8-byte direct all-reduce %.3f us in the calibration, %.3f us in the auto check (x%.2f%s)" %
            (k, cal_pts[(tr, k, "direct", 8)], c["direct"][0], r, "" if 1 / 1.6 <= r <= 1.6 else ": another machine state"))
if do_auto: verdicts.append("floor auto (8 B-256 MiB: no other choice > 5 %% slower than the fastest forced; same choice geomean <= 1.05): %s (%d of %d cells a wrong choice; same-choice geomean %.3f; strictly within 5 %%: %d of %d)" %
                            ("met" if met else "MISSED", len(wrong), total, gm, ok, total))
open(sys.argv[7], "w").write("".join(v + "\n" for v in verdicts))
PYEOF
status=$?
cat "$O/tables"
[ $status = 0 ] || echo "the tables could not be made (exit $status)"
[ -s "$O/errors" ] && { echo "stderr of the benches ($O/errors):"; head -5 "$O/errors"; }
echo "total time: $(elapsed) s, load $(load)"
echo
cat "$O/verdicts" 2>/dev/null
