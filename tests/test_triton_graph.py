"""``triton-graph``: the ``triton`` kernels' whole step (forward + loss + backward) captured as
one CUDA graph and replayed (docs/triton.md, "A CUDA graph around the kernels").

On a CPU: the vocabulary, the planner and the CLI (left out of ``all``, a one-line error when
asked for, ``--precision`` accepted), what the timing code does with a capture that fails, and
that the triton path after its first call does nothing a capture cannot hold (no host sync, no
host-to-device copy: the kernels under Triton's interpreter). With CUDA: the captured step
equals the uncaptured one on replays with new data.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from typer.testing import CliRunner

from tlstm_bench import vocab
from tlstm_bench.cli import app
from tlstm_bench.errors import UserError
from tlstm_bench.models import TLSTM_IMPLEMENTATIONS
from tlstm_bench.models.cuda_graph import CaptureFailed, check_cuda
from tlstm_bench.timing import Case, StepRun, implementations_of, measure_cases, plan_cases

NO_CUDA = not torch.cuda.is_available()


def test_triton_graph_is_a_graphed_cuda_implementation_that_takes_a_precision():
    assert vocab.GRAPHED_IMPLEMENTATIONS["triton-graph"] == "triton"
    assert "triton-graph" in vocab.CUDA_IMPLEMENTATIONS and "triton-graph" in vocab.PRECISION_IMPLEMENTATIONS
    assert vocab.check_precision("tf32x3", "triton-graph") == "tf32x3"
    assert "triton-graph" in implementations_of("tlstm") and "triton-graph" not in implementations_of("slstm")
    assert "triton-graph" not in TLSTM_IMPLEMENTATIONS  # a way to run a step, not a loop of the model


def test_the_planner_leaves_it_out_on_a_cpu_and_keeps_it_on_cuda():
    assert "triton-graph" not in {c.implementation for c in plan_cases(["2d"], [1], "all", "cpu")}
    assert "triton-graph" in {c.implementation for c in plan_cases(["2d"], [1], "all", "cuda")}
    assert {c.implementation for c in plan_cases(["2d", "slstm"], [1], "triton-graph", "cpu")} == {"triton-graph"}
    with pytest.raises(UserError, match="triton-graph"):  # the known names are listed
        plan_cases(["2d"], [1], "no-such-loop", "cpu")


def test_a_sweep_gives_it_to_the_tlstms_and_leaves_it_out_on_a_cpu(tmp_path):
    from sweep_helpers import write_spec
    from tlstm_bench.sweeps.grid import expand, left_out
    from tlstm_bench.sweeps.spec import load_spec

    spec = load_spec(write_spec(tmp_path, """
        task = "runtime"
        configs = ["slstm", "2d", "3d-cn"]
        depths = [1, 10]
        channels = 100
        device = "cuda"
        [runtime]
        precision = "tf32x3"
        implementations = ["triton-graph"]
        """))
    cells = expand(spec, code="v", machine={})
    assert {(c.spec["config"], c.spec["implementation"]) for c in cells} == {("2d", "triton-graph"),
                                                                             ("3d-cn", "triton-graph")}
    assert {c.spec["precision"] for c in cells} == {"tf32x3"}
    assert left_out(spec, "cpu") == {"triton-graph": 4} and expand(spec, code="v", device="cpu", machine={}) == []


@pytest.mark.parametrize("name", ["triton-graph", "cuda-graph"])
def test_the_cuda_errors_name_the_implementation_and_what_runs_on_a_cpu(name):
    """Without CUDA, or with the model on the CPU: one line naming it and 'fast', what a CPU runs
    (not 'triton', which needs a GPU too)."""
    with pytest.raises(UserError, match=f"^implementation '{name}' needs [^\n]*on a CPU use implementation 'fast'$"):
        check_cuda("cpu", name)


@pytest.mark.skipif(not NO_CUDA, reason="checks the behaviour where CUDA is absent")
@pytest.mark.parametrize("precision", ["ieee", "tf32"])
def test_asked_on_a_cpu_it_is_one_line_and_exit_2(precision):
    with pytest.raises(UserError, match="implementation 'triton-graph' needs CUDA.*use implementation 'fast'"):
        StepRun(Case("2d", 1, "triton-graph"), channels=3, budget=None, vocab=5, input_size=None, output_size=None,
                seq_len=3, device=torch.device("cpu"), dtype=torch.float32, seed=0, precision=precision)
    result = CliRunner().invoke(app, ["time", "2d", "--depths", "1", "--channels", "4", "--seq-len", "3",
                                      "--implementation", "triton-graph", "--precision", precision, "--no-store"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("error: implementation 'triton-graph' needs CUDA"), result.output
    assert "use implementation 'fast'" in result.output and "Traceback" not in result.output
    assert "precision" not in lines[-1]  # the precision is accepted: the error is the device's


class _FakeCuda:
    """Just enough of ``torch.cuda`` for GraphedStep on a CPU, with a capture that fails as a
    launch refused inside a capture does: the launch raises, then ending the capture raises too."""

    class Stream:
        def __init__(self, name="a side stream"):
            self.name = name

        def wait_stream(self, other):
            pass

    class _Capture:
        def __enter__(self):
            return None

        def __exit__(self, *exc):
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")

    def __init__(self):
        self.set_to = []
        self.caller = self.Stream("the caller's stream")

    def stream(self, side):
        return contextlib.nullcontext()

    def current_stream(self):
        return self.caller

    def synchronize(self):
        pass

    def CUDAGraph(self):  # noqa: N802 - torch's name
        return object()

    def graph(self, graph):
        return self._Capture()

    def set_stream(self, stream):
        self.set_to.append(stream)


def test_a_failed_capture_says_why_first_and_what_to_use_and_restores_the_stream(monkeypatch):
    """CaptureFailed carries the capture's first error (the launch that was refused), not the
    error of ending the capture that follows it, and the caller's stream is current again."""
    from tlstm_bench.models import cuda_graph

    fake = _FakeCuda()
    monkeypatch.setattr(cuda_graph, "torch", type("T", (), {"cuda": fake}))
    monkeypatch.setattr(cuda_graph, "check_cuda", lambda device, implementation: None)
    param = torch.ones(2, requires_grad=True)
    calls = []

    def loss_fn():
        calls.append(1)
        if len(calls) > cuda_graph.GRAPH_WARMUP:  # the capture
            raise RuntimeError("Triton Error [CUDA]: operation not permitted when stream is capturing\nmore")
        return (param * 2).sum()

    with pytest.raises(CaptureFailed) as info:
        cuda_graph.GraphedStep(loss_fn, [param], implementation="triton-graph", context=lambda: "the kernels")
    assert str(info.value) == ("implementation 'triton-graph' could not capture its step as one CUDA graph (the "
                               "kernels): RuntimeError: Triton Error [CUDA]: operation not permitted when stream is "
                               "capturing; use implementation 'triton'")
    assert fake.set_to == [fake.caller]


