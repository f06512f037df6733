#!/usr/bin/python3
"""bench/plan_scatter.py OUT.svg TITLE TABLE.txt...: predicted against measured all-reduce time, one dot per
cell of bench/plan_vs_measured.sh's tables (its printed output), log-log, with the line predicted = measured
and the +-25 % band of issue 9's floor. Colour: transport; filled dot: within 25 %, ring: outside. Stdlib only."""
import math, sys

out, title, files = sys.argv[1], sys.argv[2], sys.argv[3:]
colours = {"shm": "#1f77b4", "tcp": "#d62728", "net": "#2ca02c"}
pts = []
for path in files:
    for line in open(path):
        f = line.split()
        if len(f) >= 7 and f[0] in colours and f[1].isdigit():
            pred, meas = float(f[4]), float(f[5])
            if pred > 0 and meas > 0:
                pts.append((f[0], int(f[1]), f[2], pred / 1e3, meas / 1e3))
if not pts:
    sys.exit("plan_scatter.py: no table rows in " + " ".join(files))
W, H, M = 560, 520, 70
lo = 10 ** math.floor(math.log10(min(min(p[3], p[4]) for p in pts) / 1.3))
hi = 10 ** math.ceil(math.log10(max(max(p[3], p[4]) for p in pts) * 1.3))


def X(v):
    return M + (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (W - M - 20)


def Y(v):
    return H - M - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (H - M - 40)


s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
     '<rect width="100%" height="100%" fill="white"/>',
     '<text x="%d" y="20" text-anchor="middle" font-size="14">%s</text>' % (W // 2, title)]
d = lo
while d <= hi * 1.0001:
    s.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>' % (X(d), Y(lo), X(d), Y(hi)))
    s.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>' % (X(lo), Y(d), X(hi), Y(d)))
    s.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (X(d), H - M + 16, d))
    s.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (M - 6, Y(d) + 4, d))
    d *= 10
for k, dash in ((1, ""), (1.25, ' stroke-dasharray="4,3"'), (0.75, ' stroke-dasharray="4,3"')):
    s.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555"%s/>' % (X(lo), Y(lo * k), X(hi / max(k, 1)), Y(hi / max(k, 1) * k), dash))
s.append('<text x="%d" y="%d" text-anchor="middle">measured (ms, median of rounds)</text>' % ((W + M) // 2, H - M + 34))
s.append('<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">predicted (ms)</text>' % ((H - M) // 2, (H - M) // 2))
ok = 0
for tr, k, a, pred, meas in pts:
    inside = abs(pred - meas) <= 0.25 * meas
    ok += inside
    c = colours[tr]
    s.append('<circle cx="%.1f" cy="%.1f" r="4" fill="%s" stroke="%s"><title>%s %d ranks %s: predicted %.2f ms, measured %.2f ms</title></circle>'
             % (X(meas), Y(pred), c if inside else "none", c, tr, k, a, pred, meas))
y = 44
for tr in [t for t in colours if any(p[0] == t for p in pts)]:
    s.append('<circle cx="%d" cy="%d" r="4" fill="%s"/><text x="%d" y="%d">%s</text>' % (M + 10, y, colours[tr], M + 20, y + 4, tr))
    y += 16
s.append('<text x="%d" y="%d">%d of %d within 25 %% (dashed); ring = outside</text>' % (M + 10, y + 4, ok, len(pts)))
s.append("</svg>")
open(out, "w").write("\n".join(s) + "\n")
