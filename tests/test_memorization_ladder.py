"""benchmarks/memorization_ladder.py: its cells train through the tool's Trainer (the plain
nn.LSTM check included), write one record each, are skipped once done, and a cell cut by the
deadline says so and runs again."""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path

import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "memorization_ladder.py"


def ladder():
    spec = importlib.util.spec_from_file_location("memorization_ladder", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def args(out: Path, **kw) -> argparse.Namespace:
    base = dict(configs="3d-cn,torch-lstm", symbols="3", depths="1,2", seed=0, channels=6, alphabet=8,
                max_samples=30, eval_every=15, lr=1e-3, device="cpu", knobs="", variant="", out=out, clip=None,
                qbias=None, deadline=None, skip="")
    base.update(kw)
    return argparse.Namespace(**base)


def test_cells_train_in_the_tools_loop_write_records_and_resume(tmp_path):
    mod = ladder()
    cells = mod.plan(args(tmp_path, skip="3d-cn:2"))
    assert {c["id"] for c in cells} == {"3d-cn-n3-L1-s0", "torch-lstm-n3-L1-s0", "torch-lstm-n3-L2-s0"}
    for cell in cells:
        mod.run_cell(cell)
    records = {r["ladder_cell"]["id"]: r for r in mod.load_records(tmp_path)}
    plain = records["torch-lstm-n3-L2-s0"]
    assert plain["config"] == "torch-lstm" and plain["implementation"] == "torch.nn.LSTM"
    lstm = torch.nn.LSTM(6, 6, num_layers=2)
    assert plain["params"] == 9 * 6 + sum(p.numel() for p in lstm.parameters()) + 6 * 9 + 9  # embed, LSTM, out
    assert all(r["samples_seen"] == 30 and len(r["history"]) == 2 and not r["ladder_cut"] for r in records.values())
    assert mod.plan(args(tmp_path, skip="3d-cn:2")) == []  # done cells are skipped
    assert "| torch-lstm | 3 | 2 | 6 | 0 | 30 |" in mod.summary(list(records.values()))


def test_a_cell_past_its_deadline_is_recorded_as_cut_and_runs_again(tmp_path):
    mod = ladder()
    config = "3d-cn:input_init=normal"
    (cell,) = mod.plan(args(tmp_path, configs=config, depths="1", knobs='{"batch_size": 5}', variant="normal"))
    cell["deadline"] = time.time() - 1
    mod.run_cell(cell)
    record = json.loads((tmp_path / "records" / "3d-cn_input_initnormal-n3-L1-s0-normal.json").read_text())
    assert record["ladder_cut"] and record["samples_seen"] == 0 and record["init"]["input_init"] == "normal"
    assert record["config"] == config and record["batch_size"] == 5
    assert [c["id"] for c in mod.plan(args(tmp_path, configs=config, depths="1", variant="normal"))] == \
        ["3d-cn_input_initnormal-n3-L1-s0-normal"]


def test_a_knob_string_with_several_overrides_stays_one_config(tmp_path):
    mod = ladder()
    cells = mod.plan(args(tmp_path, configs="3d-cn:cell_kernel=shift,input_init=normal,torch-lstm", depths="1"))
    assert sorted(c["config"] for c in cells) == ["3d-cn:cell_kernel=shift,input_init=normal", "torch-lstm"]


def test_the_gradient_probe_reads_knob_strings_and_agrees_across_dtypes():
    mod = ladder()
    text = mod.gradient_probe(depths=(1, 2), channels=4, symbols=3,
                              configs=("3d-cn", "3d-cn:input_init=normal,input_std=3"))
    rows = [line.split(" | ") for line in text.splitlines()[2:]]
    assert [row[0] for row in rows] == [f"{c} {d} {t}" for c in ("3d-cn", "3d-cn:input_init=normal,input_std=3")
                                        for d in (1, 2) for t in ("float32", "float64")]
    grads = [[float(v) for v in row[1].split() + [row[2]]] for row in rows]
    for single, double in zip(grads[::2], grads[1::2]):  # float32 against float64, same model
        assert all(abs(a - b) <= 1e-3 * abs(b) + 1e-12 for a, b in zip(single, double))
    assert grads[0] != grads[4]  # the input knobs change what the untrained model passes back
