"""saturation.py CKPT...: how saturated the candidate G = tanh(a_G) is, initial against trained: the mean
of tanh'(a_G) = 1 - G^2 over one batch (batch 15, seed 1, float64), at every location and at location 0
(the one the input enters), and the share of |G| > 0.99; also the mean |a_G|."""
import sys
import torch
torch.set_num_threads(1)
from tlstm_bench.analysis.gradients import _load_checkpoint
from tlstm_bench.models import build_model
K = "3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2"
def stats(m, task):
    m = m.double(); M = m.channels
    x, _ = task.sample(15, torch.Generator().manual_seed(1))
    z = m.project_inputs(x); h, c = m.zero_state(15, z)
    d_all = d_0 = sat = absa = 0.0
    for s in range(z.shape[1]):
        src = torch.cat([h.new_zeros(15, 1, M), z[:, s].unsqueeze(1), h], dim=1)
        a = (src[:, m.hidden_index].reshape(15, m.num_locations, -1) @ m.w_h.reshape(-1, m.gate_channels) + m.b_h)[..., :M]
        g = torch.tanh(a)
        d_all += (1 - g ** 2).mean().item(); d_0 += (1 - g[:, 0] ** 2).mean().item()
        sat += (g.abs() > 0.99).double().mean().item(); absa += a.abs().mean().item()
        h, c = m.step(z[:, s], h, c)
    n = z.shape[1]
    return f"mean tanh' {d_all / n:.3f}  at location 0 {d_0 / n:.3f}  share |G|>0.99 {sat / n:.3f}  mean |a_G| {absa / n:.2f}"
for path in sys.argv[1:]:
    label, trained, task = _load_checkpoint(path)[:3]
    torch.manual_seed(0)
    init = build_model(K, trained.depth, channels=trained.channels, forget_bias=task.forget_bias, **task.model_io())
    print(f"L={trained.depth} initial: {stats(init, task)}")
    print(f"L={trained.depth} trained ({path}): {stats(trained, task)}", flush=True)
