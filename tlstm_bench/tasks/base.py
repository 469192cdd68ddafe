"""The interface every task meets: batches, the loss, the metric.

A task (state-spaces/s4 style: small, pure, no training logic) knows

* what the model reads and writes (:meth:`Task.model_io`: token vocabulary or real
  input/output sizes, handed to ``build_model``) and its paper settings (batch size,
  forget-gate bias, metric);
* how to make training batches (:meth:`Task.train_stream`: a :class:`Stream` whose
  position can be saved and restored, so a checkpointed run resumes exactly);
* the training loss (:meth:`Task.loss`: mean NLL in nats) and the evaluation
  (:meth:`Task.evaluate`: the metric on ``valid`` or ``test``).

The models are separable with the output delay handled inside the model (SPEC
section 3: ``y_t`` is aligned with ``x_t``), so targets line up with inputs position by
position and no task knows anything about the depth L.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

LN2 = math.log(2.0)


@dataclass
class Batch:
    """One minibatch. ``x``: model input; ``y``: targets.

    ``reset`` (stateful tasks only) says the batch starts a new pass over the data, so
    the carried recurrent state must start from zero again.
    """

    x: torch.Tensor
    y: torch.Tensor
    reset: bool = False

    def __len__(self) -> int:
        return self.x.shape[0]

    def to(self, device) -> "Batch":
        return Batch(self.x.to(device), self.y.to(device), self.reset)


class Stream:
    """Training batches with a position that can be saved (``state_dict``) and restored.

    ``epoch`` counts completed passes over a finite training set (always 0 for online
    tasks, whose samples are generated fresh).
    """

    epoch: int = 0

    def next(self) -> Batch:  # pragma: no cover - interface
        raise NotImplementedError

    def state_dict(self) -> dict:  # pragma: no cover - interface
        raise NotImplementedError

    def load_state_dict(self, state: dict) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class Task:
    """Base class; see the module docstring."""

    name: str = ""
    metric: str = "accuracy"  # "accuracy" (higher is better) or "bpc" (lower is better)
    online: bool = False  # fresh samples, no epochs, stop when the test set is solved
    stateful: bool = False  # carry the recurrent state across minibatches (truncated BPTT)
    has_valid: bool = True  # a validation split exists (early stopping)
    forget_bias: float = 1.0  # paper appendix: 4 for images, 1 otherwise
    batch_size: int = 15  # the paper's minibatch size
    eval_batch_size: int = 100  # sequences one evaluation pass runs at once (the memory check)
    sample_unit: str = "sequence"  # what one training sample is, for the record
    seq_len: int  # T of a training sequence

    @classmethod
    def check_options(cls, **options) -> None:
        """Check the options' types and ranges (a one-line error), reading no data file: what
        the constructor checks first, and what a sweep spec's validation calls."""

    def model_io(self) -> dict:
        """Keyword arguments for ``build_model``: ``vocab=V`` or ``input_size, output_size``."""
        raise NotImplementedError

    def options(self) -> dict[str, Any]:
        """The task's options: ``make_task(self.name, **self.options())`` builds this task again.
        Stored in the record and the checkpoint key."""
        return {}

    def describe(self) -> dict[str, Any]:
        """Facts about the data worth recording (sizes, vocabulary); not options."""
        return {}

    def epoch_samples(self, batch_size: int) -> int | None:
        """Training samples in one epoch (None for online tasks)."""
        return None

    def default_eval_every(self, batch_size: int) -> int:
        """How many training samples between evaluations when the user does not say."""
        raise NotImplementedError

    def train_stream(self, batch_size: int, seed: int) -> Stream:
        raise NotImplementedError

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        raise NotImplementedError

    def evaluate(self, model, split: str, *, device="cpu") -> dict:
        """``{"metric": value, ...}`` on ``split`` (``valid`` or ``test``)."""
        raise NotImplementedError

    def better(self, a: float, b: float | None) -> bool:
        """Whether metric value ``a`` beats ``b`` (None: nothing yet)."""
        if b is None:
            return True
        return a > b if self.metric == "accuracy" else a < b


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """The generator that shuffles one epoch: a pure function of (seed, epoch), so a
    resumed run reshuffles exactly as the uninterrupted one."""
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch)
