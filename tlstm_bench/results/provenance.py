"""Where a result came from: the code, the libraries, the machine, the date.

Two different questions, answered separately:

* **Which code computed it?** :func:`code_version`: a hash of the *content* of the
  package's source files (``tlstm_bench/**/*.py``), so a commit that touches only docs,
  results or tests leaves it unchanged, and an edit to the package changes it whether or
  not it is committed. Sweep cells put it into their id (a finished cell stays finished
  across such commits). It works the same in a git checkout and in an installed wheel.
* **Where does that code live?** :func:`git_info`: the git commit and dirty flag of the
  checkout the package runs from, kept in every record as provenance; ``None`` for both
  when the package is not a tracked part of a git checkout (a wheel in site-packages,
  even inside a venv that sits in some checkout).
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import os
import platform
import socket
import subprocess
from importlib import resources
from pathlib import Path

from .. import __version__

ENV_CODE_VERSION = "TLSTM_BENCH_CODE_VERSION"
# The commit a copy without its git history runs (a device machine gets the working tree, and once a
# stale .git with it): it wins over git, and the dirty flag is then unknown (None).
ENV_GIT_COMMIT = "TLSTM_BENCH_GIT_COMMIT"


def package_dir() -> Path:
    """The folder this package's source files are in (never a folder above it)."""
    return Path(str(resources.files("tlstm_bench")))


def source_files(root: "Path | None" = None) -> list[Path]:
    """Every ``.py`` file of the package, sorted by its path inside the package."""
    root = root or package_dir()
    return sorted((p for p in root.rglob("*.py") if "__pycache__" not in p.parts),
                  key=lambda p: p.relative_to(root).as_posix())


def source_hash(root: "Path | None" = None) -> str:
    """sha256 over (relative path, content) of every source file, 12 hex digits."""
    root = root or package_dir()
    digest = hashlib.sha256()
    for path in source_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


@functools.lru_cache(maxsize=1)
def _source_hash_cached() -> str:
    return source_hash()


def code_version() -> str:
    """``<package version>+src.<hash of the package's source>``; ``$TLSTM_BENCH_CODE_VERSION`` pins it.

    Pin it only to keep ids across a code change you know does not alter results.
    """
    pinned = os.environ.get(ENV_CODE_VERSION)
    if pinned:
        return pinned
    return f"{__version__}+src.{_source_hash_cached()}"


def _git(folder: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def git_info() -> dict:
    """``{"git_commit", "git_dirty"}`` of the checkout the package runs from; None, None outside one.

    The package counts as part of a checkout only when its own ``__init__.py`` is tracked
    there; dirty means uncommitted changes (or untracked files) in the package folder.
    ``$TLSTM_BENCH_GIT_COMMIT`` names the commit instead (a copy of a checkout without, or with a
    stale, ``.git``: the GPU device scripts set it); the dirty flag is then None.
    """
    given = os.environ.get(ENV_GIT_COMMIT)
    if given:
        return {"git_commit": given, "git_dirty": None}
    folder = package_dir()
    if _git(folder, "ls-files", "--error-unmatch", "--", "__init__.py") is None:
        return {"git_commit": os.environ.get(ENV_GIT_COMMIT) or None, "git_dirty": None}
    commit = _git(folder, "rev-parse", "HEAD")
    status = _git(folder, "status", "--porcelain", "--", ".")
    return {"git_commit": commit, "git_dirty": None if status is None else bool(status)}


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what platform knows."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"


def cpu_count() -> int:
    """CPUs this process may run on (what torch's default thread count follows)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def device_name(device: "str | torch.device" = "cpu") -> str:
    import torch  # here, not at the top: reading results must not need torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model()


def machine(device: str = "cpu") -> dict:
    """What a runtime depends on besides the code and the settings: a runtime cell's machine key.

    The accelerator's name (CUDA), the CPU model and how many CPUs this process may use
    (torch's default thread count follows it; an explicit thread count is in the cell's
    settings). Imports torch only for a CUDA device.
    """
    gpu = None
    if str(device).startswith("cuda"):
        import torch

        gpu = torch.cuda.get_device_name(torch.device(device)) if torch.cuda.is_available() else "unavailable"
    return {"gpu": gpu, "cpu_model": cpu_model(), "cpus": cpu_count()}


@functools.lru_cache(maxsize=1)
def driver_version() -> str | None:
    """The NVIDIA driver's version (``nvidia-smi``), or None where there is none."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else None


def triton_version() -> str | None:
    """The installed Triton's version (read from its metadata: Triton is not imported), or None."""
    from importlib import metadata

    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:
        return None


def provenance(device: "str | torch.device" = "cpu") -> dict:
    """A dict to merge into every record."""
    import torch

    device = torch.device(device)
    cuda = device.type == "cuda"
    return {
        "code_version": code_version(),
        **git_info(),
        "package_version": __version__,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "device": device.type,
        "device_name": device_name(device),
        "cuda_version": torch.version.cuda if cuda else None,
        "driver_version": driver_version() if cuda else None,
        "cudnn_version": torch.backends.cudnn.version() if cuda else None,
        "triton_version": triton_version(),
        "cpu_model": cpu_model(),
        "threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "cpu_count": os.cpu_count(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