def _capture_fails(model, z, state):
    """A loop whose capture fails, leaving the process broken for the next case (as a failed
    capture can: the stream and torch's RNG state stay as the capture left them)."""
    _STATE["broken"] = True
    raise CaptureFailed("implementation 'capfail' could not capture its step as one CUDA graph: "
                        "RuntimeError: operation not permitted when stream is capturing (simulated)")


def _fast_unless_broken(model, z, state):
    if _STATE["broken"]:
        raise RuntimeError("CUDA error: operation failed due to a previous error during capture (simulated)")
    return _FAST(model, z, state)


_STATE = {"broken": False}
_FAST = TLSTM_IMPLEMENTATIONS["fast"]


def test_a_failed_capture_is_its_case_s_one_line_and_names_itself_in_the_next_failure(monkeypatch):
    monkeypatch.setitem(TLSTM_IMPLEMENTATIONS, "capfail", _capture_fails)
    monkeypatch.setitem(TLSTM_IMPLEMENTATIONS, "fast", _fast_unless_broken)
    monkeypatch.setitem(_STATE, "broken", False)
    failed = {}
    records = measure_cases([Case("2d", 1, "capfail"), Case("2d", 2, "fast")], channels=3, seq_len=3, repeats=2,
                            warmup=1, isolate=False, on_failure=failed.__setitem__)
    assert records == []
    first, second = failed[Case("2d", 1, "capfail")], failed[Case("2d", 2, "fast")]
    assert first.startswith("CaptureFailed: implementation 'capfail' could not capture") and "\n" not in first
    assert second.endswith("(after the failed graph capture of 2d L=1 in this process)") and "\n" not in second


class _HostSyncs(TorchDispatchMode):
    """Records the aten ops that would synchronise the host with a CUDA device (a value read back:
    .item(), .tolist(), bool(), nonzero) or copy host data to it (torch.tensor of Python data)."""

    SYNCING = ("_local_scalar_dense", "nonzero", "lift_fresh", "equal", "is_nonzero", "masked_select")

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        if name in self.SYNCING or (name in ("_to_copy", "copy_") and _crosses_devices(args, kwargs or {})):
            self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


def _crosses_devices(args, kwargs) -> bool:
    devices = {a.device.type for a in args if isinstance(a, torch.Tensor)}
    if "device" in kwargs and kwargs["device"] is not None:
        devices.add(torch.device(kwargs["device"]).type)
    return len(devices) > 1


