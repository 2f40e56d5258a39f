#!/usr/bin/env python3
# usage: abn.py N scenario variant m1,m2 label=bin:pool ... (rotating order)
import sys,subprocess,json,os,statistics
n=int(sys.argv[1]); sc=sys.argv[2]; var=sys.argv[3]; mets=sys.argv[4].split(',')
sides=[]
for a in sys.argv[5:]:
  l,rest=a.split('=',1); b,p=rest.rsplit(':',1); sides.append((l,b,p))
env=dict(os.environ, DOTNET_TC_CallCountingDelayMs='0', DOTNET_gcServer='0')
pre=os.environ.get('PRE','').split()
extra=os.environ.get('EXTRA','').split()
res={l:{m:[] for m in mets} for l,_,_ in sides}
for i in range(n):
  k=i%len(sides); order=sides[k:]+sides[:k]
  if i%2: order=order[::-1]
  for l,b,p in order:
    out=subprocess.run(pre+[b+'/Spindle.Compare','--child',sc,var,p]+extra,capture_output=True,text=True,env=env).stdout
    line=[x for x in out.splitlines() if x.startswith('##spindle-compare-result')]
    if not line: print('no result',l,out[-500:]); continue
    m=json.loads(line[-1].split(' ',1)[1])['metrics']
    for kk in mets: res[l][kk].append(m.get(kk))
    print(i,l,' '.join('%s=%.4g'%(kk,m.get(kk) or 0) for kk in mets),flush=True)
for l,_,_ in sides:
  print(l,' '.join('%s med %.4g [%s]'%(kk,statistics.median([x for x in res[l][kk] if x is not None] or [0]),', '.join("%.4g"%x if x is not None else "-" for x in res[l][kk])) for kk in mets))
