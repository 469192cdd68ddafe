"""The GPU evidence script (issue 8) as a CPU dry run: it must keep working without a GPU.

Four runs of ``benchmarks/gpu_evidence.py --device cpu --tiny`` start together (they are
subprocesses, as on the device) and each test checks one of them:

* a whole run with a deliberately wrong implementation injected (``--test-inject-wrong``)
  and one that kills its process when timed (``--test-inject-failing``): every part leaves
  well-formed records, the wrong one's timings are marked invalid, the failing one fails
  alone (the other implementations of its timing group are timed and recorded);
* a run whose budget runs out after a few units: a partial, valid output that says so;
* a run with a budget too small for anything: it still ends cleanly with a summary;
* a run stopped by SIGTERM part-way: exit 143, what was measured is kept.
"""

from __future__ import annotations

import ast
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
if str(ROOT) not in sys.path:  # the evidence package lives in benchmarks/, outside the installed package
    sys.path.insert(0, str(ROOT))

from benchmarks.evidence import correctness, plan, timing  # noqa: E402
from tlstm_bench.timing import implementations_of  # noqa: E402

HAVE_TRITON = importlib.util.find_spec("triton") is not None
SCRIPT = ROOT / "benchmarks" / "gpu_evidence.py"
TIMEOUT = 600  # generous: the machine running the tests may be shared (each run starts ~12 processes)
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
        # a budget no shared machine runs out of: this run must complete
        "full": _start(outs["full"], "--test-inject-wrong", "--test-inject-failing", "--budget-s", "900"),
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


def _well_formed(out: Path) -> list[dict]:
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8, files
    assert {"records.jsonl", "log.txt", "summary.md"} <= set(files), files
    records = _records(out)
    for r in records:
        assert r["kind"] and r["part"] in ("a", "b", "c", "d", "e", "-"), r["kind"]
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
    prov = header["provenance"]
    assert prov["allow_tf32_matmul"] is False and prov["allow_tf32_cudnn"] is False  # as every process measures

    # a: every implementation in the registry is accounted for; cuda-graph cannot run on a CPU
    impls = {r["impl"]: r for r in by_kind["implementation"]}
    assert impls["cuda-graph"]["available"] is False and "CUDA" in impls["cuda-graph"]["reason"]
    assert impls["cuda-graph"]["graphed"] is True  # probed in a process of its own (a:graph-step)
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

    # b: every timed configuration and depth at both sizes; times, counts and validity per record
    timings = by_kind["timing"]
    for size in ("m100", "wiki"):
        got = {(t["config"], t["depth"]) for t in timings
               if t["size"] == size and t["implementation"] not in ("wrong-test", "triton")}
        assert got == {(c, d) for c in ("slstm", "2d") for d in (1, 3)}
    assert all(t["isolated"] and t["interleaved"] for t in timings)  # through measure_cases, one process each
    slstm = set(implementations_of("slstm")) - {"loop"}  # fused, wavefront, and any registered later (cudnn)
    expected = slstm | {"fast", "eager", "wrong-test"}
    if HAVE_TRITON:
        # Issue 9: the dry run checks the triton implementation too, through Triton's CPU
        # interpreter (the script switches it on), on a small subset; it does not time it there.
        checked = [c for c in by_kind["check"] if c["impl"] == "triton"]
        assert checked and all(c["passed"] for c in checked)
    assert {t["implementation"] for t in timings} == expected
    for t in timings:
        assert t["ms_per_step"] > 0 and len(t["samples"]) == t["repeats"] >= 1
        assert t["launches_per_step"] > 0 and "CPU" in t["launch_unit"] and t["kernels_per_step"] is None
        assert math.isfinite(t["fingerprint"]["loss"]) and isinstance(t["valid"], bool)
        if t["implementation"] == "wrong-test":
            assert t["valid"] is False and "failed" in t["invalid_reason"]
        else:
            assert t["valid"] is True and t["invalid_reason"] is None, t["invalid_reason"]
    assert {t["implementation"] for t in timings if t["size"] == "wiki"} == slstm | {"fast"}
    wiki_2d = next(t for t in timings if t["size"] == "wiki" and t["config"] == "2d" and t["depth"] == 1)
    assert wiki_2d["channels"] > 8  # the budget solver chose M, not the small size

    # e: b1's cases re-timed through `tlstm-bench time`, the ratio recorded per case
    (check,) = by_kind["time_check"]
    assert check["returncode"] == 0 and "--json" in check["command"] and "--no-store" in check["command"]
    assert [r["depth"] for r in check["rows"]] == [1, 3]
    assert all(r["ratio"] > 0 and r["time_ms"] > 0 for r in check["rows"])

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
                    "## Targets", "## c. Training", "## d. Regress baseline", "## e. The script against",
                    "## Timing failures"):
        assert heading in summary, heading
    assert "INVALID" in summary and "FAILED: `wrong-test`" in summary


