"""The runtime protocol (SPEC section 8): records, warm-up excluded, interleaving, the time command."""

from __future__ import annotations

import json
import statistics
import time

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.timing import Case, measure_cases, measure_runtime
from tlstm_bench.timing import protocol

FIELDS = ["config", "implementation", "depth", "channels", "tensor_size", "params", "seq_len", "batch", "device",
          "device_name", "threads", "dtype", "flush_denormal", "warmup", "repeats", "ms_per_step", "ms_iqr",
          "ms_q25", "ms_q75", "samples", "git_commit", "torch_version", "date", "host"]


def test_record_has_documented_fields_and_sane_values():
    rec = measure_runtime("3d-cn", 2, channels=4, seq_len=6, repeats=5, warmup=1, threads=1)
    for name in FIELDS:
        assert name in rec, name
    assert (rec["config"], rec["implementation"], rec["depth"], rec["channels"]) == ("3d-cn", "fast", 2, 4)
    assert rec["tensor_size"] == 2 and rec["batch"] == 1 and rec["device"] == "cpu"
    assert rec["threads"] == 1 and rec["dtype"] == "float32" and rec["seq_len"] == 6
    assert rec["flush_denormal"] is True  # x86 supports it; the record says so
    assert len(rec["samples"]) == 5 and all(s > 0 for s in rec["samples"])
    assert min(rec["samples"]) <= rec["ms_q25"] <= rec["ms_per_step"] <= rec["ms_q75"] <= max(rec["samples"])
    assert rec["ms_iqr"] == pytest.approx(rec["ms_q75"] - rec["ms_q25"])
    assert rec["causal"] is True


def test_record_says_a_non_causal_model_is_not_causal():
    rec = measure_runtime("3d-ln", 2, channels=2, seq_len=3, repeats=1, warmup=0, threads=1)
    assert rec["causal"] is False
    json.dumps(rec)  # storable as it is


def test_budget_real_input_and_float64():
    rec = measure_runtime("slstm", 2, budget="slstm:8", vocab=None, input_size=3, output_size=2, seq_len=4,
                          repeats=2, warmup=0, dtype="float64", implementation="wavefront")
    assert rec["channels"] == 8 and rec["dtype"] == "float64" and rec["implementation"] == "wavefront"
    assert rec["input_size"] == 3 and rec["output_size"] == 2


def test_warmup_is_run_but_not_kept(monkeypatch):
    calls = []
    original = protocol.StepRun.__call__

    def slow_first(self):
        calls.append(self)
        if len(calls) == 1:
            time.sleep(1.0)  # a first call far slower than any other: it must not be a sample
        original(self)

    monkeypatch.setattr(protocol.StepRun, "__call__", slow_first)
    rec = measure_runtime("2d", 1, channels=3, seq_len=5, repeats=3, warmup=2)
    # the two warm-up runs disagree (1 s and a few ms): warm-up goes on to a steady state
    assert rec["warmup_runs"] >= 3 and len(calls) == rec["warmup_runs"] + 3 and len(rec["samples"]) == 3
    assert max(rec["samples"]) < 1000.0 / 5  # the 1 s warm-up call would be >= 200 ms per step


