"""Sweeps: spec files, grid expansion and ids, isolated cells, resume, concurrency, submitit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.errors import UserError
from tlstm_bench.sweeps import lock as locks
from tlstm_bench.sweeps.cell import make_record
from tlstm_bench.sweeps.grid import expand, parse_filters, select
from tlstm_bench.sweeps.run import make_plan, run_sweep
from tlstm_bench.sweeps.spec import available_specs, find_spec, load_spec, shipped_dir

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FAKE = "test_sweep_fakes:cell"

RUNTIME_SPEC = """
task = "runtime"
configs = ["slstm", "2d", "2d-m", "3d"]
depths = [1, 2]
channels = 8
timeout_s = 60
[runtime]
seq_len = 5
repeats = 2
"""


def write_spec(tmp_path: Path, text: str, name: str = "t") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(textwrap.dedent(text))
    return path


def records(root: Path, sweep: str = "t") -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((root / sweep).glob("*.json"))]


def executions(log: Path) -> Counter:
    if not log.exists():
        return Counter()
    return Counter(tuple(json.loads(line)) for line in log.read_text().splitlines())


@pytest.fixture
def fake_env(tmp_path, monkeypatch):
    """Cells run the stdlib fake (fast to start); returns the path of its execution log."""
    log = tmp_path / "fake.log"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("TLSTM_BENCH_CODE_VERSION", "test-version")
    monkeypatch.delenv("FAKE_PLAN", raising=False)
    return log


# ---- spec files ---------------------------------------------------------------------------------


PAPER_SWEEPS = {"addition": 400, "memorization": 100, "mnist": 100, "pmnist": 100}


@pytest.mark.parametrize("name", ["quick", "runtime", "wiki", *PAPER_SWEEPS, *(f"{n}-budget" for n in PAPER_SWEEPS)])
def test_shipped_specs_load_and_expand(name):
    spec = load_spec(name)
    assert spec.name == name
    cells = expand(spec, code="v")
    assert cells and len({c.id for c in cells}) == len(cells)


@pytest.mark.parametrize("name, channels", PAPER_SWEEPS.items())
def test_paper_sweeps_are_literal_and_budget_variants_match(name, channels):
    """SPEC section 7: the paper's M for every configuration; <name>-budget: the count of an sLSTM with it."""
    literal = expand(load_spec(name), code="v")
    assert {c.kind for c in literal} == {"runtime", "train"}
    assert all(c.spec["channels"] == channels and c.spec["budget"] is None for c in literal)
    matched = expand(load_spec(f"{name}-budget"), code="v")
    assert all(c.spec["budget"] == f"slstm:{channels}" and c.spec["channels"] is None for c in matched)
    strip = ("budget", "channels")
    assert ([{k: v for k, v in c.spec.items() if k not in strip} for c in literal]
            == [{k: v for k, v in c.spec.items() if k not in strip} for c in matched])  # only the size differs


