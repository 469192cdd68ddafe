"""An LSTM stack's weights in one cuDNN weight buffer, as ``torch.nn.LSTM`` keeps them.

cuDNN's LSTM reads every layer's ``W_ih, W_hh, b_ih, b_hh`` from one buffer, at offsets it
chooses. torch passes it a list of tensors; unless they are views into one buffer at exactly
those offsets, every call copies them into a fresh buffer and warns ("RNN module weights are
not part of single contiguous chunk of memory ... compacted at every call"). On the H100 that
copy made the ``lstm`` anchor 1.4-1.55x slower than a plain ``nn.LSTM`` (issue 27).

* :func:`flatten_lstm` does what ``nn.LSTM.flatten_parameters`` does, for the tool's
  parameters: the stacked ``w_ih, w_hh`` (L, 4M, M) and the one bias ``b`` (L, 4M) per layer
  become strided views into one buffer (layer l at l times cuDNN's per-layer stride), so their
  names, shapes, the parameter count and the loop oracle stay as they are; the second bias cuDNN
  expects (``b_hh``) is a zero view into the buffer that is not a parameter, so nothing writes it.
  The ``lstm`` anchor and the sLSTM's layer-by-layer ``fused`` path (one layer of weights) read
  their weights in place.
* :func:`tied_weights` is for the tied sLSTM's one-call ``cudnn`` path, which passes one set of
  weights for every layer. cuDNN reads each layer's weights from its own place in the buffer, so
  that call needs L copies: it makes them itself, in one ``torch.cat`` laid out as cuDNN wants
  (one kernel; autograd sums the layers' gradients), instead of leaving torch to copy them
  tensor by tensor with a warning at every call.

The layout comes from torch's own flattening (``torch._cudnn_rnn_flatten_weight``), asked once
per shape, never assumed.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Sequence

import torch

# What torch prints when it has to copy the weights into one buffer at a call.
COMPACTION_WARNING = "RNN module weights are not part of single contiguous chunk of memory"


def cudnn_can_flatten(tensor: torch.Tensor) -> bool:
    """Whether cuDNN runs an LSTM on ``tensor``'s device and dtype (the buffer is worth making)."""
    return (tensor.is_cuda and torch.backends.cudnn.enabled and torch.backends.cudnn.is_available()
            and torch.backends.cudnn.is_acceptable(tensor) and hasattr(torch, "_cudnn_rnn_flatten_weight")
            and getattr(torch, "_use_cudnn_rnn_flatten_weight", lambda: True)())


def _cudnn_flatten(weights: list[torch.Tensor], layers: int, hidden: int) -> torch.Tensor:
    """torch's own flattening (what ``nn.LSTM.flatten_parameters`` calls): copies ``weights``
    (4 per layer) into a new buffer and points each tensor of the list into it."""
    from torch.backends.cudnn.rnn import get_cudnn_mode

    return torch._cudnn_rnn_flatten_weight(weights, 4, hidden, get_cudnn_mode("LSTM"), hidden, 0, layers,
                                           True, False)


@functools.lru_cache(maxsize=64)
def cudnn_layout(layers: int, hidden: int, device: str, dtype: torch.dtype) -> tuple[int, tuple[int, ...]] | None:
    """(elements of the buffer, offset of each of the 4L tensors ``w_ih, w_hh, b_ih, b_hh`` per
    layer) of cuDNN's LSTM of ``layers`` layers of width ``hidden`` with input ``hidden``; None if
    the tensors do not come out as contiguous views into one buffer."""
    weights = []
    for _ in range(layers):
        weights += [torch.zeros(4 * hidden, hidden, device=device, dtype=dtype),
                    torch.zeros(4 * hidden, hidden, device=device, dtype=dtype),
                    torch.zeros(4 * hidden, device=device, dtype=dtype), torch.zeros(4 * hidden, device=device, dtype=dtype)]
    with torch.no_grad(), torch.cuda.device_of(weights[0]) if weights[0].is_cuda else contextlib.nullcontext():
        buffer = _cudnn_flatten(weights, layers, hidden)
    storage = buffer.untyped_storage().data_ptr()
    if any(w.untyped_storage().data_ptr() != storage or not w.is_contiguous() for w in weights):
        return None
    offsets = tuple(w.storage_offset() for w in weights)
    ends = sorted((o, o + w.numel()) for o, w in zip(offsets, weights))
    if any(a[1] > b[0] for a, b in zip(ends, ends[1:])) or ends[-1][1] > buffer.numel():
        return None  # overlapping tensors: not a layout to write into
    return buffer.numel(), offsets


