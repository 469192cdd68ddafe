"""Claim a cell with a lock file, so two sweeps over one store never run the same cell twice.

A claim is ``<root>/<sweep>/.locks/<cell id>.lock``, holding the owner's host, PIDs (with
what tells each process from a later one given its number: :func:`~tlstm_bench.atomic.process_start`)
and an expiry time. It is written whole to a temporary file and then linked into place
(``os.link`` fails if the lock exists: an atomic create-if-absent on POSIX and on NFS), so a
lock file is never seen half-written. A lock is *stale* when its owner is gone. On the same
host the processes decide, not the clock: it is live while one of its processes runs (the
same process: its start matches), stale once none does (a zombie, or a later process given
the same PID, counts as dead), whatever the time says; a clock days ahead never breaks a live
sweep's claim. Only where that cannot be told (another host, whose PIDs mean nothing here, or
a process whose start is unknown) does the expiry decide (the cell's timeout plus a grace
period). A lock that is not what this module writes (empty,
truncated, not an object, a PID or an expiry of the wrong type: a disk or a hand broke it)
is *corrupt* and stale at once, so a sweep never needs a person to delete it (a folder where a
lock goes is the exception: it is not the tool's to delete, so the claim is a one-line error
that names it). A stale lock
is broken under a second, short-lived ``.break`` lock and after re-reading it, so two
processes that both find it stale cannot both take the cell. A write the disk refuses (full,
read-only) raises with the lock's path and leaves no lock, empty or torn; a claim whose owner
died after its cell was recorded is broken when a later run finds the record (:func:`clear_stale`).
"""

from __future__ import annotations

import errno
import json
import math
import os
import socket
import stat
import time
from pathlib import Path

from ..atomic import NotAFile, atomic_write, pid_alive, process_start, read_regular_text, temp_beside
from ..errors import UserError
from ..results.store import check_name

GRACE_S = 600.0
# os.link's errors that mean "this filesystem has no hard links", not "this write failed".
_NO_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS, errno.EMLINK})
_BREAK_STALE_S = 60.0


def lock_dir(root: Path, sweep: str) -> Path:
    return Path(root) / sweep / ".locks"


def lock_path(root: Path, sweep: str, cell_id: str) -> Path:
    return lock_dir(root, check_name("sweep name", sweep)) / f"{check_name('cell id', cell_id)}.lock"


