"""Checkpoints: model, optimizer, data position, RNG state and counters, written atomically.

One file, ``<checkpoint_dir>/checkpoint.pt``, overwritten in place by writing a
temporary file in the same folder and renaming it (``os.replace`` is atomic on POSIX):
a kill at any moment leaves either the previous checkpoint or the new one, never half
of one. The checkpoint carries a key (configuration, task, depth, channels, seed, ...)
so that a run never resumes from another run's checkpoint.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import zipfile
from pathlib import Path

import torch

from ..errors import UserError

CHECKPOINT_NAME = "checkpoint.pt"


def checkpoint_path(checkpoint_dir: "str | Path") -> Path:
    return Path(checkpoint_dir).expanduser() / CHECKPOINT_NAME


def save_checkpoint(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(payload, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(path: Path) -> dict | None:
    """The checkpoint at ``path``, or None when there is none."""
    if not path.is_file():
        return None
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile) as exc:
        raise UserError(f"checkpoint {path} is corrupt ({type(exc).__name__}); delete it to start over") from None
