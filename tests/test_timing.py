"""The runtime protocol (SPEC section 8): records, warm-up excluded, interleaving, the time command."""

from __future__ import annotations

import json
import time

import pytest
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
    original = protocol._Run.__call__

    def slow_first(self):
        calls.append(self)
        if len(calls) == 1:
            time.sleep(1.0)  # a first call far slower than any other: it must not be a sample
        original(self)

    monkeypatch.setattr(protocol._Run, "__call__", slow_first)
    rec = measure_runtime("2d", 1, channels=3, seq_len=5, repeats=3, warmup=2)
    assert len(calls) == 5 and len(rec["samples"]) == 3
    assert max(rec["samples"]) < 1000.0 / 5  # the 1 s warm-up call would be >= 200 ms per step


def test_repeats_are_interleaved_across_cases(monkeypatch):
    order = []
    original = protocol._Run.__call__

    def record(self):
        order.append(self.model.depth)
        original(self)

    monkeypatch.setattr(protocol._Run, "__call__", record)
    cases = [Case("2d", 1), Case("2d", 2), Case("slstm", 3)]
    records = measure_cases(cases, channels=3, seq_len=3, repeats=3, warmup=1)
    assert order == [1, 2, 3] + [1, 2, 3] * 3  # warm-up, then one run of every case per round
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
    assert got == {(c, i, d) for c, i in [("slstm", "fused"), ("slstm", "wavefront"), ("slstm", "loop"),
                                          ("2d", "fast")] for d in (1, 2)}
    for r in records:
        assert {"config", "implementation", "depth", "channels", "seq_len", "device", "threads", "ms_per_step",
                "samples"} <= r.keys()
    assert len(list((tmp_path / "store" / "timing").glob("*.json"))) == 8


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
