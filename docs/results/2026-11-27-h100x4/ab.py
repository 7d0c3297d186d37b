# The A/B count of README.md: run in this folder (python3 ab.py).
import re,sys,collections
def parse(p):
    d={};op=None
    for l in open(p):
        m=re.match(r'^# (\w+)$',l.strip())
        if m: op=m.group(1); continue
        f=l.split()
        if len(f)==10 and f[0].isdigit():
            d[(op,int(f[0]),f[4])]=(float(f[6]),int(f[9]))
    return d
b1,a1,b2,a2=[parse(f'bench-{i}-{v}.txt') for i,v in [(1,'before'),(1,'after'),(2,'before'),(2,'after')]]
wrong=sum(x[1] for d in (b1,a1,b2,a2) for x in d.values())
print('rows',len(b1),len(a1),len(b2),len(a2),'wrong',wrong)
rat=[];flag=[]
for k in sorted(b1):
    if k[2]!='auto': continue
    B=(b1[k][0],b2[k][0]);A=(a1[k][0],a2[k][0])
    r=(sum(A)/2)/(sum(B)/2); rat.append(r)
    if min(A)>max(B)+abs(B[0]-B[1]): flag.append((k,B,A))
print('auto ratio range %.3f-%.3f n=%d'%(min(rat),max(rat),len(rat)))
for f in flag: print('flag',f)
