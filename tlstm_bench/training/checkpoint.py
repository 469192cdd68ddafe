"""Checkpoints: a run's whole state (:class:`RunState`), written atomically, read back exactly.

One file, ``<checkpoint_dir>/checkpoint.pt``, overwritten in place by writing a
temporary file in the same folder and renaming it (``os.replace`` is atomic on POSIX):
a kill at any moment leaves either the previous checkpoint or the new one, never half
of one. The checkpoint carries a key (configuration, task, depth, channels, seed, ...)
so that a run never resumes from another run's checkpoint.

The file is a dict with the entries ``key``, ``model``, ``optimizer``, ``stream``, ``rng``,
``counters``, ``best_state`` and ``carried``: one per field of :class:`RunState`, and torch's
random state. Its ``counters`` entry holds exactly the fields of :class:`Counters`. A file
without those entries (another program's, or a future format) is refused with a one-line
error, never half-read.
"""

from __future__ import annotations

import pickle
import shutil
import zipfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch

from ..atomic import atomic_write
from ..errors import UserError

CHECKPOINT_NAME = "checkpoint.pt"
KEPT_FOLDER = "kept"  # with keep_checkpoints: every checkpoint, as kept/checkpoint-<samples>.pt
ENTRIES = ("key", "model", "optimizer", "stream", "rng", "counters", "best_state", "carried")


@dataclass
class Counters:
    """Where a run stands: how far it got, what its evaluations said, why it stopped."""

    step: int = 0                      # optimizer steps taken
    samples: int = 0                   # training samples seen
    history: list = field(default_factory=list)  # one entry per evaluation
    best: float | None = None          # best validation metric so far (validated tasks)
    bad_evals: int = 0                 # evaluations since the best one
    samples_to_solve: int | None = None  # online tasks: samples when the test set was first solved
    last_eval: int = 0                 # samples at the last evaluation
    last_checkpoint: int = 0           # samples at the last checkpoint
    wall_time: float = 0.0             # seconds of training before this process started
    resumed_at: list = field(default_factory=list)  # samples at each resume
    stop_reason: str | None = None     # max_samples | epochs | time_limit | deadline | solved | early_stopping
    loss_sum: float = 0.0              # training loss summed since the last evaluation
    loss_count: int = 0                # ... over this many steps
    clipped: int = 0                   # clip_grad_norm: steps clipped since the last evaluation
    norm_sum: float = 0.0              # ... and their gradients' norms (before the clip), summed


# Counters added after checkpoints were first written: a checkpoint from before one existed lacks
# it and still resumes (restore fills in its default). Its run had no clip, so they are zero.
ADDED_COUNTERS = ("clipped", "norm_sum")


@dataclass
class RunState:
    """Exactly what a checkpoint holds (with torch's random state, which is global)."""

    key: dict                          # what the run is: a checkpoint of another run is refused
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    stream: object                     # the task's training stream (its data position)
    counters: Counters = field(default_factory=Counters)
    best_state: dict | None = None     # the parameters best on valid (validated tasks)
    carried: tuple | None = None       # the recurrent state carried between minibatches (enwik8)

    def payload(self, wall_time: float) -> dict:
        """The checkpoint's dict, its counters' wall time set to ``wall_time``."""
        return {
            "key": self.key, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "stream": self.stream.state_dict(), "rng": torch.get_rng_state(),
            "counters": {**asdict(self.counters), "wall_time": wall_time}, "best_state": self.best_state,
            "carried": None if self.carried is None else [t.detach().cpu() for t in self.carried],
        }

    def restore(self, saved: dict, device: torch.device) -> None:
        """Load a checkpoint's dict (checked by :func:`load_checkpoint`) into this state."""
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.stream.load_state_dict(saved["stream"])
        torch.set_rng_state(saved["rng"])
        self.counters = Counters(**saved["counters"])
        self.best_state = saved["best_state"]
        if saved["carried"] is not None:
            kind = type(self.model.zero_state(1, torch.zeros(1)))
            self.carried = kind(*(t.to(device) for t in saved["carried"]))


def checkpoint_path(checkpoint_dir: "str | Path") -> Path:
    return Path(checkpoint_dir).expanduser() / CHECKPOINT_NAME


def kept_path(checkpoint_dir: "str | Path", samples: int) -> Path:
    """Where ``keep_checkpoints`` keeps the checkpoint taken at ``samples`` (zero-padded, so that
    the files sort in training order)."""
    return Path(checkpoint_dir).expanduser() / KEPT_FOLDER / f"checkpoint-{samples:010d}.pt"


def save_checkpoint(path: Path, payload: dict) -> None:
    atomic_write(path, lambda fh: torch.save(payload, fh), binary=True)


def keep_copy(path: Path, keep: Path) -> None:
    """Copy the checkpoint at ``path`` to ``keep``, atomically."""
    with path.open("rb") as source:
        atomic_write(keep, lambda fh: shutil.copyfileobj(source, fh), binary=True)


def load_checkpoint(path: Path) -> dict | None:
    """The checkpoint at ``path``, or None when there is none."""
    if not path.is_file():
        return None
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile) as exc:
        raise UserError(f"checkpoint {path} is corrupt ({type(exc).__name__}); delete it to start over") from None
    counters = {f.name for f in fields(Counters)}
    if (not isinstance(saved, dict) or set(saved) != set(ENTRIES) or not isinstance(saved["counters"], dict)
            or not counters - set(ADDED_COUNTERS) <= set(saved["counters"]) <= counters):
        raise UserError(f"checkpoint {path} is not in the format this version of tlstm-bench writes; "
                        "delete it to start over")
    return saved
