"""benchmarks/triton_precompile.py: a device run's kernels compiled ahead, in parallel processes,
into Triton's cache, where the run then finds them.

Without a GPU the workers compile for sm_90 through a stand-in driver (``--fake-target 90``):
Triton's own specialization, compile and cache, the launches turned into compiles only. What
is checked is what the device relies on: every kernel of a spec lands in the cache, and the run
that follows (another process, another sequence length, the session's float64 check path) finds
each one there instead of compiling it again.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import triton_precompile as tp  # noqa: E402

SPECS = [dict(config="2d", depth=1, channels=100, budget=None, batch=1, menu="single", persistent=True,
              precision="ieee"),
         dict(config="3d-cn", depth=2, channels=20, budget=None, batch=1, menu=None, persistent=False,
              precision="ieee")]

# The run after the precompile, as the session runs its check: another process, T = 7, the
# oracle helpers' model; prints the cache entries it had to add.
RUN_AFTER = """
import os, sys, torch
sys.path[:0] = [{bench!r}, {tests!r}]
import triton_precompile as tp
tp.fake_target(90)
from model_helpers import outputs_and_grads
from tlstm_bench.models import triton_tlstm
cache = os.environ["TRITON_CACHE_DIR"]
before = set(os.listdir(cache))
with tp.compile_only():
    with triton_tlstm.forced(persistent=False):
        outputs_and_grads("3d-cn", 2, "triton", dtype=torch.float32, device="cpu", batch=1, seq_len=7, channels=20)
    with triton_tlstm.forced(menu="single", persistent=True):
        outputs_and_grads("2d", 1, "triton", dtype=torch.float32, device="cpu", batch=1, seq_len=7, channels=100)
