#!/usr/bin/env python3
"""trace_to_svg.py TRACE.json OUT.svg [FIRST_STEP] [STEPS]: draws a `baton train --trace` timeline (one row
per rank x thread) as an SVG, for docs. Steps are counted by the main thread's "forward" spans."""
import json
import sys

COLORS = {"forward": "#4e79a7", "backward": "#59a14f", "optimizer": "#edc948", "wait": "#e15759",
          "allreduce": "#f28e2b", "convert": "#b07aa1", "data": "#9c9c9c"}


def main():
    path, out = sys.argv[1], sys.argv[2]
    first = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    nsteps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    ev = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    fw = sorted(e["ts"] for e in ev if e["pid"] == 0 and e["name"] == "forward")
    t0, t1 = fw[first], fw[first + nsteps]
    rows = sorted({(e["pid"], e["tid"]) for e in ev})
    W, H, L = 1100, 34, 130
    scale = (W - L - 10) / (t1 - t0)
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">'
           % (W, H * len(rows) + 60), '<rect width="100%" height="100%" fill="white"/>']
    for i, (pid, tid) in enumerate(rows):
        y = 10 + i * H
        svg.append('<text x="4" y="%d">rank %d %s</text>' % (y + 18, pid, "comm thread" if tid else "main"))
        for e in ev:
            if (e["pid"], e["tid"]) != (pid, tid) or e["ts"] + e["dur"] < t0 or e["ts"] > t1:
                continue
            base = e["name"].split(" ")[0]
            x = L + max(e["ts"] - t0, 0) * scale
            w = max(min(e["ts"] + e["dur"], t1) - max(e["ts"], t0), 0) * scale
            svg.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" stroke="white" stroke-width="0.3">'
                       '<title>%s %.2f ms</title></rect>' % (x, y, max(w, 0.5), H - 8, COLORS.get(base, "#ccc"),
                                                             e["name"], e["dur"] / 1000))
    y = 10 + len(rows) * H + 8
    x = L
    for name, c in COLORS.items():
        svg.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>'
                   % (x, y, c, x + 16, y + 10, name))
        x += 110
    svg.append('<text x="%d" y="%d">%d steps, %.1f ms</text>' % (L, y + 32, nsteps, (t1 - t0) / 1000))
    svg.append("</svg>")
    open(out, "w").write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
