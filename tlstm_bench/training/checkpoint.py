"""Checkpoints: model, optimizer, data position, RNG state and counters, written atomically.

One file, ``<checkpoint_dir>/checkpoint.pt``, overwritten in place by writing a
temporary file in the same folder and renaming it (``os.replace`` is atomic on POSIX):
a kill at any moment leaves either the previous checkpoint or the new one, never half
of one. The checkpoint carries a key (configuration, task, depth, channels, seed, ...)
so that a run never resumes from another run's checkpoint.
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import torch

from ..atomic import atomic_write
from ..errors import UserError

CHECKPOINT_NAME = "checkpoint.pt"


def checkpoint_path(checkpoint_dir: "str | Path") -> Path:
    return Path(checkpoint_dir).expanduser() / CHECKPOINT_NAME


def save_checkpoint(path: Path, payload: dict) -> None:
    atomic_write(path, lambda fh: torch.save(payload, fh), binary=True)


def load_checkpoint(path: Path) -> dict | None:
    """The checkpoint at ``path``, or None when there is none."""
    if not path.is_file():
        return None
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile) as exc:
        raise UserError(f"checkpoint {path} is corrupt ({type(exc).__name__}); delete it to start over") from None
