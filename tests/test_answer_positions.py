"""benchmarks/answer_positions.py: a checkpoint's accuracy by answer position is the one the
run's own record keeps (the same parameters and test set, rebuilt from the checkpoint's key)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tlstm_bench.training import train

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # benchmarks/ is beside the installed package, not in it
    sys.path.insert(0, str(ROOT))

from benchmarks import answer_positions  # noqa: E402


def test_a_checkpoint_gives_its_records_positions(tmp_path, monkeypatch, capsys):
    record = train("3d-cn:cell_kernel=shift,input_init=normal", task="memorization", symbols=4, alphabet=8,
                   depth=2, channels=6, max_samples=15 * 12, eval_every=15 * 6, seed=2,
                   checkpoint_dir=str(tmp_path / "ckpt"))
    mod = answer_positions
    result = mod.positions(tmp_path / "ckpt")
    assert result["samples"] == record["samples_seen"] == 180
    assert result["by_position"] == record["test_by_position"] and len(result["by_position"]) == 4
    assert result["metric"] == pytest.approx(record["test_metric"])

    argv = ["answer_positions.py", str(tmp_path / "ckpt"), "--json", str(tmp_path / "p.json"),
            "--figure", str(tmp_path / "p.png")]
    monkeypatch.setattr(sys, "argv", argv)
    mod.main()
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("3d-cn:cell_kernel=shift,input_init=normal L=2 M=6 seed 2, 180 samples")
    assert len(out[1].split()) == 4
    assert json.loads((tmp_path / "p.json").read_text())[0]["by_position"] == record["test_by_position"]
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    runs = mod.runs([result, {**result, "samples": 90}])  # two copies of one run: one panel, two columns
    assert len(runs) == 1 and [e["samples"] for e in runs.iloc[0]["history"]] == [90, 180]


def test_no_checkpoint_is_a_one_line_error(tmp_path):
    with pytest.raises(SystemExit, match="no checkpoint in"):
        answer_positions.positions(tmp_path)
