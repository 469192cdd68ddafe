"""clip_probe.py CLIP NORMS_LOG -- TRAIN ARGS...: `tlstm-bench train` with the gradient's total norm
clipped to CLIP before each Adam step (0: not clipped, only logged); every step's norm before the
clip is appended to NORMS_LOG. A probe (the record does not say it was clipped), not a feature."""
import sys, torch
from tlstm_bench.cli import main

clip, log = float(sys.argv[1]), open(sys.argv[2], "a")
_step = torch.optim.Adam.step

def step(self, *a, **kw):
    params = [p for g in self.param_groups for p in g["params"] if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
    log.write(f"{norm.item():.6g}\n"); log.flush()
    return _step(self, *a, **kw)

torch.optim.Adam.step = step
sys.argv = ["tlstm-bench", "train", *sys.argv[4:]]
main()
