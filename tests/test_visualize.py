"""The memory-cell trace (figure 6) and `tlstm-bench visualize`."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from typer.testing import CliRunner

from tlstm_bench.analysis import diagonal_channel_mean, diagonal_indices, trace_cells
from tlstm_bench.analysis.visualize import best_checkpoint, visualize
from tlstm_bench.cli import app
from tlstm_bench.models import build_model

TLSTM_CONFIGS = ["2d", "2d-m", "2d-f", "3d", "3d-ln", "3d-cn", "tlstm:dims=4,kernel=3", "2d:kernel=5"]


def _inputs(tokens: bool, seq_len: int = 5):
    g = torch.Generator().manual_seed(1)
    if tokens:
        return torch.randint(0, 6, (2, seq_len), generator=g)
    return torch.randn(2, seq_len, 3, generator=g)


@pytest.mark.parametrize("config", TLSTM_CONFIGS)
@pytest.mark.parametrize("tokens", [True, False], ids=["tokens", "real"])
def test_trace_equals_forward(config, tokens):
    torch.manual_seed(0)
    io = {"vocab": 6} if tokens else {"input_size": 3, "output_size": 4}
    # The trace runs model.step, the eager path's step: pin eager to compare bit for bit
    # (the default `fast` path is tested against the oracle in test_equivalence.py).
    model = build_model(config, 3, channels=3, implementation="eager", **io)
    x = _inputs(tokens)
    y, state = model(x)
    trace = trace_cells(model, x)
    torch.testing.assert_close(trace.y, y, rtol=0, atol=0)
    torch.testing.assert_close(trace.state.h, state.h, rtol=0, atol=0)
    torch.testing.assert_close(trace.state.c, state.c, rtol=0, atol=0)
    steps = x.shape[1] + model.depth - 1
    assert trace.cells.shape == (2, steps, model.num_locations, model.channels)
    torch.testing.assert_close(trace.cells[:, x.shape[1] - 1], state.c, rtol=0, atol=0)


@pytest.mark.parametrize("config", ["2d", "3d-ln", "3d-cn"])
def test_trace_matches_the_default_sequence_loop(config):
    """What visualize draws (model.step in a loop) is what the default (fast) path computes."""
    torch.manual_seed(0)
    model = build_model(config, 3, vocab=6, channels=3)
    x = _inputs(True, seq_len=7)
    torch.testing.assert_close(trace_cells(model, x).y, model(x)[0])


@pytest.mark.parametrize("config", ["2d", "3d-cn"])
def test_trace_equals_the_oracle_and_continues_a_state(config):
    torch.manual_seed(0)
    model = build_model(config, 2, vocab=6, channels=3, implementation="reference")
    x = _inputs(True, seq_len=8)
    y, _ = model(x)
    first = trace_cells(model, x[:, :3])
    rest = trace_cells(model, x[:, 3:], first.state)
    torch.testing.assert_close(torch.cat([first.y, rest.y], dim=1), y)


@pytest.mark.parametrize("config, size, expected", [
    ("2d", 3, lambda p, P: p),
    ("3d", 3, lambda p, P: p * P + p),
    ("tlstm:dims=4,kernel=3", 2, lambda p, P: p * P * P + p * P + p),
])
def test_diagonal_runs_from_the_input_corner_to_the_output_corner(config, size, expected):
    model = build_model(config, size, vocab=4, channels=2)
    index = diagonal_indices(model)
    assert index.tolist() == [expected(p, model.tensor_size) for p in range(model.tensor_size)]
    assert index[0] == 0 and index[-1] == model.num_locations - 1  # p_in next to z_t, p_out where y is read
    cells = torch.randn(1, 4, model.num_locations, model.channels)
    torch.testing.assert_close(diagonal_channel_mean(model, cells), cells.mean(-1)[:, :, index])


def test_visualize_untrained_model_writes_a_figure_and_says_untrained(tmp_path):
    out = tmp_path / "fig6"
    result = CliRunner().invoke(app, ["visualize", "3d-cn", "--depth", "2", "--channels", "4",
                                      "--task-option", "symbols=3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "UNTRAINED" in result.output
    assert (tmp_path / "fig6.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "fig6.pdf").read_bytes()[:5] == b"%PDF-"
    assert "replaced" not in result.output
    again = CliRunner().invoke(app, ["visualize", "3d-cn", "--depth", "2", "--channels", "4",
                                     "--task-option", "symbols=3", "--out", str(out)])
    assert again.exit_code == 0 and "replaced the figure" in again.output  # said, not silent


def test_visualize_uses_the_given_weights(tmp_path):
    torch.manual_seed(3)
    model = build_model("2d", 2, vocab=65, channels=4)
    torch.save(model.state_dict(), tmp_path / "w.pt")
    result = visualize("2d", depth=2, channels=4, task_options={"symbols": 3}, state_dict=tmp_path / "w.pt",
                       out=tmp_path / "fig")
    assert result.trained
    from tlstm_bench.tasks import make_task

    task = make_task("memorization", symbols=3)
    with torch.no_grad():
        expected = diagonal_channel_mean(model, trace_cells(model, task.test_x[:1]).cells)[0].T
    torch.testing.assert_close(torch.from_numpy(result.values), expected)


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory):
    """A real (very short) training run's checkpoint folder."""
    from tlstm_bench.training import train

    folder = tmp_path_factory.mktemp("run")
    train("2d", task="memorization", depth=2, channels=4, max_samples=15, batch_size=15, eval_every=15,
          checkpoint_dir=folder, progress=False, symbols=3)
    return folder


