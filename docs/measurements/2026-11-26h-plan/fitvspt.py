import json,sys,math,subprocess
B='/work/wt-plan/build/baton'
for cal in sys.argv[1:]:
    l=[];worst=[]
    for tr,algos in (('shm',('direct','ring','rd')),('tcp',('ring','rd'))):
        for k in (2,4):
            for b in (1<<20,2<<20,4<<20,8<<20,16<<20):
                j=json.loads(subprocess.run([B,'plan','allreduce','--calibrated',cal,'--link',tr,'--ranks',str(k),'--bytes',str(b),'--json'],capture_output=True,text=True).stdout)
                for a in j['algos']:
                    if 'measured_us' in a:
                        r=a['predicted_us']/a['measured_us']; l.append(math.log(r))
                        if abs(r-1)>0.03: worst.append('%s%d %s %dM %.2f'%(tr,k,a['algo'],b>>20,r))
    print(cal, 'n=%d fit/point geomean %+.2f%%'%(len(l),100*(math.exp(sum(l)/len(l))-1)), worst)
