"""GPU numbers as tool records (issue 27): the converter of the device tools' outputs, the
committed stores it made, ``results --by-depth`` (the README's GPU table) and the runtime figure
of a sweep timed at several sizes and with several implementations (``plot``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.results import write_record
from tlstm_bench.results.frame import read_frame
from tlstm_bench.results.schema import record_problem

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "results" / "evidence" / "gpu"
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_records  # noqa: E402

GIVEN = {"driver_version": "580.159.04", "cuda_version": "13.0", "date": "2026-11-26"}
# The committed conversions, as the runs' READMEs give them: (run, folder, commit, verified by).
CONVERSIONS = [
    ("2026-11-26-h100", "ev", None, None),
    ("2026-11-26-h100-2", "ev", None, None),
    ("2026-11-26-h100-2", "run1-tune", "dd8b68f9ba8c0eb020044245a305baf89d9ffe2a", None),
    ("2026-11-26-h100-2", "run2-tune", "610f8c130922ca37a60251a742cbd530763db06a", None),
    ("2026-11-26-h100-2", "run3-tune", "73d735ca7bfd9b3bba4e1925ab78e5887a2f151c", "run3-verify/diag.jsonl"),
]


def invoke(*args):
    return CliRunner().invoke(app, list(map(str, args)), env={"COLUMNS": "80"})


@pytest.mark.parametrize("run, folder, commit, verified", CONVERSIONS)
def test_the_committed_stores_are_what_the_converter_makes_of_the_raw_files(tmp_path, monkeypatch, run, folder,
                                                                              commit, verified):
    """Each committed store holds exactly what converting its raw records.jsonl gives (the
    causality audit aside, taken from the committed record: it is the audit's, not the
    converter's), and every record is a store record with its provenance."""
    committed = {p.name: json.loads(p.read_text()) for p in (GPU / run / "store" / folder).glob("*.json")}
    assert committed
    import tlstm_bench.audit

    by_cell = {(r["config"], r["depth"]): r["causal"] for r in committed.values()}
    monkeypatch.setattr(tlstm_bench.audit, "causal", lambda config, depth: by_cell[config, depth])
    given = GIVEN if commit else {}
    gpu_records.convert(GPU / run / folder, tmp_path, given, commit, GPU / run / verified if verified else None)
    fresh = {p.name: json.loads(p.read_text()) for p in (tmp_path / folder).glob("*.json")}
    assert fresh == committed
    for record in committed.values():
        assert record_problem(record) is None
        assert record["device_name"] == "NVIDIA H100 80GB HBM3" and record["driver_version"] == "580.159.04"
        assert record["torch_version"] == "2.11.0+cu130" and record["triton_version"] == "3.6.0"
        assert len(record["git_commit"]) == 40 and record["dtype"] == "float32" and record["tf32"] is False
        assert record["source"]["file"] == f"{folder}/records.jsonl"


def test_the_readme_numbers_of_the_second_session_are_tool_records():
    """The README's GPU table, from the committed records: triton single/persistent 25.9 / 30.7 us,
    sLSTM cudnn 24.6 / 85.2, lstm cudnn 21.6 / 83.0 (the tuner, run 3), cuda-graph 47 / 92 and fast
    402 / 505 (the evidence script)."""
    frame = read_frame(["run3-tune", "ev"], root=GPU / "2026-11-26-h100-2" / "store")
    ok = frame[frame["status"] == "ok"]

    def us(collection, config, impl, depth, variant=None):
        rows = ok[(ok["collection"] == collection) & (ok["config"] == config) & (ok["implementation"] == impl)
                  & (ok["depth"] == depth) & (ok["channels"] == 100)]
        if variant:
            rows = rows[rows["variant"] == variant]
        (value,) = rows["ms_per_step"]
        return round(1000 * value, 1)

    assert [us("run3-tune", "2d", "triton", d, "single/persistent") for d in (1, 10)] == [25.9, 30.7]
    assert [us("run3-tune", "slstm", "cudnn", d) for d in (1, 10)] == [24.6, 85.2]
    assert [us("run3-tune", "lstm", "cudnn", d) for d in (1, 10)] == [21.6, 83.0]
    assert [round(us("ev", "2d", "cuda-graph", d)) for d in (1, 10)] == [47, 92]
    assert [round(us("ev", "2d", "fast", d)) for d in (1, 10)] == [402, 505]


def test_a_variant_the_tuner_marked_wrong_is_kept_only_where_a_verify_run_passed_it():
    frame = read_frame("run3-tune", root=GPU / "2026-11-26-h100-2" / "store")
    at10 = frame[(frame["depth"] == 10) & (frame["implementation"] == "triton")]
    status = dict(zip(at10["variant"], at10["status"]))
    assert status == {"single/persistent": "ok", "narrow/persistent": "ok", "wide/persistent": "ok",
                      "single/step": "failed", "narrow/step": "failed", "wide/step": "failed"}
    kept = at10[at10["status"] == "ok"].iloc[0]
    assert "differs from fast" in kept["tuner_check"] and kept["verified_by"]["file"] == "run3-verify/diag.jsonl"
    dropped = at10[at10["status"] == "failed"].iloc[0]
    assert "wrong by the tuner's check" in dropped["error"] and dropped["ms_per_step"] != dropped["ms_per_step"]


def test_by_depth_is_the_readme_table(tmp_path):
    result = invoke("results", "run3-tune", "--results-dir", GPU / "2026-11-26-h100-2", "--by-depth",
                    "--format", "markdown")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "**run3-tune: us per timestep (forward + loss + backward), median (IQR), M=100**"
    assert "| config | impl | L=1 | L=10 | L10/L1 |" in lines
    assert "| 2d | triton single/persistent | 25.9 (1.4) | 30.7 (0.8) | 1.18 |" in lines
    assert any(line.startswith("NVIDIA H100 80GB HBM3, driver 580.159.04, torch 2.11.0+cu130") for line in lines)
    table = invoke("results", "ev", "--results-dir", GPU / "2026-11-26-h100-2", "--by-depth")
    assert table.exit_code == 0 and max(len(line) for line in table.output.splitlines()) <= 80
    assert "10M" in table.output and "M=100" in table.output  # two sizes: a size column


def _runtime(config, depth, impl, ms, *, budget=None, channels=100):
    return {"id": f"{config}-{depth}-{impl}-{budget}", "kind": "runtime", "task": "runtime", "config": config,
            "depth": depth, "seed": 0, "implementation": impl, "seq_len": 100, "budget": budget,
            "channels": channels, "ms_per_step": ms, "ms_q25": ms * 0.95, "ms_q75": ms * 1.05, "ms_iqr": ms * 0.1,
            "samples": [ms * 0.95, ms, ms * 1.05], "status": "ok", "error": None, "causal": True,
            "device": "cuda", "device_name": "GPU", "torch_version": "2", "threads": 1,
            "date": "2026-11-27T00:00:00+00:00", "dtype": "float32", "tf32": False}


@pytest.fixture
def two_sizes(tmp_path):
    """A runtime sweep at M = 100 and 10M, 2d with three implementations, lstm with one."""
    root = tmp_path / "results"
    for depth in (1, 4):
        for impl, ms in (("triton", 0.03), ("cuda-graph", 0.05), ("fast", 0.4)):
            write_record(_runtime("2d", depth, impl, ms * depth), "runtime", root=root / "store")
            write_record(_runtime("2d", depth, impl, ms * depth * 2, budget="10M", channels=900 // depth),
                         "runtime", root=root / "store")
        write_record(_runtime("lstm", depth, "cudnn", 0.02 * depth), "runtime", root=root / "store")
    return root


def test_plot_draws_a_panel_per_size_and_the_fastest_implementation_figure(two_sizes):
    from tlstm_bench.plotting import plot_results
    from tlstm_bench.plotting.figures import runtime_sizes
    from tlstm_bench.results.by_depth import fastest as fastest_rows

    frame = read_frame("runtime", root=two_sizes / "store")
    assert [label for label, _ in runtime_sizes(frame)] == ["M=100", "10M parameters"]
    fastest = fastest_rows(frame)
    assert set(zip(fastest["config"], fastest["implementation"])) == {("2d", "triton"), ("lstm", "cudnn")}
    report = plot_results(["runtime"], out=two_sizes / "figures", root=two_sizes / "store")
    names = {p.name for fig in report.figures for p in fig.paths}
    assert {"runtime.png", "runtime-fastest.png"} <= names
    best = next(f for f in report.figures if f.task.endswith("(fastest implementation)"))
    assert best.lines == ["2d (triton)", "lstm (not in the paper) (cudnn)"] and not best.missing


def test_by_depth_with_two_sizes_and_no_runtime_records(two_sizes, tmp_path):
    result = invoke("results", "runtime", "--results-dir", two_sizes, "--by-depth", "--format", "markdown")
    assert result.exit_code == 0, result.output
    assert "| 2d | triton | M=100 | 30.0 (3.0) | 120 (12) | 4.00 |" in result.output
    assert "| 2d | triton | 10M | 60.0 (6.0) | 240 (24) | 4.00 |" in result.output
    assert result.output.index("| 2d | triton | M=100") < result.output.index("| 2d | cuda-graph | M=100")
    fast = invoke("results", "runtime", "--results-dir", two_sizes, "--by-depth", "--fastest", "--format", "markdown")
    assert "| 2d | triton | M=100 |" in fast.output and "cuda-graph" not in fast.output and "| lstm | cudnn |" in fast.output
    assert invoke("results", "runtime", "--results-dir", two_sizes, "--fastest").exit_code == 2
    bad = invoke("results", "runtime", "--results-dir", two_sizes, "--by-depth", "--format", "csv")
    assert bad.exit_code == 2 and "--by-depth writes a table or markdown" in bad.output
    root = tmp_path / "train"
    write_record({"id": "t", "kind": "train", "task": "addition", "config": "2d", "depth": 1, "status": "ok",
                  "test_metric": 0.5}, "training", root=root / "store")
    trained = invoke("results", "--results-dir", root, "--by-depth")   # a training table, no runtime one
    assert trained.exit_code == 0 and "training: addition, test" in trained.output, trained.output
    assert "ms per timestep" not in trained.output and "us per timestep" not in trained.output
    failed = tmp_path / "failed"
    write_record({"id": "t", "kind": "train", "task": "addition", "config": "2d", "depth": 1, "status": "failed",
                  "test_metric": None}, "training", root=failed / "store")
    none = invoke("results", "--results-dir", failed, "--by-depth")
    assert none.exit_code == 2 and "no successful runtime or training records" in none.output


def test_the_converter_says_what_it_cannot_read(tmp_path):
    (tmp_path / "x").mkdir()
    assert gpu_records.main([str(tmp_path / "x"), "--store", str(tmp_path / "s")]) == 2
    (tmp_path / "x" / "records.jsonl").write_text('{"kind": "check"}\n')
    assert gpu_records.main([str(tmp_path / "x"), "--store", str(tmp_path / "s")]) == 2
    assert gpu_records.main([str(tmp_path / "x"), "--store", str(tmp_path / "s"), "--given", "gpu=1"]) == 2
