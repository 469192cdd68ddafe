"""Bad inputs of the results store and the commands that read and write it (issue 11): corrupt
records, corrupt locks, sweep names that are not file names, output folders and files that
cannot be written, for `sweep`, `results` and `plot`.

Every case asserts its exit code, exactly one line on stderr (``error: ...``), no traceback, and
that nothing in the store (or anywhere under the test's folder) was written or changed. Corrupt
locks are the exception by design: they are broken and the sweep completes, which is asserted
instead (``test_a_corrupt_lock_is_broken_and_the_sweep_completes``). ``tests/test_bad_inputs.py``
holds the other commands' bad inputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweep_helpers import FAKE, RUNTIME_SPEC, executions, records
from tlstm_bench.cli import app
from tlstm_bench.results import write_record
from tlstm_bench.sweeps import lock as locks
from tlstm_bench.sweeps.cell import make_record
from tlstm_bench.sweeps.grid import expand
from tlstm_bench.sweeps.spec import load_spec

CODE = "test-version"


def snapshot(folder: Path) -> dict:
    """Every file (by content) and folder under ``folder``: equal before and after means untouched."""
    state = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        state[key] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
    return state


def invoke(args: list[str]):
    return CliRunner().invoke(app, args, env={"COLUMNS": "200", "TLSTM_BENCH_CODE_VERSION": CODE})


def assert_one_line_error(result, code: int = 2, *needles: str) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A results folder whose store holds the records of 3 of the 8 cells of sweep ``t``; the spec
    file is ``<tmp>/t.toml``."""
    monkeypatch.setenv("TLSTM_BENCH_CODE_VERSION", CODE)
    spec = tmp_path / "t.toml"
    spec.write_text(RUNTIME_SPEC)
    folder = tmp_path / "ws"
    cells = expand(load_spec(spec), code=CODE)
    for cell in cells[:3]:
        write_record(make_record(cell, {"ms_per_step": 1.0, "samples": [1.0], "channels": 8}), "t",
                     root=folder / "store", record_id=cell.id)
    return folder, spec, cells


# ---- corrupt records ------------------------------------------------------------------------------

CORRUPT = {
    "truncated": '{"id": "x", "status": "o',
    "empty": "",
    "a-list": "[1, 2]",
    "a-string": '"ok"',
    "null": "null",
    "date-a-number": '{"status": "ok", "date": 20260101}',
    "depth-a-string": '{"status": "ok", "depth": "four"}',
    "status-unknown": '{"status": "running"}',
    "config-a-number": '{"status": "ok", "config": 2}',
    "samples-a-string": '{"status": "ok", "samples": "1,2,3"}',
    "ms-a-boolean": '{"status": "ok", "ms_per_step": true}',
    "not-utf8": b"\xff\xfe{\x00",
}
READERS = {
    "sweep": lambda ws, spec: ["sweep", str(spec), "--results-dir", str(ws), "--cell-fn", FAKE],
    "sweep-dry-run": lambda ws, spec: ["sweep", str(spec), "--dry-run", "--results-dir", str(ws)],
    "results": lambda ws, spec: ["results", "--results-dir", str(ws)],
    "results-csv": lambda ws, spec: ["results", "t", "--format", "csv", "--results-dir", str(ws)],
    "plot": lambda ws, spec: ["plot", "--results-dir", str(ws)],
}


@pytest.mark.parametrize("command", READERS)
@pytest.mark.parametrize("content", CORRUPT)
def test_a_corrupt_record_is_named_with_a_way_out(workspace, fake_env, content, command):
    """Not a traceback, and not "failed earlier": the path, what is wrong, what to do; nothing runs."""
    folder, spec, cells = workspace
    bad = folder / "store" / "t" / f"{cells[1].id}.json"              # a cell's own record
    text = CORRUPT[content]
    bad.write_bytes(text if isinstance(text, bytes) else text.encode())
    before = snapshot(folder.parent)
    line = assert_one_line_error(invoke(READERS[command](folder, spec)), 2, str(bad), "corrupt result record",
                                 "move it out of the store")
    assert snapshot(folder.parent) == before, line
    assert not executions(fake_env)


# ---- names that become paths ------------------------------------------------------------------------

