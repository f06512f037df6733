# python3 slots.py FILE: per size and algorithm, the median of the timed runs by slot (0 = first at the size in its
# round) over every job of FILE, with the count; and the minimum of every run
import sys, statistics as st
d = {}
for line in open(sys.argv[1]):
    if not line.startswith('run,'): continue
    f = line.strip().split(',')
    d.setdefault((int(f[1]), f[5], int(f[4])), []).append(float(f[7]))
for b in sorted({k[0] for k in d}):
    for a in sorted({k[1] for k in d if k[0] == b}):
        cells = ['slot %d: %.0f (n=%d)' % (s, st.median(d[(b, a, s)]), len(d[(b, a, s)])) for s in sorted({k[2] for k in d if k[:2] == (b, a)})]
        allv = [t for k, v in d.items() if k[:2] == (b, a) for t in v]
        print('%4d MiB %-6s %s | all %.0f min %.0f' % (b >> 20, a, '  '.join(cells), st.median(allv), min(allv)))
