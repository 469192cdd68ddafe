"""An LSTM stack's weights in one cuDNN weight buffer, as ``torch.nn.LSTM`` keeps them.

cuDNN's LSTM reads every layer's ``W_ih, W_hh, b_ih, b_hh`` from one buffer, at offsets it
chooses. torch passes it a list of tensors; unless they are views into one buffer at exactly
those offsets, every call copies them into a fresh buffer and warns ("RNN module weights are
not part of single contiguous chunk of memory ... compacted at every call"). On the H100 that
copy made the ``lstm`` anchor 1.4-1.55x slower than a plain ``nn.LSTM`` (issue 27).
``nn.LSTM`` avoids it by pointing its parameters into such a buffer whenever the module moves
(``flatten_parameters``); :func:`flatten_lstm` does the same for the tool's parameters:

* the stacked ``w_ih, w_hh`` (L, 4M, M) and the one bias ``b`` (L, 4M) per layer become
  strided views into the buffer (layer l at l times cuDNN's per-layer stride), so their names,
  shapes, the parameter count and the loop oracle stay as they are;
* the second bias cuDNN expects (``b_hh``) is a zero view into the buffer that is not a
  parameter: nothing writes it, so the model computes what it did with one bias per layer.

The sLSTM (one set of weights, L = 1 here) uses the same buffer for its layer-by-layer ``fused``
calls. Its ``cudnn`` path passes the tied weights L times: cuDNN needs L distinct copies in its
buffer, so that call still copies (see ``models/slstm.py``).
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

# What torch prints when it has to copy the weights into one buffer at a call.
COMPACTION_WARNING = "RNN module weights are not part of single contiguous chunk of memory"


def cudnn_can_flatten(tensor: torch.Tensor) -> bool:
    """Whether cuDNN runs an LSTM on ``tensor``'s device and dtype (the buffer is worth making)."""
    return (tensor.is_cuda and torch.backends.cudnn.enabled and torch.backends.cudnn.is_available()
            and torch.backends.cudnn.is_acceptable(tensor) and hasattr(torch, "_cudnn_rnn_flatten_weight"))


def _cudnn_flatten(weights: list[torch.Tensor], layers: int, hidden: int) -> torch.Tensor:
    """torch's own flattening (what ``nn.LSTM.flatten_parameters`` calls): copies ``weights``
    (4 per layer) into a new buffer and points each tensor of the list into it."""
    from torch.backends.cudnn.rnn import get_cudnn_mode

    return torch._cudnn_rnn_flatten_weight(weights, 4, hidden, get_cudnn_mode("LSTM"), hidden, 0, layers,
                                           True, False)


def _arithmetic(offsets: list[int]) -> int | None:
    """The common step of ``offsets`` (0 for one), or None when they are not evenly spaced."""
    steps = {b - a for a, b in zip(offsets, offsets[1:])}
    if not steps:
        return 0
    return steps.pop() if len(steps) == 1 else None


def flatten_lstm(params: Sequence[torch.nn.Parameter], layers: int, hidden: int, *,
                 flatten: Callable[[list, int, int], torch.Tensor] | None = None) -> torch.Tensor | None:
    """Point ``params`` (``w_ih, w_hh, b``: stacked (L, ...) or one layer's) into one cuDNN buffer.

    Returns the zero second bias (a (L, 4M) or (4M,) view into the buffer), or None where no
    buffer is made: not CUDA, cuDNN off, or a layout that is not one stride per layer (then the
    parameters stay as they were, and a cuDNN call copies them as before). ``flatten`` replaces
    torch's flattening (a test lays the buffer out on the CPU).
    """
    w_ih, w_hh, b = params
    if flatten is None:
        if not cudnn_can_flatten(w_ih):
            return None
        flatten = _cudnn_flatten
    stacked = b.dim() == 2
    per_layer = (lambda p: list(p.unbind(0))) if stacked else (lambda p: [p])
    with torch.no_grad():
        weights = []
        for w_i, w_h, b_i in zip(per_layer(w_ih), per_layer(w_hh), per_layer(b)):
            weights += [w_i.detach().clone(), w_h.detach().clone(), b_i.detach().clone(), torch.zeros_like(b_i)]
        buffer = flatten(weights, layers, hidden)
        views = _stacked_views(buffer, weights, stacked)
        if views is None:
            return None
        for param, view in zip(params, views):
            param.set_(view)
    return views[3]


def _stacked_views(buffer: torch.Tensor, weights: list[torch.Tensor], stacked: bool) -> list | None:
    """The four (L, ...) views into ``buffer`` that hold each layer's tensor where ``weights`` were
    put; None unless each kind sits at one stride per layer in the buffer."""
    storage = buffer.untyped_storage().data_ptr()
    if any(w.untyped_storage().data_ptr() != storage or not w.is_contiguous() for w in weights):
        return None
    views = []
    for kind in range(4):
        layer_weights = weights[kind::4]
        step = _arithmetic([w.storage_offset() for w in layer_weights])
        if step is None:
            return None
        first = layer_weights[0]
        size, stride = list(first.shape), list(first.stride())
        if stacked:
            size, stride = [len(layer_weights)] + size, [step] + stride
        views.append(buffer.as_strided(size, stride, first.storage_offset()))
    return views
