import re, sys, collections as C, math
runs = ["2026-11-26-quiet/plan.txt","2026-11-26b-quiet/plan.txt","2026-11-26c-quiet/plan.txt","2026-11-26d-quiet/plan.txt",
        "2026-11-26e-quiet/plan.txt","2026-11-26e-quiet/plan_probe_off.txt","2026-11-26g-quiet/plan.txt",
        "2026-11-26g-quiet/plan_after_revert.txt","2026-11-26j-quiet/plan.txt"]
tags = ["a04","b06","c07","d09","e13p","e13o","g15","g16","j18"]
D = "docs/measurements/"
auto = C.defaultdict(dict); pred = C.defaultdict(dict)
for t, f in zip(tags, runs):
    sec = None
    for line in open(D + f):
        if line.startswith("prediction ("): sec = "p"; continue
        if line.startswith("--algo auto"): sec = "a"; continue
        w = line.split()
        if sec == "a" and len(w) >= 8 and w[0] in ("shm", "tcp") and w[1].isdigit():
            auto[(w[0], int(w[1]), int(w[2]))][t] = (w[6], w[5], float(w[7]), float(w[3]), float(w[4]))
        if sec == "p" and len(w) >= 7 and w[0] in ("shm", "tcp") and w[1].isdigit():
            pred[(w[0], int(w[1]), w[2], int(w[3]))][t] = (float(w[4]), float(w[5]), float(w[6].rstrip('%')))
mode = sys.argv[1] if len(sys.argv) > 1 else "a"
if mode == "a":
    for key in sorted(auto):
        d = auto[key]
        nwrong = sum(1 for t, v in d.items() if v[0].split('+')[0] != v[1] and v[2] > 1.05)
        nsame = sum(1 for t, v in d.items() if v[0].split('+')[0] == v[1] and v[2] > 1.05)
        if nwrong + nsame == 0: continue
        print("%s %d %10d wrong %d same>5%% %d | %s" % (key[0], key[1], key[2], nwrong, nsame,
              " ".join("%s:%s/%s%.2f%s" % (t, v[0][:4], v[1][:4], v[2], "!" if v[0].split('+')[0] != v[1] and v[2] > 1.05 else "") for t, v in sorted(d.items()))))
elif mode == "p":
    for key in sorted(pred):
        d = pred[key]
        if not any(abs(v[2]) > 25 for v in d.values()): continue
        print("%s %d %-6s %9d | %s" % (key + (" ".join("%s:%+.0f" % (t, v[2]) for t, v in sorted(d.items())),)))
if mode == "s":
    import statistics as st
    use = sys.argv[2].split(",")
    bysize = C.defaultdict(list)
    for key, d in auto.items():
        for t, v in d.items():
            if t in use and v[0].split('+')[0] == v[1]:
                bysize[(key[0], key[2])].append(v[2])
    for k in sorted(bysize):
        v = bysize[k]
        if k[1] < 1 << 20: continue
        print("%s %10d n=%2d geomean %.3f median %.3f >1.05: %d  <0.95: %d" % (k[0], k[1], len(v), st.geometric_mean(v), st.median(v), sum(x > 1.05 for x in v), sum(x < 0.95 for x in v)))
if mode == "w":
    for key in sorted(auto):
        d = auto[key]
        nwrong = sum(1 for t, v in d.items() if v[0].split('+')[0] != v[1] and v[2] > 1.05)
        if nwrong < 2: continue
        bests = C.Counter(v[1] for v in d.values()); autos = C.Counter(v[0].split('+')[0] for v in d.values())
        print("%s %d %10d wrong %d/%d | fastest forced: %s | auto ran: %s" % (key[0], key[1], key[2], nwrong, len(d), dict(bests), dict(autos)))
