"""``tlstm-bench gradients``: the recall gradient of memorization, measured through each model's
own forward (any implementation) and equal to the eager oracle's, for untrained models seeded as
``train`` seeds them and for training checkpoints; bad input is one line and exit 2."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from tlstm_bench.analysis.gradients import measure, recall_gradients, untrained_signal
from tlstm_bench.cli import app
from tlstm_bench.errors import UserError
from tlstm_bench.models import build_model
from tlstm_bench.models.tlstm import run_eager
from tlstm_bench.tasks import make_task

KNOBS = "3d-cn:cell_kernel=shift,input_init=normal,input_std=3"


def eager_recall(model, task) -> list[float]:
    """The oracle: the eager loop written out, one answer at a time, in float64."""
    model = model.double()
    x, y = task.sample(15, torch.Generator().manual_seed(1))
    values = []
    assert all(torch.equal(y[:, task.answer.start + k], x[:, 1 + k]) for k in range(task.symbols))  # k recalls 1+k
    for k in range(task.symbols):
        z = model.project_inputs(x).detach().requires_grad_()
        h, _ = run_eager(model, z, model.zero_state(15, z))
        t = task.answer.start + k
        nll = torch.nn.functional.nll_loss(torch.log_softmax(model.read_out(h), -1)[:, t], y[:, t])
        values.append(torch.autograd.grad(nll, z)[0][:, 1 + k].norm().item())
    return values


@pytest.mark.parametrize("config", ["2d", "3d-cn", KNOBS])
def test_the_fast_path_gives_the_eager_oracles_values(config):
    task = make_task("memorization", symbols=4, alphabet=8)
    torch.manual_seed(0)
    model = build_model(config, 3, channels=5, forget_bias=task.forget_bias, **task.model_io())
    reference = build_model(config, 3, channels=5, forget_bias=task.forget_bias, implementation="eager",
                            **task.model_io())
    reference.load_state_dict(model.state_dict())
    oracle = eager_recall(reference, task)
    fast = recall_gradients(model, task)
    assert model.implementation == "fast" and len(fast) == 4
    assert fast == pytest.approx(oracle, rel=1e-9)
    assert min(fast) > 0


def test_an_untrained_model_is_the_one_train_starts_from_and_the_seed_matters():
    task = make_task("memorization", symbols=3, alphabet=8)
    a = untrained_signal("3d-cn", 2, channels=4, symbols=3, alphabet=8, seed=3)
    torch.manual_seed(3)  # what Trainer does before it builds the model
    model = build_model("3d-cn", 2, channels=4, forget_bias=task.forget_bias, **task.model_io())
    assert a.per_answer == recall_gradients(model, task)
    assert untrained_signal("3d-cn", 2, channels=4, symbols=3, alphabet=8, seed=4).per_answer != a.per_answer
    assert (a.first, a.last, a.depth, a.channels, a.trained) == (a.per_answer[0], a.per_answer[-1], 2, 4, False)


def test_the_input_knobs_change_the_signal_and_slstm_is_measured_too():
    plain, knobs, slstm = measure(["3d-cn", KNOBS, "slstm"], [2], channels=4, symbols=3, alphabet=8)
    assert plain.per_answer != knobs.per_answer
    assert slstm.label == "slstm" and len(slstm.per_answer) == 3 and min(slstm.per_answer) > 0


def test_a_checkpoint_is_measured_with_its_own_depth_and_task(tmp_path):
    from tlstm_bench.training import train

    train("3d-cn", task="memorization", depth=2, channels=4, max_samples=30, eval_every=15, batch_size=15,
          symbols=3, alphabet=8, checkpoint_dir=tmp_path / "C", keep_checkpoints=True)
    (signal,) = measure([str(tmp_path / "C")], [1, 7], channels=99, symbols=9)  # the checkpoint decides
    assert signal.trained and signal.depth == 2 and signal.channels == 4 and len(signal.per_answer) == 3
    assert signal.label == "C: 3d-cn" and signal.samples == 30
    # The checkpoints --keep-checkpoints kept along the run: one row each, named by the run, told apart by samples.
    kept = sorted(str(p) for p in (tmp_path / "C" / "kept").iterdir())
    first, last = measure(kept, [1])
    assert (first.label, first.samples, last.label, last.samples) == ("C: 3d-cn", 15, "C: 3d-cn", 30)
    assert last.per_answer == signal.per_answer and first.per_answer != last.per_answer
    result = CliRunner().invoke(app, ["gradients", *kept], env={"COLUMNS": "80"})
    assert result.exit_code == 0 and "what the checkpoint had trained on" in " ".join(result.stdout.split())
    assert [line.split("│")[4].strip() for line in result.stdout.splitlines() if "C: 3d-cn" in line] == ["15", "30"]
    assert json.loads(CliRunner().invoke(app, ["gradients", kept[0], "--json"]).stdout)[0]["samples"] == 15


def test_bad_input_is_refused_before_any_work(tmp_path):
    from tlstm_bench.training import train

    train("2d", task="addition", depth=1, channels=4, max_samples=15, eval_every=15, batch_size=15,
          digits=2, checkpoint_dir=tmp_path / "A")
    for sources, message in ((["nope"], "unknown config"), ([str(tmp_path / "none.pt")], "no checkpoint at"),
                             ([str(tmp_path / "A")], "trained on addition")):
        with pytest.raises(UserError, match=message):
            measure(sources, [1], channels=4, symbols=3)
    with pytest.raises(UserError):
        measure(["3d-cn"], [0], channels=4, symbols=3)


def test_the_command_prints_a_table_or_json_and_refuses_in_one_line():
    runner = CliRunner()
    args = ["gradients", "3d-cn", KNOBS, "--depths", "1,2", "--channels", "4", "--symbols", "3"]
    result = runner.invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert all(len(line) <= 80 for line in result.output.splitlines())
    assert "first answer" in result.output and "input_std=3" in result.output
    from test_80_columns import assert_numbers_whole  # the table's numbers stay whole at 40 columns

    assert_numbers_whole(result.stdout, runner.invoke(app, args, env={"COLUMNS": "40"}).stdout)
    data = json.loads(runner.invoke(app, args + ["--json"]).stdout)
    assert [(d["label"], d["depth"]) for d in data] == [("3d-cn", 1), ("3d-cn", 2), (KNOBS, 1), (KNOBS, 2)]
    for bad in (["gradients", "nope"], ["gradients", "3d-cn", "--depths", "x"],
                ["gradients", "3d-cn", "--channels", "4", "--budget", "10M"]):
        result = runner.invoke(app, bad)
        assert result.exit_code == 2 and result.output.count("error:") == 1, result.output