def _dry_run(tmp_path, name):
    """The plan's rows as {column header: cell text}."""
    result = CliRunner().invoke(app, ["sweep", name, "--dry-run", "--results-dir", str(tmp_path)],
                                env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = [h.strip() for h in next(line for line in lines if "┃" in line).split("┃")[1:-1]]
    return [dict(zip(header, (c.strip() for c in line.split("│")[1:-1]))) for line in lines if "│" in line]


def test_dry_run_addition_is_m_400_and_addition_budget_the_matched_sizes(tmp_path):
    rows = _dry_run(tmp_path, "addition")
    assert len(rows) == 2 * 7 * 4 and all(row["size"] == "M=400" for row in rows)
    rows = _dry_run(tmp_path, "addition-budget")
    assert len(rows) == 2 * 7 * 4
    sizes = {(row["config"], row["size"]) for row in rows}
    assert ("slstm", "slstm:400 -> M=400") in sizes
    assert ("3d", "slstm:400 -> M=187") in sizes and ("2d", "slstm:400 -> M=326") in sizes
    assert not any(size.endswith("M=400") for config, size in sizes if config != "slstm")


def test_wiki_trains_50_epochs_without_early_stopping():
    train = [c for c in expand(load_spec("wiki"), code="v") if c.kind == "train"]
    assert train and all(c.spec["early_stopping"] is False and c.spec["budget"] == "10M" for c in train)
    from tlstm_bench.training import PRESETS

    assert {PRESETS[c.spec["preset"]].epochs for c in train} == {50}


def test_dry_run_wiki_shows_50_epochs_and_no_early_stopping(tmp_path):
    rows = [row for row in _dry_run(tmp_path, "wiki") if row["kind"] == "train"]
    assert len(rows) == 7 * 4
    assert all("50 epochs" in row["settings"] and "early_stopping=False" in row["settings"]
               and row["size"].startswith("10M -> M=") for row in rows)


def test_quick_exercises_every_configuration_and_both_kinds():
    from tlstm_bench.models import CONFIG_NAMES

    cells = expand(load_spec("quick"), code="v")
    runtime = [c for c in cells if c.kind == "runtime"]
    assert {c.spec["config"] for c in runtime} == set(CONFIG_NAMES)
    assert len({c.spec["depth"] for c in runtime}) >= 2
    assert any(c.kind == "train" for c in cells)


def test_find_spec_by_name_and_path(tmp_path):
    import tlstm_bench

    assert find_spec("quick") == shipped_dir() / "quick.toml"
    assert shipped_dir().is_relative_to(Path(tlstm_bench.__file__).parent)   # package data, not the checkout
    path = write_spec(tmp_path, RUNTIME_SPEC)
    assert find_spec(str(path)) == path
    with pytest.raises(UserError, match="unknown sweep 'nope'.*quick"):
        find_spec("nope")
    assert "quick" in available_specs()


@pytest.mark.parametrize("change, message", [
    ("colour = 1", r"unknown key 'colour'; allowed: .*configs"),
    ("[runtime.extra]", r"unknown key 'runtime.extra' in \[runtime\]; allowed: .*seq_len"),
    ("depths = [0, 2]", r"key 'depths' must be an integer >= 1, got 0"),
    ("depths = [1, 1]", r"key 'depths' must not repeat"),
    ('configs = ["2d", "4d-x"]', r"key 'configs': '4d-x' is not a configuration"),
    ('budget = "lots"', r"key 'budget' must be a number like 10M"),
    ('device = "tpu"', r"key 'device' must be cpu, cuda or cuda:N"),
    ("timeout_s = -5", r"key 'timeout_s' must be a positive number"),
])
def test_malformed_top_level_keys(tmp_path, change, message):
    text = RUNTIME_SPEC.replace("depths = [1, 2]\n", "") if change.startswith("depths") else RUNTIME_SPEC
    text = text.replace('configs = ["slstm", "2d", "2d-m", "3d"]\n', "") if change.startswith("configs") else text
    text = text.replace("channels = 8\n", "") if change.startswith("budget") else text
    text = text.replace("timeout_s = 60\n", "") if change.startswith("timeout") else text
    if change.startswith("["):
        text = text + change + "\nx = 1\n"
    else:
        text = change + "\n" + text
    path = write_spec(tmp_path, text)
    with pytest.raises(UserError, match=message) as info:
        load_spec(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("text, message", [
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n', r"nothing to run"),
    ('configs=["2d"]\ndepths=[1]\nchannels=8\n[runtime]\n', r"missing key 'task'"),
    ('task = "chess"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[runtime]\n', r"key 'task' must be one of runtime, "),
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\n[runtime]\n', r"no model size"),
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\nbudget="1M"\n[runtime]\n', r"either 'budget' or"),
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[runtime]\ndtype="int8"\n',
     r"key 'runtime.dtype' must be one of float32"),
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[runtime]\nrepeats=0\n',
     r"key 'runtime.repeats' must be an integer >= 1"),
    ('task = "addition"\nconfigs=["2d"]\ndepths=[1]\n[train]\npreset="memorization-small"\n',
     r"key 'train.preset' is for memorization, not task 'addition'"),
    ('task = "addition"\nconfigs=["2d"]\ndepths=[1]\n[train]\npreset="fast"\n', r"key 'train.preset' must be one of"),
    ('task = "addition"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[train]\noptions={symbols=3}\n',
     r"unknown key 'train.options.symbols' for task addition; allowed: digits"),
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[runtime]\nimplementations=["warp"]\n',
     r"'warp' is not a sequence loop"),
    ('task = "runtime"\nconfigs = [\n', r"not valid TOML"),
    ('task = "memorization"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[train]\nearly_stopping="no"\n',
     r"key 'train.early_stopping' must be true or false"),
    ('task = "memorization"\nconfigs=["2d-m:window=appendix"]\ndepths=[1]\nchannels=8\n[runtime]\n',
     r"not a configuration.*memory_conv=0"),
])
def test_malformed_specs(tmp_path, text, message):
    path = write_spec(tmp_path, text)
    with pytest.raises(UserError, match=message) as info:
        expand(load_spec(path), code="v")
    assert str(path) in str(info.value)