print(len(before), len(set(os.listdir(cache)) - before))
"""


def test_unique_keeps_the_first_of_each_kernel_set_in_order():
    graph_twin = dict(SPECS[0], kind="triton-graph", seq_len=100)  # what the kernels do not see
    got = tp.unique([SPECS[0], SPECS[1], graph_twin, dict(SPECS[0], precision="tf32")])
    assert [s["precision"] for s in got] == ["ieee", "ieee", "tf32"]
    assert got[0] == SPECS[0] and set(got[0]) == set(tp.SPEC_KEYS)


def test_nothing_to_compile_starts_no_process():
    report = tp.precompile([], device="cpu", jobs=8, timeout_s=1)
    assert report["jobs"] == 0 and report["done"] == [] and tp.summary(report).startswith("precompiled 0")


def test_summary_is_one_line_with_the_first_failure():
    report = {"done": ["a"], "failed": {"b": "UserError: unknown configuration 'x'"}, "missed": ["c"], "s": 4.2,
              "jobs": 2}
    line = tp.summary(report)
    assert "\n" not in line and "precompiled 1 variant(s) in 4.2 s" in line
    assert "1 failed" in line and "1 not reached" in line and "unknown configuration" in line


@pytest.mark.triton
@pytest.mark.slow
def test_precompiled_kernels_are_found_by_the_run_after_it(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the workers compile; the interpreter does not
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    broken = dict(SPECS[0], config="no-such-config")
    report = tp.precompile([*SPECS, SPECS[0], broken], device="cpu", jobs=2, timeout_s=600,
                           extra_args=("--fake-target", "90"))
    assert sorted(report["done"]) == sorted(tp.spec_key(s) for s in SPECS), report
    assert list(report["failed"]) == [tp.spec_key(broken)] and "\n" not in report["failed"][tp.spec_key(broken)]
    assert report["missed"] == [] and report["stopped"] == []
    kernels = sorted(p.name for p in (tmp_path / "cache").glob("*/*.cubin"))
    # 2d persistent (forward, backward); 3d-cn per step (forward first/middle/finisher, backward last/middle)
    assert kernels.count("forward_persistent.cubin") == 1 and kernels.count("backward_persistent.cubin") == 1
    assert kernels.count("forward_step.cubin") == 3 and kernels.count("backward_step.cubin") == 2
    named = report["kernels"][tp.spec_key(SPECS[1])]  # each spec says which kernels it compiled
    assert {k: len(v) for k, v in named.items()} == {"forward_step": 3, "backward_step": 2}
    code = RUN_AFTER.format(bench=str(ROOT / "benchmarks"), tests=str(ROOT / "tests"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    had, added = map(int, done.stdout.split()[-2:])
    assert had == 7 and added == 0, done.stdout


@pytest.mark.triton
def test_workers_stopped_at_the_deadline_leave_their_specs_missed(monkeypatch):
    """A deadline shorter than a worker's start (python, torch): nothing done, every spec
    reported as not reached, and no worker left running."""
    pytest.importorskip("triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    report = tp.precompile(SPECS, device="cpu", jobs=2, timeout_s=0.05, extra_args=("--fake-target", "90"))
    assert report["done"] == [] and sorted(report["missed"]) == sorted(tp.spec_key(s) for s in SPECS)
    assert report["stopped"] and "deadline" in tp.summary(report) and report["s"] < 30


def test_a_worker_refuses_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "triton_precompile.py"), "--worker",
                           json.dumps(SPECS[:1]), "--device", "cpu"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 2 and "unset TRITON_INTERPRET" in done.stderr


def test_the_session_precompiles_every_triton_kernel_of_its_plan_and_nothing_else(monkeypatch):
    """triton_session.py hands every triton and triton-graph variant of its plan to the
    precompile (a third of what is left at most), and no fast, cuDNN or nn.LSTM one."""
    import triton_session as ts

    seen = {}

    def fake(specs, device, jobs, timeout_s):
        seen.update(specs=specs, device=device, jobs=jobs, timeout_s=timeout_s)
        return {"done": [tp.spec_key(s) for s in specs], "failed": {}, "missed": [], "stopped": [], "s": 1.0,
                "jobs": jobs}

    class Budget:
        def left(self):
            return 300.0

    monkeypatch.setattr(tp, "precompile", fake)
    variants = ts.plan("cuda")
    line = ts.precompile_plan(variants, 8, Budget())
    def key(v):
        return tp.spec_key(dict(config=v.config, depth=v.depth, channels=v.channels, budget=v.budget, batch=v.batch,
                                menu=v.menu, persistent=v.persistent, precision=v.precision))

    kernels = [v for v in variants if v.kind in ("triton", "triton-graph")]
    assert {tp.spec_key(s) for s in seen["specs"]} == {key(v) for v in kernels}
    assert len(kernels) > len(tp.unique(seen["specs"])) > 30  # the graph twins share their kernels
    assert not any(s["config"] in ("lstm", "slstm") for s in seen["specs"])
    assert seen["device"] == "cuda" and seen["jobs"] == 8 and seen["timeout_s"] == 100.0
    assert line.startswith(f"precompiled {len(seen['specs'])} variant(s)")


@pytest.mark.triton
@pytest.mark.slow
def test_a_sweeps_triton_cells_precompile_from_the_shell(tmp_path):
    """What gpu_runtime_session.sh runs before the sweep: the spec's triton runtime cells
    (here 2d at M = 100, L = 1, 4, 7, 10: one persistent pair of kernels for all four), and a
    spec that does not exist as one line and exit 2."""
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    script = str(ROOT / "benchmarks" / "triton_precompile.py")
    args = ["--only", "config=2d", "--only", "channels=100", "--jobs", "2", "--fake-target", "90"]  # builds on the CPU
    done = subprocess.run([sys.executable, script, "--sweep", "runtime", *args], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("precompiled 4 variant(s)") and "failed" not in done.stdout, done.stdout
    assert sorted(p.name for p in (tmp_path / "cache").glob("*/*.cubin")) == ["backward_persistent.cubin",
                                                                              "forward_persistent.cubin"]
    done = subprocess.run([sys.executable, script, "--sweep", "no-such-sweep", *args], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("error:") and len(done.stderr.splitlines()) == 1
