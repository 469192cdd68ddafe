"""Reliability, fourth round (issue 31): special files in the store, a record under another
cell's name, absurd clocks, long paths, a dead plot's temporary file, and smaller messages.

Each test fails on d081c5f (the code before this round) and names the issue's item it holds.
A hang is run in a subprocess with a timeout: the test fails (TimeoutExpired) instead of
hanging. Terminal widths (item 6), the ASCII locale (item 7) and the frozen clock of `time`
(item 5) are tested elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from sweep_helpers import FAKE, RUNTIME_SPEC, executions, records, write_spec
from test_bad_inputs_store import assert_one_line_error, invoke, snapshot
from test_faults_store import dead_pid
from tlstm_bench import atomic
from tlstm_bench.cli import app
from tlstm_bench.results import store, write_record
from tlstm_bench.results.frame import read_frame
from tlstm_bench.sweeps import lock as locks
from tlstm_bench.sweeps.cell import make_record
from tlstm_bench.sweeps.grid import expand
from tlstm_bench.sweeps.plan import plan_sweep, run_sweep
from tlstm_bench.sweeps.runner import run_cell
from tlstm_bench.sweeps.spec import load_spec

CODE = "test-version"
HANG_S = 30  # a command that takes longer is hung (each takes a few seconds)


def cli(*args: str, timeout: float = HANG_S) -> subprocess.CompletedProcess:
    """``tlstm-bench ARGS`` in its own process; a hang fails the test with TimeoutExpired."""
    env = {**os.environ, "COLUMNS": "200", "TLSTM_BENCH_CODE_VERSION": CODE}
    return subprocess.run([sys.executable, "-m", "tlstm_bench", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def one_line_error(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    lines = proc.stderr.splitlines()
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    return lines[0]


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """A results folder whose store holds every record of the 8-cell sweep ``t``: (folder, spec, cells)."""
    monkeypatch.setenv("TLSTM_BENCH_CODE_VERSION", CODE)
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    folder = tmp_path / "ws"
    cells = expand(load_spec(spec), code=CODE)
    for cell in cells:
        write_record(make_record(cell, {"ms_per_step": 1.0, "samples": [1.0], "channels": 8}), "t",
                     root=folder / "store", record_id=cell.id)
    return folder, spec, cells


def cell_of(cells, config: str, depth: int):
    return next(c for c in cells if c.spec["config"] == config and c.spec["depth"] == depth)


# ---- 1. special files in the store: never opened, never waited on, named in one line --------------

@pytest.mark.parametrize("where,command", [
    ("c/x.json", ["results"]),          # another collection's folder
    ("t/x.json", ["results", "t"]),
    ("t/x.json", ["plot", "t"]),
])
def test_a_fifo_in_the_store_is_named_in_one_line_not_waited_on(recorded, where, command):
    folder, _, _ = recorded
    fifo = folder / "store" / where
    fifo.parent.mkdir(exist_ok=True)
    os.mkfifo(fifo)
    line = one_line_error(cli(*command, "--results-dir", str(folder)))
    assert str(fifo) in line and "not a regular file" in line, line


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_fifo_at_a_cells_record_path_stops_the_sweep_in_one_line(recorded, dry_run):
    folder, spec, cells = recorded
    path = store.record_path(folder / "store", "t", cells[3].id)
    path.unlink()
    os.mkfifo(path)
    extra = ["--dry-run"] if dry_run else []
    line = one_line_error(cli("sweep", str(spec), "--results-dir", str(folder), "--cell-fn", FAKE, *extra))
    assert str(path) in line and "not a regular file" in line, line


def test_fifos_as_a_lock_a_result_file_and_a_temp_file_do_not_block_a_sweep(tmp_path, fake_env):
    """A FIFO where a claim, a dead runner's result file and a dead writer's temporary file go:
    the claim is broken as corrupt, the others are left alone (never opened), every cell runs."""
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    root = tmp_path / "ws" / "store"
    cells = expand(load_spec(spec), code=CODE)
    (root / "t" / ".locks").mkdir(parents=True)
    (root / "t" / ".logs").mkdir(parents=True)
    os.mkfifo(locks.lock_path(root, "t", cells[0].id))
    result = root / "t" / ".logs" / f"{cells[1].id}.{dead_pid()}.result.json"
    os.mkfifo(result)
    temp = root / "t" / f".{cells[2].id}.json.{atomic._HOST}-{dead_pid()}.abc.tmp"
    os.mkfifo(temp)
    proc = subprocess.run([sys.executable, "-m", "tlstm_bench", "sweep", str(spec), "--results-dir",
                           str(root.parent), "--cell-fn", FAKE], capture_output=True, text=True, timeout=HANG_S,
                          env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "broke a corrupt lock file" in proc.stdout
    assert len(records(root)) == 8 and sum(executions(fake_env).values()) == 8
    assert not locks.lock_path(root, "t", cells[0].id).exists()
    assert result.is_fifo() and temp.is_fifo()  # not ours, not a file: neither read nor deleted


def test_a_folder_where_a_lock_goes_is_a_one_line_error_and_is_kept(tmp_path, fake_env):
    """Not the tool's to delete (it may hold someone's files): that cell is not run, its line
    says where the folder is and what to do, the other cells run, the sweep exits 1 (a cell not
    run), no traceback; the folder and what is in it stay."""
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    root = tmp_path / "ws" / "store"
    cells = expand(load_spec(spec), code=CODE)
    folder = locks.lock_path(root, "t", cells[0].id)
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("mine")
    proc = cli("sweep", str(spec), "--results-dir", str(root.parent), "--cell-fn", FAKE)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())
    assert "NOT RUN" in said and f"{folder} is a folder" in said and "move it away" in said, proc.stdout
    assert len(records(root)) == 7 and sum(executions(fake_env).values()) == 7
    assert (folder / "notes.txt").read_text() == "mine"
    locks.clear_stale(root, "t", cells[0].id)  # a recorded cell's leftover claim: a folder is left alone
    assert folder.is_dir()


def test_a_spec_swapped_for_a_fifo_after_it_was_found_is_refused_without_blocking(tmp_path):
    """find_spec saw a file; by the time it is read a FIFO stands there: refused from its stat and
    again once opened (non-blocking), never read from (in its own process: a hang is a timeout)."""
    fifo = tmp_path / "swapped.toml"
    os.mkfifo(fifo)
    code = ("import sys; from pathlib import Path; from tlstm_bench.sweeps import spec; "
            "from tlstm_bench.errors import UserError\n"
            "spec.find_spec = lambda _: Path(sys.argv[1])\n"
            "try: spec.load_spec('anything.toml')\nexcept UserError as e: print(e)")
    out = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=HANG_S)
    assert "is a FIFO, not a regular file" in out.stdout, out.stdout + out.stderr


def test_the_temp_cleaner_never_deletes_what_is_not_a_regular_file(tmp_path):
    target = tmp_path / "x.json"
    fifo = tmp_path / f".x.json.{atomic._HOST}-{dead_pid()}.abc.tmp"
    os.mkfifo(fifo)
    stale = tmp_path / f".x.json.{atomic._HOST}-{dead_pid()}.def.tmp"
    stale.write_bytes(b"")
    assert atomic.clean_stale_temps(target) == [stale]
    assert fifo.is_fifo() and not stale.exists()


def test_a_lock_that_is_a_fifo_reads_as_corrupt_without_blocking(tmp_path):
    path = tmp_path / "x.lock"
    os.mkfifo(path)
    code = ("import sys; from pathlib import Path; from tlstm_bench.sweeps.lock import read_lock; "
            "print(read_lock(Path(sys.argv[1])))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=HANG_S)
    assert out.stdout.strip() == "{}", out.stderr


def test_a_fifo_as_the_regress_baseline_is_one_line_not_a_hang(tmp_path):
    fifo = tmp_path / "baseline.json"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "tlstm_bench", "regress", "--quick", "--baseline", str(fifo)],
                          capture_output=True, text=True, timeout=HANG_S, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 2 and "a FIFO" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# ---- 2. a record under another cell's file name -----------------------------------------------------

def stranger_planted(folder: Path, cells) -> tuple:
    """The slstm L=1 record copied over the 2d L=2 cell's file: (the 2d L=2 cell, its path, the stranger)."""
    root = folder / "store"
    mine, other = cell_of(cells, "2d", 2), cell_of(cells, "slstm", 1)
    path = store.record_path(root, "t", mine.id)
    shutil.copyfile(store.record_path(root, "t", other.id), path)
    return mine, path, json.loads(path.read_text())


