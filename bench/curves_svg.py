#!/usr/bin/python3
"""bench/curves_svg.py OUT.svg TITLE "LABEL=metrics.jsonl" ...: the test-accuracy curves (one point per
evaluation record) of several baton train runs in one SVG (stdlib only)."""
import json, sys

out, title, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
colours = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"]
series = []
for arg in runs:
    label, path = arg.split("=", 1)
    try:
        open(path).close()
    except OSError:
        label += " (diverged)"; series.append((label, [])); continue
    pts = [(j["epoch"], 100 * j["test_accuracy"]) for j in map(json.loads, open(path)) if j["type"] == "eval"]
    series.append((label, pts))
W, H, ML, MB, MT, MR = 640, 360, 60, 40, 40, 20
xmax = max([e for _, p in series for e, _ in p] + [1])
ys = [a for _, p in series for _, a in p]
ylo, yhi = min(ys) - 1, max(ys) + 1
fx = lambda e: ML + (e / xmax) * (W - ML - MR)
fy = lambda a: H - MB - (a - ylo) / (yhi - ylo) * (H - MT - MB)
o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
     '<rect width="100%" height="100%" fill="white"/>',
     '<text x="%d" y="20" font-size="14">%s</text>' % (ML, title),
     '<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>' % (ML, MT, W - ML - MR, H - MT - MB)]
for k in range(0, int(xmax) + 1):
    o.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (fx(k), H - MB + 16, k))
for v in range(int(ylo), int(yhi) + 1, max(1, int((yhi - ylo) / 6))):
    o.append('<text x="%d" y="%.1f" text-anchor="end">%d%%</text>' % (ML - 4, fy(v) + 4, v))
o.append('<text x="%d" y="%d" text-anchor="middle">epoch</text>' % ((W + ML) // 2, H - 6))
for i, (label, pts) in enumerate(series):
    c = colours[i % len(colours)]
    if not pts:
        o.append('<text x="%d" y="%d" fill="%s">%s</text>' % (ML + 10, H - MB - 12 - 16 * (len(series) - 1 - i), c, label)); continue
    o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (c, " ".join("%.1f,%.1f" % (fx(e), fy(a)) for e, a in pts)))
    for e, a in pts:
        o.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s epoch %d: %.2f%%</title></circle>' % (fx(e), fy(a), c, label, e, a))
    last = pts[-1][1] if pts else 0
    o.append('<text x="%d" y="%d" fill="%s">%s: %.2f%%</text>' % (ML + 10, H - MB - 12 - 16 * (len(series) - 1 - i), c, label, last))
o.append("</svg>")
open(out, "w").write("\n".join(o) + "\n")
