"""Shared helpers for the model tests."""

import torch

from tlstm_bench.models import CONFIG_NAMES, build_model

TLSTM_CONFIGS = [c for c in CONFIG_NAMES if c != "slstm"]
# Knob combinations beyond the seven presets (SPEC section 6): 4D, even and larger kernels, 2D+CN,
# and the memory-cell window of appendix A.2 as written (SPEC section 3 step 5, window=appendix).
KNOB_CONFIGS = [
    "tlstm:dims=4,kernel=3",
    "tlstm:dims=2,kernel=4",
    "tlstm:dims=2,kernel=5",
    "tlstm:dims=3,kernel=4,memory_conv=0",
    "2d:norm=cn",
    "tlstm:dims=2,window=appendix",
    "3d:window=appendix",
    "2d-f:window=appendix",
    "tlstm:dims=2,kernel=5,norm=cn,window=appendix",
]


def perturb(model, scale=0.3):
    """Move every parameter off its initial value (norm gains start at 1, biases at 0)."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * scale)
    return model


def outputs_and_grads(config, depth, implementation, *, dtype=torch.float64, device="cpu", batch=2, seq_len=4,
                      channels=3, cell_index=None, precision=None, perturb_scale=0.3):
    """Run ``implementation`` forward from a random state, a random linear loss on y and the final
    state, and backward: {name: tensor} of y, h_T, c_T and the gradient of every parameter, the
    input and the initial state, as float64 on the CPU.

    Parameters, input, state and loss weights are drawn in float64 from fixed seeds and then cast
    to ``dtype`` and moved to ``device``, so every implementation, dtype and device sees the same
    values. ``cell_index`` replaces the model's memory-cell index map (another window);
    ``precision`` sets the model's (the triton kernels' products: vocab.PRECISIONS);
    ``perturb_scale`` how far the parameters move (keep it near 0.3 * sqrt(20 / channels) at large
    widths and depths: further, the recurrence is chaotic and float32 itself leaves float64)."""
    torch.manual_seed(0)
    model = perturb(build_model(config, depth, input_size=3, output_size=2, channels=channels,
                                implementation=implementation).double(), perturb_scale)
    model = model.to(device, dtype)
    if cell_index is not None:
        model.cell_index = cell_index.to(device)
    if precision is not None:
        model.precision = precision
    g = torch.Generator().manual_seed(1)

    def rand(*shape):
        return torch.randn(shape, generator=g, dtype=torch.float64).to(device, dtype)

    x = rand(batch, seq_len, 3).requires_grad_(True)
    zero = model.zero_state(batch, x)
    h0, c0 = rand(*zero.h.shape).requires_grad_(True), rand(*zero.c.shape).requires_grad_(True)
    y, state = model(x, type(zero)(h0, c0))
    loss = sum((t * rand(*t.shape)).sum() for t in (y, state.h, state.c))
    loss.backward()
    out = {"y": y, "h_T": state.h, "c_T": state.c}
    out.update({f"grad {name}": p.grad for name, p in model.named_parameters()})
    out.update({"grad x": x.grad, "grad h0": h0.grad, "grad c0": c0.grad})
    return {name: None if t is None else t.detach().to("cpu", torch.float64) for name, t in out.items()}
