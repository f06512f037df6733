#!/usr/bin/python3
"""bench/loss_to_svg.py LOG OUT.svg [TITLE]: the loss curve of a `baton train --model gpt --log-every N` log
(stderr) as an SVG picture: training loss per logged step (thin line) and validation loss at each evaluation
(dots), loss (nats per byte) against training seconds."""
import re
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: loss_to_svg.py LOG OUT.svg [TITLE]")
    title = sys.argv[3] if len(sys.argv) > 3 else "baton GPT"
    train, val = [], []   # (step, loss)
    tokens_per_s = {}
    for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
        m = re.match(r"step (\d+)/\d+\s+loss ([0-9.]+)\s+lr \S+\s+([0-9.]+) tokens/s", line)
        if m:
            train.append((int(m.group(1)), float(m.group(2))))
            tokens_per_s[int(m.group(1))] = float(m.group(3))
        m = re.match(r"eval step (\d+)\s+val_loss ([0-9.]+).*elapsed ([0-9.]+) s", line)
        if m:
            val.append((int(m.group(1)), float(m.group(2)), float(m.group(3))))
    if not train:
        sys.exit("loss_to_svg.py: %s: no 'step N/M loss' lines (run with --log-every)" % sys.argv[1])
    # x axis: training seconds, from the eval lines' elapsed time (linear between evaluations)
    pts = [(0, 0.0)] + [(s, e) for s, _, e in val]

    def secs(step):
        for (s0, e0), (s1, e1) in zip(pts, pts[1:]):
            if step <= s1:
                return e0 + (e1 - e0) * (step - s0) / max(1, s1 - s0)
        s0, e0 = pts[-1]
        return e0
    w, h, l, r, t, b = 720, 420, 60, 20, 40, 50
    xmax = max(secs(train[-1][0]), 1e-9)
    ymax = max(max(x for _, x in train), max([v for _, v, _ in val] or [0])) * 1.05
    ymin = 0.0

    def X(s):
        return l + (w - l - r) * secs(s) / xmax

    def Y(v):
        return t + (h - t - b) * (1 - (v - ymin) / (ymax - ymin))
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (w, h),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" font-size="14">%s</text>' % (l, title)]
    for i in range(6):   # grid and labels
        v = ymin + (ymax - ymin) * i / 5
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (l, w - r, Y(v), Y(v)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%.1f</text>' % (l - 6, Y(v) + 4, v))
        sx = xmax * i / 5
        xx = l + (w - l - r) * i / 5
        out.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#ddd"/>' % (xx, xx, t, h - b))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%.0f</text>' % (xx, h - b + 16, sx))
    out.append('<text x="%d" y="%d" text-anchor="middle">training seconds (2 workers)</text>' % ((l + w - r) // 2, h - 12))
    out.append('<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">loss (nats/byte)</text>' % ((t + h - b) // 2, (t + h - b) // 2))
    out.append('<polyline fill="none" stroke="#4a7bd0" stroke-width="1" points="%s"/>' %
               " ".join("%.1f,%.1f" % (X(s), Y(v)) for s, v in train))
    for s, v, _ in val:
        out.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="#d0504a"/>' % (X(s), Y(v)))
    out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#4a7bd0"/><text x="%d" y="%d">training loss</text>' %
               (w - 190, w - 170, t + 10, t + 10, w - 165, t + 14))
    out.append('<circle cx="%d" cy="%d" r="3.5" fill="#d0504a"/><text x="%d" y="%d">validation loss</text>' %
               (w - 180, t + 28, w - 165, t + 32))
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
