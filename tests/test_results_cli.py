"""``tlstm-bench results``: one reader, the newest record per cell, tables readable at 80 columns,
causality marked, and exports (csv, json, markdown, parquet) that read back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.errors import UserError
from tlstm_bench.results import write_record
from tlstm_bench.results.frame import read_frame
from tlstm_bench.results.schema import FIELDS, normalise, record_key


def _record(config, depth, *, key, date, ms, version="v1", causal=True):
    return {"id": f"{key}-{version}", "key": key, "code_version": version, "sweep": "s", "kind": "runtime",
            "task": "runtime", "config": config, "depth": depth, "seed": 0, "channels": 8, "params": 100,
            "status": "ok", "error": None, "spec": {"kind": "runtime", "config": config, "depth": depth},
            "ms_per_step": ms, "ms_iqr": 0.1, "samples": [ms, ms + 0.5], "implementation": "fused",
            "seq_len": 20, "git_commit": "abc", "git_dirty": False, "torch_version": "2", "device": "cpu",
            "device_name": "x86_64", "threads": 1, "host": "h", "date": date, "causal": causal}


@pytest.fixture
def folder(tmp_path):
    """A results folder: store/s holds three records of two cells, store/other one record of an old layout."""
    root = tmp_path / "results"
    rows = [_record("slstm", 1, key="k1", date="2026-01-01T00:00:00+00:00", ms=1.0),
            _record("slstm", 1, key="k1", date="2026-02-01T00:00:00+00:00", ms=1.5, version="v2"),  # newer code
            _record("3d-ln", 4, key="k2", date="2026-01-01T00:00:00+00:00", ms=2.0, causal=False)]
    for row in rows:
        write_record(row, "s", root=root / "store", record_id=row["id"])
    write_record({"config": "3d", "depth": 1, "ms_per_step": 3.0}, "other", root=root / "store", record_id="x")
    return root


def invoke(*args):
    return CliRunner().invoke(app, ["results", *map(str, args)])


def test_one_reader_newest_record_per_cell(folder):
    store = folder / "store"
    frame = read_frame("s", root=store, all_versions=True)
    assert len(frame) == 3
    row = frame[(frame["config"] == "3d-ln")].iloc[0]
    assert row["depth"] == 4 and row["ms_per_step"] == 2.0 and row["samples"] == [2.0, 2.5]
    assert row["spec"] == {"kind": "runtime", "config": "3d-ln", "depth": 4}
    latest = read_frame("s", root=store)
    assert len(latest) == 2                                              # one row per cell key: the newest
    assert latest[latest["config"] == "slstm"]["ms_per_step"].tolist() == [1.5]
    both = read_frame(None, root=store)
    assert set(both["collection"]) == {"s", "other"} and set(FIELDS) <= set(both.columns)


def test_old_records_are_read_with_the_missing_fields_filled():
    old = {"config": "2d", "depth": 1, "ms_per_step": 0.5, "seq_len": 10}   # a `time` record before kind/key/causal
    record = normalise(old, "timing")
    assert record["kind"] == "runtime" and record["task"] == "runtime" and record["causal"] is None
    assert record["key"] == record_key(record) and record["status"] == "ok"
    assert normalise({**old, "seq_len": 11}, "timing")["key"] != record["key"]   # another measurement
    assert normalise({"config": "2d", "depth": 1, "metric": "bpc"}, "training")["kind"] == "train"
    assert old == {"config": "2d", "depth": 1, "ms_per_step": 0.5, "seq_len": 10}  # stored values untouched


def test_unknown_collection_and_empty_store(folder, tmp_path):
    with pytest.raises(UserError, match="no results for 'nope'.*there: other, s"):
        read_frame("nope", root=folder / "store")
    with pytest.raises(UserError, match="no result records"):
        read_frame(None, root=tmp_path / "empty")


@pytest.mark.parametrize("fmt", ["csv", "json", "markdown", "parquet"])
def test_exports_read_back(folder, tmp_path, fmt):
    out = tmp_path / f"r.{fmt}"
    result = invoke("s", "--results-dir", folder, "--format", fmt, "--out", out)
    assert result.exit_code == 0, result.output
    if fmt == "csv":
        back = pd.read_csv(out)
        assert len(back) == 2 and set(back["config"]) == {"slstm", "3d-ln"}
        assert json.loads(back[back["config"] == "3d-ln"]["spec"].iloc[0]) == {"kind": "runtime", "config": "3d-ln",
                                                                              "depth": 4}
        assert set(FIELDS) <= set(back.columns)                          # everything
    elif fmt == "json":
        back = json.loads(out.read_text())
        assert len(back) == 2 and {r["config"] for r in back} == {"slstm", "3d-ln"}
        assert next(r for r in back if r["config"] == "3d-ln")["causal"] is False
    elif fmt == "parquet":
        pytest.importorskip("pyarrow")
        back = pd.read_parquet(out)
        assert len(back) == 2 and list(back[back["config"] == "3d-ln"]["samples"].iloc[0]) == [2.0, 2.5]
    else:
        text = out.read_text()
        assert text.startswith("| collection | kind | task | config |") and text.count("\n") == 4
        assert "| 3d-ln |" in text and "ms_per_step" in text and "git_commit" not in text


def test_columns_choose_what_is_exported(folder):
    result = invoke("s", "--results-dir", folder, "--format", "csv", "--columns", "config,depth,ms_per_step")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "config,depth,ms_per_step"
    bad = invoke("s", "--results-dir", folder, "--columns", "config,colour")
    assert bad.exit_code == 2 and "unknown column 'colour'" in bad.output


def test_table_is_readable_at_80_columns_and_marks_a_non_causal_config(folder):
    result = invoke("s", "--results-dir", folder)                       # CliRunner: an 80-column console
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    header = next(line for line in lines if "config" in line)
    for name in ("config", "L", "impl", "M", "ms/step", "IQR", "threads", "status"):
        assert f" {name} " in header                                     # whole headers, not folded
    row = next(line for line in lines if "3d-ln" in line)
    assert "3d-ln†" in row and "2.000" in row and "fused" in row
    assert any(line.startswith("† not causal") for line in lines)       # the footnote says why
    assert "1.500" in result.output and "1.000" not in result.output    # the newest record of k1


def test_wide_shows_every_column_with_a_value(folder):
    result = invoke("s", "--results-dir", folder, "--wide")
    assert result.exit_code == 0, result.output
    assert "git_commit" in result.output and "torch_version" in result.output


def test_unknown_causality_is_marked_and_explained(folder):
    result = invoke("other", "--results-dir", folder)
    assert result.exit_code == 0, result.output
    assert "3d?" in result.output and "causality not recorded" in result.output


def test_errors_are_one_line_exit_2(folder):
    for args, message in ((["s", "--format", "xml"], "unknown --format"),
                          (["s", "--format", "parquet"], "give --out"),
                          (["s", "--format", "table", "--out", "x.txt"], "for the screen"),
                          (["nope"], "no results for 'nope'")):
        bad = invoke(*args, "--results-dir", folder)
        assert bad.exit_code == 2 and message in bad.output and "Traceback" not in bad.output


def test_a_store_given_as_the_results_folder_says_what_to_give(folder):
    bad = invoke("s", "--results-dir", folder / "store")
    assert bad.exit_code == 2 and "holds records directly" in bad.output and str(folder) in bad.output


def test_the_docs_table_lists_exactly_the_schema_fields():
    text = (Path(__file__).resolve().parents[1] / "docs" / "results.md").read_text()
    rows = text[text.index("| field | kind | meaning |"):].splitlines()[2:]
    names = set()
    for line in rows:
        if not line.startswith("|"):
            break
        names.update(re.findall(r"`([a-z0-9_]+)`", line.split("|")[1]))
    assert names == set(FIELDS)


def test_a_runtime_within_the_spread_of_the_next_depth_is_marked(tmp_path):
    root = tmp_path / "results"
    for config, depth, ms, iqr in (("2d", 1, 0.30, 0.10), ("2d", 3, 0.32, 0.10), ("3d", 1, 0.10, 0.01),
                                   ("3d", 3, 0.30, 0.01)):
        row = _record(config, depth, key=f"{config}{depth}", date="2026-01-01T00:00:00+00:00", ms=ms)
        row.update(ms_iqr=iqr, ms_q25=ms - iqr / 2, ms_q75=ms + iqr / 2)
        write_record(row, "s", root=root / "store", record_id=row["id"])
    result = invoke("s", "--results-dir", root)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.count("≈") for line in lines if line.startswith("│ 2d") or line.startswith("│ 3d")] == [1, 1, 0, 0]
    assert "≈ not resolved" in result.output
    assert max(len(line) for line in lines) <= 80


def test_the_accuracy_by_answer_position_is_a_column_of_whole_percents(tmp_path):
    """``--columns test_by_position``: the answers' accuracies (first answer first), wrapped at
    80 columns, not the '[20 values]' of any other list."""
    by_position = [0.01] * 18 + [0.79, 1.0]
    write_record({"id": "p", "kind": "train", "task": "memorization", "config": "3d-cn", "depth": 4, "seed": 0,
                  "metric": "accuracy", "test_metric": sum(by_position) / 20, "status": "ok",
                  "test_by_position": by_position}, "training", root=tmp_path / "store")
    result = CliRunner().invoke(app, ["results", "training", "--results-dir", str(tmp_path), "--columns",
                                      "config,depth,test_metric,test_by_position"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "% by answer" in result.output and "values]" not in result.output
    cells = re.findall(r"│ [^│]*│ [^│]*│ [^│]*│ ([^│]*)│", result.output)
    assert " ".join(cells).split() == ["1"] * 18 + ["79", "100"]
    assert max(map(len, result.output.splitlines())) <= 80


def test_records_at_two_learning_rates_show_an_lr_column_and_one_lr_goes_in_the_caption(tmp_path):
    """Two runs of one configuration and depth at two ``--lr`` are not two seeds: the table names
    each run's lr; a table whose runs share one says it once, under the table."""
    def run(record_id, lr, collection):
        write_record({"id": record_id, "kind": "train", "task": "memorization", "config": "3d-cn", "depth": 4,
                      "seed": 0, "metric": "accuracy", "test_metric": 0.02, "status": "ok", "lr": lr},
                     collection, root=tmp_path / "store")

    run("a", 0.001, "both")
    run("b", 0.0001, "both")
    run("c", 0.0001, "one")
    both = CliRunner().invoke(app, ["results", "both", "--results-dir", str(tmp_path)], env={"COLUMNS": "80"})
    assert both.exit_code == 0, both.output
    header = next(line for line in both.output.splitlines() if "config" in line)
    assert re.findall(r"\w+", header)[:4] == ["config", "L", "seed", "lr"]
    assert "0.0001" in both.output and "lr 0.0" not in both.output
    one = CliRunner().invoke(app, ["results", "one", "--results-dir", str(tmp_path)], env={"COLUMNS": "80"})
    assert one.exit_code == 0, one.output
    assert "lr 0.0001" in one.output and "lr " not in next(line for line in one.output.splitlines() if "config" in line)


