"""benchmarks/sync_floor.py: the floor under a persistent step (a grid barrier and a chain of
dependent loads, nothing of the model), checked against its host model. Here under Triton's
interpreter (one program, so the barrier is trivial) and compiled for sm_80 and sm_90; the
timings are a device's (triton_session.py's ``floor`` group)."""

import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.triton

ROOT = os.path.join(os.path.dirname(__file__), "..")


def brute(buf, first, steps, chain):
    """The recurrence one program at a time, as the kernel's docstring states it."""
    from benchmarks import sync_floor

    buf = [list(map(int, row)) for row in buf]
    t = sync_floor.table()
    n = len(buf[0])
    for s in range(first, first + steps):
        new = []
        for p in range(n):
            v = buf[s % 2][(p + 1) % n]
            idx = v % sync_floor.TABLE
            for _ in range(chain):
                idx = int(t[idx])
            new.append(v + 1 + idx)
        buf[(s + 1) % 2] = new
    return np.array(buf)


def test_host_model_is_the_stated_recurrence_and_tells_chains_and_steps_apart():
    from benchmarks import sync_floor

    start = np.arange(10, dtype=np.int32).reshape(2, 5)
    for chain in (0, 2, 8):
        for first, steps in ((0, 4), (1, 3)):
            assert np.array_equal(sync_floor.expected(start, first, steps, chain), brute(start, first, steps, chain))
    four = sync_floor.expected(start, 0, 4, 2)
    assert not np.array_equal(four, sync_floor.expected(start, 0, 4, 0))  # the chain's loads count
    assert not np.array_equal(four, sync_floor.expected(start, 0, 3, 2))  # a missed step shows
    assert sorted(sync_floor.table()) == list(range(sync_floor.TABLE))  # a permutation: chains stay in the table


def test_floor_runs_right_in_the_interpreter_and_its_lines_say_so():
    pytest.importorskip("triton")
    from benchmarks import sync_floor

    said = []
    results = sync_floor.measure("cpu", 0.0, said.append)
    assert [(r["mode"], r["programs"], r["chain"], r["weights_kb"]) for r in results] == [
        ("persistent", 1, 0, 0), ("persistent", 1, 2, 0), ("persistent", 1, 2, 8), ("host", 1, 0, 0)]
    assert all(r["right"] and r["us_per_step"] > 0 and r["rounds"] >= sync_floor.MIN_ROUNDS for r in results)
    assert said == sync_floor.lines(results)
    assert said[1].startswith("FLOOR: persistent, a grid barrier a step, 1 program, 2 chained loads: ")
    assert said[1].endswith(", right")
    assert said[2].startswith("FLOOR: persistent, a grid barrier a step, 1 program, 2 chained loads, 8 KB of weights a program: ")


def test_floor_check_catches_a_kernel_that_disagrees_with_the_model(monkeypatch):
    """The check is the kernel's values against the host model: a model of other steps (what a
    stale read would give) makes every case WRONG, and the line says so."""
    pytest.importorskip("triton")
    from benchmarks import sync_floor

    real = sync_floor.expected
    monkeypatch.setattr(sync_floor, "expected", lambda buf, first, steps, chain: real(buf, first, steps - 1, chain))
    results = sync_floor.measure("cpu", 0.0)
    assert not any(r["right"] for r in results)
    assert sync_floor.lines(results)[0].endswith("WRONG (a program read a stale value)")


def test_floor_kernel_compiles_for_a100_and_h100():
    """Compiled with Triton's own compiler for sm_80 and sm_90 (no GPU needed): the interpreter
    accepts what a GPU compiler may reject."""
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = ROOT
    done = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "sync_floor.py"), "--compile", "80,90"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 12 and all(line.startswith("ok sm_") for line in lines), lines


def test_floor_script_needs_an_out_file_and_a_gpu_for_cuda():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the script would time it")
    env = dict(os.environ, PYTHONPATH=ROOT)
    script = os.path.join(ROOT, "benchmarks", "sync_floor.py")
    done = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2 and "--out is required" in done.stderr
    done = subprocess.run([sys.executable, script, "--out", os.devnull], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 2 and done.stderr.startswith("error: benchmarks/sync_floor.py times a GPU")
