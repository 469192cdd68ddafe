"""``tlstm-bench results``: the store round-trips to a DataFrame and exports as table/csv/markdown/parquet."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.errors import UserError
from tlstm_bench.results import write_record
from tlstm_bench.sweeps.export import results_frame


def _record(config, depth, *, key, date, ms, version="v1"):
    return {"id": f"{key}-{version}", "key": key, "code_version": version, "sweep": "s", "kind": "runtime",
            "task": "runtime", "config": config, "depth": depth, "seed": 0, "channels": 8, "params": 100,
            "status": "ok", "error": None, "spec": {"kind": "runtime", "config": config, "depth": depth},
            "ms_per_step": ms, "ms_iqr": 0.1, "samples": [ms, ms + 0.5], "implementation": "fused",
            "seq_len": 20, "git_commit": "abc", "git_dirty": False, "torch_version": "2", "device": "cpu",
            "device_name": "x86_64", "threads": 1, "host": "h", "date": date}


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    rows = [_record("slstm", 1, key="k1", date="2026-01-01T00:00:00+00:00", ms=1.0),
            _record("slstm", 1, key="k1", date="2026-02-01T00:00:00+00:00", ms=1.5, version="v2"),  # newer code
            _record("2d", 4, key="k2", date="2026-01-01T00:00:00+00:00", ms=2.0)]
    for row in rows:
        write_record(row, "s", root=root, record_id=row["id"])
    write_record({"config": "3d", "depth": 1, "ms_per_step": 3.0}, "other", root=root, record_id="x")
    return root


def test_store_round_trips_to_a_frame(store):
    frame = results_frame("s", root=store, all_versions=True)
    assert len(frame) == 3
    row = frame[(frame["config"] == "2d")].iloc[0]
    assert row["depth"] == 4 and row["ms_per_step"] == 2.0 and row["samples"] == [2.0, 2.5]
    assert row["spec"] == {"kind": "runtime", "config": "2d", "depth": 4}
    latest = results_frame("s", root=store)
    assert len(latest) == 2                                              # one row per cell key: the newest
    assert latest[latest["config"] == "slstm"]["ms_per_step"].tolist() == [1.5]
    assert set(results_frame(None, root=store)["collection"]) == {"s", "other"}


def test_unknown_sweep_and_empty_store(store, tmp_path):
    with pytest.raises(UserError, match="no results for 'nope'.*have: other, s"):
        results_frame("nope", root=store)
    with pytest.raises(UserError, match="no records"):
        results_frame(None, root=tmp_path / "empty")


@pytest.mark.parametrize("fmt", ["csv", "markdown", "parquet"])
def test_exports_read_back(store, tmp_path, fmt):
    frame = results_frame("s", root=store)
    out = tmp_path / f"r.{fmt}"
    result = CliRunner().invoke(app, ["results", "s", "--results-dir", str(store), "--format", fmt, "--out", str(out)])
    assert result.exit_code == 0, result.output
    if fmt == "csv":
        back = pd.read_csv(out)
        assert len(back) == 2 and set(back["config"]) == {"slstm", "2d"}
        assert json.loads(back[back["config"] == "2d"]["spec"].iloc[0]) == {"kind": "runtime", "config": "2d", "depth": 4}
    elif fmt == "parquet":
        pytest.importorskip("pyarrow")
        back = pd.read_parquet(out)
        assert len(back) == 2 and list(back[back["config"] == "2d"]["samples"].iloc[0]) == [2.0, 2.5]
    else:
        text = out.read_text()
        assert text.startswith("| sweep | kind |") and text.count("\n") == 4 and "| 2d |" in text


def test_table_on_screen_and_errors(store):
    result = CliRunner().invoke(app, ["results", "s", "--results-dir", str(store)])
    assert result.exit_code == 0, result.output
    assert "2 records of s" in result.output   # (80 columns here: the cells fold, so check the title)
    text = CliRunner().invoke(app, ["results", "s", "--results-dir", str(store), "--format", "csv"])
    assert text.exit_code == 0 and text.output.count("\n") == 3
    for args, message in ((["--format", "xml"], "unknown --format"), (["--format", "parquet"], "give --out"),
                          (["nope"], "no results for 'nope'")):
        bad = CliRunner().invoke(app, ["results", *([] if args == ["nope"] else ["s"]), *args,
                                       "--results-dir", str(store)])
        assert bad.exit_code == 2 and message in bad.output and "Traceback" not in bad.output
