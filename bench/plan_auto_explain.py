#!/usr/bin/python3
"""bench/plan_auto_explain.py OUTDIR...: for every wrong choice of `bench/plan_floors.sh OUTDIR`'s auto check (auto ran
another algorithm than the fastest forced one and was more than 5 % slower), what the calibration (OUTDIR/cal.json)
measured and fitted at that cell against what the check measured, and a class:
  fit     the fit disagrees with the calibration's own point by more than 2 % on the order (the model's shape)
  probe   the calibration (its fits, as auto reads them) ranks the fastest forced algorithm first: auto's online timing
          (BATON_TUNING_PROBE) moved it
  calib   the calibration ranks auto's algorithm first: calibration and check disagree (a stall or the job's draw in
          one of them; compare several runs to tell which)
With several OUTDIRs it also prints, per cell, each run's calibration and check order, so a cell where the calibration
and the check disagree the same way every time (systematic) stands out from one that flips (the job's draw).
Reads OUTDIR/auto_rows (tr k asked used bytes us) and OUTDIR/cal.json; the fixed rule and the 2 % margin are
src/comm/coll.c's and src/comm/autotune.c's (issue 9, docs/plan.md)."""
import json, sys

def rows(path):
    runs = {}
    for line in open(path):
        tr, k, asked, used, b, us = line.split()
        runs.setdefault((tr, int(k), int(b), asked), []).append((float(us), used))
    cells = {}
    for (tr, k, b, a), v in runs.items():
        v.sort()
        cells.setdefault((tr, k, b), {})[a] = v[(len(v) - 1) // 2]
    return cells

def fit(cal, tr, k, a, b):
    for f in cal["fits"]:
        if f["transport"] == tr and f["ranks"] == k and f["algo"] == a and f["lo"] <= b <= f["hi"]:
            return f["a_us"] + f["b_us_per_byte"] * b
    return None

def point(cal, tr, k, a, b):
    for p in cal["points"]:
        if p["transport"] == tr and p["ranks"] == k and p["algo"] == a and p["bytes"] == b:
            return p["us"]
    return None

def model_choice(cal, tr, k, b, forced):
    fixed = "direct" if tr == "shm" else ("rd" if b <= (65536 if k <= 2 else 1048576) else "ring")
    p = {a: fit(cal, tr, k, a, b) for a in forced}
    p = {a: v for a, v in p.items() if v is not None}
    if not p: return None
    best = min(p, key=p.get)
    return fixed if fixed in p and p[best] >= 0.98 * p[fixed] else best

def order(d):
    s = sorted(d, key=d.get)
    return "%s %.2fx" % (s[0], d[s[1]] / d[s[0]]) if len(s) > 1 else s[0]

runs = []
for out in sys.argv[1:]:
    cal = json.load(open(out + "/cal.json"))
    cells = rows(out + "/auto_rows")
    runs.append((out, cal, cells))
    print("== %s" % out)
    for key in sorted(cells):
        c = cells[key]
        if "auto" not in c: continue
        forced = {a: v[0] for a, v in c.items() if a != "auto"}
        best = min(forced, key=forced.get)
        used = c["auto"][1].split("+")[0]
        ratio = c["auto"][0] / forced[best]
        if used == best or ratio <= 1.05: continue
        tr, k, b = key
        pts = {a: point(cal, tr, k, a, b) for a in forced}
        fits = {a: fit(cal, tr, k, a, b) for a in forced}
        m = model_choice(cal, tr, k, b, forced)
        pts_ok = {a: v for a, v in pts.items() if v}
        fit_order = min((a for a in fits if fits[a]), key=lambda a: fits[a], default=None)
        pt_order = min(pts_ok, key=pts_ok.get) if pts_ok else None
        cls = "fit" if pt_order and fit_order and pt_order != fit_order else "probe" if m == best else "calib"
        print("%s %d %10d auto ran %s (%.3fx the fastest, %s) | check: %s | calibration points: %s | fits: %s | model: %s | %s" % (
            tr, k, b, used, ratio, best, " ".join("%s %.1f" % (a, forced[a]) for a in sorted(forced)),
            " ".join("%s %.1f" % (a, pts[a]) if pts[a] else "%s -" % a for a in sorted(forced)),
            " ".join("%s %.1f" % (a, fits[a]) if fits[a] else "%s -" % a for a in sorted(forced)), m, cls))
if len(runs) > 1:
    print("\n== per cell over the runs (calibration's fastest and its lead | check's fastest and its lead)")
    keys = set()
    for out, cal, cells in runs:
        for key, c in cells.items():
            forced = {a: v[0] for a, v in c.items() if a != "auto"}
            used = c.get("auto", (0, ""))[1].split("+")[0]
            if forced and used and used != min(forced, key=forced.get) and c["auto"][0] > 1.05 * min(forced.values()):
                keys.add(key)
    for key in sorted(keys):
        line = "%s %d %10d" % key
        for out, cal, cells in runs:
            forced = {a: v[0] for a, v in cells.get(key, {}).items() if a != "auto"}
            pts = {a: point(cal, key[0], key[1], a, key[2]) for a in forced}
            pts = {a: v for a, v in pts.items() if v}
            line += " | cal %s, check %s" % (order(pts) if pts else "-", order(forced) if forced else "-")
        print(line)
