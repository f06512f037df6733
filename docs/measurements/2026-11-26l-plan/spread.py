# python3 spread.py FILE: per job (a '#' line starts one), size and algorithm: the median of its timed runs (us)
# and the runs themselves; then per size the direct/ring ratio of the job medians and per sweep
import sys, statistics as st
jobs = []; cur = None
for line in open(sys.argv[1]):
    if line.startswith('#'):
        cur = {}; jobs.append((line.strip(), cur)); continue
    if not line.startswith('run,'): continue
    f = line.strip().split(',')
    b, sw, slot, algo, t = int(f[1]), int(f[2]), int(f[4]), f[5], float(f[7])
    cur.setdefault((b, algo), []).append((sw, slot, t))
for head, d in jobs:
    print(head)
    for b in sorted({k[0] for k in d}):
        row = []
        for a in sorted({k[1] for k in d if k[0] == b}):
            v = [t for _, _, t in d[(b, a)]]
            row.append('%s %.0f [%s]' % (a, st.median(v), ' '.join('%.0f' % t for t in v)))
        m = {a: st.median([t for _, _, t in d[(b, a)]]) for a in {k[1] for k in d if k[0] == b}}
        ratio = ' direct/ring %.2f' % (m['direct'] / m['ring']) if 'direct' in m and 'ring' in m else ''
        print('  %4d MiB %s%s' % (b >> 20, ' | '.join(row), ratio))