def test_a_failing_implementation_fails_alone(runs):
    """``failing-test`` passes part a, then kills its process in every timed run: its cases are
    recorded as its failures, the other implementation of the same group is timed, the run
    goes on (and does not time it again)."""
    outs, procs = runs
    assert _finish(procs["full"]) == 0
    records = _records(outs["full"])
    errors = [r for r in records if r["kind"] == "timing_error"]
    assert errors and {r["implementation"] for r in errors} == {"failing-test"}
    (unit,) = {r["unit"] for r in errors}
    assert unit.startswith("b1:m100:2d:") and "fast" in unit  # one group: fast and failing-test together
    assert {r["depth"] for r in errors} == {1, 3} and all("died" in r["error"] for r in errors)
    same_group = [r for r in records if r["kind"] == "timing" and r.get("unit") == unit]
    assert {(r["implementation"], r["depth"]) for r in same_group} == {("fast", 1), ("fast", 3)}
    assert all(r["valid"] for r in same_group)
    units = {r["unit"]: r["status"] for r in records if r["kind"] == "unit"}
    assert units[unit] == "done"  # the unit, and the run, go on
    later = [u for u in units if u.startswith("b") and "failing-test" in u and u != unit]
    assert not later  # excluded from every later group
    assert records[-1]["status"] == "complete"


def test_budget_running_out_keeps_a_partial_valid_output_and_says_so(runs):
    outs, procs = runs
    out = outs["cut"]
    assert _finish(procs["cut"]) == 0, (out.parent / "cut.stdout").read_text()[-3000:]
    records = _well_formed(out)
    units = [r for r in records if r["kind"] == "unit"]
    done = [u["unit"] for u in units if u["status"] == "done"]
    assert len(done) == 6 and done[:2] == ["d:regress-baseline", "a:implementations"]  # the baseline first
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
    assert any(r["kind"] == "baseline" for r in records)  # part d runs first
    assert not any(r["kind"] == "time_check" for r in records)  # part e, last, did not run
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
    rows = [("void gemv_kernel<float>(...)", "cuda", None), ("Memcpy HtoD (Pageable -> Device)", "cuda", None),
            ("Memset (Device)", "cuda", None), ("elementwise_kernel", "cuda", "kernel"),
            ("cudaLaunchKernel", "cpu", "cuda_runtime"), ("cuLaunchKernel", "cpu", "cuda_driver"),
            ("cudaGraphLaunch", "cpu", "cuda_runtime"), ("cudaStreamSynchronize", "cpu", "cuda_runtime"),
            ("aten::mm", "cpu", "cpu_op")]
    assert timing.count_device_events(rows) == {"kernels_total": 2, "memops_total": 2,
                                            "host_kernel_launches_total": 2, "graph_launches": 1}
    # a profiler that recorded no API calls: the host counts are unknown, not zero
    assert timing.count_device_events(rows[:4])["host_kernel_launches_total"] is None


def _check(impl, config, passed, **extra):
    return {"kind": "check", "check": "equivalence", "impl": impl, "config": config, "depth": 3,
            "dtype": "float64", "passed": passed, "worst": "y", "max_rel_error": 0.5 if passed is False else 0.0,
            **extra}


