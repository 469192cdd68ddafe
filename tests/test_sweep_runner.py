"""Running cells: each isolated in its own process, failures fail alone, resume, kills,
interruptions, concurrent sweeps, the record of a cell, and the real cell function."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter

from tlstm_bench.sweeps.cell import make_record
from tlstm_bench.sweeps.grid import expand
from tlstm_bench.sweeps.plan import run_sweep
from tlstm_bench.sweeps.spec import load_spec

from sweep_helpers import FAKE, RUNTIME_SPEC, executions, records, sweep_process, write_spec


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



def test_time_left_counts_each_kind_of_cell_at_its_own_mean():
    """The quick sweep's shape: 14 runtime cells of about a second, then 14 training cells of
    half a minute. The average over all cells would promise a minute where six are left; by
    kind, nothing is promised until a training cell has finished (only a floor: the runtime
    cells left), then each cell left counts at its kind's mean, less what a running one has run,
    spread over the jobs."""
    from tlstm_bench.sweeps.runner import time_left

    runtime_done = {"runtime": [(1, "8", 1.0)] * 14}
    assert time_left([("train", 1, "s", 0.0)] * 14, runtime_done, jobs=1) == (0.0, True)
    assert time_left([("runtime", 1, "8", 0.0)] * 2 + [("train", 1, "s", 0.0)] * 14,
                     {"runtime": [(1, "8", 1.0), (1, "8", 3.0)]}, jobs=1) == (4.0, True)
    took = {**runtime_done, "train": [(1, "s", 30.0)]}
    left = [("train", 1, "s", 10.0)] + [("train", 1, "s", 0.0)] * 12  # one has run 10 s of its 30
    assert time_left(left, took, jobs=1) == (20.0 + 12 * 30.0, False)
    assert time_left(left, took, jobs=2) == ((20.0 + 12 * 30.0) / 2, False)
    # past its mean: nothing more promised, and only a floor (it is taking longer than the others did)
    assert time_left([("train", 1, "s", 45.0)], took, jobs=4) == (0.0, True)
    assert time_left([], took, jobs=1) == (0.0, False)


def test_time_left_is_a_floor_while_a_deeper_cell_than_any_finished_is_left():
    """A training sweep at L = 1, 4, 7 whose L = 1 cell took 70 s and whose L = 7 cells take
    ten times that: the mean of the shallow cells counts them short, so the estimate says
    "at least" (``>``) until a cell as deep as every cell left has finished."""
    from tlstm_bench.sweeps.runner import time_left

    took = {"train": [(1, "s", 70.0)]}
    assert time_left([("train", 4, "s", 0.0), ("train", 7, "s", 0.0)], took, jobs=2) == (70.0, True)
    took["train"].append((7, "s", 700.0))
    assert time_left([("train", 4, "s", 0.0), ("train", 7, "s", 100.0)], took, jobs=2) == ((385.0 + 285.0) / 2,
                                                                                             False)
    assert time_left([("train", 1, "s", 0.0)], took, jobs=1) == (385.0, False)  # shallower: the mean is not a floor


def test_time_left_is_a_floor_while_a_size_no_finished_cell_had_is_left():
    """The runtime sweep: its M = 100 cells finish in seconds, then its 10M cells take minutes
    each; the M = 100 cells' mean said "~0:40 left" while one 10M cell ran for five minutes."""
    from tlstm_bench.sweeps.runner import cell_size, time_left

    took = {"runtime": [(d, "100", 8.0) for d in (1, 4, 7, 10)]}
    left = [("runtime", d, "10M", 0.0) for d in (1, 4, 7, 10)]
    assert time_left(left, took, jobs=1) == (32.0, True)
    took["runtime"] += [(d, "10M", 200.0) for d in (1, 4)]
    assert time_left(left[2:], took, jobs=1) == (400.0, True)  # 10M cells count at their own mean; L = 7 > 4
    took["runtime"].append((7, "10M", 200.0))
    assert time_left(left[3:], took, jobs=1) == (200.0, True)  # L = 10 deeper than every 10M cell done
    took["runtime"].append((10, "10M", 200.0))
    assert time_left([("runtime", 7, "10M", 0.0)], took, jobs=1) == (200.0, False)
    assert cell_size({"budget": "10M", "channels": None}) == "10M" and cell_size({"channels": 100}) == "100"
    assert cell_size({"preset": "memorization-small"}) == "memorization-small"


def test_a_sweep_reports_its_own_estimate_of_the_time_left(tmp_path, fake_env):
    """Every advance of a local sweep carries the runner's estimate: a floor before any cell of
    a kind has finished and while only shallower ones have (L = 1 before L = 2), a number after,
    nothing left at the end."""
    from tlstm_bench.events import Event

    seen: list[Event] = []
    summary = run_sweep(write_spec(tmp_path, RUNTIME_SPEC), root=tmp_path / "store", jobs=1, cell_fn=FAKE, code="v",
                        progress=seen.append)
    advances = [e for e in seen if e.kind == "advance"]
    assert summary.exit_code == 0 and advances and all(e.left_s is not None for e in advances)
    assert all(e.left_floor for e in advances if e.done == 0)
    floors = [e.left_floor for e in advances]
    assert floors == sorted(floors, reverse=True) and floors.count(False) > 1  # floors first, then numbers
    assert advances[-1].done == 8 and advances[-1].left_s == 0.0


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


def test_kill_and_resume_loses_and_duplicates_nothing(tmp_path, fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_SLEEP", "0.6")
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    root = tmp_path / "store"
    proc = sweep_process(spec, root)
    deadline = time.time() + 120
    while time.time() < deadline:                                 # kill it while it holds a cell's claim:
        if len(list((root / "t").glob("*.json"))) >= 3:           # frozen (SIGSTOP), so what is seen is
            os.killpg(proc.pid, signal.SIGSTOP)                   # what the kill leaves, however loaded
            if list((root / "t" / ".locks").glob("*.lock")):      # the machine is
                break
            os.killpg(proc.pid, signal.SIGCONT)
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)                          # the sweep, mid-run; its cell dies with it
    proc.wait()
    before = {r["id"]: r for r in records(root)}
    assert 3 <= len(before) < 8, "the sweep should have been killed part-way"
    assert list((root / "t" / ".locks").glob("*.lock"))         # the killed cell left its claim behind

    rerun = sweep_process(spec, root)
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
    proc = sweep_process(spec, root, "--jobs", "2")
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
    procs = [sweep_process(spec, root, "--jobs", "2") for _ in range(2)]
    outputs = [p.communicate(timeout=180)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    after = records(root)
    assert len(after) == 8 and all(r["status"] == "ok" for r in after)
    runs = executions(fake_env)
    assert len(runs) == 8 and set(runs.values()) == {1}           # every cell ran exactly once


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
