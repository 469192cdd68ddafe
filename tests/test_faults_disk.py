"""A disk that fills or turns read-only under a sweep or a training run (issue 21, cases 5-6).

What a user whose disk filled at 3 a.m. finds in the morning: every record stored before is
there and unchanged, one line saying which folder refused what, no traceback, no empty or
stale lock, no temporary file, and a rerun (once there is room) that finishes the rest.

The disks are real: a small tmpfs mounted for the test (and a read-only bind mount), which needs
root (CI runs as root); elsewhere these tests skip, saying why.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweep_helpers import FAKE, RUNTIME_SPEC, executions, records, sweep_process, write_spec
from tlstm_bench.cli import app
from tlstm_bench.sweeps import lock as locks
from tlstm_bench.sweeps.plan import run_sweep


@pytest.fixture
def disk(tmp_path):
    """A 1 MiB tmpfs at ``tmp_path/disk`` (unmounted, with what is mounted inside it, after the test)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip() or done.returncode}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(path: Path) -> None:
    from sweep_fakes import _fill

    _fill(str(path))


def leftovers(folder: Path) -> list[str]:
    """Lock files and temporary files anywhere under ``folder``."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.name.endswith((".lock", ".tmp", ".break")))


def one_line_stopped(output: str) -> None:
    assert "Traceback" not in output, output
    text = " ".join(output.split())
    assert "No space left on device" in text or "Read-only file system" in text, output
    assert "stopped early" in text and "rerun the same command" in text, output


def rerun_finishes_keeping(spec, root, monkeypatch, before: dict) -> None:
    """The same sweep again without faults: it exits 0, all 8 cells recorded, those recorded
    before unchanged."""
    monkeypatch.setenv("FAKE_PLAN", "{}")
    again = sweep_process(spec, root)
    output = again.communicate(timeout=120)[0].decode()
    assert again.returncode == 0, output
    after = {r["id"]: r for r in records(root)}
    assert len(after) == 8 and all(after[i] == r for i, r in before.items())


def test_a_sweep_whose_disk_fills_keeps_its_records_and_a_rerun_finishes(disk, tmp_path, fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_PLAN", json.dumps({"2d-m": "fill"}))    # the 5th cell fills the disk
    monkeypatch.setenv("FAKE_FILL", str(disk / "filler"))
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    root = disk / "ws" / "store"
    proc = sweep_process(spec, root)
    output = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 1, output
    one_line_stopped(output)
    before = {r["id"]: r for r in records(root)}
    assert len(before) == 4 and all(r["status"] == "ok" for r in before.values())
    assert leftovers(root) == []

    (disk / "filler").unlink()                                         # morning: there is room again
    rerun_finishes_keeping(spec, root, monkeypatch, before)
    assert leftovers(root) == []


def test_a_sweep_on_a_full_disk_says_so_in_one_line_and_leaves_no_lock(disk, tmp_path, fake_env):
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    root = disk / "ws" / "store"
    (root / "t" / ".locks").mkdir(parents=True)
    fill(disk / "filler")
    summary = run_sweep(spec, root=root, cell_fn=FAKE, code="test-version", jobs=2)
    assert summary.exit_code == 1 and summary.missing == 8
    assert summary.count("not-run") >= 1 and summary.count("not-run", "stopped") == 8
    refused = next(o for o in summary.outcomes if o.state == "not-run")
    assert "No space left on device" in refused.error and str(root / "t" / ".locks") in refused.error
    assert leftovers(root) == [] and not executions(fake_env)


def test_a_lock_that_cannot_be_written_leaves_nothing(disk):
    root = disk / "store"
    locks.lock_dir(root, "t").mkdir(parents=True)
    fill(disk / "filler")
    with pytest.raises(OSError) as caught:
        locks.claim(root, "t", "abc", timeout_s=60)
    assert caught.value.filename == str(locks.lock_path(root, "t", "abc"))
    assert list(locks.lock_dir(root, "t").iterdir()) == []


def test_a_store_turned_read_only_mid_sweep_stops_it_cleanly(disk, tmp_path, fake_env, monkeypatch):
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    root = disk / "ws" / "store"
    (root / "t").mkdir(parents=True)
    monkeypatch.setenv("FAKE_PLAN", json.dumps({"2d": "readonly"}))   # the 3rd cell makes the store read-only
    monkeypatch.setenv("FAKE_MOUNT", str(root / "t"))
    proc = sweep_process(spec, root)
    try:
        output = proc.communicate(timeout=120)[0].decode()
    finally:
        mounted = subprocess.run(["umount", str(root / "t")], capture_output=True).returncode == 0
    assert mounted and proc.returncode == 1, output
    one_line_stopped(output)
    before = {r["id"]: r for r in records(root)}
    assert len(before) == 2
    rerun_finishes_keeping(spec, root, monkeypatch, before)
    assert [p for p in leftovers(root) if not p.endswith(".lock")] == []   # its stale claim is broken


def test_train_whose_checkpoint_disk_is_full_finishes_and_stores_its_record(disk, tmp_path):
    fill(disk / "filler")
    results = tmp_path / "results"
    args = ["train", "2d", "--depth", "1", "--preset", "memorization-small", "--channels", "4",
            "--max-samples", "30", "--eval-every", "15", "--checkpoint-dir", str(disk / "ckpt"),
            "--results-dir", str(results)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "checkpoint not saved" in result.output and "No space left on device" in result.output
    (record,) = [json.loads(p.read_text()) for p in (results / "store" / "training").glob("*.json")]
    assert record["status"] == "ok" and record["samples_seen"] == 30
    assert leftovers(disk) == []
