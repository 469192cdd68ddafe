"""How torch's CPU threads wait: OMP_WAIT_POLICY=PASSIVE unless the environment says otherwise,
set by the CLI and by a sweep cell's process before torch loads, and stored in every record
(docs/tasks.md, "Threads on a shared machine")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tlstm_bench.results.provenance import provenance
from tlstm_bench.vocab import OMP_WAIT_POLICY, default_omp_wait_policy

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent


def _env(policy: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    return env


def test_the_default_is_passive_and_a_set_value_stays():
    env: dict = {}
    default_omp_wait_policy(env)
    assert env == {"OMP_WAIT_POLICY": "PASSIVE"} and OMP_WAIT_POLICY == "PASSIVE"
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    default_omp_wait_policy(env)
    assert env == {"OMP_WAIT_POLICY": "ACTIVE"}


@pytest.mark.parametrize("given, expected", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_the_cli_sets_it_before_torch_loads(given, expected):
    script = ("import os, sys\nimport tlstm_bench.cli\n"
              "print('torch' in sys.modules, os.environ.get('OMP_WAIT_POLICY'))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                         env=_env(given), timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", expected]


@pytest.mark.parametrize("given, expected", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_a_sweep_cell_process_sets_it(tmp_path, given, expected):
    """A cell process started without the CLI's environment (a SLURM job that does not inherit it)."""
    cell = {"sweep": "s", "spec": {"kind": "train", "config": "2d", "depth": 1, "seed": 0}, "key": "k", "id": "i",
            "code_version": "v", "timeout_s": 60.0}
    env = _env(given)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(REPO)])
    out = subprocess.run([sys.executable, "-m", "tlstm_bench.sweeps.cell", f"--root={tmp_path}",
                          f"--out={tmp_path / 'out.json'}", "--fn=sweep_fakes:environment"],
                         input=json.dumps(cell), capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "out.json").read_text())["result"] == {"omp_wait_policy": expected}


def test_a_record_stores_it(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert provenance("cpu")["omp_wait_policy"] == "ACTIVE"
    monkeypatch.delenv("OMP_WAIT_POLICY")
    assert provenance("cpu")["omp_wait_policy"] is None


def test_a_train_run_from_the_cli_records_passive(tmp_path):
    """End to end: `tlstm-bench train` started with no OMP_WAIT_POLICY ran, and says it ran, with PASSIVE."""
    out = subprocess.run([sys.executable, "-m", "tlstm_bench", "train", "2d", "--preset", "memorization-small",
                          "-L", "1", "--max-samples", "30", "--results-dir", str(tmp_path)],
                         capture_output=True, text=True, cwd=REPO, env=_env(None), timeout=600)
    assert out.returncode == 0, out.stderr
    (record,) = (tmp_path / "store" / "training").glob("*.json")
    assert json.loads(record.read_text())["omp_wait_policy"] == "PASSIVE"


def test_the_benchmark_refuses_an_unknown_case_in_one_line():
    out = subprocess.run([sys.executable, "benchmarks/omp_wait.py", "--cases", "huge"], capture_output=True,
                         text=True, cwd=REPO, timeout=120)
    assert out.returncode == 1
    assert out.stderr.strip() == "error: unknown case 'huge'; use one of small, paper"