def _valid(info) -> bool:
    """Whether ``info`` is a lock as :func:`claim` and :meth:`CellLock.add_child` write it."""
    def pid(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value > 0

    def number(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    def starts(value) -> bool:
        return isinstance(value, list) and all(v is None or isinstance(v, str) for v in value)

    return (isinstance(info, dict) and isinstance(info.get("host"), str) and pid(info.get("pid"))
            and number(info.get("expires")) and number(info.get("created", 0.0))
            and isinstance(info.get("child_pids", []), list) and all(map(pid, info.get("child_pids", [])))
            and starts([info.get("pid_start")]) and starts(info.get("child_starts", [])))


def read_lock(path: Path) -> dict | None:
    """The lock's content; {} if it is corrupt (see the module docstring), None if there is no lock."""
    try:  # never opened unless a regular file: a FIFO here would block the sweep
        info = json.loads(read_regular_text(path))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (NotAFile, OSError, UnicodeDecodeError, ValueError):
        return {}
    return info if _valid(info) else {}


def is_stale(info: dict | None) -> bool:
    """Whether the owner of a lock (as :func:`read_lock` returns it) is gone; a corrupt lock ({}) is."""
    if info is None:
        return False
    if not info:
        return True
    if info["host"] == socket.gethostname():
        owners = [_owner(p, s) for p, s in _processes(info)]
        if "alive" in owners:
            return False
        if all(state == "dead" for state in owners):
            return True
    return time.time() > info["expires"]


def _processes(info: dict) -> list[tuple[int, str | None]]:
    """(pid, start or None) of the lock's owner and of its cell processes."""
    children = info.get("child_pids", [])
    starts = [*info.get("child_starts", []), *[None] * len(children)]
    return [(info["pid"], info.get("pid_start")), *zip(children, starts)]


def _owner(pid: int, start: str | None) -> str:
    """``alive`` (that very process runs), ``dead`` (it does not: no process, or a later one with
    its number) or ``unknown`` (a process with its number runs; no start to tell them apart)."""
    if not pid_alive(pid):
        return "dead"
    now = process_start(pid)
    if start is None or now is None:
        return "unknown"
    return "alive" if now == start else "dead"


def _write(path: Path, info: dict) -> None:
    atomic_write(path, lambda fh: json.dump(info, fh))


def _create(path: Path, info: dict) -> bool:
    """Create ``path`` holding ``info`` unless it exists: written whole, then linked into place.

    A write that fails (a full disk) raises and leaves nothing: no lock, no temporary file.
    """
    fd, tmp = temp_beside(path)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(info, fh)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in _NO_LINKS:
                raise
            return _create_in_place(path, info)  # a filesystem without hard links (a reader may see it torn)
    except OSError as exc:
        if exc.filename is None:  # a write() failed: name the lock it was for
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    finally:
        os.unlink(tmp)
    return True


def _create_in_place(path: Path, info: dict) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except FileExistsError:
        return False
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(info))
    except BaseException:  # never leave an empty or torn lock of ours behind
        path.unlink(missing_ok=True)
        raise
    return True


class CellLock:
    """A held claim on one cell. Release it with :meth:`release` (or use ``with``).

    ``broke_corrupt``: taking it broke a corrupt lock file (said in the cell's line, so a
    damaged store does not go unnoticed).
    """

    def __init__(self, path: Path, info: dict, broke_corrupt: bool = False):
        self.path = path
        self.info = info
        self.broke_corrupt = broke_corrupt

    def add_child(self, pid: int) -> None:
        """Record the cell's process, so the claim outlives a killed sweep while the cell still runs."""
        known = self.info.get("child_pids", [])
        starts = [*self.info.get("child_starts", []), *[None] * len(known)][:len(known)]
        info = {**self.info, "child_pids": [*known, pid], "child_starts": [*starts, process_start(pid)]}
        _write(self.path, info)
        self.info = info  # only once written: a refused write leaves the claim as it is, and ours

    def held(self) -> bool:
        """Whether the claim is still this one (not broken, deleted or taken over meanwhile)."""
        return read_lock(self.path) == self.info

    def release(self) -> None:
        if read_lock(self.path) in (self.info, {}):  # ours, or broken since: never another owner's
            try:
                self.path.unlink(missing_ok=True)
            except OSError:  # a folder turned read-only: the claim goes stale with this process
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def _break_stale(path: Path) -> None:
    breaker = path.with_name(path.name + ".break")
    try:  # a breaker left by a process killed while breaking: its owner is dead (or, elsewhere, expired)
        if is_stale(read_lock(breaker)):
            breaker.unlink(missing_ok=True)
    except OSError:
        pass
    mine = {**_me(), "expires": time.time() + _BREAK_STALE_S}
    if not _create(breaker, mine):
        return
    try:
        if is_stale(read_lock(path)):  # re-read under the breaker: it may be fresh by now
            path.unlink(missing_ok=True)
    finally:
        breaker.unlink(missing_ok=True)


def _me() -> dict:
    """This process, as a lock names its owner."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "pid_start": process_start(os.getpid())}


def claim(root: Path, sweep: str, cell_id: str, *, timeout_s: float) -> CellLock | None:
    """Take the cell, or return None if a live owner holds it."""
    path = lock_path(root, sweep, cell_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    _refuse_folder(path)
    info = {**_me(), "created": time.time(), "expires": time.time() + timeout_s + GRACE_S}
    corrupt = False
    for _ in range(2):
        if _create(path, info):
            return CellLock(path, info, broke_corrupt=corrupt)
        found = read_lock(path)
        if not is_stale(found):
            return None
        corrupt = corrupt or found == {}
        _break_stale(path)
    return None


class FolderInTheWay(UserError):
    """A folder stands where a cell's lock file goes: the cell cannot be claimed."""


def _refuse_folder(path: Path) -> None:
    """A folder where the lock file goes cannot be a claim and is not the tool's to delete."""
    try:
        folder = stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return
    if folder:
        raise FolderInTheWay(f"{path} is a folder where the cell's lock file goes; move it away and rerun")


def clear_stale(root: Path, sweep: str, cell_id: str) -> None:
    """Break the cell's claim if its owner is gone: a sweep killed between storing a cell's
    record and releasing its claim leaves it, and no later run claims a recorded cell."""
    path = lock_path(root, sweep, cell_id)
    if os.path.lexists(path) and not os.path.isdir(path) and is_stale(read_lock(path)):
        _break_stale(path)  # (a folder there is not a claim, and not the tool's to delete)


def holder(root: Path, sweep: str, cell_id: str) -> dict | None:
    """Who holds a live claim on the cell (None if nobody)."""
    path = lock_path(root, sweep, cell_id)
    info = read_lock(path)
    if info is None or is_stale(info):
        return None
    return info
