#!/bin/sh
# test_report.sh: `baton report` in a real headless browser (Debian's chromium; issue 12, item 2). A 2-rank
# run writes its metrics, baton report draws them, and chromium loads the page:
#   1. the console check catches an error (a canary page that logs one), and the report logs none;
#   2. every chart is in the DOM with its marks (counts follow from the run: evaluations, ranks, phases);
#   3. the per-rank numbers shown equal the medians computed here from the metrics file;
#   4. the screenshot is not a blank page (many non-white pixels, the charts' colours present);
#   5. the page is self-contained (no script, no http(s) reference) and under 2 MB.
# Chromium runs with a fresh --user-data-dir inside the test's directory, removed with it (trap).
. tests/sh/lib.sh   # tmo: timeouts scaled like the C tests'
BUILD=${BUILD:-build}
B="$PWD/$BUILD/baton"
PY=${BATON_TEST_PY:-/usr/bin/python3}   # make asan: the interpreter with the ASan runtime preloaded
passed=0
failed=0
ok() { echo "PASS $1"; passed=$((passed + 1)); }
ko() { echo "FAIL $1"; failed=$((failed + 1)); }

if ! command -v chromium >/dev/null 2>&1; then
    echo "FAIL chromium is not installed (apt-get install chromium; it is in DEB_PKGS)"
    echo "0 passed, 1 failed"
    exit 1
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/baton-report-XXXXXX") || exit 1
cleanup() { rm -rf "$T"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
export TMPDIR="$T" OPENBLAS_NUM_THREADS=1
unset XDG_RUNTIME_DIR

browse() {   # browse MODE PAGE OUT: MODE dump (DOM to OUT, console log to OUT.log) or shot (PNG to OUT)
    prof=$(mktemp -d "$T/profile-XXXXXX")
    flags="--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
--disable-sync --no-first-run --user-data-dir=$prof --enable-logging=stderr --v=0"
    if [ "$1" = dump ]; then
        tmo 90 chromium $flags --dump-dom "file://$2" >"$3" 2>"$3.log"
    else
        tmo 90 chromium $flags --window-size=900,2400 --hide-scrollbars --screenshot="$3" "file://$2" \
            >/dev/null 2>"$3.log"
    fi
    rc=$?
    rm -rf "$prof"
    return $rc
}
# Console messages of the page (chromium prints them as ...:INFO:CONSOLE:line] "message", source: ...).
console_lines() { grep -E ':CONSOLE[:(][0-9]+\)?\]|Uncaught|Refused to' "$1" ; }

# 1a. The console check works: a page that logs an error is caught.
printf '<!DOCTYPE html><html><body><p>canary</p><script>console.error("canary-error-7f3a");</script></body></html>\n' >"$T/canary.html"
browse dump "$T/canary.html" "$T/canary.dom"
if console_lines "$T/canary.dom.log" | grep -q canary-error-7f3a; then ok console_check_catches_an_error
else ko console_check_catches_an_error; tail -5 "$T/canary.dom.log"; fi

# The run: 2 ranks, 2 epochs of synthetic data (2 evaluations), metrics into the run directory.
mkdir "$T/run"
if ! tmo 150 "$B" run -n 2 -- "$B" train --data synthetic --train-samples 2048 --hidden 64 --batch 32 \
        --threads 1 --epochs 2 --metrics "$T/run/metrics.jsonl" >"$T/train.out" 2>&1; then
    ko training_run; cat "$T/train.out"
fi
if tmo 60 "$B" report "$T/run" -o "$T/report.html" >"$T/report.out" 2>&1 && [ -s "$T/report.html" ]; then
    ok report_written
else
    ko report_written; cat "$T/report.out"
fi

# 5. Self-contained and small.
size=$(wc -c <"$T/report.html")
remote=$(grep -oE 'https?://[^" ]*' "$T/report.html" | grep -v '^http://www.w3.org/2000/svg$')
if [ "$size" -lt 2000000 ] && ! grep -qiE '<script|<link|<img|<iframe|@import|url\(' "$T/report.html" && [ -z "$remote" ]; then
    ok "report_self_contained_and_small ($size bytes)"
else
    ko report_self_contained_and_small; echo "$remote" | head -3
fi

# 1b, 2, 3. Load it; no console message at all; marks and numbers.
t0=$(date +%s.%N)
browse dump "$T/report.html" "$T/report.dom"
t1=$(date +%s.%N)
echo "note: chromium start + load + DOM dump took $($PY -c "print(round($t1 - $t0, 2))") s (not asserted)"
if [ -s "$T/report.dom" ] && ! console_lines "$T/report.dom.log" >/dev/null; then ok report_loads_without_console_errors
else ko report_loads_without_console_errors; console_lines "$T/report.dom.log" | head -5; fi

if $PY - "$T/report.dom" "$T/run/metrics.jsonl" <<'EOF'
import json, sys
from html.parser import HTMLParser
dom, metrics = sys.argv[1], sys.argv[2]
class P(HTMLParser):
    def __init__(self):
        super().__init__(); self.chart = None; self.marks = {}; self.cells = []; self.in_td = False; self.text = {}
        self.cur = None
    def handle_starttag(self, tag, a):
        a = dict(a)
        if tag == "svg" and "chart" in (a.get("class") or "").split():
            self.chart = a["id"]; self.marks[self.chart] = []
        elif self.chart and "mark" in (a.get("class") or "").split():
            self.marks[self.chart].append((tag, a))
        if tag == "td": self.in_td = True; self.cells.append("")
        if a.get("id") in ("diagnosis", "final-acc"): self.cur = a["id"]; self.text[self.cur] = ""
    def handle_endtag(self, tag):
        if tag == "svg": self.chart = None
        if tag == "td": self.in_td = False
        if tag in ("p", "b"): self.cur = None
    def handle_data(self, d):
        if self.in_td: self.cells[-1] += d
        if self.cur: self.text[self.cur] += d
p = P(); p.feed(open(dom).read())
steps = {}; evals = []; run = None; diag = None
for line in open(metrics):
    j = json.loads(line)
    if j["type"] == "run": run = j
    elif j["type"] == "step": steps.setdefault(j["rank"], []).append(j)
    elif j["type"] == "eval": evals.append(j)
    elif j["type"] == "diagnosis": diag = j
world = run["world_size"]; bad = []
def want(cond, what):
    if not cond: bad.append(what)
expect = {"chart-loss": None, "chart-accuracy": None, "chart-throughput": None, "chart-steptime": None,
          "chart-split": None, "chart-timeline": None}
for c in expect: want(c in p.marks and len(p.marks[c]) > 0, "chart %s has no marks" % c)
want(sum(1 for t, a in p.marks.get("chart-loss", []) if t == "circle") == len(evals), "loss: one point per eval")
want(sum(1 for t, a in p.marks.get("chart-loss", []) if t == "polyline") == 1, "loss: one train curve")
acc = [float(a["data-value"]) for t, a in p.marks.get("chart-accuracy", []) if t == "circle"]
want([round(x, 2) for x in acc] == [round(100 * e["test_accuracy"], 2) for e in evals], "accuracy points %s" % acc)
want(len(p.marks.get("chart-steptime", [])) == world, "one box per rank")
want(len(p.marks.get("chart-split", [])) == 3 * world, "three parts per rank")
want(len(p.marks.get("chart-timeline", [])) == 5 * 4 * world, "5 phases x 4 steps x ranks")
want(len(p.marks.get("chart-throughput", [])) == min(60, run["steps"]), "throughput bins")
# the per-rank medians, computed here from the file
def med(v):
    v = sorted(v); n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
rows = [p.cells[i:i + 6] for i in range(0, len(p.cells), 6)]
want(len(rows) == world, "table rows %d" % len(rows))
for r in range(world):
    s = sorted(steps[r], key=lambda j: j["step"])[2:]
    mine = [r, med([j["step_ms"] for j in s]), med([j["forward_ms"] + j["backward_ms"] + j["optim_ms"] for j in s]),
            med([j["comm_exposed_ms"] for j in s]), med([j["data_ms"] for j in s]), med([j["wait_ms"] for j in s])]
    shown = [float(x) for x in rows[r]] if r < len(rows) else []
    want(len(shown) == 6 and all(abs(a - b) <= 0.006 for a, b in zip(mine, shown)), "rank %d: file %s page %s" % (r, mine, shown))
    box = [a for t, a in p.marks["chart-steptime"] if a.get("data-rank") == str(r)]
    want(box and abs(float(box[0]["data-median"]) - mine[1]) < 0.0006, "box median rank %d" % r)
want(p.text.get("diagnosis", "").strip() == diag["text"], "diagnosis text")
want(p.text.get("final-acc", "").strip() == "%.2f %%" % (100 * evals[-1]["test_accuracy"]), "final accuracy")
for b in bad: print("  mismatch:", b)
sys.exit(1 if bad else 0)
EOF
then ok every_chart_has_its_marks_and_numbers_match_the_metrics_file
else ko every_chart_has_its_marks_and_numbers_match_the_metrics_file; fi

# 4. Not a blank page: decode the screenshot (PNG, stdlib zlib) and count pixels.
browse shot "$T/report.html" "$T/report.png"
if $PY - "$T/report.png" <<'EOF'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, typ = struct.unpack(">I4s", data[pos:pos + 8]); body = data[pos + 8:pos + 8 + n]; pos += 12 + n
    if typ == b"IHDR": w, h, depth, ctype, _, _, inter = struct.unpack(">IIBBBBB", body)
    elif typ == b"IDAT": idat += body
assert depth == 8 and inter == 0 and ctype in (2, 6), (depth, ctype, inter)
bpp = 3 if ctype == 2 else 4
raw = zlib.decompress(idat); stride = w * bpp; prev = bytearray(stride); rows = []; i = 0
for y in range(h):
    f = raw[i]; line = bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0; b = prev[x]; c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line); prev = line
