"""A whole forward + loss + backward step captured once as one CUDA graph (``cuda-graph``,
``triton-graph``).

At batch 1 a GPU spends a recurrent step launching kernels, not computing: the ``fast``
path issues a few dozen small kernels per timestep, thousands per sequence. Capturing
the whole step (input projection, the T+L-1-step loop, the output layer, the loss and
the backward with every parameter gradient) as one CUDA graph and replaying it removes
the host from the loop. :class:`GraphedStep` does that for any step function whose
inputs stay in place, following PyTorch's whole-network capture recipe
(``torch.cuda.graph``): warm-up iterations on a side stream, gradients set to ``None``
before the capture so that the backward allocates them in the graph's memory pool,
then one capture; each call replays it.

Why not ``torch.cuda.make_graphed_callables`` (the first version of this module): on
the H100 with torch 2.11 (results/evidence/gpu/2026-11-26-h100/diag.txt) its backward
capture failed at L >= 3 with "operation would make the legacy stream depend on a
capturing blocking stream". The parameters' AccumulateGrad nodes of an earlier,
still-referenced autograd graph belonged to the default stream, and the capture of
the backward had to synchronise with it (the stream-mismatch warning of PyTorch PR
166136). Here nothing of the warm-up's autograd graphs survives the warm-up (no loss
or output of it is kept), the capture creates its own AccumulateGrad nodes, and the
captured loss is kept detached, so no later eager step can reach them either.

Who uses it: the timing protocol (:class:`tlstm_bench.timing.protocol.StepRun`) for the
implementation names of ``tlstm_bench.vocab.GRAPHED_IMPLEMENTATIONS``: ``cuda-graph``
builds the model with ``fast`` and captures its step, ``triton-graph`` with ``triton``
(docs/triton.md, "A CUDA graph around the kernels"). They are ways of *running a step*,
not sequence loops of the model, so they are not in ``TLSTM_IMPLEMENTATIONS``.

Semantics a caller must keep: the step reads only tensors that stay at the same address
(the parameters, which every torch optimizer updates in place, and input buffers the
caller copies new data into); after each call every parameter's ``.grad`` holds that
step's gradient (set, not accumulated), and :attr:`GraphedStep.loss` its loss. Do not
set the gradients to ``None`` between calls (``zero_grad(set_to_none=True)``): they are
the graph's output buffers (the call re-attaches them if someone did).

Where CUDA is absent, or the model is on the CPU, :func:`check_cuda` raises a one-line
:class:`~tlstm_bench.errors.UserError` that names the loop to use instead (``fast``,
``triton``): a record labelled ``cuda-graph`` or ``triton-graph`` is always a CUDA-graph
measurement. A capture that fails raises :class:`CaptureFailed`, one line with the first
error of the capture; such a failure can leave the process's CUDA state unusable (the
timing code says so for the cases after it, ``timing.measure``).
"""

from __future__ import annotations

import os
from typing import Callable, Iterable

import torch

from ..errors import UserError
from ..vocab import GRAPHED_IMPLEMENTATIONS

GRAPH_WARMUP = 3  # eager warm-up steps on the side stream before the capture (lazy init, cuDNN/cuBLAS handles)

TRITON_NEEDS_CUDA = ("implementation 'triton' runs Triton kernels, which need a CUDA GPU and the model on it "
                     "(model.to('cuda')); on a CPU use implementation 'fast' (TRITON_INTERPRET=1, set before "
                     "the first use, runs them on the CPU for testing only)")


def check_runs_on(implementation: str, device: torch.device) -> None:
    """The one-line error of an implementation that cannot run on ``device``, before anything
    is built or warmed up: the graphed ones need CUDA (:func:`check_cuda`), and
    ``triton`` does unless Triton's interpreter is on (``TRITON_INTERPRET=1``: tests)."""
    if implementation in GRAPHED_IMPLEMENTATIONS:
        check_cuda(device, implementation)
    elif (implementation == "triton" and device.type != "cuda"
          and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")):
        raise UserError(TRITON_NEEDS_CUDA)


class CaptureFailed(RuntimeError):
    """The capture of a graphed step failed (one line: the implementation, the capture's first
    error, what to use instead). The process's CUDA state may be unusable after it."""


def check_cuda(device: torch.device | str, implementation: str = "cuda-graph") -> None:
    """One-line error unless ``device`` is a usable CUDA device, naming ``implementation`` (a
    graphed one) and what runs instead: on a CPU that is ``fast`` (``triton`` needs a GPU too);
    with CUDA at hand, the loop it captures, uncaptured."""
    loop = GRAPHED_IMPLEMENTATIONS[implementation]
    if not torch.cuda.is_available():
        raise UserError(f"implementation {implementation!r} needs CUDA, which is not available here; "
                        "on a CPU use implementation 'fast'")
    if torch.device(device).type != "cuda":
        raise UserError(f"implementation {implementation!r} needs the model and input on a CUDA device "
                        f"(--device cuda, or implementation {loop!r} uncaptured); on a CPU use implementation "
                        "'fast'")


def _first_error(exc: BaseException) -> str:
    """``Type: first line`` of the first exception of a chain: when a launch fails inside a
    capture, ending the capture fails too, and only the first error says why."""
    while exc.__context__ is not None:
        exc = exc.__context__
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _drop_grads(params: list[torch.Tensor]) -> None:
    for p in params:
        p.grad = None


class GraphedStep:
    """``loss_fn()`` and its backward, captured once as one CUDA graph; each call replays it.

    ``loss_fn``: no arguments, returns a scalar loss; reads only tensors that stay in place.
    ``params``: the leaves whose gradients the step computes (those without ``requires_grad``
    are ignored). ``implementation``: the graphed implementation's name, for the errors;
    ``context()``, asked only when the capture fails, what was being captured (a few words).
    """

    def __init__(self, loss_fn: Callable[[], torch.Tensor], params: Iterable[torch.Tensor],
                 warmup: int = GRAPH_WARMUP, implementation: str = "cuda-graph",
                 context: Callable[[], str] | None = None):
        self.params = [p for p in params if p.requires_grad]
        check_cuda(self.params[0].device, implementation)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):  # nothing of these steps' autograd graphs is kept
                _drop_grads(self.params)
                loss_fn().backward()
        torch.cuda.current_stream().wait_stream(side)
        _drop_grads(self.params)  # the captured backward allocates them in the graph's pool
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.current_stream()
        try:
            with torch.cuda.graph(self.graph):
                loss = loss_fn()
                loss.backward()
        except Exception as exc:
            torch.cuda.set_stream(stream)  # a capture_end that raised left its capture stream current
            what = f" ({context()})" if context is not None else ""
            raise CaptureFailed(f"implementation {implementation!r} could not capture its step as one CUDA "
                                f"graph{what}: {_first_error(exc)}; use implementation "
                                f"{GRAPHED_IMPLEMENTATIONS[implementation]!r}") from exc
        self.loss = loss.detach()  # the static output; detached so the captured autograd graph dies
        self.grads = [p.grad for p in self.params]

    def __call__(self) -> torch.Tensor:
        """Replay: the loss (a static buffer, overwritten by the next call); ``.grad`` set."""
        for p, g in zip(self.params, self.grads):
            if p.grad is not g:
                p.grad = g
        self.graph.replay()
        return self.loss
