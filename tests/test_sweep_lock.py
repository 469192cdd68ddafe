"""Cell claims: a lock is exclusive, a dead owner's lock is broken, another host's trusted until it expires."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from tlstm_bench.sweeps import lock as locks


def test_lock_is_exclusive_and_stale_locks_are_broken(tmp_path):
    held = locks.claim(tmp_path, "t", "abc", timeout_s=60)
    assert held is not None
    assert locks.claim(tmp_path, "t", "abc", timeout_s=60) is None          # a live owner (this process)
    held.release()
    assert not locks.lock_path(tmp_path, "t", "abc").exists()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = locks.lock_path(tmp_path, "t", "def")
    import socket

    path.write_text(json.dumps({"host": socket.gethostname(), "pid": dead.pid, "expires": time.time() + 999}))
    assert locks.holder(tmp_path, "t", "def") is None
    again = locks.claim(tmp_path, "t", "def", timeout_s=60)                  # dead owner: taken over
    assert again is not None and json.loads(path.read_text())["pid"] == os.getpid()
    path2 = locks.lock_path(tmp_path, "t", "ghi")
    path2.write_text(json.dumps({"host": "elsewhere", "pid": 1, "expires": time.time() + 999}))
    assert locks.claim(tmp_path, "t", "ghi", timeout_s=60) is None          # another host: trusted until expiry
    path2.write_text(json.dumps({"host": "elsewhere", "pid": 1, "expires": time.time() - 1}))
    assert locks.claim(tmp_path, "t", "ghi", timeout_s=60) is not None


def test_a_lock_is_readable_like_any_file_and_breaking_a_corrupt_one_is_known(tmp_path):
    """A 0600 lock (mkstemp's mode) read by another user's sweep looks corrupt, and corrupt locks
    are broken: locks get open()'s mode. A claim that broke a corrupt lock says so."""
    import stat

    from tlstm_bench import atomic

    held = locks.claim(tmp_path, "t", "abc", timeout_s=60)
    assert held is not None and not held.broke_corrupt
    assert stat.S_IMODE(held.path.stat().st_mode) == 0o666 & ~atomic._UMASK
    held.release()
    locks.lock_path(tmp_path, "t", "abc").write_text("{not json")
    again = locks.claim(tmp_path, "t", "abc", timeout_s=60)
    assert again is not None and again.broke_corrupt