BAD_NAMES = {
    "dot-dot": "...toml",                 # the sweep '..': records were written outside the store
    "dot": "..toml",
    "hidden": ".hidden.toml",
    "option-like": "-x.toml",
    "space": "my sweep.toml",
    "non-ascii": "résumé.toml",
    "too-long": "a" * 201 + ".toml",
    "dot-dot-inside": "a..b.toml",
}


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_sweep_name_that_is_not_a_file_name_is_refused(tmp_path, fake_env, name, dry_run):
    spec = tmp_path / "specs" / BAD_NAMES[name]
    spec.parent.mkdir()
    spec.write_text(RUNTIME_SPEC)
    before = snapshot(tmp_path)
    args = ["sweep", str(spec), "--results-dir", str(tmp_path / "ws"), "--cell-fn", FAKE] + ["--dry-run"] * dry_run
    assert_one_line_error(invoke(args), 2, "sweep name", "rename the file")
    assert snapshot(tmp_path) == before and not executions(fake_env)


@pytest.mark.parametrize("collection", ["..", "../ws", "/etc", "t/../.."])
@pytest.mark.parametrize("command", ["results", "plot"])
def test_a_collection_outside_the_store_is_not_read(workspace, command, collection):
    folder, spec, _ = workspace
    before = snapshot(folder.parent)
    assert_one_line_error(invoke([command, collection, "--results-dir", str(folder)]), 2, "no results for")
    assert snapshot(folder.parent) == before


