"""The SLURM executor (submitit): ``tlstm-bench sweep --executor slurm`` submits one job per cell;
each job claims its cell, runs it and writes its record into the store.

The tests marked ``real SLURM`` submit to a running SLURM whose only node is this machine (a
test's tmp folder is not on a filesystem other nodes share, and test jobs do not belong in a
production queue). CI starts one first (``.ci/slurm-up.sh``) and sets
``TLSTM_BENCH_REQUIRE_SLURM=1``, so there they fail, never skip, when SLURM does not answer;
elsewhere they skip with the reason and the command that starts one.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tlstm_bench.errors import UserError
from tlstm_bench.sweeps.grid import expand, parse_filters, select
from tlstm_bench.sweeps.plan import cluster_machine, plan_sweep, run_cells, run_sweep
from tlstm_bench.sweeps.slurm import SlurmOptions
from tlstm_bench.sweeps.spec import load_spec

from sweep_helpers import FAKE, RUNTIME_SPEC, executions, records, write_spec

CODE = "test-version"  # the code version fake_env (conftest.py) pins
SWEEP_TIMEOUT_S = 300  # a sweep of a few fake cells takes 15-40 s on the one-node CI SLURM


# ---- submitit without a cluster ------------------------------------------------------------------


def test_submitit_local_executor_writes_records(tmp_path, fake_env, monkeypatch):
    pytest.importorskip("submitit")
    monkeypatch.setenv("FAKE_PLAN", json.dumps({"2d": "raise"}))
    spec = load_spec(write_spec(tmp_path, RUNTIME_SPEC))
    cells = select(expand(spec, code="v"), parse_filters(["config=slstm,2d", "depth=1"]))
    root = tmp_path / "store"
    summary = run_cells(cells, root, executor="slurm", cell_fn=FAKE,
                        slurm=SlurmOptions(cluster="local", time_limit_min=5), )
    got = {r["config"]: r["status"] for r in records(root)}
    assert got == {"slstm": "ok", "2d": "failed"} and summary.exit_code == 1
    assert list((root / "t" / ".submitit").iterdir())            # submitit's job folders
    again = run_cells(cells, root, executor="slurm", cell_fn=FAKE, slurm=SlurmOptions(cluster="local"))
    assert again.count("skipped-done", "skipped-failed") == 2    # resume rules hold for jobs too


def _fake_tools(bin_dir: Path, *names: str) -> None:
    """Executables that do nothing, under these names, in bin_dir."""
    bin_dir.mkdir(exist_ok=True)
    for name in names:
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(0o755)


@pytest.mark.parametrize("present, missing", [((), "no sbatch or srun on PATH"), (("srun",), "no sbatch on PATH"),
                                              (("sbatch",), "no srun on PATH")], ids=["neither", "srun", "sbatch"])
def test_slurm_without_sbatch_or_srun_is_a_user_error(tmp_path, fake_env, monkeypatch, present, missing):
    """Without sbatch or srun on PATH, one line naming what is missing: submitit's SlurmExecutor
    raises a RuntimeError ("Could not detect srun") where sbatch is there and srun is not."""
    pytest.importorskip("submitit")
    _fake_tools(tmp_path / "bin", *present)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    with pytest.raises(UserError, match=f"needs a SLURM cluster \\({missing}\\)"):
        run_sweep(spec, root=tmp_path / "s", executor="slurm", cell_fn=FAKE, code="v")
    assert not (tmp_path / "s").exists() or records(tmp_path / "s") == []


@pytest.mark.parametrize("says, options, expected", [
    ("sbatch: error: Invalid generic resource (gres) specification", ["--partition", "gpu", "--gpus-per-job", "1"],
     "error: sbatch refused the 4 jobs, nothing was submitted: Invalid generic resource (gres) specification; "
     "check --partition gpu and --gpus-per-job 1 against what sinfo lists"),
    ("sbatch: warning: can't run 1 processes on 2 nodes\n"
     "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)", [],
     "error: sbatch refused the 4 jobs, nothing was submitted: Unable to contact slurm controller (connect "
     "failure); check that the SLURM controller answers (sinfo)"),
], ids=["gres", "no-controller"])
def test_sbatch_refusing_the_array_is_one_line_exit_2(tmp_path, fake_env, says, options, expected):
    """An sbatch that refuses the job array (a gres the partition lacks, no controller): one
    `error:` line saying what sbatch said and what to check, exit 2, no traceback, and the store as
    it was (no record, no claim), so the same command, fixed, submits every cell."""
    pytest.importorskip("submitit")
    bin_dir = tmp_path / "bin"
    _fake_tools(bin_dir, "srun")  # submitit looks for srun; this test needs no real SLURM
    calls = tmp_path / "sbatch.calls"
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nprintf \'%s\\n\' "$FAKE_SBATCH_SAYS" >&2\nexit 1\n')
    sbatch.chmod(0o755)
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    root = tmp_path / "results" / "store"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_SBATCH_SAYS": says,
           "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-m", "tlstm_bench", "sweep", str(spec), "--executor", "slurm",
                           "--only", "depth=1", "--results-dir", str(root.parent), "--cell-fn", FAKE, *options],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(calls.read_text().splitlines()) == 1                 # the whole array, one sbatch call
    assert "Traceback" not in done.stdout + done.stderr and "submitted" not in done.stdout
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(expected), done.stderr
    assert done.stderr.rstrip().endswith("then run the same command again")
    assert records(root) == [] and list((root / "t").glob(".locks/*")) == []
    assert list((root / "t").glob(".submitit/*")) == []              # submitit's pickles of the array removed
    assert executions(fake_env) == {}                                # no cell ran


# ---- real SLURM ----------------------------------------------------------------------------------


def _why_no_slurm() -> str | None:
    """None when a SLURM whose only node is this machine answers and can run a job; else why not."""
    if importlib.util.find_spec("submitit") is None:
        return "submitit is not installed: pip install -e '.[cluster]'"
    for tool in ("sbatch", "sinfo", "squeue", "scancel"):
        if shutil.which(tool) is None:
            return f"no {tool} on PATH"
    try:
        out = subprocess.run(["sinfo", "--noheader", "--Node", "--format=%N %T"], capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"sinfo failed: {exc}"
    if out.returncode != 0:
        return f"sinfo says: {out.stderr.strip() or out.returncode}"
    nodes = dict(line.split()[:2] for line in out.stdout.splitlines() if len(line.split()) >= 2)
    host = socket.gethostname().split(".")[0]
    if set(nodes) != {host}:
        return f"its nodes are {sorted(nodes) or 'none'}, not only this machine ({host})"
    if nodes[host].rstrip("*~#$@^-!%") not in ("idle", "mixed", "allocated", "completing"):
        return f"node {host} is {nodes[host]}"
    return None


@pytest.fixture(scope="module")
def slurm():
    why = _why_no_slurm()
    if why is None:
        return
    message = f"no one-node SLURM answers here ({why}); start one with `sudo .ci/slurm-up.sh` (Debian)"
    if os.environ.get("TLSTM_BENCH_REQUIRE_SLURM") == "1":
        pytest.fail(f"TLSTM_BENCH_REQUIRE_SLURM=1 but {message}")
    pytest.skip(message)


@pytest.fixture
def sweep_name(slurm):
    """A sweep name of its own (its jobs are named tlstm-<name>); its jobs are cancelled afterwards."""
    name = f"slurm{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["scancel", f"--name=tlstm-{name}"], capture_output=True, timeout=30)


def sweep_command(spec: Path, root: Path, *extra: str) -> list[str]:
    """``tlstm-bench sweep --executor slurm`` with the fake cells, run by this interpreter, writing into
    the store ``root`` (``<results folder>/store``)."""
    assert root.name == "store"
    return [sys.executable, "-c", "from tlstm_bench.cli import main; main()", "sweep", str(spec), "--executor",
            "slurm", "--results-dir", str(root.parent), "--cell-fn", FAKE, "--time-limit", "5", *extra]


# Runtime cells of a SLURM sweep key on the partition (the nodes are unknown when planning).
SLURM_MACHINE = cluster_machine("slurm", SlurmOptions())


def cli_env() -> dict:
    return {**os.environ, "COLUMNS": "200"}  # one summary line per line: rich wraps at 80 columns otherwise


def run_sweep_cli(spec: Path, root: Path, cwd: Path, *extra: str) -> subprocess.CompletedProcess:
    cwd.mkdir(exist_ok=True)
    try:
        return subprocess.run(sweep_command(spec, root, *extra), cwd=cwd, env=cli_env(), capture_output=True,
                              text=True, timeout=SWEEP_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the sweep did not finish in {SWEEP_TIMEOUT_S} s; its output:\n{exc.stdout}\n{exc.stderr}")


def submitted_array(output: str) -> str:
    """The job array id from the sweep's 'submitted N jobs (slurm); job ids A_0 ... A_n' line."""
    match = re.search(r"submitted \d+ jobs \(slurm\); job ids (\d+)_\d+", output)
    assert match, output
    return match.group(1)