def test_training_records_by_depth_are_what_the_figure_draws(tmp_path):
    """``--by-depth`` on training records: a column per depth with the mean test metric over
    seeds (their sd under it), and on an algorithmic task the median samples to solve of the
    seeds that solved (how many of how many), or how far the runs got; an lr column only where
    the rows differ in it; enwik8 has no samples line."""
    def run(record_id, config, depth, seed, metric, *, solved=None, lr=0.001, task="memorization"):
        write_record({"id": record_id, "kind": "train", "task": task, "config": config, "depth": depth, "seed": seed,
                      "metric": "bpc" if task == "enwik8" else "accuracy", "test_metric": metric, "status": "ok",
                      "lr": lr, "channels": 32, "solved": solved is not None, "samples_to_solve": solved,
                      "samples_seen": solved or 9000, "causal": True}, "s", root=tmp_path / "store")

    run("a", "3d-cn", 1, 0, 0.5)
    run("b", "3d-cn", 1, 1, 0.7)
    run("c", "3d-cn", 2, 0, 1.0, solved=6000)
    run("d", "3d-cn", 2, 1, 1.0, solved=8000)
    run("e", "3d-cn", 2, 2, 0.9)
    run("f", "2d", 2, 0, 0.25, lr=0.0001)
    run("g", "2d", 1, 0, 1.61, task="enwik8")
    result = CliRunner().invoke(app, ["results", "s", "--results-dir", str(tmp_path), "--by-depth"],
                                env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert "s: memorization, test accuracy, mean (sd) over up to 3 seeds" in " ".join(text.split())
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in text.splitlines() if line.startswith("│") and line.split("│")[1].strip()}
    assert rows["3d-cn"] == ["0.001", "60.0%", "96.7%"]
    assert rows["2d"] == ["0.0001", "-", "25.0%"]
    assert "(sd 14.1%)" in text and "2/3 solved 7,000" in text and "not by 9,000" in text
    assert "s: enwik8, test bpc" in text and "1.610" in text
    enwik8 = next(part for part in re.split(r"^(?=s: )", text, flags=re.M) if part.startswith("s: enwik8"))
    assert "not by" not in enwik8 and "solved" not in enwik8 and "1.610" in enwik8
    markdown = invoke("s", "--results-dir", str(tmp_path), "--by-depth", "--format", "markdown")
    assert "| 3d-cn | 0.001 | 60.0% (sd 14.1%) not by 9,000 | 96.7% (sd 5.8%) 2/3 solved 7,000 |" in markdown.output
    # a run with other task options is a row of its own, not a seed of the others
    write_record({"id": "h", "kind": "train", "task": "memorization", "config": "3d-cn", "depth": 1, "seed": 0,
                  "metric": "accuracy", "test_metric": 0.1, "status": "ok", "lr": 0.001, "channels": 32,
                  "task_options": {"symbols": 20}, "samples_seen": 500}, "s", root=tmp_path / "store")
    markdown = invoke("s", "--results-dir", str(tmp_path), "--by-depth", "--format", "markdown").output
    assert "| 3d-cn | symbols=20 | 0.001 | 10.0% not by 500 | - |" in markdown
    assert "| 3d-cn | - | 0.001 | 60.0%" in markdown
