#!/bin/sh
# bench/zero.sh: ZeRO against plain data parallelism on the wide MLP of issue 14 (784-4096x4-10, about 54 M
# parameters, AdamW: 16 bytes per parameter of state without ZeRO), 2 workers, 1 thread each, synthetic data.
# Interleaved plain / --zero 1 / --zero 2, REPS runs each; medians of step_ms, and per rank: optimizer bytes,
# gradient bytes (kept + staging), the CPU time of the whole run (every process, from the children's rusage)
# and every rank's peak RSS (VmHWM, the JSON's peak_rss_bytes_per_rank, and the same without its file-backed
# pages: rss_file_bytes_per_rank, when the peak is the resident set at the end); then what `baton plan memory`
# predicts for each stage against what the run reports, and the issue's floors, met or MISSED.
# Run it under flock /tmp/baton-bench.lock.
#
# Step times: the floors use the steps after the first of each run (step_ms_after_first; the first step of
# every stage also faults in the pages of the peers' shared buffers it writes, a one-off of several hundred
# ms here); the mean over all steps (step_ms) is printed beside them.
#
# usage: bench/zero.sh [REPS (default 3)] [STEPS (default 10)]
set -eu
REPS=${1:-3}
STEPS=${2:-10}
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
make --no-print-directory BUILD="$BUILD" "$BUILD/baton" >/dev/null
TMP=$(mktemp -d)
export TMPDIR="$TMP"   # the runs' metrics land here, removed at exit
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM HUP
ARGS="--data synthetic --train-samples 4096 --hidden 4096,4096,4096,4096 --optim adamw --batch 16 --threads 1 \
--steps $STEPS --warmup 0 --json"
one() {   # STAGE: one run; appends step_ms optim_bytes grad_bytes params param_bytes cpu_s rss(rank 0) rss(rank 1) ...
    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 - "$BUILD/baton" "$1" "$ARGS" >> "$TMP/z$1" <<'PY'
import json, resource, subprocess, sys
baton, z, args = sys.argv[1], sys.argv[2], sys.argv[3].split()
c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
out = subprocess.run([baton, "run", "-n", "2", "--", baton, "train"] + args + ["--zero", z], check=True,
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()
c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
j = json.loads(out.strip().splitlines()[-1])
cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)   # every process of the run, init included
# per rank: the peak (VmHWM), and the file-backed pages (code, libraries) when the peak is the resident set
# at the end (else -1: the split of the peak is not known)
peak, now, fil = j["peak_rss_bytes_per_rank"], j["rss_bytes_per_rank"], j["rss_file_bytes_per_rank"]
print(j["step_ms"], j["optim_bytes"], j["grad_bytes"], j["params"], j["param_bytes"], cpu, j["step_ms_after_first"],
      *peak, *[f if p == n else -1 for p, n, f in zip(peak, now, fil)], *j["pss_bytes_per_rank"])
PY
}
for r in $(seq 1 "$REPS"); do
    for z in 0 1 2; do one "$z"; done
done
echo "$(lscpu | sed -n 's/^Model name: *//p'); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg);" \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-<unset>}; 2 workers; $ARGS; medians of $REPS interleaved runs"
P=$(head -n 1 "$TMP/z0" | cut -d' ' -f4)
for z in 0 1 2; do
    "$BUILD/baton" plan memory --params "$P" --ranks 2 --zero $z --largest-param 16777216 --json |
        /usr/bin/python3 -c "import json,sys; j=json.load(sys.stdin); print(j['params_bytes'], j['grads_bytes'], j['optimizer_bytes'])" \
        > "$TMP/p$z"
done
/usr/bin/python3 - "$TMP" <<'PY'
import statistics as S, sys
med, runs, allrows = {}, {}, {}
for z in range(3):
    rows = allrows[z] = [list(map(float, l.split())) for l in open("%s/z%d" % (sys.argv[1], z))]
    med[z] = [S.median(c) for c in zip(*rows)]
    runs[z] = [r[6] for r in rows]
rows0 = allrows[0]
M = 1048576.0
ranks = (len(med[0]) - 7) // 3
print("| ZeRO | ms a step after the first (median; runs) | vs plain | all steps (median) | CPU s per run (all processes) | optimizer MiB/rank | gradients MiB/rank | "
      + " | ".join("peak RSS MiB rank %d (saved)" % r for r in range(ranks)) + " |")