@pytest.mark.triton
@pytest.mark.parametrize("config, depth", [("2d", 2), ("3d-cn", 2)])
def test_after_its_first_call_the_triton_step_does_nothing_a_capture_cannot_hold(config, depth, monkeypatch):
    """The second forward + loss + backward of the triton path reads no value back to the host,
    copies nothing from the host, and does not rebuild the index maps (cached per model in
    ``launch._maps``): what a CUDA graph capture needs. Checked here at the aten level (the
    kernels under Triton's interpreter, whose own numpy work is not aten)."""
    pytest.importorskip("triton")
    from tlstm_bench.models.triton_tlstm import launch

    run = StepRun(Case(config, depth, "triton"), channels=4, budget=None, vocab=5, input_size=None, output_size=None,
                  seq_len=3, device=torch.device("cpu"), dtype=torch.float32, seed=0)
    run()  # the first call builds and caches the maps (a host round trip, outside any capture)

    def rebuilt(*args):
        raise AssertionError("the index maps were rebuilt after the first call")

    monkeypatch.setattr(launch, "_inverse_maps", rebuilt)
    with _HostSyncs() as mode:
        run()
    assert mode.seen == []
    assert run.model.triton_last["menu"]  # what ran, for the record (set again by each call)


@pytest.mark.skipif(NO_CUDA, reason="triton-graph needs CUDA")
@pytest.mark.triton
@pytest.mark.parametrize("config", ["2d", "3d-cn"])
@pytest.mark.parametrize("depth", [1, 3])
def test_the_captured_triton_step_equals_the_uncaptured_one_on_replay(config, depth):
    """float32: the loss and every parameter gradient of the replayed graph against ``triton``
    run eagerly, after new data is copied into both steps' inputs (twice); and the record's
    ``kernels`` description is the same."""
    pytest.importorskip("triton")

    def run(impl):
        return StepRun(Case(config, depth, impl), channels=8, budget=None, vocab=7, input_size=None,
                       output_size=None, seq_len=5, device=torch.device("cuda"), dtype=torch.float32, seed=3)

    graphed, plain = run("triton-graph"), run("triton")
    graphed()  # captures
    for data in range(2):
        gen = torch.Generator().manual_seed(data)
        x = torch.randint(0, 7, graphed.x.shape, generator=gen).cuda()
        target = torch.randint(0, 7, graphed.target.shape, generator=gen).cuda()
        for r in (graphed, plain):
            r.x.copy_(x)
            r.target.copy_(target)
            r()
        torch.testing.assert_close(graphed.last_loss, plain.last_loss, rtol=1e-5, atol=1e-7)
        for name, g in plain.gradients().items():
            torch.testing.assert_close(graphed.gradients()[name], g, rtol=1e-5, atol=1e-7, msg=name)
    assert graphed.model.triton_last == plain.model.triton_last


# ---- the issue 28 device session's graph variants (benchmarks/triton_session.py) ----------------
@pytest.mark.triton
def test_the_session_s_graph_check_catches_a_step_that_does_not_read_its_new_input(monkeypatch):
    """graph_check compares the loss and every gradient with float64 eager after each of two
    replays on new data. Without CUDA the uncaptured triton step stands in for the graph: it
    passes; a stand-in that replays nothing new (a capture that lost its inputs) fails."""
    pytest.importorskip("triton")
    from benchmarks import triton_session as ts

    def uncaptured(v, device, seq_len=None):
        run = StepRun(Case(v.config, v.depth, "triton"), channels=v.channels, budget=None, vocab=ts.VOCAB,
                      input_size=None, output_size=None, seq_len=seq_len, device=torch.device(device),
                      dtype=torch.float32, seed=0)
        return run, run

    def stale(v, device, seq_len=None):
        run, _ = uncaptured(v, device, seq_len)
        return run, lambda: run.last_loss is None and run()  # only the first call runs

    v = ts.Variant("m100", "3d-cn", 2, "triton-graph", channels=4, seq_len=3)
    monkeypatch.setattr(ts, "graph_step", uncaptured)
    right = ts.graph_check(v, "cpu")
    assert right["check_ok"] and right["check_max_rel"] < 1e-5, right
    monkeypatch.setattr(ts, "graph_step", stale)
    wrong = ts.graph_check(v, "cpu")
    assert not wrong["check_ok"] and wrong["check_max_rel"] > 1e-3, wrong