def test_sweep_through_slurm_writes_every_record_once(tmp_path, fake_env, sweep_name):
    spec = write_spec(tmp_path, RUNTIME_SPEC, name=sweep_name)
    filters = ["config=slstm,2d", "depth=1,2"]
    only = [word for f in filters for word in ("--only", f)]
    root, cwd = tmp_path / "store", tmp_path / "cwd"
    done = run_sweep_cli(spec, root, cwd, *only)
    assert done.returncode == 0, done.stdout + done.stderr
    array = submitted_array(done.stdout)

    cells = plan_sweep(spec, root=root, only=filters, code=CODE, machine=SLURM_MACHINE).cells
    got = records(root, sweep_name)
    assert len(cells) == 4 and sorted(r["id"] for r in got) == sorted(c.id for c in cells)
    assert all(r["status"] == "ok" and r["error"] is None for r in got), [r["error"] for r in got]
    assert all(r["ms_per_step"] == 1.0 + r["depth"] for r in got)               # the fake's result, kept
    # each record says which job of the submitted array ran it, on this machine
    jobs = sorted(r["slurm_job_id"] for r in got)
    assert jobs == [f"{array}_{i}" for i in range(4)]
    assert {r["host"] for r in got} == {socket.gethostname()}
    assert sorted(executions(fake_env).values()) == [1, 1, 1, 1]               # every cell ran exactly once

    # submitit's files (the job script, pickles, each job's logs) sit in the store, none in the cwd
    folder = root / sweep_name / ".submitit"
    for job in jobs:
        assert (folder / f"{job}_0_log.out").exists() and (folder / f"{job}_0_log.err").exists()
    assert list(cwd.iterdir()) == []
    # the jobs ran this interpreter (the one with tlstm_bench installed), not whatever `python` is
    script = next(folder.glob("*_submission.sh")).read_text()
    assert f"{sys.executable} -u -m submitit.core._submit" in script

    again = run_sweep_cli(spec, root, cwd, *only)                              # resuming submits nothing
    assert again.returncode == 0 and "submitted" not in again.stdout, again.stdout
    assert "already done 4" in again.stdout and sum(executions(fake_env).values()) == 4