print("|" + " --- |" * (7 + ranks))
for z in range(3):
    step_all, opt, grad, _, par, cpu, step = med[z][:7]
    rss = med[z][7:7 + ranks]
    print("| %d | %.0f (%s) | %+.1f %% | %.0f (%+.1f %%) | %.1f | %.1f | %.1f | %s |" % (z, step, " ".join("%.0f" % x for x in runs[z]),
          100 * (step / med[0][6] - 1), step_all, 100 * (step_all / med[0][0] - 1), cpu, opt / M, grad / M,
          " | ".join("%.1f (%+.1f)" % (rss[r] / M, (med[0][7 + r] - rss[r]) / M) for r in range(ranks))))
print()
print("| ZeRO | plan: params / gradients / optimizer MiB | run: params / gradients / optimizer MiB | worst plan error |")
print("| --- | --- | --- | --- |")
worst = 0.0
for z in range(3):
    plan = list(map(float, open("%s/p%d" % (sys.argv[1], z)).read().split()))
    run = [med[z][4], med[z][2], med[z][1]]
    err = max(abs(p - r) / r for p, r in zip(plan, run))
    worst = max(worst, err)
    print("| %d | %s | %s | %.2f %% |" % (z, " / ".join("%.1f" % (x / M) for x in plan), " / ".join("%.1f" % (x / M) for x in run), 100 * err))
print()
ok = lambda c: "met" if c else "MISSED"
d1, d2 = med[1][6] / med[0][6] - 1, med[2][6] / med[0][6] - 1
print("floor: ZeRO-1 step within 10 %% of plain: %s (%+.1f %%)" % (ok(d1 <= 0.10), 100 * d1))
sharded = med[0][1] - med[1][1]   # the optimizer state ZeRO-1 does not keep
for r in range(ranks):
    saved = med[0][7 + r] - med[1][7 + r]
    # the resolution of a peak RSS: how far identical plain runs of this rank differ among themselves
    spread = max(rw[7 + r] for rw in rows0) - min(rw[7 + r] for rw in rows0)
    print("floor: ZeRO-1 peak RSS of rank %d lower by at least the %.1f MiB of optimizer state it shards: %s (%.1f MiB lower, "
          "margin %+.0f KiB; plain runs' own peak RSS spread over %.0f KiB)"
          % (r, sharded / M, ok(saved >= sharded), saved / M, (saved - sharded) / 1024, spread / 1024))
    # the same peak without its file-backed pages (the binary and its libraries, which every stage maps alike
    # and whose resident part varies with the page cache): the medians of peak - file over the runs whose
    # peak was the resident set at the end (all of them, normally)
    data = {}
    for z in (0, 1):
        data[z] = [rw[7 + r] - rw[7 + ranks + r] for rw in allrows[z] if rw[7 + ranks + r] >= 0]
    if data[0] and data[1]:
        dsaved = S.median(data[0]) - S.median(data[1])
        # resident sets count whole 4 KiB pages: each of AdamW's two moment arrays ends in a page of its own,
        # so the pages saved can fall short of the bytes by up to one page per array
        print("       the same without the program's file-backed pages (code and libraries; %d and %d runs), to the "
              "page (2 x 4 KiB): %s (%.1f MiB lower, margin %+.1f KiB)" % (len(data[0]), len(data[1]),
              ok(dsaved >= sharded - 2 * 4096), dsaved / M, (dsaved - sharded) / 1024))
# the proportional set at the end of the run (Pss: shared pages divided among the processes that map them), the
# node's memory per rank: on one node ZeRO's ranks share one parameter slab, which the resident set counts whole
params = med[0][4]
for r in range(ranks):
    psaved = med[0][7 + 2 * ranks + r] - med[1][7 + 2 * ranks + r]
    want = sharded + params * (ranks - 1) / ranks
    print("       ZeRO-1 proportional set (PSS) of rank %d at the end: %.1f MiB lower (the optimizer state plus %d/%d of "
          "the %.1f MiB of parameters the node's ranks share: %.1f MiB)" % (r, psaved / M, ranks - 1, ranks, params / M, want / M))
print("floor: ZeRO-2 step within 15 %% of plain: %s (%+.1f %%)" % (ok(d2 <= 0.15), 100 * d2))
print("floor: baton plan memory within 5 %% of the run: %s (worst %.2f %%)" % (ok(worst <= 0.05), 100 * worst))
PY
