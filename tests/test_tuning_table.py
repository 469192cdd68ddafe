"""benchmarks/tuning_table.py: a device run's tuning rows merged into the shipped table, one
shape at a time, every row checked first; and the table's shapes keeping 3d, 3d-ln and 3d-cn
(2d and 2d-m) apart, which share every size but not their kernels."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

from benchmarks import tuning_table  # noqa: E402
from tlstm_bench.models.triton_tlstm import tiles  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ROW = dict(m=100, n=100, kd=9, batch=1, dtype="float32", precision="ieee", norm="cn", memory_conv=True,
           menu="mid", persistent=True, us_per_step=50.0, device="NVIDIA H100 80GB HBM3")


def _write(path: Path, rows: list[dict], **extra) -> Path:
    path.write_text(json.dumps({**extra, "entries": rows}))
    return path


def test_a_new_row_replaces_its_shape_and_leaves_the_others(tmp_path):
    legacy = dict(m=100, n=1, kd=3, batch=1, dtype="float32", menu="single", persistent=True, us_per_step=25.9)
    old_3d = dict(ROW, norm="none", menu="wide", us_per_step=80.0)
    old_cn = dict(ROW, menu="wide", us_per_step=90.0)
    table = _write(tmp_path / "tuning.json", [legacy, old_3d, old_cn], note="kept")
    new = _write(tmp_path / "table.json", [ROW, dict(ROW, n=40, us_per_step=30.0)])
    assert tuning_table.main([str(new), "--table", str(table), "--source", "results/evidence/gpu/x"]) == 0
    merged = json.loads(table.read_text())
    assert merged["note"] == "kept" and len(merged["entries"]) == 4
    by = {tiles.table_key(r): r for r in merged["entries"]}
    assert by[tiles.table_key(ROW)]["menu"] == "mid" and by[tiles.table_key(ROW)]["source"] == "results/evidence/gpu/x"
    assert by[tiles.table_key(old_3d)]["menu"] == "wide"  # 3d: another shape than 3d-cn
    assert by[tiles.table_key(legacy)] == legacy  # a row before norm and precision: 2d, ieee


def test_the_dispatcher_tells_the_norms_apart(tmp_path, monkeypatch):
    """Two rows of the same sizes, 3d and 3d-cn: each configuration gets its own; a legacy row
    (no norm, no memory_conv) is the 2D tLSTM's, not 2d-m's."""
    legacy = dict(m=100, n=1, kd=3, batch=1, dtype="float32", menu="wide", persistent=False, us_per_step=1.0)
    table = _write(tmp_path / "t.json", [ROW, dict(ROW, norm="none", menu="narrow-u3", persistent=False), legacy])
    monkeypatch.setattr(tiles, "TABLE", table)
    assert tiles.choose(100, 100, 9, 1, "float32", norm="cn") == ("mid", True)
    assert tiles.choose(100, 100, 9, 1, "float32", norm="none") == ("narrow-u3", False)
    assert tiles.choose(100, 100, 9, 1, "float32", norm="ln") == tiles.default_choice(100, 100, 1, "float32")
    assert tiles.choose(100, 1, 3, 1, "float32") == ("wide", False)
    assert tiles.choose(100, 1, 3, 1, "float32", memory_conv=False) == tiles.default_choice(100, 1, 1, "float32")


@pytest.mark.parametrize("bad, says", [
    (dict(ROW, menu="tiny"), "tile set 'tiny' is not one the compile check compiles"),
    (dict(ROW, us_per_step=float("nan")), "us_per_step nan is not a positive number"),
    ({k: v for k, v in ROW.items() if k != "device"}, "missing device"),
    (dict(ROW, device="cpu (interpreter dry run)"), "not a GPU: a dry run's rows are not timings to ship"),
])
def test_a_wrong_row_is_one_line_and_writes_nothing(tmp_path, bad, says):
    table = _write(tmp_path / "tuning.json", [dict(ROW, us_per_step=90.0)])
    before = table.read_text()
    new = _write(tmp_path / "table.json", [dict(ROW, n=40), bad])
    done = subprocess.run([sys.executable, "benchmarks/tuning_table.py", str(new), "--table", str(table)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: {new} row 1: ") and says in done.stderr, done.stderr
    assert table.read_text() == before


def test_two_rows_of_one_shape_and_a_missing_file_are_refused(tmp_path, capsys):
    table = _write(tmp_path / "tuning.json", [])
    twice = _write(tmp_path / "table.json", [ROW, dict(ROW, menu="wide")])
    assert tuning_table.main([str(twice), "--table", str(table)]) == 2
    assert "rows 0 and 1 are the same shape" in capsys.readouterr().err
    assert tuning_table.main([str(tmp_path / "none.json"), "--table", str(table)]) == 2
    assert "no table at" in capsys.readouterr().err
    assert json.loads(table.read_text()) == {"entries": []}


def test_a_dry_run_says_what_would_change_and_writes_nothing(tmp_path, capsys):
    table = _write(tmp_path / "tuning.json", [dict(ROW, us_per_step=90.0)])
    before = table.read_text()
    new = _write(tmp_path / "table.json", [ROW, dict(ROW, n=40)])
    assert tuning_table.main([str(new), "--table", str(table), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "1 replaced, 1 added, 0 kept" in out and "dry run: nothing written" in out
    assert table.read_text() == before
