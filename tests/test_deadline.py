"""$TLSTM_BENCH_DEADLINE: a hard stop every training run and sweep meets with its records kept
(benchmarks/device_run.sh sets it, so a device call given less time than its spec still brings
back a record of every cell it started)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tlstm_bench import checks
from tlstm_bench.cli import app
from tlstm_bench.errors import UserError
from tlstm_bench.training import train

REPO = Path(__file__).resolve().parents[1]


def test_the_deadline_is_read_as_a_unix_time(monkeypatch):
    monkeypatch.delenv(checks.ENV_DEADLINE, raising=False)
    assert checks.deadline() is None
    monkeypatch.setenv(checks.ENV_DEADLINE, " ")
    assert checks.deadline() is None
    monkeypatch.setenv(checks.ENV_DEADLINE, "1800000000")
    assert checks.deadline() == 1.8e9
    for bad in ("soon", "-5", "0", "nan", "inf"):
        monkeypatch.setenv(checks.ENV_DEADLINE, bad)
        with pytest.raises(UserError, match=r"^\$TLSTM_BENCH_DEADLINE must be a UNIX time in seconds .*unset it"):
            checks.deadline()


def test_a_length_of_time_in_seconds_minutes_or_hours():
    assert [checks.duration(t, "--stop-after") for t in ("90", "90s", "45m", "1.5h", " 2H ")] == [90, 90, 2700, 5400, 7200]
    for bad in ("", "soon", "-5m", "0s", "5d", "nanh"):
        with pytest.raises(UserError, match="^--stop-after must be a length of time such as 90s, 45m or 2h"):
            checks.duration(bad, "--stop-after")


def test_the_sooner_of_stop_after_and_the_environment_s_deadline_goes_to_the_cells(monkeypatch):
    from tlstm_bench.sweeps.plan import deadline_env

    monkeypatch.delenv(checks.ENV_DEADLINE, raising=False)
    assert deadline_env(None) == {}
    soon = float(deadline_env(60)[checks.ENV_DEADLINE])
    assert abs(soon - (time.time() + 60)) < 5
    monkeypatch.setenv(checks.ENV_DEADLINE, str(time.time() + 10))
    assert float(deadline_env(3600)[checks.ENV_DEADLINE]) < time.time() + 15
    assert float(deadline_env(5)[checks.ENV_DEADLINE]) < time.time() + 8


def test_sweep_stop_after_stops_training_with_its_record_and_starts_no_cell_after(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('task = "memorization"\nconfigs = ["2d", "3d-cn"]\ndepths = [1]\nchannels = 4\n'
                    'timeout_s = 300\n[train]\nmax_samples = 100000000\ntime_limit_s = 200\n'
                    'options = { symbols = 3, alphabet = 8 }\n')
    args = ["sweep", str(spec), "--results-dir", str(tmp_path / "r")]
    bad = CliRunner().invoke(app, [*args, "--stop-after", "soon"])
    assert bad.exit_code == 2 and "--stop-after must be a length of time" in bad.output
    result = CliRunner().invoke(app, [*args, "--stop-after", "8s"], env={"COLUMNS": "80"})
    assert result.exit_code == 1, result.output  # one cell was not started: no record
    assert "training cells stop there with their records" in result.output
    store = tmp_path / "r" / "store" / "s"
    (first,) = [json.loads(p.read_text()) for p in store.glob("*.json")]
    assert (first["config"], first["stop_reason"]) == ("2d", "deadline")
    assert checks.ENV_DEADLINE not in os.environ  # set for the cells, not in this process
    # cut, not done: kept with its checkpoint, and the next run goes on from it, replacing the record
    assert (store / ".checkpoints" / first["id"]).is_dir()
    plan = CliRunner().invoke(app, [*args, "--dry-run"], env={"COLUMNS": "80"})
    assert "0 done" in plan.output and "2 to run (1 cut by a deadline: on from its checkpoint)" in " ".join(plan.output.split())
    again = CliRunner().invoke(app, [*args, "--stop-after", "8s"], env={"COLUMNS": "80"})
    assert again.exit_code == 1, again.output
    (second,) = [json.loads(p.read_text()) for p in store.glob("*.json")]
    assert second["id"] == first["id"] and second["resumed_at"] == [first["samples_seen"]]
    assert second["samples_seen"] >= first["samples_seen"] and second["stop_reason"] == "deadline"


class Clock:
    """time.time() for the training loop: ``before`` for the first ``calls`` reads (one a step),
    then ``after``; the rest of the time module as it is."""

    def __init__(self, calls: int, before: float, after: float):
        self.calls, self.before, self.after = calls, before, after
        self.monotonic = time.monotonic

    def time(self) -> float:
        self.calls -= 1
        return self.before if self.calls >= 0 else self.after


def test_a_run_past_the_deadline_stops_and_keeps_its_record(monkeypatch, tmp_path):
    from tlstm_bench.training import loop

    run = dict(depth=1, preset="memorization-small", channels=4, max_samples=10**8, eval_every=150,
               checkpoint_dir=tmp_path / "ck")
    monkeypatch.setenv(checks.ENV_DEADLINE, "1000")
    monkeypatch.setattr(loop, "time", Clock(20, 999.0, 1001.0))  # the deadline passes after 20 steps
    record = train("2d", **run)
    assert record["status"] == "ok" and record["stop_reason"] == "deadline"
    assert record["samples_seen"] == 20 * record["batch_size"] and record["test_metric"] is not None
    assert record["stop_detail"] == (f"stopped at $TLSTM_BENCH_DEADLINE, sample {record['samples_seen']:,} of "
                                     "100,000,000 (run again with its checkpoint to go on)")
    assert "time_limit_s" in record and record["time_limit_s"] is None  # not a setting: not in the identity
    monkeypatch.setattr(loop, "time", Clock(10, 999.0, 1001.0))  # a later deadline: the same run goes on
    more = train("2d", **run)
    assert more["key"] == record["key"] and more["stop_reason"] == "deadline"
    assert more["samples_seen"] == 30 * record["batch_size"] and more["resumed_at"] == [record["samples_seen"]]


def test_a_malformed_deadline_is_one_line_before_any_work(monkeypatch, tmp_path):
    monkeypatch.setenv(checks.ENV_DEADLINE, "tomorrow")
    for args in (["train", "2d", "--preset", "memorization-small", "--depth", "1"],
                 ["sweep", "quick", "--only", "kind=train"]):
        result = CliRunner().invoke(app, [*args, "--results-dir", str(tmp_path)])
        assert result.exit_code == 2, result.output
        assert "TLSTM_BENCH_DEADLINE must be a UNIX time" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "store").exists()


def test_device_run_with_less_time_than_the_spec_keeps_a_record_of_what_it_started(tmp_path):
    """The spec asks for 200 s a cell; the call gives 80 s with a 40 s margin: the first cell stops
    at the deadline with its record, the second is not started, and the archive holds the record."""
    spec = tmp_path / "short.toml"
    spec.write_text('task = "memorization"\nconfigs = ["2d", "3d-cn"]\ndepths = [1]\nchannels = 4\n'
                    'timeout_s = 300\n[train]\nmax_samples = 100000000\ntime_limit_s = 200\n'
                    'options = { symbols = 3, alphabet = 8 }\n')
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "OUT": str(tmp_path / "out"),
           "TMPDIR": str(tmp_path), "DEADLINE_MARGIN_S": "40",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "benchmarks/device_run.sh", "short", "80", "0123abc", "--",
                           "sweep", str(spec), "--jobs", "1"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr  # one cell has no record
    with tarfile.open(tmp_path / "out" / "short.tar.gz") as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    run = tmp_path / "unpacked"
    records = [json.loads(p.read_text()) for p in (run / "store" / "short").glob("*.json")]
    assert [(r["config"], r["status"], r["stop_reason"]) for r in records] == [("2d", "ok", "deadline")]
    log = " ".join((run / "short.log").read_text().split())
    assert "1 cell without a record" in log and "the deadline ($TLSTM_BENCH_DEADLINE) has passed" in log
    assert "1 cell has no record" in log
    assert "exit status 1" in (run / "short-meta.txt").read_text()
