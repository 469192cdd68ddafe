"""The learning rate's warm-up: an unstated choice of the paper, as a setting (``--lr-warmup``).

The paper trains with Adam at one learning rate (1e-3) from the first step, and says nothing of a
warm-up; with none (the default) every run here does the same. A warm-up is written
``SHAPE:SAMPLES[:START]`` and sets the learning rate of the step that starts after ``c`` training
samples:

- ``linear:N[:START]``: ``START + (lr - START) * min(1, c / N)``; START defaults to 0 (the first
  step then moves no weight, as in the common linear warm-up), so the rate reaches ``--lr`` after
  N samples.
- ``step:N:START``: ``START`` while ``c < N``, then ``lr``: the learning-rate switch of the init
  search (results/evidence/cpu/init_search/, "The paper's lr 1e-3 from the lr 1e-4 run's
  checkpoint"), ``step:96000:1e-4`` at ``--lr 1e-3``, as one run.

The rate is a function of the samples seen, so a run resumed from its checkpoint goes on with the
same rates. Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import checks
from .errors import UserError

SHAPES = ("linear", "step")
NONE = "none"  # what a sweep spec's list may name for "no warm-up"
USAGE = "like linear:20000 (to --lr over 20,000 samples from 0), linear:20000:1e-5, or step:96000:1e-4"


@dataclass(frozen=True)
class Warmup:
    """A parsed warm-up: ``shape`` (linear, step), over ``samples``, from the rate ``start``."""

    shape: str
    samples: int
    start: float = 0.0

    def __str__(self) -> str:
        """The canonical text (what records store): ``linear:20000``, ``step:96000:0.0001``."""
        return f"{self.shape}:{self.samples}" + (f":{self.start:g}" if self.start or self.shape == "step" else "")

    def rate(self, lr: float, samples_seen: int) -> float:
        """The learning rate of the step that starts after ``samples_seen`` training samples."""
        if samples_seen >= self.samples:
            return lr
        if self.shape == "step":
            return self.start
        return self.start + (lr - self.start) * samples_seen / self.samples


def parse_warmup(text: "str | None", what: str = "--lr-warmup") -> Warmup | None:
    """The warm-up ``text`` names; None for none (None, "" or "none"). A one-line
    :class:`UserError` says what is wrong otherwise."""
    if text is None or (isinstance(text, str) and text.strip().lower() in ("", NONE)):
        return None
    if not isinstance(text, str):
        raise UserError(f"{what} takes a warm-up {USAGE}, got {text!r}")
    parts = [p.strip() for p in text.split(":")]
    if parts[0] not in SHAPES or len(parts) not in (2, 3):
        raise UserError(f"{what} takes a warm-up {USAGE}, or none; got {text!r}")
    shape = parts[0]
    try:
        samples = int(parts[1].replace("_", ""))
    except ValueError:
        raise UserError(f"{what}: the warm-up's samples must be a whole number like 20000, got {parts[1]!r}") from None
    checks.integer(samples, f"{what}'s samples")
    if shape == "step" and len(parts) == 2:
        raise UserError(f"{what}: a step warm-up holds a learning rate first; give it, like step:{samples}:1e-4")
    start = 0.0
    if len(parts) == 3:
        try:
            start = float(parts[2])
        except ValueError:
            raise UserError(f"{what}: the warm-up's start must be a learning rate like 1e-5, "
                            f"got {parts[2]!r}") from None
        start = 0.0 if start == 0 and shape == "linear" else checks.number(start, f"{what}'s start")
    return Warmup(shape, samples, start)


def canonical_warmup(text: "str | None", what: str = "--lr-warmup") -> str | None:
    """``text`` checked and written one way (``linear:20000``), or None for none."""
    warmup = parse_warmup(text, what)
    return None if warmup is None else str(warmup)
