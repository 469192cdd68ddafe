"""The initialisation knobs, applied to a model just built (docs/fidelity.md rows 13-17).

The paper states only the forget-gate bias (appendix D); everything else here is a reading
of what it leaves out. Each model class draws its parameters as it always has (weights
uniform +-1/sqrt(fan in), zero biases, the forget bias); :func:`apply_init` then changes
what ``model.arch``'s knobs ask for (:mod:`.config`), in a fixed order, drawing from the
global generator only for a knob that is not at its default. So

* a model with every knob at its default is bit for bit the model built before the knobs
  existed (same seed, same draws);
* one seed gives the same initial parameters for every implementation of a configuration
  (``eager``, ``fast``, ``triton`` share the class and its parameters; only the loop
  differs), because ``build_model`` applies the knobs, not the loops.

What each knob touches, per model kind:

| knob | tLSTM | sLSTM / lstm anchor |
|---|---|---|
| ``input_init=normal`` | W^x = N(0, input_std^2) | the same |
| ``bias_init=torch7`` | b^x, b^h (not F), b^y uniform +-1/sqrt(fan in) | b^x, b (not f), b^y |
| ``recurrent_scale`` | W^h times it | W^ih and W^hh times it |
| ``cell_kernel`` | the Q bias of one kernel entry + cell_kernel_bias | (none: no memory-cell kernel) |

The fan in of a bias is its weight's: R for b^x (nn.Linear(R, M) on the one-hot input),
K^(D-1) M for the tLSTM's b^h (the window the kernel reads), M for the LSTMs' gates and for
b^y. LN/CN gains and biases keep their 1 and 0 (they are not a layer's bias).
"""

from __future__ import annotations

import math

import torch

from .config import INIT_DEFAULTS


def apply_init(model) -> None:
    """Set the initial parameters ``model.arch``'s initialisation knobs ask for (module docstring)."""
    arch = model.arch
    with torch.no_grad():
        if arch.input_init == "normal":
            model.w_x.normal_(0.0, arch.input_std)  # the first draw: as the earlier TrainSettings.input_init drew it
        if arch.bias_init == "torch7":
            for bias, fan_in, forget in _biases(model):
                keep = bias[forget].clone()
                bias.uniform_(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))
                bias[forget] = keep  # the paper's forget-gate bias stays
        if arch.recurrent_scale != INIT_DEFAULTS["recurrent_scale"]:
            for weight in _recurrent_weights(model):
                weight.mul_(arch.recurrent_scale)
        entry = arch.cell_kernel_entry()
        if entry is not None:
            model.b_h[4 * model.channels + entry] += arch.cell_kernel_bias  # Q follows G, I, F, O


def _biases(model) -> list[tuple[torch.Tensor, int, tuple]]:
    """(bias, fan in, index of its forget-gate part or an empty one) for every layer bias, in draw order."""
    m, none = model.channels, (slice(0, 0),)
    if model.arch.kind == "tlstm":  # gate order G, I, F, O, Q
        core = [(model.b_h, model.arch.kernel_entries * m, (slice(2 * m, 3 * m),))]
    else:  # the LSTMs' one bias per gate set: order i, f, g, o; (4M,) or (L, 4M)
        core = [(model.b, m, (..., slice(m, 2 * m)))]
    return [(model.b_x, model.input_size, none), *core, (model.b_y, m, none)]


def _recurrent_weights(model) -> list[torch.Tensor]:
    if model.arch.kind == "tlstm":
        return [model.w_h]
    return [model.w_ih, model.w_hh]