def test_failing_cells_under_slurm_are_recorded_failed(tmp_path, fake_env, monkeypatch, sweep_name):
    """An exception, a crashed cell process, and a job killed outright (as by the OOM killer): each
    cell gets a failed record saying why; none is lost, none keeps the sweep waiting."""
    # the killed job first: the sweep notices it only after a grace period, while the others run
    monkeypatch.setenv("FAKE_PLAN", json.dumps({"slstm": "kill-parent", "2d": "raise", "2d-m": "crash"}))
    spec = write_spec(tmp_path, RUNTIME_SPEC, name=sweep_name)
    root = tmp_path / "store"
    done = run_sweep_cli(spec, root, tmp_path / "cwd", "--only", "depth=1")
    assert done.returncode == 1, done.stdout + done.stderr
    got = {r["config"]: r for r in records(root, sweep_name)}
    assert sorted(got) == ["2d", "2d-m", "3d", "slstm"]
    assert {c: r["status"] for c, r in got.items()} == {"slstm": "failed", "2d": "failed", "2d-m": "failed",
                                                        "3d": "ok"}
    assert got["2d"]["error"] == "FloatingPointError: loss is nan at step 3"
    assert got["2d-m"]["error"].startswith("cell process exited with code 3")
    array = submitted_array(done.stdout)
    killed = got["slstm"]
    assert re.match(rf"job {array}_\d+ ended \(FAILED\) before its cell finished", killed["error"]), killed["error"]
    assert killed["slurm_job_id"].startswith(f"{array}_")
    assert "4 cells; ran 4 (1 ok, 3 failed)" in done.stdout
    assert sum(executions(fake_env).values()) == 4


def test_a_cancelled_job_leaves_its_cell_undone_and_the_sweep_unfinished(tmp_path, fake_env, monkeypatch,
                                                                         sweep_name):
    """scancel is an interruption, not a failure: the cell gets no record, the sweep exits 130 (not
    0), and running it again submits that cell and completes the sweep."""
    monkeypatch.setenv("FAKE_PLAN", json.dumps({"2d": "hang"}))
    spec = write_spec(tmp_path, RUNTIME_SPEC.replace("timeout_s = 60", "timeout_s = 600"), name=sweep_name)
    root, cwd = tmp_path / "store", tmp_path / "cwd"
    cwd.mkdir()
    filters = ["config=slstm,2d", "depth=1"]
    only = [word for f in filters for word in ("--only", f)]
    cells = plan_sweep(spec, root=root, only=filters, code=CODE, machine=SLURM_MACHINE).cells
    hung = [c.spec["config"] for c in cells].index("2d")                     # its task in the job array
    log = tmp_path / "sweep.out"
    with open(log, "w") as out:
        proc = subprocess.Popen(sweep_command(spec, root, *only), cwd=cwd, env=cli_env(), stdout=out,
                                stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + SWEEP_TIMEOUT_S
        while ("2d" not in {c for _, c, *_ in executions(fake_env)}
               or not re.search(r"job ids \d+_", log.read_text())):     # the hanging cell has started
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        job = f"{submitted_array(log.read_text())}_{hung}"
        subprocess.run(["scancel", job], check=True, timeout=30)
        proc.wait(timeout=SWEEP_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = log.read_text()
    assert proc.returncode == 130, output
    assert "INTERRUPTED" in output and "interrupted (rerun the same command to resume)" in output
    assert {r["config"]: r["status"] for r in records(root, sweep_name)} == {"slstm": "ok"}

    monkeypatch.delenv("FAKE_PLAN")
    again = run_sweep_cli(spec, root, cwd, *only)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "ran 1 (1 ok, 0 failed), already done 1" in again.stdout
    assert {r["config"]: r["status"] for r in records(root, sweep_name)} == {"slstm": "ok", "2d": "ok"}
