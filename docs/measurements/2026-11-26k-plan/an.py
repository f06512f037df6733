import sys, statistics as st, collections as C
runs=[]
for f in sys.argv[1:]:
    job=0
    for line in open(f):
        if line.startswith('#'): job+=1; continue
        if not line.startswith('run,'): continue
        _,b,sw,r,pos,asked,used,us,it=line.strip().split(',')[:9]
        runs.append((f,job,int(b),int(sw),int(r),int(pos),asked,used,float(us),int(it)))
sizes=sorted(set(x[2] for x in runs))
for b in sizes:
    rs=[x for x in runs if x[2]==b]
    algos=sorted(set(x[6] for x in rs))
    print("size",b)
    for a in algos:
        v=[x for x in rs if x[6]==a]
        bypos=C.defaultdict(list)
        for x in v: bypos[x[5]].append(x[8])
        print("  %-5s med %9.1f  n=%d  by position: %s"%(a,st.median([x[8] for x in v]),len(v),
              "  ".join("%d:%.1f(n%d)"%(p,st.median(t),len(t)) for p,t in sorted(bypos.items()))))
    # same-round pairs auto vs the forced algo auto used
    pairs=C.defaultdict(list)
    key=lambda x:(x[0],x[1],x[3],x[4])
    rounds=C.defaultdict(dict)
    for x in rs: rounds[key(x)][x[6]]=x
    rat=[];ratpos=C.defaultdict(list)
    for k,d in rounds.items():
        if 'auto' in d and d['auto'][7] in d:
            f=d[d['auto'][7]]
            rat.append(d['auto'][8]/f[8]); ratpos['auto first' if d['auto'][5]<f[5] else 'auto after'].append(d['auto'][8]/f[8])
    if rat:
        print("  auto/same-forced per round: median %.3f  geomean %.3f  n=%d  min %.3f max %.3f"%(st.median(rat),st.geometric_mean(rat),len(rat),min(rat),max(rat)),
              "  ".join("%s %.3f(n%d)"%(k,st.median(v),len(v)) for k,v in ratpos.items()))
