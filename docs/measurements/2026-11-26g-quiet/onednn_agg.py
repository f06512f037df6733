import sys,statistics,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    if not l.startswith("onednn_verbose,exec"): continue
    f=l.rstrip().split(",")
    impl=f[4]; mds=f[6]; prob=f[9]; t=float(f[10])
    lay=" ".join(x.split("::")[1].split(":")[1] for x in mds.split())
    d[(impl,lay,prob)].append(t)
rows=[]
for (impl,lay,prob),ts in d.items():
    a,b,c=prob.split(":"); m,k=map(int,a.split("x")); n=int(b.split("x")[1])
    med=statistics.median(ts[1:]) if len(ts)>1 else ts[0]
    rows.append((med*len(ts),len(ts),impl,lay,prob,med,2*m*n*k/med/1e6))
rows.sort(reverse=True)
for r in rows: print("%7.1f ms %3d %-20s %-10s %-30s med %6.3f ms %5.0f GF/s"%r)
