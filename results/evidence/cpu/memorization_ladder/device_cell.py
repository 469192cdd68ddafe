import sys,json,time,os,torch
from torch import nn
from tlstm_bench.training import Trainer,TrainSettings
from tlstm_bench.events import reporter
from tlstm_bench.models.config import parse_config
class P(nn.Module):
 def __init__(s,M,L):
  super().__init__();s.arch=parse_config("slstm");s.depth,s.channels,s.implementation=L,M,"torch.nn.LSTM"
  s.e=nn.Embedding(65,M);s.l=nn.LSTM(M,M,L,batch_first=True);s.o=nn.Linear(M,65)
  with torch.no_grad():
   for k,p in s.l.named_parameters():
    if k[0]=="b":p[M:2*M]=.5
 def forward(s,x,st=None):
  h,st=s.l(s.e(x),st);return s.o(h),st
a=sys.argv[1];D=float(os.environ["DL"])
if a in"CG":
 e=lambda C,N,L,V,S=(0,),d="cpu/32/45000":[f"{c}/{n}/{l}/{d}/{v}/{s}"for c in C for n in N for l in L for v in V for s in S]
 q="3d-cn",;w="2d","slstm";y=w+("torch-lstm",);dv="d","normal"
 G=["3d-cn/20/10/cuda/100/300000/normal/0"]+e(q,(20,10,5,3),(10,),dv,d="cuda/32/45000")
 C=e(q,(20,10),(4,),dv)+e(q,(20,),(4,),("normal",),(1,))+e(q,(5,),(4,),("clip",))+e(y,(20,10),(10,),"d")+e(w,(20,10),(10,),("normal",))+e(q,(5,3),(4,),dv)+e(y,(20,10,5,3),(4,1),"d")+e(w,(20,10,5,3),(4,1),("normal",))+e(q,(20,10,5,3),(1,),dv)+e(y,(5,3),(10,),"d")+e(w,(5,3),(10,),("normal",))
 print("\n".join(eval(a)));sys.exit()
if time.time()>D-120:sys.exit()
c,n,L,d,M,cap,v,seed=a.split("/");n,L,M,cap,seed=map(int,(n,L,M,cap,seed))
torch.set_num_threads(1);t0=time.monotonic();pl=c=="torch-lstm"
s,t=TrainSettings("slstm" if pl else c,L,task="memorization",task_options={"symbols":n},channels=M,max_samples=cap,eval_every=1500,seed=seed,device=d).resolve()
tr=Trainer(s,t,torch.device(d),reporter(False),started=t0);m=tr.state.model;R=tr.record
if pl:
 torch.manual_seed(seed);m=P(M,L).to(d);tr.state.model=m;tr.state.optimizer=torch.optim.Adam(m.parameters(),1e-3)
 R.update(config=c,implementation=m.implementation,params=sum(p.numel() for p in m.parameters()))
if v=="normal":
 with torch.no_grad():m.w_x.copy_(torch.randn(m.w_x.shape))
 R["input_init"]=v
if v=="clip":
 o=tr.state.optimizer;f=o.step
 def g(*x,**k):nn.utils.clip_grad_norm_(m.parameters(),1.);return f(*x,**k)
 o.step=g
f2=tr.step;cut=0
def h():
 if time.time()>D:raise KeyboardInterrupt
 return f2()
tr.step=h
try:tr.run()
except KeyboardInterrupt:cut=1
r=tr.finish();r.update(ladder_variant=v,ladder_cut=bool(cut),ladder_wall_s=time.monotonic()-t0)
os.makedirs(os.environ["OUT"]+"/r",exist_ok=True);i=a.replace("/","_")
open(os.environ["OUT"]+"/r/"+i+".json","w").write(json.dumps(r,default=str))
