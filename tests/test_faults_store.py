"""Faults a sweep meets in its store (issue 21): another process racing on a cell, claims left
by a killed sweep, links planted in the store, a results folder whose name starts with '-'.

What each asserts is the store's two rules: an ``ok`` record is never replaced by a worse one,
and a process deletes only the files it created (or a dead owner's claim); nothing outside the
store is ever written. Disk faults (full, read-only) are in ``tests/test_faults_disk.py``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from sweep_helpers import FAKE, RUNTIME_SPEC, executions, records, sweep_process, write_spec
from tlstm_bench.results import store
from tlstm_bench.sweeps import lock as locks
from tlstm_bench.sweeps.cell import make_record
from tlstm_bench.sweeps.grid import expand
from tlstm_bench.sweeps.plan import run_sweep
from tlstm_bench.sweeps.runner import run_cell
from tlstm_bench.sweeps.spec import load_spec

CODE = "test-version"


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def cells_of(tmp_path: Path) -> tuple[Path, list]:
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    return spec, expand(load_spec(spec), code=CODE)


def recorded_with_a_claim(tmp_path, pid: int):
    """Every cell of a sweep recorded, and a claim (lock) of its first cell by process ``pid``
    left on it: (spec, store root, lock path, the claim)."""
    spec, cells = cells_of(tmp_path)
    root = tmp_path / "store"
    for cell in cells:
        store.write_record(make_record(cell, {"ms_per_step": 1.0}), "t", root=root, record_id=cell.id)
    lock = locks.lock_path(root, "t", cells[0].id)
    lock.parent.mkdir(parents=True)
    claim = {"host": socket.gethostname(), "pid": pid, "created": time.time(), "expires": time.time() + 600}
    lock.write_text(json.dumps(claim))
    return spec, root, lock, claim


def test_a_claim_left_by_a_sweep_killed_after_the_record_is_cleared(tmp_path, fake_env):
    """Issue 20, item 1: a sweep killed between storing a cell's record and releasing its claim
    left the lock behind for ever (no later run claims a recorded cell)."""
    spec, root, lock, _ = recorded_with_a_claim(tmp_path, dead_pid())
    summary = run_sweep(spec, root=root, cell_fn=FAKE, code=CODE)
    assert summary.exit_code == 0 and summary.count("skipped-done") == 8
    assert not list(lock.parent.glob("*.lock*"))
    assert not executions(fake_env)


def test_a_live_claim_of_a_recorded_cell_is_left_alone(tmp_path, fake_env):
    spec, root, lock, live = recorded_with_a_claim(tmp_path, os.getpid())
    assert run_sweep(spec, root=root, cell_fn=FAKE, code=CODE).exit_code == 0
    assert json.loads(lock.read_text()) == live


def test_a_failed_record_never_replaces_an_ok_one(tmp_path):
    _, cells = cells_of(tmp_path)
    cell, root = cells[0], tmp_path / "store"
    ok = make_record(cell, {"ms_per_step": 1.0})
    path = store.write_record(ok, "t", root=root, record_id=cell.id)
    failed = make_record(cell, error="cell process exited with code 1")
    assert store.write_record(failed, "t", root=root, record_id=cell.id) == path
    assert json.loads(path.read_text())["status"] == "ok"
    assert store.put_record(failed, "t", root=root, record_id=cell.id)["status"] == "ok"
    newer = make_record(cell, {"ms_per_step": 2.0})                  # a success may replace a success
    store.write_record(newer, "t", root=root, record_id=cell.id)
    assert json.loads(path.read_text())["ms_per_step"] == 2.0


def test_a_failure_replaces_a_failure_and_a_corrupt_record(tmp_path):
    _, cells = cells_of(tmp_path)
    cell, root = cells[0], tmp_path / "store"
    path = store.record_path(root, "t", cell.id)
    path.parent.mkdir(parents=True)
    path.write_text("{")
    store.write_record(make_record(cell, error="first"), "t", root=root, record_id=cell.id)
    store.write_record(make_record(cell, error="second"), "t", root=root, record_id=cell.id)
    assert json.loads(path.read_text())["error"] == "second"


def test_a_cell_never_deletes_another_process_result_file(tmp_path, fake_env):
    """Issue 21, case 1: a process collected (and deleted) the result file of another that ran
    the same cell and was still alive (its claim removed by hand), which then found its result
    gone and stored a failure."""
    _, cells = cells_of(tmp_path)
    cell, root = cells[0], tmp_path / "store"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])   # the other runner, alive
    try:
        theirs = root / "t" / ".logs" / f"{cell.id}.{other.pid}.result.json"
        theirs.parent.mkdir(parents=True)
        theirs.write_text(json.dumps({"result": {"ms_per_step": 9.0}, "wall_time_s": 1.0}))
        outcome = run_cell(cell, root, cell_fn=FAKE)                 # no lock: this process claims and runs it
        assert outcome.state == "ok" and outcome.record["ms_per_step"] == 2.0
        assert theirs.exists()
        assert sum(executions(fake_env).values()) == 1
    finally:
        other.kill()
        other.wait()
    dead = root / "t" / ".logs" / f"{cells[1].id}.{dead_pid()}.result.json"   # a dead runner's: collected
    dead.write_text(json.dumps({"result": {"ms_per_step": 9.0}, "wall_time_s": 1.0}))
    collected = run_cell(cells[1], root, cell_fn=FAKE)
    assert collected.state == "ok" and collected.record["ms_per_step"] == 9.0 and not dead.exists()


def test_two_sweeps_racing_on_one_cell_keep_the_ok_record(tmp_path, fake_env):
    """Two sweeps run one cell at once (the first one's claim deleted by hand): the one that
    fails later does not replace the other's ok record, and says so."""
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    root = tmp_path / "store"
    only = ("--only", "config=2d", "--only", "depth=1")
    go = tmp_path / "go"
    os.environ.update(FAKE_PLAN=json.dumps({"2d": "crash"}), FAKE_WAIT_FOR=str(go))
    try:
        slow = sweep_process(spec, root, *only)                     # crashes once `go` exists
    finally:
        del os.environ["FAKE_PLAN"], os.environ["FAKE_WAIT_FOR"]
    locks_dir = root / "t" / ".locks"

    def running() -> list[Path]:  # the claim once it names the cell process (its last write)
        return [p for p in locks_dir.glob("*.lock") if (locks.read_lock(p) or {}).get("child_pids")]

    deadline = time.time() + 60
    while time.time() < deadline and not running():
        time.sleep(0.05)
    for lock in running():
        lock.unlink()                                               # the claim removed by hand
    fast = sweep_process(spec, root, *only)                          # succeeds at once
    fast_out = fast.communicate(timeout=60)[0].decode()
    go.touch()
    slow_out = slow.communicate(timeout=60)[0].decode()
    assert fast.returncode == 0, fast_out
    (record,) = records(root)
    assert record["status"] == "ok", slow_out
    assert slow.returncode == 0 and "Traceback" not in slow_out, slow_out
    assert sum(executions(fake_env).values()) == 2


def test_a_log_planted_as_a_link_is_replaced_not_written_through(tmp_path, fake_env):
    spec, cells = cells_of(tmp_path)
    root = tmp_path / "store"
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me\n")
    logs = root / "t" / ".logs"
    logs.mkdir(parents=True)
    for cell in cells:
        (logs / f"{cell.id}.log").symlink_to(outside)
    os.environ["FAKE_PLAN"] = json.dumps({"2d": "raise"})            # a failing cell writes a traceback to its log
    try:
        summary = run_sweep(spec, root=root, cell_fn=FAKE, code=CODE)
    finally:
        del os.environ["FAKE_PLAN"]
    assert summary.count("ok") == 6 and summary.count("failed") == 2
    assert outside.read_text() == "keep me\n"
    assert "FloatingPointError" in (logs / f"{next(c for c in cells if c.spec['config'] == '2d').id}.log").read_text()


def test_planted_links_in_the_store_change_nothing_outside_it(tmp_path, fake_env):
    """A lock and a result file planted as links to files outside the store: the sweep breaks or
    ignores them, and the files they point to are unchanged."""
    spec, cells = cells_of(tmp_path)
    root = tmp_path / "store"
    outside = tmp_path / "outside.json"
    outside.write_text('{"keep": true}')
    (root / "t" / ".locks").mkdir(parents=True)
    (root / "t" / ".logs").mkdir(parents=True)
    locks.lock_path(root, "t", cells[0].id).symlink_to(outside)
    (root / "t" / ".logs" / f"{cells[1].id}.{os.getpid()}.result.json").symlink_to(outside)
    summary = run_sweep(spec, root=root, cell_fn=FAKE, code=CODE)
    assert summary.exit_code == 0 and summary.count("ok") == 8
    assert outside.read_text() == '{"keep": true}'
    assert not list((root / "t" / ".locks").iterdir())


def test_a_results_folder_starting_with_a_dash_runs_its_cells(tmp_path, fake_env, monkeypatch):
    """Issue 21, case 8: `--root -r/store` was read as an option by the cell process."""
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    monkeypatch.chdir(tmp_path)
    summary = run_sweep(spec, root=Path("-r") / "store", cell_fn=FAKE, code=CODE, only=["depth=1"])
    assert summary.exit_code == 0, [o.error for o in summary.outcomes]
    assert all(r["status"] == "ok" for r in records(tmp_path / "-r" / "store"))