def _arithmetic(offsets: Sequence[int]) -> int | None:
    """The common step of ``offsets`` (0 for one), or None when they are not evenly spaced."""
    steps = {b - a for a, b in zip(offsets, offsets[1:])}
    if not steps:
        return 0
    return steps.pop() if len(steps) == 1 else None


def flatten_lstm(params: Sequence[torch.nn.Parameter], layers: int, hidden: int) -> torch.Tensor | None:
    """Point ``params`` (``w_ih, w_hh, b``: stacked (L, ...) or one layer's) into one cuDNN buffer.

    Returns the zero second bias (a (L, 4M) or (4M,) view into the buffer), or None where no
    buffer is made: not CUDA, cuDNN off, or a layout that is not one stride per layer (then the
    parameters stay as they were, and a cuDNN call copies them, with torch's warning).
    """
    w_ih, w_hh, b = params
    if not cudnn_can_flatten(w_ih):
        return None
    layout = cudnn_layout(layers, hidden, str(w_ih.device), w_ih.dtype)
    if layout is None:
        return None
    total, offsets = layout
    stacked = b.dim() == 2
    steps = [_arithmetic(offsets[kind::4]) for kind in range(4)]
    if any(step is None for step in steps):
        return None
    buffer = torch.zeros(total, device=w_ih.device, dtype=w_ih.dtype)
    views = []
    for kind, like in enumerate((w_ih, w_hh, b, b)):
        size = list(like.shape[1:] if stacked else like.shape)
        stride = [size[1], 1] if len(size) == 2 else [1]  # one layer's tensor, contiguous
        if stacked:
            size, stride = [layers] + size, [steps[kind]] + stride
        views.append(buffer.as_strided(size, stride, offsets[kind]))
    with torch.no_grad():
        for param, view in zip(params, views):
            view.copy_(param)
            param.set_(view)
    return views[3]


@functools.lru_cache(maxsize=64)
def _zeros(numel: int, device: str, dtype: torch.dtype) -> torch.Tensor:
    return torch.zeros(numel, device=device, dtype=dtype)


def tied_weights(w_ih: torch.Tensor, w_hh: torch.Tensor, b: torch.Tensor, layers: int) -> list[torch.Tensor] | None:
    """One set of LSTM weights repeated for ``layers`` layers, as the 4L tensors cuDNN's
    multi-layer call takes, all views into one buffer of its layout: one ``torch.cat`` (the copy
    the tie costs), differentiable (the layers' gradients sum into the one set). None where cuDNN
    does not run or its layout is unknown (then the caller passes the tensors as they are)."""
    if not cudnn_can_flatten(w_ih):
        return None
    hidden = w_hh.shape[1]
    layout = cudnn_layout(layers, hidden, str(w_ih.device), w_ih.dtype)
    if layout is None:
        return None
    total, offsets = layout
    zero_bias = _zeros(b.numel(), str(b.device), b.dtype)
    flat = [w_ih.reshape(-1), w_hh.reshape(-1), b, zero_bias] * layers
    pieces, at = [], 0
    for offset, index in sorted((o, i) for i, o in enumerate(offsets)):
        if offset > at:
            pieces.append(_zeros(offset - at, str(b.device), b.dtype))
        pieces.append(flat[index])
        at = offset + flat[index].numel()
    if total > at:
        pieces.append(_zeros(total - at, str(b.device), b.dtype))
    buffer = torch.cat(pieces)
    shapes = [w_ih.shape, w_hh.shape, b.shape, b.shape] * layers
    return [buffer[o:o + s.numel()].view(s) for o, s in zip(offsets, shapes)]