def test_a_record_under_another_cells_name_does_not_mark_it_done(recorded, fake_env):
    folder, spec, cells = recorded
    root = folder / "store"
    mine, path, stranger = stranger_planted(folder, cells)
    assert plan_sweep(spec, root=root, code=CODE).states[mine.id] == "todo"
    assert json.loads(path.read_text()) == stranger  # planning (and --dry-run) moves nothing
    summary = run_sweep(spec, root=root, cell_fn=FAKE, code=CODE)
    assert summary.exit_code == 0 and summary.count("ok") == 1 and summary.count("skipped-done") == 7
    assert set(executions(fake_env)) == {("runtime", "2d", 2, 0)}
    assert json.loads(path.read_text())["id"] == mine.id
    (moved,) = (root / "t" / store.QUARANTINE).iterdir()  # kept, never deleted
    assert json.loads(moved.read_text()) == stranger
    (outcome,) = [o for o in summary.outcomes if o.state == "ok"]
    assert "quarantine" in (outcome.note or ""), outcome.note
    assert len({r["id"] for r in records(root)}) == 8


def test_a_record_written_where_a_stranger_lies_moves_it_to_quarantine(recorded):
    """Whoever writes the cell's record (a failure included) moves the stranger first: its ``ok``
    must not count as this cell's and keep this cell's record out."""
    folder, _, cells = recorded
    root = folder / "store"
    mine, path, stranger = stranger_planted(folder, cells)
    stored = store.put_record(make_record(mine, error="boom"), "t", root=root, record_id=mine.id)
    assert stored["status"] == "failed" and json.loads(path.read_text())["id"] == mine.id
    (moved,) = (root / "t" / store.QUARANTINE).iterdir()
    assert json.loads(moved.read_text()) == stranger


