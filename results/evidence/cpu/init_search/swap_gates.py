"""swap_gates.py TRAINED_CKPT [BLOCK...]: which gate's part of W^h carries the collapse of the recall gradient?
W^h's output channels are G, I, F, O (M each) and Q (Kd): the trained model with one block put back
to its initial value, and the initial model with one block from the trained one (median, first and
last of the 20 answers); each block's relative move; and the mean of every gate over one batch."""
import statistics, sys
import torch
torch.set_num_threads(1)
from tlstm_bench.analysis.gradients import _load_checkpoint, recall_gradients
from tlstm_bench.models import build_model
K = "3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2"
label, trained, task = _load_checkpoint(sys.argv[1])[:3]
m_ = trained.channels
def build():
    return build_model(K, trained.depth, channels=m_, forget_bias=task.forget_bias, **task.model_io())
torch.manual_seed(0)
init = build()
T = {k: v.detach().clone() for k, v in trained.state_dict().items()}
I = {k: v.detach().clone() for k, v in init.state_dict().items()}
blocks = {"G": slice(0, m_), "I": slice(m_, 2 * m_), "F": slice(2 * m_, 3 * m_), "O": slice(3 * m_, 4 * m_),
          "Q": slice(4 * m_, None)}
def gate_means(state):
    m = build(); m.load_state_dict(state); m = m.double()
    x, _ = task.sample(15, torch.Generator().manual_seed(1))
    z = m.project_inputs(x); h, c = m.zero_state(15, z)
    sums = {k: 0.0 for k in "GIFOQ"}; steps = z.shape[1]
    for s in range(steps):
        src = torch.cat([h.new_zeros(15, 1, m_), z[:, s].unsqueeze(1), h], dim=1)
        a = src[:, m.hidden_index].reshape(15, m.num_locations, -1) @ m.w_h.reshape(-1, m.gate_channels) + m.b_h
        sums["G"] += torch.tanh(a[..., :m_]).abs().mean().item()
        for k, sl in (("I", blocks["I"]), ("F", blocks["F"]), ("O", blocks["O"])):
            sums[k] += torch.sigmoid(a[..., sl]).mean().item()
        sums["Q"] += torch.softmax(a[..., 4 * m_:], -1).max(-1).values.mean().item()
        h, c = m.step(z[:, s], h, c)
    return " ".join(f"{k} {v / steps:.3f}" for k, v in sums.items())
def row(name, state):
    m = build(); m.load_state_dict(state)
    g = recall_gradients(m, task)
    print(f"{name:24s} median {statistics.median(g):.1e}  first {g[0]:.1e}  last {g[-1]:.1e}", flush=True)
print("gate means (|G|, I, F, O, max Q), initial:", gate_means(I), flush=True)
print("gate means (|G|, I, F, O, max Q), trained:", gate_means(T), flush=True)
for name, sl in blocks.items():
    if sys.argv[2:] and name not in sys.argv[2:]:
        continue
    wt, wi = T["w_h"][..., sl], I["w_h"][..., sl]
    print(f"-- {name}: W^h block moved {((wt - wi).norm() / wi.norm()).item():.3g} of its norm", flush=True)
    a = T["w_h"].clone(); a[..., sl] = wi
    row(f"trained, {name} initial", {**T, "w_h": a})
    b = I["w_h"].clone(); b[..., sl] = wt
    row(f"initial, {name} trained", {**I, "w_h": b})
