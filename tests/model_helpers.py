"""Shared helpers for the model tests."""

import torch

from tlstm_bench.models import CONFIG_NAMES

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
