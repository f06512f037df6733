import collections,statistics,sys
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    arm,L,a,s,t=l.split(); d[(arm,L,a,int(s))].append(float(t))
sizes=sorted({k[3] for k in d})
for a in sorted({k[2] for k in d}, reverse=True):
  for arm in ('before','after'):
    for L in sorted({k[1] for k in d}, reverse=True):
      if (arm,L,a,sizes[0]) not in d: continue
      def f(s):
        b=s>>20 and f"{s>>20}M" or (s>>10 and f"{s>>10}K" or f"{s}B")
        return f"{b}:{statistics.median(d[(arm,L,a,s)]):.0f}"
      print(f"{a:4} {arm:6} {L:7} n={len(d[(arm,L,a,sizes[0])])}", " ".join(f(s) for s in sizes))
