import sys, statistics as st, collections as C
for f in sys.argv[1:]:
    seq=[]; job=0
    for line in open(f):
        if line.startswith('#'): job+=1; continue
        if not line.startswith('run,'): continue
        w=line.strip().split(',')
        seq.append((job,int(w[1]),int(w[3]),int(w[4]),w[5],w[6],float(w[7])))
    g=C.defaultdict(list)
    for i,x in enumerate(seq):
        if i==0 or seq[i-1][0]!=x[0]: prev='start'
        else: prev=seq[i-1][5]+('@same' if seq[i-1][1]==x[1] else '@other')
        g[(x[1]>>20,x[5],prev)].append(x[6])
    print(f)
    for k in sorted(g): print("  %4dM %-5s after %-12s med %9.0f n=%d"%(k[0],k[1],k[2],st.median(g[k]),len(g[k])))
