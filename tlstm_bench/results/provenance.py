"""Where a result came from: code version, library versions, machine, device, date."""

from __future__ import annotations

import datetime as _dt
import functools
import os
import platform
import socket
import subprocess
from pathlib import Path

from .. import __version__

_REPO = Path(__file__).resolve().parents[2]
CODE_PATHS = ("tlstm_bench", "benchmarks", "sweeps", "pyproject.toml")


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(_REPO), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def code_version() -> dict:
    """The git commit and dirty flag of the checkout this package runs from (if any)."""
    commit = _git("rev-parse", "HEAD")
    dirty = None
    if commit is not None:
        # Dirty means the code that produced a result may differ from the commit: only
        # uncommitted changes to what runs count (not results, figures or docs).
        status = _git("status", "--porcelain", "--untracked-files=no", "--", *CODE_PATHS)
        dirty = bool(status) if status is not None else None
    return {"git_commit": commit, "git_dirty": dirty, "package_version": __version__}


def device_name(device: "str | torch.device" = "cpu") -> str:
    import torch  # here, not at the top: reading results must not need torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


def provenance(device: "str | torch.device" = "cpu") -> dict:
    """A dict to merge into every record."""
    import torch

    device = torch.device(device)
    return {
        **code_version(),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "device": device.type,
        "device_name": device_name(device),
        "cuda_version": torch.version.cuda if device.type == "cuda" else None,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
