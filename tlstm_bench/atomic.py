"""Every file the tool writes goes through here: created fresh, never through a link, never half.

* :func:`atomic_write` writes a temporary file beside the target and renames it over: readers
  see the old version or the new one, and a link at the target is replaced, never followed.
* :func:`fresh_file` opens a new file at a path for streaming (a cell's log) the same way.
* A temporary file is named after its owner (``.<name>.<host>-<pid>.<random>.tmp``), so the
  one rule for deleting holds here too: a process deletes the files it created, and
  :func:`clean_stale_temps` deletes only those whose owner is dead (a kill mid-write).
* :func:`disk_problem` phrases a write that failed for want of space or permission (a full
  disk, a read-only mount, a quota) as one line naming the folder.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import tempfile
from pathlib import Path
from typing import IO, Callable

# A write that failed for the disk's or the folder's sake, not the data's: no space, a quota, a
# read-only mount, a folder made unwritable.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})
_HOST = re.sub(r"[^A-Za-z0-9-]", "", socket.gethostname().split(".")[0])[:32] or "host"


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
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:  # a write() failed: name the file it was for
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    return path


def fresh_file(path: "str | Path", mode: str = "w") -> IO:
    """A new empty file at ``path``, open for writing: a file or a link already there is
    replaced (by a rename), never truncated or written through."""
    path = Path(path)
    fd, tmp = temp_beside(path)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        raise
    return os.fdopen(fd, mode)


def temp_beside(path: Path) -> tuple[int, str]:
    """(fd, name) of a new temporary file beside ``path``, with the mode ``open()`` would give.

    mkstemp makes it 0600; records and locks in a shared store (SLURM jobs, colleagues) must be
    as readable as any other file (0666 less the umask): a lock another user cannot read would
    look corrupt to their sweep, which breaks corrupt locks.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{_HOST}-{os.getpid()}.", suffix=".tmp", dir=path.parent)
    if hasattr(os, "fchmod"):
        try:
            os.fchmod(fd, 0o666 & ~_UMASK)
        except OSError:
            os.close(fd)
            Path(tmp).unlink(missing_ok=True)
            raise
    return fd, tmp


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host is alive (a zombie is not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    try:  # a zombie (killed, not yet reaped) writes nothing more
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def clean_stale_temps(path: "str | Path") -> list[Path]:
    """Delete the temporary files of writes to ``path`` whose writer (a process on this host)
    is dead, as a kill mid-write leaves them; the paths deleted. A live writer's, or another
    host's (its pid means nothing here), are left alone."""
    path = Path(path)
    pattern = re.compile(re.escape(f".{path.name}.{_HOST}-") + r"(\d+)\.[^/]*\.tmp")
    removed = []
    for temp in path.parent.glob(f".{path.name}.*.tmp"):
        found = pattern.fullmatch(temp.name)
        if found and int(found.group(1)) != os.getpid() and not pid_alive(int(found.group(1))):
            temp.unlink(missing_ok=True)
            removed.append(temp)
    return removed


def disk_problem(exc: OSError) -> str | None:
    """One line for a write refused for want of space or permission, naming the folder; None
    for any other error."""
    if exc.errno not in DISK_ERRNOS:
        return None
    target = Path(exc.filename) if exc.filename else None
    folder = target if target is not None and target.is_dir() else target.parent if target is not None else None
    where = f"cannot write in {folder}" if folder is not None else "cannot write"
    return f"{where} ({exc.strerror or os.strerror(exc.errno)})"


def save_figure(fig, stem: "str | Path", *, dpi: int = 150) -> list[Path]:
    """``fig`` (a matplotlib Figure) as ``<stem>.png`` and ``<stem>.pdf``, each written fresh by
    :func:`atomic_write` (a link in its place is replaced, never written through) and without
    dates in them, so the same records give the same files."""
    png, pdf = Path(f"{stem}.png"), Path(f"{stem}.pdf")
    atomic_write(png, lambda fh: fig.savefig(fh, format="png", dpi=dpi, metadata={"Software": None}), binary=True)
    atomic_write(pdf, lambda fh: fig.savefig(fh, format="pdf", metadata={"CreationDate": None, "Producer": None}),
                 binary=True)
    return [png, pdf]