def test_cli_malformed_spec_is_one_line_exit_2(tmp_path):
    path = write_spec(tmp_path, "colour = 1\n" + RUNTIME_SPEC)
    result = CliRunner().invoke(app, ["sweep", str(path), "--dry-run", "--results-dir", str(tmp_path / "s")])
    assert result.exit_code == 2
    assert "unknown key 'colour'" in result.output and "Traceback" not in result.output


# ---- grid and ids --------------------------------------------------------------------------------


def test_grid_is_the_product_and_ids_are_stable(tmp_path):
    spec = load_spec(write_spec(tmp_path, RUNTIME_SPEC.replace("depths = [1, 2]", "depths = [1, 2]\nseeds = [0, 1]")))
    cells = expand(spec, code="v1")
    assert len(cells) == 4 * 2 * 2
    assert {(c.spec["config"], c.spec["depth"], c.spec["seed"]) for c in cells} == {
        (c, d, s) for c in ("slstm", "2d", "2d-m", "3d") for d in (1, 2) for s in (0, 1)}
    assert [c.id for c in expand(spec, code="v1")] == [c.id for c in cells]       # stable
    assert len({c.id for c in cells}) == len(cells)                              # unique
    other = expand(spec, code="v2")
    assert {c.key for c in other} == {c.key for c in cells}                      # key: spec only
    assert not {c.id for c in other} & {c.id for c in cells}                     # id: + code version
    longer = expand(load_spec(write_spec(tmp_path, RUNTIME_SPEC.replace("seq_len = 5", "seq_len = 6"), "u")), code="v1")
    assert not {c.key for c in longer} & {c.key for c in cells}                  # every setting counts
    assert cells[0].spec["vocab"] == 205 and cells[0].spec["device"] == "cpu"


def test_implementations_apply_where_they_exist(tmp_path):
    spec = load_spec(write_spec(tmp_path, RUNTIME_SPEC.replace("repeats = 2", 'repeats = 2\nimplementations = ["default", "loop"]')))
    cells = expand(spec, code="v")
    loops = [c for c in cells if c.spec["implementation"] == "loop"]
    assert loops and all(c.spec["config"] == "slstm" for c in loops)
    assert len(cells) == 4 * 2 + 2


