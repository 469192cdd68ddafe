"""Every file the tool writes goes through here: created fresh, never through a link, never half.

* :func:`atomic_write` writes a temporary file beside the target and renames it over: readers
  see the old version or the new one, and a link at the target is replaced, never followed.
* :func:`fresh_file` opens a new file at a path for streaming (a cell's log) the same way.
* A temporary file is named after its owner (``.<name>.<host>-<pid>.<random>.tmp``), so the
  one rule for deleting holds here too: a process deletes the files it created, and
  :func:`clean_stale_temps` deletes only those whose owner is dead (a kill mid-write).
* :func:`read_regular` reads a file only if it is a regular one: a FIFO, a device or a socket
  planted where a record, a claim or a result goes is never opened (opening a FIFO blocks
  until someone writes to it), and :class:`NotAFile` says what it is instead.
* :func:`disk_problem` phrases a write that failed for want of space or permission (a full
  disk, a read-only mount, a quota) as one line naming the folder.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import stat
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

    The dead writers' temporary files of the same target are deleted first
    (:func:`clean_stale_temps`), so no temporary file outlives its writer's next run.

    mkstemp makes it 0600; records and locks in a shared store (SLURM jobs, colleagues) must be
    as readable as any other file (0666 less the umask): a lock another user cannot read would
    look corrupt to their sweep, which breaks corrupt locks.
    """
    try:
        clean_stale_temps(path)
    except OSError:  # an unreadable folder: the write below says what is wrong, if anything
        pass
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
    host's (its pid means nothing here), are left alone, and so is anything that is not a
    regular file (no writer of ours made it)."""
    path = Path(path)
    pattern = re.compile(re.escape(f".{path.name}.{_HOST}-") + r"(\d+)\.[^/]*\.tmp")
    removed = []
    try:
        with os.scandir(path.parent) as entries:
            temps = [entry for entry in entries if pattern.fullmatch(entry.name)]
    except (FileNotFoundError, NotADirectoryError):  # no folder yet: nothing was written there
        return removed
    for entry in temps:
        pid = int(pattern.fullmatch(entry.name).group(1))
        try:
            regular = entry.is_file(follow_symlinks=False)
        except OSError:
            continue
        if regular and pid != os.getpid() and not pid_alive(pid):
            temp = Path(entry.path)
            temp.unlink(missing_ok=True)
            removed.append(temp)
    return removed


def process_start(pid: int) -> str | None:
    """What tells process ``pid`` of this host from a later one given the same number: the boot
    and the start time since boot (``/proc``, not the wall clock); None where unknown."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        with open(f"/proc/{pid}/stat") as fh:
            started = fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError, ValueError):
        return None
    return f"{boot}:{started}"


class NotAFile(OSError):
    """Raised by :func:`read_regular` for a path that is not a regular file (``what`` says what it is)."""

    def __init__(self, path: "str | Path", what: str):
        super().__init__(errno.EINVAL, f"not a regular file ({what})", str(path))
        self.what = what


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words (``a FIFO``); ``a regular file`` for one."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((what for test, what in _KINDS if test(mode)), "a special file")


def read_regular(path: "str | Path") -> bytes:
    """The bytes of ``path`` if it is a regular file (a link to one counts); else :class:`NotAFile`.

    Never blocks: a special file is refused from its ``stat`` without being opened, and the
    file is opened non-blocking and checked again (it may have been swapped meanwhile).
    """
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotAFile(path, file_kind(mode))
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotAFile(path, file_kind(mode))
        return fh.read()


def read_regular_text(path: "str | Path", errors: str = "strict") -> str:
    """:func:`read_regular` decoded as UTF-8 (UnicodeDecodeError unless ``errors`` says otherwise)."""
    return read_regular(path).decode("utf-8", errors)


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
