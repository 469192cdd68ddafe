"""swap.py TRAINED_CKPT [PARAM...]: which parameter's first Adam steps take the recall gradient away?
The recall gradient (tlstm-bench gradients' measure; median, first and last of the 20 answers) of
the trained model with one parameter put back to its initial value, and of the initial model with
one parameter taken from the trained one; and how far each parameter moved."""
import statistics, sys
import torch
torch.set_num_threads(1)
from tlstm_bench.analysis.gradients import _load_checkpoint, recall_gradients
from tlstm_bench.models import build_model
K = "3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2"
label, trained, task = _load_checkpoint(sys.argv[1])[:3]
def build():
    return build_model(K, trained.depth, channels=trained.channels, forget_bias=task.forget_bias, **task.model_io())
torch.manual_seed(0)  # as train --seed 0 builds it
init = build()
T = {k: v.detach().clone() for k, v in trained.state_dict().items()}
I = {k: v.detach().clone() for k, v in init.state_dict().items()}
def row(name, state):
    m = build(); m.load_state_dict(state)
    g = recall_gradients(m, task)
    print(f"{name:28s} median {statistics.median(g):.1e}  first {g[0]:.1e}  last {g[-1]:.1e}", flush=True)
row("trained", T)
row("initial", I)
for k in (sys.argv[2:] or T):
    rel = ((T[k] - I[k]).norm() / I[k].norm().clamp_min(1e-12)).item()
    print(f"-- {k}: moved {rel:.3g} of its norm", flush=True)
    row(f"trained, {k} initial", {**T, k: I[k]})
    row(f"initial, {k} trained", {**I, k: T[k]})