def test_task_sweeps_time_the_task_model(tmp_path):
    text = 'task = "addition"\nconfigs=["2d"]\ndepths=[1]\n[runtime]\nchannels=8\n[train]\npreset="addition-small"\n'
    cells = expand(load_spec(write_spec(tmp_path, text)), code="v")
    runtime = [c for c in cells if c.kind == "runtime"][0]
    train = [c for c in cells if c.kind == "train"][0]
    assert runtime.spec["vocab"] == 11 and runtime.spec["task"] == "addition"
    assert train.spec["preset"] == "addition-small" and train.spec["channels"] is None


def test_only_filters(tmp_path):
    cells = expand(load_spec(write_spec(tmp_path, RUNTIME_SPEC)), code="v")
    picked = select(cells, parse_filters(["config=2d,3d", "depth=2"]))
    assert {(c.spec["config"], c.spec["depth"]) for c in picked} == {("2d", 2), ("3d", 2)}
    assert select(cells, parse_filters([f"id={cells[3].id[:6]}"])) == [cells[3]]
    with pytest.raises(UserError, match="unknown key 'colour'"):
        parse_filters(["colour=red"])
    with pytest.raises(UserError, match="KEY=V1,V2"):
        parse_filters(["depth"])


def test_runtime_cells_key_on_the_machine_and_training_cells_do_not(tmp_path):
    text = RUNTIME_SPEC.replace('task = "runtime"', 'task = "memorization"') + \
        '[train]\npreset = "memorization-small"\nmax_samples = 30\n'
    spec = load_spec(write_spec(tmp_path, text))
    here = expand(spec, code="v")
    other = expand(spec, code="v", machine={"gpu": None, "cpu_model": "another CPU", "cpus": 64})
    kinds = {c.key: c.kind for c in here}
    assert here[0].spec["machine"]["cpus"] >= 1 and "cpu_model" in here[0].spec["machine"]
    shared = {c.key for c in here} & {c.key for c in other}
    assert shared and all(kinds[k] == "train" for k in shared)             # training: the same cells
    assert len(shared) == sum(c.kind == "train" for c in here)             # runtime: all different


# ---- locks and records -------------------------------------------------------------------------


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


def test_record_marks_non_finite_metrics_and_reported_failures(tmp_path):
    cell = expand(load_spec(write_spec(tmp_path, RUNTIME_SPEC)), code="v")[0]
    ok = make_record(cell, {"ms_per_step": 1.5, "samples": [1.5], "channels": 8, "params": 9})
    assert ok["status"] == "ok" and ok["error"] is None and ok["ms_per_step"] == 1.5
    for key in ("id", "key", "sweep", "kind", "task", "config", "depth", "seed", "spec", "git_commit", "torch_version",
                "device", "device_name", "threads", "host", "date", "ms_iqr", "implementation", "seq_len"):
        assert key in ok
    nan = make_record(cell, {"ms_per_step": float("nan")})
    assert nan["status"] == "failed" and "non-finite ms_per_step" in nan["error"]
    reported = make_record(cell, {"status": "failed", "error": "loss is nan"})
    assert reported["status"] == "failed" and reported["error"] == "loss is nan"
    assert make_record(cell, {"config": "other"})["config"] == cell.spec["config"]


# ---- running cells -------------------------------------------------------------------------------