def test_results_report_a_stranger_and_the_quarantine(recorded, fake_env):
    folder, spec, cells = recorded
    mine, path, stranger = stranger_planted(folder, cells)
    result = invoke(["results", "t", "--results-dir", str(folder)])
    assert result.exit_code == 0, result.stderr
    assert f"{path.name}" in result.stdout and stranger["id"] in result.stdout, result.stdout
    assert "another" in result.stdout
    run_sweep(spec, root=folder / "store", cell_fn=FAKE, code=CODE)
    result = invoke(["results", "t", "--results-dir", str(folder)])
    assert result.exit_code == 0 and "quarantine" in result.stdout, result.stdout
    frame = read_frame("t", root=folder / "store")
    assert len(frame) == 8 and mine.id in set(frame["id"])


def test_plot_reports_a_stranger_too(recorded):
    """``plot`` reads through the same reader as ``results``: the stranger is named, not drawn."""
    folder, _, cells = recorded
    mine, path, stranger = stranger_planted(folder, cells)
    result = invoke(["plot", "t", "--results-dir", str(folder), "--out", str(folder / "f")])
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "note:" in text and path.name in text and stranger["id"] in text, result.stdout


# ---- 3. long paths: one line and exit 2 for every path option ----------------------------------------

LONG = "r" * 300
DEEP = "/".join(["d" * 200] * 25)  # 5,000 characters of short enough names


@pytest.mark.parametrize("args", [
    ["results", "--results-dir", LONG],
    ["results", "--results-dir", DEEP],
    ["results", "--format", "csv", "--out", LONG],
    ["results", "--format", "csv", "--out", f"{LONG}/x.csv"],
    ["plot", "--out", LONG],
    ["plot", "--results-dir", LONG],
    ["sweep", LONG],
    ["sweep", f"{LONG}.toml"],
    ["sweep", "quick", "--dry-run", "--results-dir", LONG],
    ["sweep", "quick", "--dry-run", "--data-dir", LONG],
    ["train", "slstm", "--task", "addition", "--channels", "4", "--max-samples", "8", "--checkpoint-dir", LONG],
    ["train", "slstm", "--task", "addition", "--channels", "4", "--max-samples", "8", "--results-dir", LONG],
    ["train", "slstm", "--task", "enwik8", "--channels", "4", "--max-samples", "8", "--data-dir", LONG],
    ["train", "slstm", "--task", "enwik8", "--channels", "4", "--max-samples", "8", "--data", LONG],
    ["time", "slstm", "--results-dir", LONG],
    ["visualize", "2d", "--out", f"{LONG}/x"],
    ["visualize", "--state-dict", LONG, "2d"],
    ["regress", "--update", "--results-dir", LONG],
    ["regress", "--update", "--baseline", f"{LONG}.json"],
    ["data", "download", "enwik8", "--data-dir", LONG],
])
def test_a_path_too_long_is_one_line_and_exit_2(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    line = assert_one_line_error(invoke(args), 2)
    assert "too long" in line, line
    assert len(line) < 400, line  # the path is shortened, not printed whole


def test_a_results_folder_too_long_in_the_environment_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["results"], env={"COLUMNS": "200", "TLSTM_BENCH_RESULTS": LONG})
    line = assert_one_line_error(result, 2)
    assert "too long" in line and "$TLSTM_BENCH_RESULTS" in line, line