def test_the_store_refuses_to_write_outside_itself_whatever_the_name(tmp_path):
    from tlstm_bench.errors import UserError

    root = tmp_path / "store"
    for collection, record_id in [("..", "x"), ("a/b", "x"), ("c", "../x"), ("c", "/etc/x"), ("", "x"), ("c", ".x")]:
        with pytest.raises(UserError, match="cannot be a file name"):
            write_record({"v": 1}, collection, root=root, record_id=record_id)
    (root / "linked").parent.mkdir(parents=True)
    (root / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(UserError, match="outside the results store"):
        write_record({"v": 1}, "linked", root=root, record_id="x")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["linked", "store"]


# ---- outputs that cannot be written -------------------------------------------------------------------


@pytest.fixture
def read_only(tmp_path):
    """A folder this process cannot write in: a chmod 555 folder, or (as root, who writes anywhere
    the permission bits forbid) a sysfs folder, where even root cannot create files."""
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        probe = folder / "probe"
        probe.touch()
    except OSError:
        yield folder
        folder.chmod(0o755)
        return
    probe.unlink()
    folder.chmod(0o755)
    folder.rmdir()
    if not Path("/sys/kernel").is_dir():
        pytest.skip("running as root and no sysfs: no folder this process cannot write in")
    yield Path("/sys/kernel")


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("not a folder\n")
    return path


UNWRITABLE = {
    "sweep-results-dir-a-file": (lambda t, ro, ws, spec: ["sweep", str(spec), "--results-dir", str(_file(t))],
                                 "is a file, not a folder"),
    "sweep-results-dir-under-a-file": (lambda t, ro, ws, spec: ["sweep", str(spec), "--results-dir",
                                                               str(_file(t) / "sub")], "which is a file"),
    "sweep-dry-run-results-dir-a-file": (lambda t, ro, ws, spec: ["sweep", str(spec), "--dry-run", "--results-dir",
                                                                 str(_file(t))], "is a file, not a folder"),
    "sweep-results-dir-read-only": (lambda t, ro, ws, spec: ["sweep", str(spec), "--results-dir", str(ro / "ws")],
                                    "cannot write in"),
    "sweep-store-folder-a-file": (lambda t, ro, ws, spec: ["sweep", str(spec), "--results-dir",
                                                          str(_sweep_folder_is_a_file(t))], "is a file, not a folder"),
    "results-results-dir-a-file": (lambda t, ro, ws, spec: ["results", "--results-dir", str(_file(t))],
                                   "is a file, not a folder"),
    "results-out-a-folder": (lambda t, ro, ws, spec: ["results", "--format", "csv", "--out", str(t),
                                                      "--results-dir", str(ws)], "is a folder; give a file name"),
    "results-out-under-a-file": (lambda t, ro, ws, spec: ["results", "--format", "json", "--out",
                                                          str(_file(t) / "r.json"), "--results-dir", str(ws)],
                                 "is a file, not a folder"),
    "results-out-read-only": (lambda t, ro, ws, spec: ["results", "--format", "markdown", "--out", str(ro / "r.md"),
                                                       "--results-dir", str(ws)], "cannot write in"),
    "results-parquet-out-a-folder": (lambda t, ro, ws, spec: ["results", "--format", "parquet", "--out", str(t),
                                                              "--results-dir", str(ws)], "is a folder"),
    "plot-out-a-file": (lambda t, ro, ws, spec: ["plot", "--out", str(_file(t)), "--results-dir", str(ws)],
                        "is a file, not a folder"),
    "plot-out-under-a-file": (lambda t, ro, ws, spec: ["plot", "--out", str(_file(t) / "figs"), "--results-dir",
                                                       str(ws)], "which is a file"),
    "plot-out-read-only": (lambda t, ro, ws, spec: ["plot", "--out", str(ro / "figs"), "--results-dir", str(ws)],
                           "cannot write in"),
    "plot-results-dir-a-file": (lambda t, ro, ws, spec: ["plot", "--results-dir", str(_file(t))],
                                "is a file, not a folder"),
}


def _sweep_folder_is_a_file(tmp_path: Path) -> Path:
    """A results folder whose store has a file where the sweep's folder would be."""
    folder = tmp_path / "odd"
    (folder / "store").mkdir(parents=True)
    (folder / "store" / "t").write_text("a file\n")
    return folder


@pytest.mark.parametrize("case", UNWRITABLE)
def test_an_output_that_cannot_be_written_is_refused_before_any_work(workspace, read_only, fake_env, case):
    """Checked before anything runs or is read: never failed records, never a traceback at the end."""
    folder, spec, _ = workspace
    tmp = folder.parent
    make, needle = UNWRITABLE[case]
    args = make(tmp, read_only, folder, spec) + (["--cell-fn", FAKE] if case.startswith("sweep") else [])
    before = snapshot(tmp)
    assert_one_line_error(invoke(args), 2, needle)
    assert snapshot(tmp) == before
    assert not executions(fake_env)


# ---- corrupt locks: broken, and the sweep completes ------------------------------------------------------

CORRUPT_LOCKS = {
    "a-list": "[1]",
    "pid-a-string": json.dumps({"host": socket.gethostname(), "pid": "abc", "expires": 9e12}),
    "expires-a-string": json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "expires": "tomorrow"}),
    "empty": "",
    "truncated": '{"host": "h", "pi',
    "null": "null",
    "negative-pid": json.dumps({"host": socket.gethostname(), "pid": -5, "expires": 9e12}),
    "child-pids-a-string": json.dumps({"host": "elsewhere", "pid": 1, "expires": 9e12, "child_pids": "abc"}),
    "not-utf8": b"\xff\xfe\x00",
}


@pytest.mark.parametrize("content", CORRUPT_LOCKS)
def test_a_corrupt_lock_is_broken_and_the_sweep_completes(workspace, fake_env, content):
    """A lock that no sweep wrote this way (a disk, an editor, a bug) is stale at once: the sweep
    breaks it and runs the cell, without a person deleting it, and without a traceback."""
    folder, spec, cells = workspace
    root = folder / "store"
    target = cells[4]
    path = locks.lock_path(root, "t", target.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = CORRUPT_LOCKS[content]
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    dry = invoke(["sweep", str(spec), "--dry-run", "--results-dir", str(folder)])
    assert dry.exit_code == 0 and dry.exception is None, dry.output
    assert "0 running elsewhere, 5 to run" in " ".join(dry.stdout.split())
    start = time.monotonic()
    result = invoke(["sweep", str(spec), "--results-dir", str(folder), "--cell-fn", FAKE, "--only",
                     f"id={target.id}"])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 0, result.output
    assert time.monotonic() - start < 30 and "Traceback" not in result.output
    assert not path.exists() and len(records(root)) == 4
    assert executions(fake_env) == {("runtime", target.spec["config"], target.spec["depth"], 0): 1}
    assert f"broke a corrupt lock file {path.name}" in " ".join(result.output.split())  # said, not silent
