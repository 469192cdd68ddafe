"""The GPU evidence script (issue 8) as a CPU dry run: it must keep working without a GPU.

Four runs of ``benchmarks/gpu_evidence.py --device cpu --tiny`` start together (they are
subprocesses, as on the device) and each test checks one of them:

* a whole run with a deliberately wrong implementation injected (``--test-inject-wrong``):
  every part leaves well-formed records, and the wrong one's timings are marked invalid;
* a run whose budget runs out after a few units: a partial, valid output that says so;
* a run with a budget too small for anything: it still ends cleanly with a summary;
* a run stopped by SIGTERM part-way: exit 143, what was measured is kept.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HAVE_TRITON = importlib.util.find_spec("triton") is not None
SCRIPT = ROOT / "benchmarks" / "gpu_evidence.py"
TIMEOUT = 240  # generous: the machine running CI may be shared
PROVENANCE = ("git_commit", "commit_source", "code_hash", "torch_version", "cuda_version", "cudnn_version",
              "driver_version", "device_name", "gpu_name", "args", "argv", "date")


def _start(out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = open(out.parent / f"{out.name}.stdout", "w")
    return subprocess.Popen([sys.executable, str(SCRIPT), "--out", str(out), "--device", "cpu", "--tiny", *extra],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)


def _records(out: Path) -> list[dict]:
    lines = (out / "records.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]  # every line whole: no half-written record


def _finish(proc: subprocess.Popen) -> int:
    try:
        return proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def _terminate_once_timing_starts(proc: subprocess.Popen, out: Path, sent: dict) -> None:
    """SIGTERM the run as soon as its first timing record is on disk (part b under way)."""
    deadline = time.time() + TIMEOUT
    path = out / "records.jsonl"
    while time.time() < deadline and proc.poll() is None:
        if path.exists() and '"kind": "timing"' in path.read_text():
            sent["at"] = time.time()
            proc.send_signal(signal.SIGTERM)
            return
        time.sleep(0.2)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("gpu-evidence")
    outs = {name: base / name for name in ("full", "cut", "tiny_budget", "sigterm")}
    procs = {
        "full": _start(outs["full"], "--test-inject-wrong"),
        "cut": _start(outs["cut"], "--test-stop-after-units", "6"),
        "tiny_budget": _start(outs["tiny_budget"], "--budget-s", "2"),
        "sigterm": _start(outs["sigterm"]),
    }
    if not _cuda_available():
        outs["no_gpu"] = base / "no_gpu"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        procs["no_gpu"] = subprocess.Popen([sys.executable, str(SCRIPT), "--out", str(outs["no_gpu"]), "--tiny"],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    sent: dict = {}
    watcher = threading.Thread(target=_terminate_once_timing_starts, args=(procs["sigterm"], outs["sigterm"], sent),
                               daemon=True)
    watcher.start()
    procs["sigterm_sent"] = sent
    yield outs, procs
    for proc in procs.values():
        if isinstance(proc, subprocess.Popen) and proc.poll() is None:
            proc.kill()


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@functools.lru_cache(maxsize=1)
def _module():
    spec = importlib.util.spec_from_file_location("gpu_evidence", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gpu_evidence", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _well_formed(out: Path) -> list[dict]:
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8, files
    assert {"records.jsonl", "log.txt", "summary.md"} <= set(files), files
    records = _records(out)
    for r in records:
        assert r["kind"] and r["part"] in ("a", "b", "c", "d", "-"), r["kind"]
        assert set(PROVENANCE) - {"cuda_version", "cudnn_version", "gpu_name", "torch_version", "device_name",
                                  "date"} <= set(r["provenance"]), r["kind"]
    assert records[-1]["kind"] == "end"
    return records


def test_full_dry_run_has_every_part_and_marks_the_wrong_implementation_invalid(runs):
    outs, procs = runs
    out = outs["full"]
    assert _finish(procs["full"]) == 0, (out.parent / "full.stdout").read_text()[-3000:]
    records = _well_formed(out)
    assert {"runtime_m100.png", "runtime_wiki.png", "training.png", "baseline-cpu.json"} <= {
        p.name for p in out.iterdir()}
    by_kind = {}
    for r in records:
        by_kind.setdefault(r["kind"], []).append(r)
    assert by_kind["end"][-1]["status"] == "complete"
    header = by_kind["header"][0]
    for key in PROVENANCE:
        assert key in header["provenance"], key
    assert header["provenance"]["driver_version"] == "unknown"  # no nvidia-smi here: said, not guessed
    assert header["provenance"]["argv"][:2] == ["--out", str(out)]

    # a: every implementation in the registry is accounted for; cuda-graph cannot run on a CPU
    impls = {r["impl"]: r for r in by_kind["implementation"]}
    assert impls["cuda-graph"]["available"] is False and "CUDA" in impls["cuda-graph"]["reason"]
    assert impls["fast"]["available"] is True and impls["wrong-test"]["available"] is True
    checks = by_kind["check"]
    for impl in ("fast", "fused", "wavefront"):
        mine = [c for c in checks if c["impl"] == impl and c["check"] == "equivalence"]
        assert mine and all(c["passed"] for c in mine), impl
    fast = [c for c in checks if c["impl"] == "fast" and c["check"] == "equivalence"]
    assert {c["config"] for c in fast} == {"2d", "2d-m", "2d-f", "3d", "3d-ln", "3d-cn"}
    assert {(c["depth"], c["dtype"]) for c in fast} == {(1, "float32"), (3, "float32"), (1, "float64"),
                                                        (3, "float64")}
    assert all(c["max_rel_error"] <= 1e-9 for c in fast if c["dtype"] == "float64")
    assert any("grad h0" in name for name in fast[0]["errors"])  # the state's gradients are compared too
    wrong = [c for c in checks if c["impl"] == "wrong-test"]
    assert wrong and not any(c["passed"] for c in wrong)
    assert [a["verdict"] for a in by_kind["audit"]] == ["separable"] * len(by_kind["audit"]) == ["separable"] * 8

    # b: every configuration and depth at both sizes; times, counts and validity per record
    timings = by_kind["timing"]
    for size in ("m100", "wiki"):
        got = {(t["config"], t["depth"]) for t in timings
               if t["size"] == size and t["implementation"] not in ("wrong-test", "triton")}
        assert got == {(c, d) for c in ("slstm", "2d", "2d-m", "2d-f", "3d", "3d-ln", "3d-cn") for d in (1, 3)}
    expected = {"fused", "wavefront", "fast", "eager", "wrong-test"}
    if HAVE_TRITON:
        # Issue 9: the dry run checks and times the triton implementation too, through Triton's
        # CPU interpreter (the script switches it on), on a small subset.
        expected.add("triton")
        checked = [c for c in by_kind["check"] if c["impl"] == "triton"]
        assert checked and all(c["passed"] for c in checked)
        assert {(t["config"], t["depth"]) for t in timings if t["implementation"] == "triton"} == {("2d", 1), ("2d", 3)}
    assert {t["implementation"] for t in timings} == expected
    for t in timings:
        assert t["ms_per_step"] > 0 and len(t["samples"]) == t["repeats"] >= 1
        assert t["launches_per_step"] > 0 and "CPU" in t["launch_unit"] and t["kernels_per_step"] is None
        assert math.isfinite(t["fingerprint"]["loss"]) and isinstance(t["valid"], bool)
        if t["implementation"] == "wrong-test":
            assert t["valid"] is False and "failed" in t["invalid_reason"]
        else:
            assert t["valid"] is True and t["invalid_reason"] is None, t["invalid_reason"]
    assert {t["implementation"] for t in timings if t["size"] == "wiki"} == {"fused", "wavefront", "fast", "eager"}
    wiki_2d = next(t for t in timings if t["size"] == "wiki" and t["config"] == "2d" and t["depth"] == 1)
    assert wiki_2d["channels"] > 8  # the budget solver chose M, not the small size

    # c: four training runs through train(), each with its outcome and throughput
    trains = {t["key"]: t for t in by_kind["training"]}
    assert set(trains) == {"memorization-3d-cn", "addition-3d-cn", "memorization-slstm", "addition-slstm"}
    for t in trains.values():
        assert t["status"] == "ok" and t["samples_seen"] > 0 and t["samples_per_s"] > 0 and t["history"]
        assert t["stop"] in ("solved", "sample cap", "time cap")
    assert trains["memorization-3d-cn"]["implementation"] == "fast"  # the fastest valid tLSTM path here

    # d: a regress baseline the gate can read, and the summary
    baseline = json.loads((out / "baseline-cpu.json").read_text())
    assert set(baseline["modes"]) == {"quick", "full"} and baseline["device_kind"] == "cpu"
    summary = (out / "summary.md").read_text()
    for heading in ("## a. Correctness", "## b. Runtime at M = 100", "## b. Runtime at the Wikipedia",
                    "## Targets", "## c. Training", "## d. Regress baseline"):
        assert heading in summary, heading
    assert "INVALID" in summary and "FAILED: `wrong-test`" in summary


def test_budget_running_out_keeps_a_partial_valid_output_and_says_so(runs):
    outs, procs = runs
    out = outs["cut"]
    assert _finish(procs["cut"]) == 0, (out.parent / "cut.stdout").read_text()[-3000:]
    records = _well_formed(out)
    units = [r for r in records if r["kind"] == "unit"]
    done = [u["unit"] for u in units if u["status"] == "done"]
    assert len(done) == 6 and done[0] == "a:implementations"
    skipped = [u for u in units if u["status"] == "skipped_budget"]
    assert skipped and all("left" in u["note"] for u in skipped)
    assert records[-1]["status"] == "budget" and records[-1]["units_skipped"]
    assert any(r["kind"] == "check" for r in records)  # what ran before the cut is kept
    assert not any(r["kind"] == "training" for r in records)
    assert "STOPPED BY THE TIME BUDGET" in (out / "summary.md").read_text()


def test_a_budget_too_small_for_anything_still_ends_cleanly(runs):
    outs, procs = runs
    out = outs["tiny_budget"]
    started = time.time()
    assert _finish(procs["tiny_budget"]) == 0, (out.parent / "tiny_budget.stdout").read_text()[-3000:]
    records = _well_formed(out)
    assert records[-1]["status"] == "budget"
    assert not any(r["kind"] in ("timing", "training") for r in records)
    assert "STOPPED BY THE TIME BUDGET" in (out / "summary.md").read_text()
    assert time.time() - started < TIMEOUT


def test_sigterm_stops_the_run_and_keeps_what_was_measured(runs):
    outs, procs = runs
    out, proc = outs["sigterm"], procs["sigterm"]
    rc = _finish(proc)
    assert "at" in procs["sigterm_sent"], "the run ended before part b, so it could not be interrupted there"
    assert rc == 143, (out.parent / "sigterm.stdout").read_text()[-3000:]
    records = _well_formed(out)
    assert records[-1]["status"] == "interrupted"
    assert any(r["kind"] == "timing" for r in records)
    assert not any(r["kind"] == "baseline" for r in records)
    assert "INTERRUPTED" in (out / "summary.md").read_text()


def test_out_must_be_empty(tmp_path):
    (tmp_path / "old.txt").write_text("x")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--device", "cpu", "--tiny"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2 and "not empty" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.txt"]


def test_without_a_gpu_device_cuda_is_one_clean_error(runs):
    outs, procs = runs
    if "no_gpu" not in procs:
        pytest.skip("this machine has a GPU")
    out = outs["no_gpu"]
    assert _finish(procs["no_gpu"]) == 2
    records = _well_formed(out)
    assert records[-1]["status"] == "error"
    summary = (out / "summary.md").read_text()
    assert "ERROR before any measurement" in summary and "CUDA is not available" in summary


def test_device_events_are_counted_by_kind():
    ev = _module()
    rows = [("void gemv_kernel<float>(...)", "cuda", None), ("Memcpy HtoD (Pageable -> Device)", "cuda", None),
            ("Memset (Device)", "cuda", None), ("elementwise_kernel", "cuda", "kernel"),
            ("cudaLaunchKernel", "cpu", "cuda_runtime"), ("cuLaunchKernel", "cpu", "cuda_driver"),
            ("cudaGraphLaunch", "cpu", "cuda_runtime"), ("cudaStreamSynchronize", "cpu", "cuda_runtime"),
            ("aten::mm", "cpu", "cpu_op")]
    assert ev.count_device_events(rows) == {"kernels_total": 2, "memops_total": 2,
                                            "host_kernel_launches_total": 2, "graph_launches": 1}
    # a profiler that recorded no API calls: the host counts are unknown, not zero
    assert ev.count_device_events(rows[:4])["host_kernel_launches_total"] is None


def _check(impl, config, passed, **extra):
    return {"kind": "check", "check": "equivalence", "impl": impl, "config": config, "depth": 3,
            "dtype": "float64", "passed": passed, "worst": "y", "max_rel_error": 0.5 if passed is False else 0.0,
            **extra}


def test_a_timing_is_valid_only_with_a_passed_check_of_its_configuration():
    ev = _module()
    impl = {"kind": "implementation", "family": "tlstm", "available": True}
    st = ev.State([{**impl, "impl": "fast"}, {**impl, "impl": "bad"}, {**impl, "impl": "partial"},
                   _check("fast", "2d", True), _check("bad", "2d", True), _check("bad", "3d", False),
                   _check("partial", "2d", True), _check("partial", "3d", None, unsupported="no 3D")])
    assert st.correctness("fast", "2d") == ("passed", None)
    assert st.correctness("fast", "3d")[0] == "unchecked"  # no check of 3d ran: not valid
    verdict, reason = st.correctness("bad", "2d")  # one failure anywhere invalidates every timing
    assert verdict == "failed" and "3d L=3 float64" in reason
    assert st.correctness("partial", "3d")[0] == "unchecked"  # unsupported is not a pass
    assert st.correctness("eager", "3d")[0] == "oracle"
    assert (st.status("fast"), st.status("bad"), st.status("partial")) == ("passed", "failed", "passed")
    assert st.excluded() == set()


def test_an_implementation_a_unit_died_in_is_not_used_again():
    ev = _module()
    impl = {"kind": "implementation", "family": "tlstm", "available": True}
    unit = {"kind": "unit", "part": "b"}
    st = ev.State([{**impl, "impl": "fast"}, {**impl, "impl": "cuda-graph"}, {**impl, "impl": "triton"},
                   _check("fast", "2d", True), _check("cuda-graph", "2d", True), _check("triton", "2d", True),
                   {**unit, "unit": "b1:m100:2d:fast+cuda-graph", "status": "done"},
                   {**unit, "unit": "b1x:m100:2d:triton", "status": "crashed"},  # a segfault: no record names it
                   {**unit, "unit": "a:check:cuda-graph", "status": "failed"}])
    assert st.excluded() == {"triton"}
    assert st.status("cuda-graph") == "failed" and st.correctness("cuda-graph", "2d")[0] == "failed"
    st.add({"kind": "timing_error", "unit": "b2:wiki:2d:fast+triton", "implementation": "fast"})
    st.add({**unit, "unit": "b2:wiki:2d:fast+triton", "status": "failed"})  # a sticky error, named
    assert st.excluded() == {"triton", "fast"}


def test_budget_starts_only_what_fits():
    ev = _module()
    budget = ev.Budget(deadline=time.time() + 100, tail=10)
    assert 89 < budget.left() <= 90
    assert budget.fits(60) and not budget.fits(80)  # 80 s x the safety factor is over 90
    assert not budget.fits(60, reserve_s=20)
    assert budget.fits(80, safety=1.0)