def test_visualize_a_training_checkpoint(checkpoint_dir, tmp_path):
    result = CliRunner().invoke(app, ["visualize", str(checkpoint_dir), "--out", str(tmp_path / "fig")])
    assert result.exit_code == 0, result.output
    assert "trained: " in result.output and "UNTRAINED" not in result.output
    assert (tmp_path / "fig.png").exists()


def test_visualize_best_of_a_sweep_picks_the_best_tlstm_checkpoint(checkpoint_dir, tmp_path):
    store = tmp_path / "store"
    accuracy = {"a-slstm": 0.9, "b-2d-good": 0.5, "c-2d-bad": 0.2}  # sLSTM has no cell tensor: never picked
    for cell_id, acc in accuracy.items():
        (store / "s" / ".checkpoints" / cell_id).mkdir(parents=True)
        shutil.copy(checkpoint_dir / "checkpoint.pt", store / "s" / ".checkpoints" / cell_id / "checkpoint.pt")
        record = {"id": cell_id, "key": cell_id, "sweep": "s", "kind": "train", "task": "memorization", "status": "ok",
                  "config": "slstm" if "slstm" in cell_id else "2d", "depth": 2, "seed": 0, "metric": "accuracy",
                  "test_metric": acc, "samples_to_solve": None}
        (store / "s" / f"{cell_id}.json").write_text(json.dumps(record))
    path, record = best_checkpoint("s", root=store)
    assert record["id"] == "b-2d-good" and path == store / "s" / ".checkpoints" / "b-2d-good" / "checkpoint.pt"
    result = CliRunner().invoke(app, ["visualize", "--best", "s", "--results-dir", str(tmp_path),
                                      "--out", str(tmp_path / "fig")])
    assert result.exit_code == 0, result.output
    assert "b-2d-good" in result.output and (tmp_path / "fig.png").exists()


@pytest.mark.parametrize("args, message", [
    (["slstm"], "no memory-cell tensor"),
    (["nosuch-config"], "unknown config"),
    (["missing/checkpoint.pt"], "no checkpoint at"),
    (["2d", "--task-option", "symbols"], "--task-option takes KEY=VALUE"),
    (["2d", "--task", "nosuch"], "unknown task"),
    ([], "give a checkpoint or configuration, or --best SWEEP"),
    (["2d", "--best", "quick"], "give a checkpoint or configuration, or --best SWEEP"),
])
def test_visualize_bad_input_is_one_line_exit_2(args, message, tmp_path):
    result = CliRunner().invoke(app, ["visualize", *args, "--out", str(tmp_path / "f")])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_visualize_weights_that_do_not_fit_are_one_line_exit_2(tmp_path):
    torch.save(build_model("2d", 2, vocab=65, channels=4).state_dict(), tmp_path / "w.pt")
    result = CliRunner().invoke(app, ["visualize", "2d", "--depth", "2", "--channels", "5", "--task-option",
                                      "symbols=3", "--state-dict", str(tmp_path / "w.pt"), "--out", str(tmp_path / "f")])
    assert result.exit_code == 2
    assert "do not fit" in result.output and "Traceback" not in result.output
