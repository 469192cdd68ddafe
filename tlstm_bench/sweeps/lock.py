"""Claim a cell with a lock file, so two sweeps over one store never run the same cell twice.

A claim is ``<root>/<sweep>/.locks/<cell id>.lock`` created with ``O_CREAT | O_EXCL`` (atomic
on POSIX and on NFSv3+), holding the owner's host, PIDs and an expiry time. A lock is *stale*
when its owner is gone: on the same host, none of its PIDs is alive (a zombie counts as
dead); on any host, its expiry has passed (the cell's timeout plus a grace period). A stale
lock is broken under a second, short-lived ``.break`` lock and after re-reading it, so two
processes that both find it stale cannot both take the cell.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from ..atomic import atomic_write

GRACE_S = 600.0
_BREAK_STALE_S = 60.0


def lock_dir(root: Path, sweep: str) -> Path:
    return Path(root) / sweep / ".locks"


def lock_path(root: Path, sweep: str, cell_id: str) -> Path:
    return lock_dir(root, sweep) / f"{cell_id}.lock"


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (killed, not yet reaped) holds nothing
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def read_lock(path: Path) -> dict | None:
    """The lock's content; {} if unreadable (being written), None if there is no lock."""
    try:
        return json.loads(path.read_text() or "{}")
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError):
        return {}


def is_stale(info: dict | None, path: Path | None = None) -> bool:
    if info is None:
        return False
    if not info:  # empty or torn: stale only if it has been so for a while
        try:
            return time.time() - path.stat().st_mtime > _BREAK_STALE_S if path else False
        except OSError:
            return False
    if time.time() > info.get("expires", float("inf")):
        return True
    if info.get("host") == socket.gethostname():
        pids = [info.get("pid", 0), *info.get("child_pids", [])]
        return not any(pid_alive(int(p)) for p in pids if p)
    return False


def _write(path: Path, info: dict) -> None:
    atomic_write(path, lambda fh: json.dump(info, fh))


def _create(path: Path, info: dict) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as fh:
        json.dump(info, fh)
    return True


class CellLock:
    """A held claim on one cell. Release it with :meth:`release` (or use ``with``)."""

    def __init__(self, path: Path, info: dict):
        self.path = path
        self.info = info

    def add_child(self, pid: int) -> None:
        """Record the cell's process, so the claim outlives a killed sweep while the cell still runs."""
        self.info = {**self.info, "child_pids": [*self.info.get("child_pids", []), pid]}
        _write(self.path, self.info)

    def release(self) -> None:
        if read_lock(self.path) == self.info or read_lock(self.path) == {}:
            self.path.unlink(missing_ok=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def _break_stale(path: Path) -> None:
    breaker = path.with_name(path.name + ".break")
    try:
        if time.time() - breaker.stat().st_mtime > _BREAK_STALE_S:
            breaker.unlink(missing_ok=True)
    except OSError:
        pass
    if not _create(breaker, {"host": socket.gethostname(), "pid": os.getpid()}):
        return
    try:
        if is_stale(read_lock(path), path):  # re-read under the breaker: it may be fresh by now
            path.unlink(missing_ok=True)
    finally:
        breaker.unlink(missing_ok=True)


def claim(root: Path, sweep: str, cell_id: str, *, timeout_s: float) -> CellLock | None:
    """Take the cell, or return None if a live owner holds it."""
    path = lock_path(root, sweep, cell_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    info = {"host": socket.gethostname(), "pid": os.getpid(), "created": time.time(),
            "expires": time.time() + timeout_s + GRACE_S}
    for _ in range(2):
        if _create(path, info):
            return CellLock(path, info)
        if not is_stale(read_lock(path), path):
            return None
        _break_stale(path)
    return None


def holder(root: Path, sweep: str, cell_id: str) -> dict | None:
    """Who holds a live claim on the cell (None if nobody)."""
    path = lock_path(root, sweep, cell_id)
    info = read_lock(path)
    if info is None or is_stale(info, path):
        return None
    return info
