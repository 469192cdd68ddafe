"""``cuda-graph``: the tLSTM's whole (T+L-1)-step forward and backward as two CUDA graphs.

At batch 1 a GPU spends its time launching kernels, not computing: a step is a few
dozen tiny kernels, and T+L-1 steps forward and backward are thousands of launches.
This implementation captures the ``fast`` path's sequence (forward loop, and the
backward loop with its deferred weight gradient) once per input shape with
``torch.cuda.make_graphed_callables`` (static input/output buffers, no host syncs
inside the loop: the loops are TorchScript and never read a value back), then replays
the two graphs. The input projection, the output layer and the loss stay eager (a
handful of kernels).

Captured graphs are cached on the model per (shape, dtype, device, state given). A
graph bakes in the parameter tensors' addresses, so an optimizer must update them in
place (every torch optimizer does); replacing a parameter tensor needs a new model or
``model.__dict__.pop("_cuda_graphs")``.

Replay reuses static buffers: the outputs of one call, and the activations its backward
needs, are overwritten by the next call with the same key. So each forward must be
followed by its backward before the next forward (as training and the timing protocol
do); two forwards and then two backwards give wrong gradients.

Gradients of leaf tensors (the parameters, a given initial state) are cloned on their
way out: ``make_graphed_callables`` returns them as views of its static gradient
buffers, so the first backward's ``.grad`` would alias a buffer that the next replay
overwrites, and accumulating over two backward passes without zeroing would give
2 * g2 instead of g1 + g2 (pytorch/pytorch#181723, open in torch 2.13).

Where CUDA is absent, or the model is on the CPU, selecting it raises a
:class:`~tlstm_bench.errors.UserError` that says to use ``fast`` instead: it never
silently runs something else under its name, so a timing record labelled
``cuda-graph`` is always a CUDA-graph measurement. With gradients disabled (inference)
it runs ``fast`` without capture, which is the same computation.

NOT RUN on a GPU by its author (no GPU was available): the CPU-side behaviour (the
clean error) is tested; the capture itself is untested.
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import UserError
from .fast_tlstm import run_fast
from .tlstm import TLSTM, TLSTM_IMPLEMENTATIONS, TLSTMState

_CACHE = "_cuda_graphs"
_HOOKED = "_cuda_graph_grad_clones"


class _CloneGrad(torch.autograd.Function):
    """Identity forward; the backward hands on a copy of the gradient, not the static buffer."""

    @staticmethod
    def forward(ctx, t):
        return t.view_as(t)

    @staticmethod
    def backward(ctx, grad):
        return grad.clone()


class _Core(nn.Module):
    """The recurrent core as a module whose parameters are the ones it uses (for capture)."""

    def __init__(self, model: TLSTM):
        super().__init__()
        self.w_h, self.b_h, self.b_x = model.w_h, model.b_h, model.b_x
        if model.arch.norm != "none":
            self.norm_gain, self.norm_bias = model.norm_gain, model.norm_bias
        self.__dict__["model"] = model  # not a submodule: its other parameters are not ours

    def forward(self, z, h0, c0):
        h_out, state = run_fast(self.model, z, TLSTMState(h0, c0))
        return h_out, state.h, state.c


def check_cuda(z: torch.Tensor) -> None:
    if not torch.cuda.is_available():
        raise UserError("implementation 'cuda-graph' needs CUDA, which is not available here; "
                        "use implementation 'fast'")
    if not z.is_cuda:
        raise UserError("implementation 'cuda-graph' needs the model and input on a CUDA device "
                        "(model.to('cuda')); on a CPU use implementation 'fast'")


def run_cuda_graph(model: TLSTM, z: torch.Tensor, state: TLSTMState):
    """Replay (capturing on first use per shape) the forward and backward of ``fast``."""
    check_cuda(z)
    if not torch.is_grad_enabled():
        return run_fast(model, z, state)
    key = (tuple(z.shape), z.dtype, z.device, z.requires_grad, state.h.requires_grad, state.c.requires_grad)
    cache = model.__dict__.setdefault(_CACHE, {})
    graphed = cache.get(key)
    if graphed is None:
        sample = tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in (z, state.h, state.c))
        core = _Core(model)
        graphed = torch.cuda.make_graphed_callables(core, sample, allow_unused_input=True)
        cache[key] = graphed
        _clone_grads_of(core.parameters())
    h0, c0 = (_CloneGrad.apply(t) if t.requires_grad else t for t in (state.h, state.c))
    h_out, h_t, c_t = graphed(z, h0.contiguous(), c0.contiguous())
    return h_out, TLSTMState(h_t, c_t)


def _clone_grads_of(parameters) -> None:
    """pytorch/pytorch#181723 (see the module docstring): clone each parameter's summed gradient
    just before it is accumulated into ``.grad``. Marked on the tensor itself, once: a parameter
    replaced after a capture (``model.__dict__.pop("_cuda_graphs")``) gets its hook at the next one."""
    for p in parameters:
        if not getattr(p, _HOOKED, False):
            p.register_hook(torch.Tensor.clone)
            setattr(p, _HOOKED, True)


TLSTM_IMPLEMENTATIONS["cuda-graph"] = run_cuda_graph
