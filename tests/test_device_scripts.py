"""The scripts that run on a GPU device machine are reviewed like the rest: every shell script
parses, every Python script compiles, no evidence command hides its code in an encoded blob, and
the GPU runtime session runs end to end on the CPU (its stages, deadlines and the one archive)."""

from __future__ import annotations

import json
import os
import py_compile
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHELL = sorted([*ROOT.glob("benchmarks/**/*.sh"), *ROOT.glob("results/evidence/**/*.sh")])
PYTHON = sorted([*ROOT.glob("benchmarks/**/*.py"), *ROOT.glob("results/evidence/**/*.py")])
LADDER = ROOT / "results" / "evidence" / "cpu" / "memorization_ladder"


def test_there_are_device_scripts_to_check():
    names = {p.name for p in SHELL}
    assert {"device_session.sh", "gpu_runtime_session.sh", "device_cmd.sh", "device_cmd2.sh"} <= names
    assert {"gpu_records.py", "anchor_check.py", "device_cell.py", "triton_tune.py"} <= {p.name for p in PYTHON}


@pytest.mark.parametrize("script", SHELL, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shell_script_parses(script):
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("script", PYTHON, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_script_compiles(script, tmp_path):
    py_compile.compile(str(script), cfile=str(tmp_path / "x.pyc"), doraise=True)


@pytest.mark.parametrize("script", SHELL, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_command_carries_its_code_as_an_encoded_blob(script):
    """A reader of a command sees what it runs: no base64 (or other encoded) run of 200+ characters."""
    assert not re.search(r"[A-Za-z0-9+/=]{200,}", script.read_text()), "an encoded blob: call the script by name"


def test_the_ladder_commands_call_the_committed_script():
    for name in ("device_cmd.sh", "device_cmd2.sh"):
        text = (LADDER / name).read_text()
        assert "r=results/evidence/cpu/memorization_ladder/device_cell.py" in text and "python3 $r" in text
    assert (LADDER / "device_cell.py").is_file()


TINY = ROOT / "benchmarks" / "gpu-runtime-tiny.toml"  # the shipped spec's shape at toy sizes


@pytest.mark.slow
def test_the_gpu_runtime_session_runs_end_to_end_on_the_cpu_into_one_archive(tmp_path):
    """gpu_runtime_session.sh with GPU_SESSION_DEVICE=cpu and a small spec of the shipped one's
    shape: every stage runs (the sweep's triton and cuda-graph cells left out with a line), and
    $OUT holds one archive with the store (the sweep's records, the anchors' records), the log,
    nvidia-smi's answer and the commit; every record names the commit given."""
    spec = tmp_path / "gpu-tiny.toml"
    spec.write_text(TINY.read_text())  # the sweep is named by the file: gpu-tiny
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "GPU_SESSION_DEVICE": "cpu", "GPU_SESSION_SPEC": str(spec),
           "GPU_SESSION_RESULTS": str(tmp_path / "results")}
    env.pop("TLSTM_BENCH_RESULTS", None)
    result = subprocess.run(["bash", "benchmarks/gpu_runtime_session.sh", "c0ffee", "600"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["gpu-runtime.tgz"]
    with tarfile.open(out / "gpu-runtime.tgz") as archive:
        names = archive.getnames()
        log = archive.extractfile("session.log").read().decode()
        records = [json.load(archive.extractfile(n)) for n in names if n.endswith(".json")]
    assert {"session.log", "nvidia-smi.txt", "commit.txt", "plan.txt"} <= set(names)
    for stage in ("headline M=100", "anchors", "headline 10M", "the rest"):
        assert f"{stage}: exit 0" in log, log
    assert "cells of triton, cuda-graph left out: they need a CUDA GPU" in log
    assert log.count("against the loop oracle, float64 on cpu") == 3 and "WRONG" not in log
    sweep = [r for n, r in zip([n for n in names if n.endswith(".json")], records) if n.startswith("store/gpu-tiny/")]
    anchors = [r for n, r in zip([n for n in names if n.endswith(".json")], records) if n.startswith("store/anchors/")]
    assert len(sweep) == 2 * (2 + 1 + 1) + 2 * 2 and len(anchors) == 18  # M=100: slstm x2, 2d, lstm; 10M: 2
    assert {r["git_commit"] for r in sweep + anchors} == {"c0ffee"}
    assert {(r["config"], r["implementation"]) for r in sweep} == {("slstm", "cudnn"), ("slstm", "fused"),
                                                                   ("2d", "fast"), ("lstm", "cudnn")}
    assert all(r["status"] == "ok" for r in sweep + anchors)
    _unpacked_the_way_the_docs_say(out / "gpu-runtime.tgz", tmp_path / "run")


def _unpacked_the_way_the_docs_say(archive: Path, run: Path) -> None:
    """tar xzf into a run folder, then `results --by-depth` and `plot` read it (docs/gpu-evidence.md)."""
    from typer.testing import CliRunner

    from tlstm_bench.cli import app

    run.mkdir()
    subprocess.run(["tar", "xzf", str(archive), "-C", str(run)], check=True)
    table = CliRunner().invoke(app, ["results", "gpu-tiny", "--results-dir", str(run), "--by-depth"],
                               env={"COLUMNS": "80"})
    assert table.exit_code == 0, table.output
    assert "M=100" in table.output and "10M" in table.output and "cudnn" in table.output
    plot = CliRunner().invoke(app, ["plot", "gpu-tiny", "anchors", "--results-dir", str(run), "--out", str(run / "f")])
    assert plot.exit_code == 0, plot.output
    assert {"gpu-tiny-runtime.png", "gpu-tiny-runtime-fastest.png", "anchors-runtime.png"} <= {p.name for p in (run / "f").iterdir()}


def test_the_anchor_check_without_a_gpu_is_one_line():
    result = subprocess.run([sys.executable, "benchmarks/anchor_check.py"], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 2 and "--device cpu --tiny is the dry run" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args", [["triton_session.py", "--device", "cpu", "--out", "OUT"], ["triton_compile.py", "--ci"],
                                  ["triton_tune.py", "--device", "cpu"]], ids=lambda a: a[0])
def test_a_triton_script_without_triton_is_one_line(args, tmp_path):
    """Where Triton is not installed (the README's install), a Triton script says so in one line
    and how to install it, with exit code 2 (a package named triton that fails to import stands in)."""
    (tmp_path / "triton").mkdir()
    (tmp_path / "triton" / "__init__.py").write_text("raise ImportError('no triton here')\n")
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    env.pop("TRITON_INTERPRET", None)
    result = subprocess.run([sys.executable, f"benchmarks/{args[0]}", *args[1:]], cwd=ROOT, capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f'error: benchmarks/{args[0]} needs Triton: pip install -e ".[gpu]" (or pip install triton)']
