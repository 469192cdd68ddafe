"""How much of the loss's gradient reaches the symbol each memorization answer must recall.

Memorization (paper section 3.2 (b)) asks answer k, read at position n + 1 + k, to repeat the
symbol read at position 1 + k. Learning it starts from the gradient of that answer's loss with
respect to what the model took in at position 1 + k: if it is tiny, nothing moves the weights
toward remembering the symbol. For answers k = 0 .. n-1 this module measures

    g_k = || d NLL(answer k) / d z_(1+k) ||   (norm over the batch and the M channels)

where z is the projected input (x_t W^x + b^x, SPEC section 3), in float64, on one batch of the
task, for an untrained model (seeded exactly as ``train --seed`` seeds it) or a training
checkpoint. At the paper's size the 3D tLSTM+CN's g falls with depth at its default
initialisation and does not with the initialisation knobs (docs/fidelity.md, "Memorization:
where learning stops").
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import torch

from ..errors import UserError
from ..events import Event, Progress, reporter
from ..models import build_model, parse_config
from ..models.memory import check_fits, model_memory

BATCH = 15  # the paper's memorization minibatch
SAMPLE_SEED = 1  # the batch measured on (the model's seed is the caller's)


@dataclass(frozen=True)
class RecallSignal:
    """g_k for one model: the answers in order, the first answer first."""

    label: str  # the configuration, or the checkpoint's folder and what it was trained for
    depth: int
    channels: int
    trained: bool
    per_answer: tuple[float, ...]
    samples: int | None = None  # a checkpoint's: the training samples it had seen

    @property
    def first(self) -> float:
        return self.per_answer[0]

    @property
    def last(self) -> float:
        return self.per_answer[-1]

    @property
    def median(self) -> float:
        return statistics.median(self.per_answer)

    def as_dict(self) -> dict:
        return {"label": self.label, "depth": self.depth, "channels": self.channels, "trained": self.trained,
                "samples": self.samples, "first": self.first, "median": self.median, "last": self.last,
                "per_answer": list(self.per_answer)}


def recall_gradients(model: torch.nn.Module, task, *, batch: int = BATCH, seed: int = SAMPLE_SEED) -> tuple[float, ...]:
    """g_k of ``model`` (any configuration, any implementation) on one batch of memorization ``task``.

    The model's own forward runs, with its input projection replaced for the call by a leaf
    tensor of the same values, so the gradient reaches z exactly as in training. The model is
    moved to float64 in place."""
    if getattr(task, "name", None) != "memorization":
        raise UserError(f"the recall gradient is measured on memorization; this model was trained on "
                        f"{getattr(task, 'name', task)}")
    model = model.double()
    x, y = task.sample(batch, torch.Generator().manual_seed(seed))
    z = model.project_inputs(x).detach().requires_grad_()
    model.project_inputs = lambda _x: z  # an instance attribute: forward() calls it instead of the method
    try:
        logits, _ = model(x)
    finally:
        del model.project_inputs
    logp = torch.log_softmax(logits, -1)
    first = task.answer.start
    values = []
    for k in range(task.symbols):
        nll = torch.nn.functional.nll_loss(logp[:, first + k], y[:, first + k])
        (grad,) = torch.autograd.grad(nll, z, retain_graph=k < task.symbols - 1)
        values.append(grad[:, 1 + k].norm().item())
    return tuple(values)


def untrained_signal(config: str, depth: int, *, channels: int | None = None, budget: str | None = None,
                     symbols: int = 20, alphabet: int = 64, seed: int = 0, batch: int = BATCH) -> RecallSignal:
    """g_k of ``config`` at depth L as ``train --seed SEED`` would start it on memorization."""
    from ..tasks import make_task

    task = make_task("memorization", symbols=symbols, alphabet=alphabet)
    arch = parse_config(config)
    _check_size(arch, depth, channels, budget, task, batch)
    return _untrained(config, depth, task, channels=channels, budget=budget, seed=seed, batch=batch)


def _untrained(config: str, depth: int, task, *, channels, budget, seed: int, batch: int = BATCH) -> RecallSignal:
    torch.manual_seed(seed)  # what Trainer does before it builds the model
    model = build_model(config, depth, channels=channels, budget=budget, forget_bias=task.forget_bias,
                        **task.model_io())
    return RecallSignal(config, depth, model.channels, False, recall_gradients(model, task, batch=batch))


def _check_size(arch, depth: int, channels, budget, task, batch: int) -> None:
    """The shape limits, and the forward + backward's memory against this machine's."""
    need = model_memory(arch, depth, channels=channels, budget=budget, batch=batch, seq_len=task.seq_len,
                        dtype="float64", **task.model_io())
    check_fits(need, "cpu", f"the recall gradient of {arch.label} at L={depth}", "lower the depth or --channels")


def _load_checkpoint(source: "str | Path"):
    """A memorization checkpoint's label, model, task and training samples, with the weights
    ``visualize`` draws (the best evaluated ones when the checkpoint keeps them)."""
    from ..training.checkpoint import CHECKPOINT_NAME, KEPT_FOLDER
    from .visualize import load_model

    loaded = load_model(str(source), any_model=True)
    if loaded.task.name != "memorization":
        raise UserError(f"{source} was trained on {loaded.task.name}; the recall gradient is measured on "
                        "memorization checkpoints")
    path = Path(source).expanduser()
    # The run's checkpoint folder names it (its checkpoint.pt, and the kept/checkpoint-<samples>.pt of
    # --keep-checkpoints, which the samples tell apart); any other file, its own name.
    if path.is_dir():
        name = path.name
    elif path.name == CHECKPOINT_NAME:
        name = path.parent.name
    elif path.parent.name == KEPT_FOLDER:
        name = path.parent.parent.name
    else:
        name = path.stem
    return f"{name}: {loaded.model.arch.label}", loaded.model, loaded.task, loaded.samples


def measure(sources: list[str], depths: list[int], *, channels: int | None = None, budget: str | None = None,
            symbols: int = 20, alphabet: int = 64, seed: int = 0, progress: Progress = None) -> list[RecallSignal]:
    """g_k of every configuration in ``sources`` at every depth (untrained, seed ``seed``) and of
    every checkpoint in it (its own depth and task), in that order. Every source is checked
    (configurations parsed, checkpoints found) before the first is measured."""
    from ..tasks import make_task

    task = make_task("memorization", symbols=symbols, alphabet=alphabet)  # the options, before any work
    cells: list[tuple[str, "int | tuple"]] = []  # (configuration, depth) or (checkpoint, its loaded model)
    from .visualize import checkpoint_file

    for source in sources:
        if checkpoint_file(source) is not None:
            cells.append((source, _load_checkpoint(source)))
            continue
        arch = parse_config(source)
        for depth in depths:
            _check_size(arch, depth, channels, budget, task, BATCH)  # every size before any work
            cells.append((source, depth))
    report = reporter(progress)
    report(Event("start", "recall gradients", done=0, total=len(cells)))
    out = []
    try:
        for done, (source, what) in enumerate(cells, 1):
            if isinstance(what, int):
                out.append(_untrained(source, what, task, channels=channels, budget=budget, seed=seed))
            else:
                label, model, task, samples = what
                out.append(RecallSignal(label, model.depth, model.channels, True, recall_gradients(model, task),
                                        samples))
            report(Event("advance", f"{out[-1].label} L={out[-1].depth}", done=done))
    finally:
        report(Event("end"))
    return out