def test_warm_up_goes_on_until_two_runs_agree_and_stops_at_twice_the_minimum(monkeypatch):
    seconds = iter([5.0, 1.0, 1.05, 9.0, 9.0, 9.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
    monkeypatch.setattr(protocol, "time_step", lambda run, device: next(seconds))
    assert protocol.warm_up(None, None, 2) == [5.0, 1.0, 1.05]  # 1.0 and 1.05 agree within 10%
    assert protocol.warm_up(None, None, 3) == [9.0, 9.0, 9.0]  # steady from the start: the minimum only
    assert protocol.warm_up(None, None, 3) == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]  # never steady: 2 x minimum


def test_repeats_are_interleaved_across_cases(monkeypatch):
    order = []
    original = protocol.StepRun.__call__

    def record(self):
        order.append(self.model.depth)
        original(self)

    monkeypatch.setattr(protocol.StepRun, "__call__", record)
    cases = [Case("2d", 1), Case("2d", 2), Case("slstm", 3)]
    records = measure_cases(cases, channels=3, seq_len=3, repeats=3, warmup=1)
    # warm-up, then one run of every case per round, odd rounds in the reverse order (a load that
    # changes within a round then slows the first and the last case alike)
    assert order == [1, 2, 3] + [1, 2, 3] + [3, 2, 1] + [1, 2, 3]
    assert len({r["measurement"] for r in records}) == 1  # one id: their samples pair round by round
    assert [r["depth"] for r in records] == [1, 2, 3]


def test_repeats_for_lowers_one_case():
    records = measure_cases([Case("2d", 1), Case("2d", 2, "reference")], channels=2, seq_len=3, repeats=4,
                            warmup=0, repeats_for=lambda c: 2 if c.implementation == "reference" else 4)
    assert [len(r["samples"]) for r in records] == [4, 2]
    assert records[1]["repeats"] == 2


def test_time_command_json_and_store(tmp_path, monkeypatch):
    monkeypatch.setenv("TLSTM_BENCH_RESULTS", str(tmp_path))
    result = CliRunner().invoke(app, ["time", "slstm", "2d", "--depths", "1,2", "--channels", "3", "--seq-len",
                                      "4", "--repeats", "2", "--warmup", "1", "--json"])
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    # slstm without --implementation: every sLSTM implementation; the tLSTM: fast
    got = {(r["config"], r["implementation"], r["depth"]) for r in records}
    assert got == {(c, i, d) for c, i in [("slstm", "fused"), ("slstm", "cudnn"), ("slstm", "wavefront"),
                                          ("slstm", "loop"), ("2d", "fast")] for d in (1, 2)}
    for r in records:
        assert {"config", "implementation", "depth", "channels", "seq_len", "device", "threads", "ms_per_step",
                "samples"} <= r.keys()
    assert len(list((tmp_path / "store" / "timing").glob("*.json"))) == 10


def test_time_command_table_and_csv(tmp_path, monkeypatch):
    monkeypatch.setenv("TLSTM_BENCH_RESULTS", str(tmp_path))
    runner = CliRunner()
    result = runner.invoke(app, ["time", "2d-f", "--depths", "1", "--channels", "3", "--seq-len", "3",
                                 "--repeats", "2", "--implementation", "all", "--no-store"])
    assert result.exit_code == 0, result.output
    assert "fast" in result.output and "eager" in result.output and "reference" in result.output
    result = runner.invoke(app, ["time", "2d", "--depths", "1", "--channels", "3", "--seq-len", "3",
                                 "--repeats", "2", "--csv", "--no-store"])
    assert result.exit_code == 0 and result.stdout.splitlines()[0].startswith("config,implementation,depth")


@pytest.mark.parametrize("args,message", [
    (["nope", "--channels", "3"], "unknown config"),
    (["2d"], "exactly one of --channels"),
    (["2d", "--channels", "3", "--depths", "1,x"], "comma-separated"),
    (["2d", "--channels", "3", "--depths", "0"], "depth"),
    (["2d", "--channels", "3", "--device", "cuda"], "CUDA is not available"),
    (["2d", "--channels", "3", "--implementation", "wavefront"], "no configuration given has"),
    (["2d", "--channels", "3", "--repeats", "0"], "repeats"),
    (["2d", "--channels", "3", "--dtype", "float16"], "dtype"),
])
def test_time_command_bad_input_is_one_line_exit_2(args, message, tmp_path, monkeypatch):
    monkeypatch.setenv("TLSTM_BENCH_RESULTS", str(tmp_path))
    if "cuda" in args:
        import torch
        if torch.cuda.is_available():
            pytest.skip("CUDA is available here")
    result = CliRunner().invoke(app, ["time", "--seq-len", "2", "--repeats", "1", "--warmup", "0", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


# ---- failure containment: one implementation's error fails its own cases only (issue 18) ----

TINY = dict(channels=3, seq_len=3, repeats=3, warmup=1)


def _failing_cases(broken: str) -> list[Case]:
    return [Case("2d", 1, "fast"), Case("2d", 2, "fast"), Case("2d", 1, broken)]


def test_isolated_a_poisoned_process_fails_only_its_own_implementation():
    import os

    import timing_helpers

    failed = {}
    records = measure_cases(_failing_cases("poison"), isolate=True, prepare=timing_helpers.register_broken,
                            inspect=timing_helpers.count_params, on_failure=failed.__setitem__, **TINY)
    assert [(r["depth"], r["implementation"]) for r in records] == [(1, "fast"), (2, "fast")]
    assert all(len(r["samples"]) == 3 and r["isolated"] for r in records)
    assert set(failed) == {Case("2d", 1, "poison")} and "illegal memory access" in failed[Case("2d", 1, "poison")]
    assert {r["inspected_pid"] for r in records} != {os.getpid()}  # inspected in the worker that held the run
    assert all(r["inspected_params"] == r["params"] for r in records)


def test_in_process_the_same_poison_takes_every_case_down():
    """Why isolation exists: in one process the sticky error fails the healthy cases too."""
    import timing_helpers

    failed = {}
    try:
        records = measure_cases(_failing_cases("poison"), isolate=False, prepare=timing_helpers.register_broken,
                                on_failure=failed.__setitem__, **TINY)
    finally:
        timing_helpers.unregister_broken()
    assert records == [] and set(failed) == set(_failing_cases("poison"))


def test_isolated_a_worker_that_dies_mid_rounds_fails_its_cases_and_the_rest_finish():
    import timing_helpers

    failed = {}
    records = measure_cases(_failing_cases("crash"), isolate=True, prepare=timing_helpers.register_broken,
                            on_failure=failed.__setitem__, **TINY)
    assert [(r["depth"], len(r["samples"])) for r in records] == [(1, 3), (2, 3)]
    assert set(failed) == {Case("2d", 1, "crash")} and "died" in failed[Case("2d", 1, "crash")]


def test_without_on_failure_a_failure_is_raised():
    import timing_helpers

    with pytest.raises(RuntimeError, match="poison failed"):
        measure_cases(_failing_cases("poison"), isolate=True, prepare=timing_helpers.register_broken, **TINY)


def test_keep_going_stops_the_rounds_and_the_records_say_truncated():
    asked = []

    def two_rounds(seconds: float) -> bool:
        asked.append(seconds)
        return len(asked) <= 2

    records = measure_cases([Case("2d", 1), Case("2d", 2)], keep_going=two_rounds, **{**TINY, "repeats": 5})
    assert [len(r["samples"]) for r in records] == [2, 2] and all(r["truncated"] for r in records)
    assert len(asked) == 3 and all(s > 0 for s in asked)


def test_cuda_graph_is_a_timing_implementation_of_the_tlstm_only():
    from tlstm_bench.timing import implementations_of, plan_cases

    assert "cuda-graph" in implementations_of("tlstm") and "cuda-graph" not in implementations_of("slstm")
    assert {c.implementation for c in plan_cases(["2d"], [1], "all", "cpu")} >= {"fast", "eager"}
    assert "cuda-graph" not in {c.implementation for c in plan_cases(["2d"], [1], "all", "cpu")}
    assert {c.implementation for c in plan_cases(["2d"], [1], "cuda-graph", "cuda")} == {"cuda-graph"}


def test_time_command_a_failing_implementation_fails_alone(tmp_path, monkeypatch):
    """`time` records and shows the healthy cases, names the failed one in one line, exits 1."""
    import timing_helpers

    monkeypatch.setenv("TLSTM_BENCH_RESULTS", str(tmp_path))
    timing_helpers.register_failing()
    try:
        result = CliRunner().invoke(app, ["time", "2d", "--depths", "1,2", "--channels", "3", "--seq-len", "3",
                                          "--repeats", "2", "--warmup", "1", "--implementation", "all", "--json"])
    finally:
        timing_helpers.unregister_broken()
    assert result.exit_code == 1, result.output
    assert "2d L=1 fails failed (the other cases were timed): RuntimeError: CUDA error" in result.stderr
    assert "Traceback" not in result.output
    timed = {r["implementation"] for r in json.loads(result.stdout)}
    assert {"eager", "reference", "fast"} <= timed and "fails" not in timed  # (other tests may register more)


def test_a_case_an_implementation_refuses_is_contained_unless_every_case_is_refused():
    """A UserError of one case (this implementation cannot run this case) is that case's failure
    when the caller contains failures; bad input for every case is still a UserError."""
    from tlstm_bench.errors import UserError

    failed = {}
    records = measure_cases([Case("2d", 1, "fast"), Case("2d", 1, "cuda-graph")], on_failure=failed.__setitem__,
                            **TINY)
    assert [r["implementation"] for r in records] == ["fast"]
    assert "needs CUDA" in failed[Case("2d", 1, "cuda-graph")]
    with pytest.raises(UserError, match="needs CUDA"):
        measure_cases([Case("2d", 1, "cuda-graph")], on_failure=failed.__setitem__, **TINY)
    with pytest.raises(UserError, match="needs CUDA"):
        measure_cases([Case("2d", 1, "fast"), Case("2d", 1, "cuda-graph")], **TINY)


def test_an_implementation_that_cannot_run_here_is_refused_before_anything_is_warmed_up(monkeypatch):
    """`time --implementation triton` (or a graphed one) on a CPU: the one-line error, exit 2,
    before a model is built or a warm-up line printed; with the interpreter on, triton runs."""
    from tlstm_bench.errors import UserError
    from tlstm_bench.models import check_runs_on

    built = []
    monkeypatch.setattr(protocol, "build_model", lambda *a, **k: built.append(a))
    for name in ("cuda-graph", "triton-graph"):
        result = CliRunner().invoke(app, ["time", "2d", "--depths", "1", "--channels", "3", "--implementation", name,
                                          "--no-store"])
        assert result.exit_code == 2 and "needs CUDA" in result.output and "warm-up" not in result.output
    assert built == []
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(UserError, match="need a CUDA GPU"):
        check_runs_on("triton", torch.device("cpu"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    check_runs_on("triton", torch.device("cpu"))
    check_runs_on("fast", torch.device("cpu"))


def test_keep_going_that_stops_before_the_first_round_fails_the_cases_instead_of_crashing():
    failed = {}
    records = measure_cases([Case("2d", 1)], keep_going=lambda s: False, on_failure=failed.__setitem__, **TINY)
    assert records == [] and "before its first sample" in failed[Case("2d", 1)]


def test_the_last_loss_is_kept():
    from tlstm_bench.timing import StepRun

    run = StepRun(Case("2d", 1), channels=3, budget=None, vocab=5, input_size=None, output_size=None, seq_len=3,
                  device=torch.device("cpu"), dtype=torch.float64, seed=0)
    run()
    assert run.last_loss is not None and run.last_loss.requires_grad is False
    assert float(run.last_loss) == pytest.approx(float(run.loss().detach()))


def test_time_defaults_to_one_thread_samples_of_50_ms_and_records_the_contention(tmp_path, monkeypatch):
    """Issue 30: one thread unless asked (recorded), samples of back-to-back runs on a CPU, and each
    record says how much of its samples' time the process had on the CPU; progress goes to stderr,
    also with --json, whose stdout stays the data."""
    import torch

    monkeypatch.setenv("TLSTM_BENCH_RESULTS", str(tmp_path))
    threads = torch.get_num_threads()
    result = CliRunner().invoke(app, ["time", "2d", "--depths", "1,2", "--channels", "3", "--seq-len", "3",
                                      "--repeats", "6", "--warmup", "2", "--json", "--no-store"])
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    assert torch.get_num_threads() == threads  # restored afterwards
    for r in records:
        assert r["threads"] == 1 and r["runs_per_sample"] > 1  # a ~1 ms run: many per 50 ms sample
        assert len(r["cpu_shares"]) == 6 and all(0 < s <= 1 for s in r["cpu_shares"])
        assert r["cpu_share"] == pytest.approx(statistics.median(r["cpu_shares"]), abs=1e-3)
    assert records[0]["measurement"] == records[1]["measurement"]
    assert "warm-up 1/2: 2d L=1 fast" in result.stderr
    assert "2 case(s) in 6 interleaved rounds: about" in result.stderr
    result = CliRunner().invoke(app, ["time", "2d", "--depths", "1", "--channels", "3", "--seq-len", "3",
                                      "--repeats", "1", "--warmup", "0", "--threads", "2", "--json", "--no-store"])
    assert json.loads(result.stdout)[0]["threads"] == 2


def test_a_busy_machine_is_warned_about(monkeypatch):
    from tlstm_bench.timing import measure

    notes = []

    monkeypatch.setattr(measure, "time_sample", lambda *a, **k: (0.001, 0.4))
    records = measure_cases([Case("2d", 1)], channels=2, seq_len=2, repeats=2, warmup=0, threads=1,
                            progress=lambda e: notes.append(e))
    assert records[0]["cpu_share"] == 0.4
    (warning,) = [e for e in notes if e.level == "warning"]
    assert "busy" in warning.message and "40%" in warning.message


class _FrozenTime:
    """A clock that never moves, as under `faketime -f '2020-01-01 00:00:00'`."""

    @staticmethod
    def perf_counter():
        return 1000.0

    thread_time = process_time = perf_counter
    sleep = staticmethod(time.sleep)


def test_a_frozen_clock_is_refused_and_nothing_is_recorded(tmp_path, monkeypatch):
    """Issue 31: under a frozen clock `time` wrote records of 0.000 ms and exited 0."""
    monkeypatch.setenv("TLSTM_BENCH_RESULTS", str(tmp_path))
    monkeypatch.setattr(protocol, "time", _FrozenTime)
    for warmup in (1, 0):  # refused in the warm-up, and in the rounds when there is none
        with pytest.raises(protocol.FrozenClock, match="clock did not advance while timing 2d L=1"):
            measure_cases([Case("2d", 1), Case("2d", 2)], channels=2, seq_len=2, repeats=2, warmup=warmup,
                          on_failure=lambda case, why: None)
    for warmup in ("1", "0"):
        result = CliRunner().invoke(app, ["time", "2d", "slstm", "--depths", "1,2", "--channels", "3", "--seq-len",
                                          "3", "--repeats", "2", "--warmup", warmup])
        assert result.exit_code == 2, result.output
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "clock did not advance" in errors[0] and "Traceback" not in result.output
        assert not list(tmp_path.rglob("*.json"))  # no record written


# ---- runs of one case far apart (results.frame.rerun_notes) -------------------------------------
def _run(ms, *, key="k1", code="v1", share=1.0, status="ok", config="2d", depth=4, **kw) -> dict:
    return dict(collection="timing", kind="runtime", status=status, key=key, code_version=code, config=config,
                depth=depth, implementation="fast", channels=16, budget=None, ms_per_step=ms, cpu_share=share, **kw)


@pytest.mark.parametrize("runs, expected", [
    ([_run(0.05), _run(0.11, share=0.5)], "1 case timed more than once (same code, settings and machine) differ "
                                          "x2.2 between runs (2d L=4 fast M=16, with 50% to 100% of a CPU)"),
    ([_run(0.05), _run(0.07)], None),                                    # within the spread a load moves it
    ([_run(0.05), _run(0.11, code="v2")], None),                         # new code may be faster: not a rerun
    ([_run(0.05), _run(0.11, key="k2")], None),                          # another case
    ([_run(0.05, host="a"), _run(0.11, host="b")], None),                # two hosts of one kind share a store
    ([_run(0.05), _run(0.50, status="failed")], None),                   # a failed run measured nothing
    ([_run(0.05, config="3d-cn", key="c"), _run(0.2, config="3d-cn", key="c"), _run(0.05), _run(0.1)],
     "2 cases timed more than once (same code, settings and machine) differ x2.0-4.0 between runs "
     "(2d L=4 fast M=16, 3d-cn L=4 fast M=16):"),                         # the CPU share did not change
])
def test_runs_of_one_case_far_apart_get_a_note(runs, expected):
    from tlstm_bench.results.frame import rerun_notes

    notes = rerun_notes(pd.DataFrame(runs))
    if expected is None:
        assert notes == []
    else:
        (note,) = notes
        assert note.startswith(f"timing: {expected}"), note
        assert "the machine's load changed between them" in note


def test_time_says_when_an_earlier_run_of_a_case_measured_far_from_this_one(tmp_path, monkeypatch):
    """The newest run is the one `results` shows; an earlier run of the same case, code and
    machine measured 5x slower (here: its record edited so) is named by `time` and `results`."""
    monkeypatch.setenv("TLSTM_BENCH_RESULTS", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    args = ["time", "2d", "--depths", "1", "--channels", "3", "--seq-len", "3", "--repeats", "2", "--warmup", "0"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0 and "timed more than once" not in first.output, first.output
    (path,) = (tmp_path / "store" / "timing").glob("*.json")
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "ms_per_step": record["ms_per_step"] * 5}))
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert "timing: 1 case timed more than once" in again.output and "2d L=1 fast M=3" in again.output
    for view in ([], ["--by-depth"]):
        shown = CliRunner().invoke(app, ["results", "timing", *view])
        assert "timing: 1 case timed more than once" in shown.output, view
