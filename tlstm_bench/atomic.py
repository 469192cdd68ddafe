"""Write a file so that readers see the old version or the new one, never half of either."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO, Callable


def _read_umask() -> int:
    """The process's umask: from /proc on Linux, else by setting it and setting it back (os has
    no getter; done once, at import, so no thread sees the temporary value)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def atomic_write(path: "str | Path", write: Callable[[IO], None], *, binary: bool = False) -> Path:
    """Call ``write(fh)`` on a temporary file beside ``path``, fsync it, and rename it into place.

    ``os.replace`` is atomic on POSIX: a crash, a kill or a failing ``write`` leaves the old
    file (if any) untouched and no temporary file behind; two writers leave one whole file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_beside(path)
    try:
        with os.fdopen(fd, "wb" if binary else "w") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def temp_beside(path: Path) -> tuple[int, str]:
    """(fd, name) of a new temporary file beside ``path``, with the mode ``open()`` would give.

    mkstemp makes it 0600; records and locks in a shared store (SLURM jobs, colleagues) must be
    as readable as any other file (0666 less the umask): a lock another user cannot read would
    look corrupt to their sweep, which breaks corrupt locks.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    if hasattr(os, "fchmod"):
        try:
            os.fchmod(fd, 0o666 & ~_UMASK)
        except OSError:
            os.close(fd)
            Path(tmp).unlink(missing_ok=True)
            raise
    return fd, tmp
