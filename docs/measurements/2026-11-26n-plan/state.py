import json, glob, os, sys
def rows(f):
    out = {}
    for l in open(f):
        t = l.split()
        if len(t) != 6 or t[0] != 'shm' or t[1] != '2': continue
        if t[2] == 'auto': continue
        out[(t[2], int(t[4]))] = float(t[5])
    return out
def cal(f):
    d = json.load(open(f)); out = {}
    for p in d.get('points', []):
        if p['transport'] == 'shm' and p['ranks'] == 2: out[(p['algo'], p['bytes'])] = p['us']
    return out, d.get('about', '')
keys = [('direct', 8), ('ring', 8), ('rd', 8), ('direct', 1 << 21), ('ring', 1 << 21), ('direct', 1 << 26), ('ring', 1 << 26)]
print('%-55s' % 'source', ' '.join('%9s' % ('%s@%s' % (a, b if b < 1024 else str(b >> 20) + 'M')) for a, b in keys))
for dname in sorted(glob.glob('*')):
    for f in sorted(glob.glob(dname + '/*')):
        if f.endswith('.json'):
            try: r, about = cal(f)
            except Exception: continue
        elif f.endswith('rows.txt'): r = rows(f)
        else: continue
        if not r: continue
        def g(k):
            v = r.get(k); return '%9.3f' % v if v is not None else '%9s' % '-'
        print('%-55s' % f[:55], ' '.join(g(k) for k in keys))
