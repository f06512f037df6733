import json,sys,math,os
for d in sys.argv[1:]:
    if not os.path.exists(d+'/pred_rows'): continue
    cal=json.load(open(d+'/cal.json'))
    cp={(p['transport'],p['ranks'],p['algo'],p['bytes']):p['us'] for p in cal['points']}
    def rows(f):
        r={}
        for l in open(f):
            tr,k,asked,used,b,us=l.split(); r.setdefault((tr,int(k),asked,int(b)),[]).append(float(us))
        return {k:sorted(v)[(len(v)-1)//2] for k,v in r.items()}
    pr=rows(d+'/pred_rows'); ar=rows(d+'/auto_rows')
    lc_p=[];lc_a=[];la_p=[]
    per={}
    for k,v in pr.items():
        if k in cp and k in ar:
            lc_p.append(math.log(cp[k]/v)); lc_a.append(math.log(cp[k]/ar[k])); la_p.append(math.log(ar[k]/v))
            per.setdefault((k[0],k[1]),[]).append((math.log(cp[k]/v),math.log(cp[k]/ar[k])))
    g=lambda l: '%+.1f%%'%(100*(math.exp(sum(l)/len(l))-1)) if l else '-'
    print(d, cal.get('about','')[-30:], 'n=%d cal/pred %s cal/auto %s auto/pred %s'%(len(lc_p),g(lc_p),g(lc_a),g(la_p)))
    for s,v in sorted(per.items()):
        print('   ',s,'cal/pred',g([a for a,b in v]),'cal/auto',g([b for a,b in v]))