# ---- 4. a dead writer's temporary file is cleaned by the next writer --------------------------------

def test_a_dead_plots_temp_file_is_removed_by_the_next_plot(recorded):
    folder, _, _ = recorded
    figures = folder / "figures"
    assert invoke(["plot", "t", "--results-dir", str(folder)]).exit_code == 0
    pdfs = sorted(figures.glob("t*.pdf"))
    assert pdfs
    dead = figures / f".{pdfs[0].name}.{atomic._HOST}-{dead_pid()}.x1y2z3.tmp"
    dead.write_bytes(b"")  # what a SIGTERM mid-write leaves
    live_owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = figures / f".{pdfs[0].name}.{atomic._HOST}-{live_owner.pid}.a1b2c3.tmp"
        live.write_bytes(b"")
        assert invoke(["plot", "t", "--results-dir", str(folder)]).exit_code == 0
        assert not dead.exists() and live.exists()
    finally:
        live_owner.kill()
        live_owner.wait()


def test_every_atomic_write_cleans_its_targets_dead_temp_files(tmp_path):
    target = tmp_path / "a[1].json"  # a name with glob characters
    dead = tmp_path / f".{target.name}.{atomic._HOST}-{dead_pid()}.q.tmp"
    dead.write_text("{")
    atomic.atomic_write(target, lambda fh: fh.write("{}"))
    assert not dead.exists() and target.read_text() == "{}"


# ---- 5. clocks ---------------------------------------------------------------------------------------

def timing_record(date: str, ms: float) -> dict:
    return {"kind": "runtime", "task": "runtime", "config": "slstm", "depth": 1, "seed": 0, "status": "ok",
            "implementation": "fused", "seq_len": 5, "repeats": 2, "channels": 8, "device": "cpu",
            "ms_per_step": ms, "samples": [ms], "date": date}


def test_a_record_dated_in_the_future_never_hides_a_later_one(tmp_path):
    root = tmp_path / "store"
    write_record(timing_record("2036-01-01T00:00:00+00:00", 1.0), "timing", root=root)  # a clock 10 years ahead
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    write_record(timing_record(now, 2.0), "timing", root=root)                            # written after it
    frame = read_frame("timing", root=root)
    assert sorted(frame["ms_per_step"]) == [1.0, 2.0]
    assert any("2036" in note and "ahead" in note for note in frame.attrs.get("notes", [])), frame.attrs
    result = invoke(["results", "timing", "--results-dir", str(tmp_path)])
    assert result.exit_code == 0 and "ahead" in result.stdout, result.stdout
    # an ordinary older record still gives way to the newer one
    write_record(timing_record("2020-01-01T00:00:00+00:00", 3.0), "timing", root=root)
    assert 3.0 not in set(read_frame("timing", root=root)["ms_per_step"])


def _clock_ahead(monkeypatch, seconds: float) -> None:
    real = time.time
    monkeypatch.setattr(locks, "time", SimpleNamespace(time=lambda: real() + seconds))