def test_failing_cells_fail_alone_and_rerun_skips_done(tmp_path, fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_PLAN", json.dumps({"2d-m": "raise", "3d": "crash"}))
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    root = tmp_path / "store"
    summary = run_sweep(spec, root=root, jobs=2, cell_fn=FAKE, code="v")
    assert summary.exit_code == 1
    by_config = Counter((r["config"], r["status"]) for r in records(root))
    assert by_config == {("slstm", "ok"): 2, ("2d", "ok"): 2, ("2d-m", "failed"): 2, ("3d", "failed"): 2}
    errors = {r["config"]: r["error"] for r in records(root) if r["status"] == "failed"}
    assert errors["2d-m"] == "FloatingPointError: loss is nan at step 3"
    assert errors["3d"].startswith("cell process exited with code 3")
    assert sum(executions(fake_env).values()) == 8

    again = run_sweep(spec, root=root, jobs=2, cell_fn=FAKE, code="v")          # nothing reruns
    assert again.count("skipped-done") == 4 and again.count("skipped-failed") == 4 and again.exit_code == 1
    assert sum(executions(fake_env).values()) == 8

    monkeypatch.setenv("FAKE_PLAN", "{}")
    retried = run_sweep(spec, root=root, jobs=2, cell_fn=FAKE, code="v", retry_failed=True)
    assert retried.count("ok") == 4 and retried.exit_code == 0
    assert len(records(root)) == 8 and all(r["status"] == "ok" for r in records(root))


def test_a_hanging_cell_times_out_and_a_nan_fails(tmp_path, fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_PLAN", json.dumps({"slstm": "hang", "2d": "nan"}))
    spec = write_spec(tmp_path, RUNTIME_SPEC.replace("timeout_s = 60", "timeout_s = 3"))
    root = tmp_path / "store"
    summary = run_sweep(spec, root=root, jobs=2, cell_fn=FAKE, code="v", only=["config=slstm,2d", "depth=1"])
    assert summary.exit_code == 1
    got = {r["config"]: r for r in records(root)}
    assert got["slstm"]["status"] == "failed" and "timed out after 3 s" in got["slstm"]["error"]
    assert got["2d"]["status"] == "failed" and "non-finite ms_per_step" in got["2d"]["error"]


def test_dry_run_shows_plan_and_done_cells(tmp_path, fake_env):
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    root = tmp_path / "store"
    run_sweep(spec, root=root, cell_fn=FAKE, only=["config=2d", "depth=1"])
    result = CliRunner().invoke(app, ["sweep", str(spec), "--dry-run", "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "8 cells, 1 done, 0 failed, 0 running elsewhere, 7 to run" in text
    assert text.count("│ todo") == 7 and text.count("│ done") == 1
    assert not executions(fake_env) - Counter({("runtime", "2d", 1, 0): 1})   # the dry run ran nothing
    plan = make_plan(spec, root=root, only=["kind=runtime"])
    assert plan.count("done") == 1 and len(plan.to_run(False)) == 7


def test_cli_sweep_exit_codes(tmp_path, fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_PLAN", json.dumps({"2d-m": "raise"}))
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    args = ["sweep", str(spec), "--results-dir", str(tmp_path / "s"), "--cell-fn", FAKE, "--only", "depth=1"]
    result = CliRunner().invoke(app, args + ["--jobs", "2"])
    assert result.exit_code == 1, result.output
    assert "1 failed cells" in result.output and "FloatingPointError" in result.output
    assert "sweep t: 4 cells; ran 4 (3 ok, 1 failed)" in " ".join(result.output.split())
    assert CliRunner().invoke(app, args + ["--jobs", "0"]).exit_code == 2
    assert CliRunner().invoke(app, args + ["--only", "config=3d-cn"]).exit_code == 2   # matches no cell
    assert "--device must be cpu" in CliRunner().invoke(app, args + ["--device", "tpu"]).output
    bad = CliRunner().invoke(app, args + ["--executor", "mars"])
    assert bad.exit_code == 2 and "unknown --executor" in bad.output


def _sweep_process(spec: Path, root: Path, *extra: str) -> subprocess.Popen:
    """``tlstm-bench sweep`` in its own process, writing into the store ``root`` (``<folder>/store``)."""
    assert root.name == "store"
    return subprocess.Popen([sys.executable, "-m", "tlstm_bench", "sweep", str(spec), "--results-dir", str(root.parent),
                             "--cell-fn", FAKE, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env=os.environ.copy())


def test_kill_and_resume_loses_and_duplicates_nothing(tmp_path, fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_SLEEP", "0.6")
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    root = tmp_path / "store"
    proc = _sweep_process(spec, root)
    deadline = time.time() + 120
    while time.time() < deadline and len(list((root / "t").glob("*.json"))) < 3:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)                          # the sweep and its running cell, mid-run
    proc.wait()
    before = {r["id"]: r for r in records(root)}
    assert 3 <= len(before) < 8, "the sweep should have been killed part-way"
    assert list((root / "t" / ".locks").glob("*.lock"))         # the killed cell left its claim behind

    rerun = _sweep_process(spec, root)
    output = rerun.communicate(timeout=180)[0].decode()
    assert rerun.returncode == 0, output
    after = records(root)
    assert len(after) == 8 and len({r["id"] for r in after}) == 8 and all(r["status"] == "ok" for r in after)
    for record in after:                                          # finished cells were not redone
        if record["id"] in before:
            assert record == before[record["id"]]
    runs = executions(fake_env)
    assert set(runs) == {("runtime", c, d, 0) for c in ("slstm", "2d", "2d-m", "3d") for d in (1, 2)}
    assert sum(runs.values()) <= 9                                # at most the killed cell ran twice
    assert not list((root / "t" / ".locks").glob("*.lock"))


def test_interrupted_cells_are_left_undone_not_failed(tmp_path, fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_SLEEP", "1.5")
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    root = tmp_path / "store"
    proc = _sweep_process(spec, root, "--jobs", "2")
    deadline = time.time() + 120
    while time.time() < deadline and not list((root / "t").glob("*.json")):
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGTERM)                          # as Ctrl-C or scancel would
    output = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 130, output
    assert "interrupted" in output
    done = records(root)
    assert 1 <= len(done) < 8 and all(r["status"] == "ok" for r in done)
    assert not list((root / "t" / ".locks").glob("*.lock"))


def test_two_sweeps_at_once_share_the_work(tmp_path, fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_SLEEP", "0.3")
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    root = tmp_path / "store"
    procs = [_sweep_process(spec, root, "--jobs", "2") for _ in range(2)]
    outputs = [p.communicate(timeout=180)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    after = records(root)
    assert len(after) == 8 and all(r["status"] == "ok" for r in after)
    runs = executions(fake_env)
    assert len(runs) == 8 and set(runs.values()) == {1}           # every cell ran exactly once


# ---- the real cell function ----------------------------------------------------------------------


def test_real_cells_time_and_train(tmp_path, monkeypatch):
    """The default cell function calls measure_runtime and train (tiny sizes) and fills the schema."""
    monkeypatch.setenv("TLSTM_BENCH_CODE_VERSION", "test-version")
    spec = write_spec(tmp_path, """
        task = "memorization"
        configs = ["2d"]
        depths = [2]
        timeout_s = 300
        [runtime]
        channels = 4
        seq_len = 4
        repeats = 2
        warmup = 1
        threads = 1
        [train]
        preset = "memorization-small"
        channels = 4
        max_samples = 30
        eval_every = 15
    """)
    root = tmp_path / "store"
    summary = run_sweep(spec, root=root, jobs=2)
    got = {r["kind"]: r for r in records(root)}
    assert summary.exit_code == 0, [r.get("error") for r in got.values()]
    runtime, train = got["runtime"], got["train"]
    assert runtime["ms_per_step"] > 0 and len(runtime["samples"]) == 2 and runtime["seq_len"] == 4
    assert runtime["channels"] == 4 and runtime["params"] > 0 and runtime["config"] == "2d"
    assert train["metric"] == "accuracy" and 0 <= train["test_metric"] <= 1 and train["samples_seen"] == 30
    assert train["channels"] == 4 and train["preset"] == "memorization-small"
    for record in (runtime, train):
        assert record["status"] == "ok" and record["sweep"] == "t" and record["depth"] == 2
        assert record["torch_version"] and record["host"] and record["date"] and record["device"] == "cpu"
    assert not list((root / "t" / ".checkpoints").glob("*/*"))       # a finished cell keeps no checkpoint