def test_a_timing_is_valid_only_with_a_passed_check_of_its_configuration():
    impl = {"kind": "implementation", "family": "tlstm", "available": True}
    st = plan.State([{**impl, "impl": "fast"}, {**impl, "impl": "bad"}, {**impl, "impl": "partial"},
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
    impl = {"kind": "implementation", "family": "tlstm", "available": True}
    unit = {"kind": "unit", "part": "b"}
    st = plan.State([{**impl, "impl": "fast"}, {**impl, "impl": "cuda-graph"}, {**impl, "impl": "triton"},
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
    budget = plan.Budget(deadline=time.time() + 100, tail=10)
    assert 89 < budget.left() <= 90
    assert budget.fits(60) and not budget.fits(80)  # 80 s x the safety factor is over 90
    assert not budget.fits(60, reserve_s=20)
    assert budget.fits(80, safety=1.0)


def test_the_time_check_compares_each_case_with_times_record():
    rows = [{"config": "2d", "implementation": "fast", "depth": d, "ms_per_step": ms, "channels": 100,
             "seq_len": 100, "dtype": "float32"} for d, ms in ((1, 0.30), (4, 0.33), (10, 0.40))]
    got = {1: {"ms_per_step": 0.30}, 4: {"ms_per_step": 0.30}}  # L=10: time gave no record
    pairs = timing.compare_with_time(rows, got, 0.10)
    assert [p["agrees"] for p in pairs] == [True, False, False]
    assert pairs[1]["ratio"] == pytest.approx(1.1) and pairs[2]["ratio"] is None
    cmd = timing.time_command(rows, "cuda", 3, 7, 205)
    assert cmd[1:5] == ["-m", "tlstm_bench", "time", "2d"]
    for flag, value in (("--depths", "1,4,10"), ("--channels", "100"), ("--seq-len", "100"), ("--repeats", "7"),
                        ("--warmup", "3"), ("--implementation", "fast"), ("--vocab", "205"), ("--device", "cuda")):
        assert cmd[cmd.index(flag) + 1] == value, flag
    assert "--no-store" in cmd and "--json" in cmd and "--threads" not in cmd


def test_a_timing_failure_excludes_its_implementation_from_later_groups():
    impl = {"kind": "implementation", "family": "tlstm", "available": True}
    st = plan.State([{**impl, "impl": "fast"}, {**impl, "impl": "cuda-graph"}, _check("fast", "2d", True),
                   _check("cuda-graph", "2d", True)])
    assert st.excluded() == set()
    st.add({"kind": "timing_error", "unit": "b1:m100:2d:fast+cuda-graph", "implementation": "cuda-graph"})
    assert st.excluded() == {"cuda-graph"}  # its failure, not fast's, and the unit is not failed


def test_the_step_check_compares_the_loss_and_every_gradient_on_replay():
    """compare_graph_step, as a:graph-step runs it for ``cuda-graph`` on a GPU, here with CPU
    steps: ``fast`` agrees with ``eager`` after new data is copied into the input buffers,
    the deliberately wrong implementation does not."""
    from tlstm_bench.models import TLSTM_IMPLEMENTATIONS

    opts = dict(device="cpu", channels=6, vocab=7, seq_len=5, seed=5, tolerance=1e-9)
    right = correctness.compare_graph_step("fast", "3d-cn", 3, opts)
    assert right["passed"] and right["errors"]["loss (replay 2)"] <= 1e-12
    assert {k for k in right["errors"] if k.startswith("grad ")} >= {"grad w_y (replay 1)", "grad b_x (replay 2)"}
    correctness.install_wrong_implementation()
    try:
        wrong = correctness.compare_graph_step("wrong-test", "2d", 1, opts)
    finally:
        TLSTM_IMPLEMENTATIONS.pop("wrong-test")  # the registry is shared with every other test
    assert not wrong["passed"] and wrong["errors"]["loss (replay 1)"] > 1e-6


def test_the_evidence_package_keeps_its_functions_short():
    """Issue 23: a package whose functions are each under 60 lines (the script was 2,000 lines
    in one file with functions of up to 108)."""
    long = []
    for path in sorted((ROOT / "benchmarks" / "evidence").glob("*.py")) + [SCRIPT]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                long.append(f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not long, long


def test_the_graph_step_checks_run_in_processes_of_their_own_and_a_dying_one_fails_alone():
    """run_graph_checks as part a runs it for cuda-graph, here with CPU steps: right results come
    back from a spawned process; a process that dies (the failing implementation kills it, as
    a poisoned CUDA context would end it) fails its case, and a new process checks the rest."""
    import functools

    opts = dict(device="cpu", channels=4, vocab=5, seq_len=4, seed=5, tolerance=1e-9)
    items = [("2d", 1), ("3d", 1)]
    results, unavailable = correctness.run_graph_checks("fast", items, opts, 240, correctness.prepare_process)
    assert unavailable is None and [r["passed"] for r in results] == [True, True]
    dying = functools.partial(correctness.prepare_process, failing=True, seq_len=4)
    results, _ = correctness.run_graph_checks("failing-test", items, opts, 240, dying)
    assert [(r["config"], r["passed"]) for r in results] == [("2d", False), ("3d", False)]
    assert all("died" in r["error"] for r in results)  # one process each: the second was not left unchecked


def test_commit_argument_wins_over_a_stale_git(monkeypatch):
    """The second H100 session's device copy carried a .git at an older commit than its
    files: --commit is what the caller sent, so it is recorded; git's answer is kept beside."""
    import importlib

    from benchmarks.evidence import provenance

    results_provenance = importlib.import_module("tlstm_bench.results.provenance")  # the module, not the function

    monkeypatch.setattr(results_provenance, "git_info", lambda: {"git_commit": "f6f4aed", "git_dirty": False})
    info = provenance.code_provenance("dd8b68f")
    assert (info["git_commit"], info["commit_source"], info["git_commit_seen"]) == ("dd8b68f", "--commit", "f6f4aed")
    assert info["git_dirty"] is None
    same = provenance.code_provenance("f6f4aed")
    assert same["git_commit"] == "f6f4aed" and "git_commit_seen" not in same and same["git_dirty"] is False
    assert provenance.code_provenance(None)["commit_source"] == "git"