def test_a_live_claim_is_not_stale_to_a_clock_days_ahead(tmp_path, fake_env, monkeypatch):
    """A sweep whose clock is two days ahead must not take cells a live sweep on this host holds."""
    spec, root = write_spec(tmp_path, RUNTIME_SPEC), tmp_path / "store"
    cell = expand(load_spec(spec), code=CODE)[0]
    code = ("import sys, time; from pathlib import Path; from tlstm_bench.sweeps import lock; "
            "c = lock.claim(Path(sys.argv[1]), 't', sys.argv[2], timeout_s=60); print(bool(c), flush=True); "
            "time.sleep(60)")
    owner = subprocess.Popen([sys.executable, "-c", code, str(root), cell.id], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "True"
        _clock_ahead(monkeypatch, 2 * 86400)
        assert locks.holder(root, "t", cell.id) is not None
        assert run_cell(cell, root, cell_fn=FAKE).state == "taken"
        assert not executions(fake_env)
    finally:
        owner.kill()
        owner.wait()
    assert locks.holder(root, "t", cell.id) is None  # its owner is dead: stale at once, whatever the clock


def test_a_claim_of_a_reused_pid_is_stale(tmp_path, monkeypatch):
    """The owner's pid alive but started after the claim (another process got the number): stale."""
    root = tmp_path / "store"
    claim = locks.claim(root, "t", "c1", timeout_s=60)
    info = {**claim.info, "pid_start": "not-this-process"}
    claim.path.write_text(json.dumps(info))
    assert locks.is_stale(locks.read_lock(claim.path))
    claim.path.write_text(json.dumps(claim.info))
    _clock_ahead(monkeypatch, 10 * 365 * 86400)
    assert not locks.is_stale(locks.read_lock(claim.path))


# ---- 7. smaller: messages that say what is wrong ----------------------------------------------------

def test_results_of_a_store_that_is_a_file_says_so(tmp_path):
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "store").write_text("not a folder")
    line = assert_one_line_error(invoke(["results", "t", "--results-dir", str(folder)]), 2)
    assert "store is empty" not in line and "file" in line and str(folder / "store") in line, line


def test_results_of_a_collection_that_is_a_file_says_so(recorded):
    folder, _, _ = recorded
    (folder / "store" / "c").write_text("x")
    line = assert_one_line_error(invoke(["results", "c", "--results-dir", str(folder)]), 2)
    assert "store is empty" not in line and "is a file" in line, line


def test_results_of_a_missing_results_folder_says_so(tmp_path):
    missing = tmp_path / "nowhere"
    for args in (["results", "t"], ["results"]):
        line = assert_one_line_error(invoke([*args, "--results-dir", str(missing)]), 2)
        assert "store is empty" not in line and "no results folder" in line and str(missing) in line, line
    assert not missing.exists()


def test_a_non_record_file_in_a_sweep_folder_gets_no_cell_hint(recorded):
    folder, _, _ = recorded
    (folder / "store" / "t" / "notes.json").write_text("my notes")
    line = assert_one_line_error(invoke(["results", "t", "--results-dir", str(folder)]), 2)
    assert "notes.json" in line and "runs that cell again" not in line, line
    assert "not a record" in line, line


@pytest.mark.parametrize("kind", ["folder", "device", "fifo"])
def test_a_spec_path_that_is_not_a_file_says_what_it_is(tmp_path, kind):
    if kind == "folder":
        path = tmp_path / "x.toml"
        path.mkdir()
    elif kind == "device":
        path = Path("/dev/null")
    else:
        path = tmp_path / "f.toml"
        os.mkfifo(path)
    line = one_line_error(cli("sweep", str(path), "--dry-run", "--results-dir", str(tmp_path / "ws")))
    assert "does not exist" not in line and str(path) in line, line
    assert ("a folder" if kind == "folder" else "not a regular file") in line, line


ENWIK8_SPEC = """
task = "enwik8"
configs = ["slstm"]
depths = [1]
channels = 8
timeout_s = 60
[train]
max_samples = 100
batch_size = 2
eval_every = 100
options = {seq_len = 5}
"""


@pytest.mark.parametrize("dry_run", [False, True])
@pytest.mark.parametrize("data", ["none", "empty-folder"])
def test_an_enwik8_sweep_without_data_refuses_at_plan_time(tmp_path, monkeypatch, dry_run, data):
    monkeypatch.delenv("TLSTM_BENCH_DATA", raising=False)
    spec = write_spec(tmp_path, ENWIK8_SPEC, "wk")
    extra = ["--dry-run"] if dry_run else []
    if data == "empty-folder":
        (tmp_path / "data").mkdir()
        extra += ["--data-dir", str(tmp_path / "data")]
    folder = tmp_path / "ws"
    before = snapshot(tmp_path)
    line = assert_one_line_error(invoke(["sweep", str(spec), "--results-dir", str(folder), *extra]), 2)
    assert "enwik8" in line, line
    assert snapshot(tmp_path) == before  # no record, FAILED or other