def test_the_session_s_correctness_verdict_never_says_met_of_nothing():
    """The float64 check's line counts what it covers: a session whose triton variants all
    failed before their check (the CPU interpreter with Triton 3.6 and NumPy 2.5 once did) is
    UNMEASURED, not "MET ... all"; one wrong variant makes it MISSED and names it."""
    from benchmarks import triton_session as ts

    def variant(depth, **rec):
        v = ts.Variant("m100", "2d", depth)
        v.rec = rec
        return v

    broken = [variant(1, status="failed", error="InterpreterError"), variant(10, status="failed")]
    assert ts.correctness(broken).startswith("UNMEASURED: ")
    assert ts.correctness(broken).endswith("0 of 2 checked right; 2 failed before the check")
    right = [variant(1, check_ok=True), variant(10, status="failed")]
    assert ts.correctness(right) == ("MET: every timed triton variant right against float64 eager: "
                                     "1 of 2 checked right; 1 failed before the check")
    wrong = right + [variant(4, check_ok=False, wrong=True)]
    assert ts.correctness(wrong) == ("MISSED: every timed triton variant right against float64 eager: "
                                     "wrong: m100 2d L=4 triton:auto:ieee")
    assert ts.correctness([ts.Variant("m100", "2d", 1, "fast")]).startswith("UNMEASURED: ")


def test_the_session_times_tensor_cores_at_10m_and_reports_them_beside_ieee_outside_the_targets():
    """At 10M the plan times 2d and 3d-cn at L = 10 in tf32x3 beside ieee, profiled both; the
    targets stay ieee (a faster tf32x3 does not meet them) and a TENSOR CORES line gives the
    ratio, only where both precisions ran right."""
    from benchmarks import triton_session as ts

    tc = [v for v in ts.plan("cuda") if v.group == "10m" and v.precision != "ieee"]
    assert [(v.config, v.depth, v.precision, v.budget) for v in tc] == [("2d", 10, "tf32x3", "10M"),
                                                                        ("3d-cn", 10, "tf32x3", "10M")]
    assert all(ts.profiled(v, "cuda") for v in tc)

    def timed(config, kind, us, precision="ieee", **rec):
        v = ts.Variant("10m", config, 10, kind, channels=None, budget="10M", precision=precision)
        v.rec = dict(status="ok", us_per_step=us, **rec)
        return v

    done = [timed("2d", "triton", 450.0), timed("2d", "triton", 150.0, "tf32x3"), timed("slstm", "cudnn", 400.0),
            timed("3d-cn", "triton", 1900.0), timed("3d-cn", "triton", 100.0, "tf32x3", wrong=True)]
    notes = ts.precision_notes(done)
    assert notes == ["TENSOR CORES: 10M 2d L=10: 150.0 us (triton:auto:tf32x3) against 450.0 us (triton:auto:ieee): "
                     "x3.00"]  # 3d-cn's tf32x3 is wrong: no line
    lines = ts.targets(done)
    assert "MISSED: 10M 2d L=10 faster than sLSTM cudnn: 450.0 us (triton:auto:ieee) vs 400.0 us (cudnn)" in lines
    assert notes[0] in lines


def test_the_session_s_graph_probe_gives_what_is_left_to_a_fresh_process(monkeypatch, tmp_path):
    """A probe process stops at its first failure (a failed capture may leave it unusable): the
    next process takes the variants left; one that answers nothing fails the first of them with
    its reason, so every variant ends with a result or one line."""
    from benchmarks import triton_session as ts

    graphs = [ts.Variant("m100", c, d, "triton-graph") for c, d in (("2d", 1), ("2d", 10), ("3d-cn", 1))]
    a, b, c = (ts.vkey(v) for v in graphs)
    asked = []

    def process(todo, device, timeout):
        asked.append([ts.vkey(v) for v in todo])
        if len(asked) == 1:
            return [{"key": a, "check_ok": True}, {"key": b, "error": "CaptureFailed: simulated"}], None
        return [], "the graph probe's process ended with exit code -11: simulated"

    monkeypatch.setattr(ts, "probe_process", process)
    found = ts.graph_probe(ts.Session(tmp_path, 100.0, "cpu"), graphs + [ts.Variant("m100", "2d", 1)])
    assert asked == [[a, b, c], [c]]
    assert found == {a: {"check_ok": True}, b: {"error": "CaptureFailed: simulated"},
                     c: {"error": "the graph probe's process ended with exit code -11: simulated"}}


def test_the_probe_process_rebuilds_each_variant_under_the_same_key(monkeypatch):
    """What the probe process is sent rebuilds every variant as the parent knows it (the tile set
    and path included), so each answer finds its variant."""
    import json
    import subprocess
    from types import SimpleNamespace

    from benchmarks import triton_session as ts

    sent = {}

    def fake_run(cmd, **kw):
        sent["spec"] = cmd[cmd.index("--probe-graphs") + 1]
        return SimpleNamespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    graphs = [ts.Variant("m100", "2d", 10, "triton-graph", menu="single-u3", persistent=True),
              ts.Variant("m100", "3d-cn", 1, "triton-graph", persistent=False, precision="tf32")]
    ts.probe_process(graphs, "cpu", 5.0)
    assert [ts.vkey(ts.Variant(**item)) for item in json.loads(sent["spec"])] == [ts.vkey(v) for v in graphs]