nonwhite = 0; colours = set()
for line in rows:
    for x in range(0, stride, bpp):
        px = tuple(line[x:x + 3])
        if px != (255, 255, 255): nonwhite += 1
        colours.add(px)
want = {(0x1f, 0x77, 0xb4): "blue", (0xd6, 0x27, 0x28): "red", (0xff, 0x7f, 0x0e): "orange", (0x2c, 0xa0, 0x2c): "green"}
missing = [name for c, name in want.items() if c not in colours]
frac = nonwhite / (w * h)
print("  screenshot %dx%d: %.1f %% non-white pixels, %d colours%s" % (w, h, 100 * frac, len(colours),
      ", missing " + ",".join(missing) if missing else ""))
sys.exit(0 if frac > 0.03 and not missing else 1)
EOF
then ok screenshot_is_not_a_blank_page
else ko screenshot_is_not_a_blank_page; tail -3 "$T/report.png.log"; fi

# Bad input: one line, exit 2.
"$B" report "$T/nonexistent" >"$T/bad.out" 2>&1; rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <"$T/bad.out")" -eq 1 ] && grep -q "no metrics.jsonl\|nonexistent" "$T/bad.out"; then
    ok report_of_a_missing_run_fails_with_one_line
else ko report_of_a_missing_run_fails_with_one_line; cat "$T/bad.out"; fi
printf '{"type":"step","step":0,"rank":5}\n' >"$T/bad.jsonl"
"$B" report "$T/bad.jsonl" -o "$T/bad.html" >"$T/bad.out" 2>&1; rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <"$T/bad.out")" -eq 1 ] && [ ! -e "$T/bad.html" ]; then
    ok report_of_a_malformed_file_fails_with_one_line
else ko report_of_a_malformed_file_fails_with_one_line; cat "$T/bad.out"; fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
