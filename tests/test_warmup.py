"""The learning-rate warm-up (``--lr-warmup``, tlstm_bench/warmup.py): its grammar, the rate each
step trains at, that a step warm-up is the init search's lr switch as one run, and where it is
recorded (the record, its key and its checkpoint's only when set; sweeps; plot lines; claims)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.errors import UserError
from tlstm_bench.results.schema import record_key
from tlstm_bench.training import TrainSettings, Trainer, checkpoint_path
from tlstm_bench.training.checkpoint import load_checkpoint, save_checkpoint
from tlstm_bench.warmup import Warmup, canonical_warmup, parse_warmup

from train_helpers import BASE, params, run

torch.set_num_threads(1)


# ---- the grammar ---------------------------------------------------------------------
@pytest.mark.parametrize("text, canonical", [
    ("linear:20000", "linear:20000"), ("linear:20_000", "linear:20000"), (" linear : 500 : 0 ", "linear:500"),
    ("linear:500:1e-5", "linear:500:1e-05"), ("step:96000:1e-4", "step:96000:0.0001"),
    ("step:96000:0.0001", "step:96000:0.0001"), (None, None), ("none", None), ("", None)])
def test_a_warmup_is_written_one_way(text, canonical):
    assert canonical_warmup(text) == canonical
    if canonical is not None:  # the canonical text reads back as itself
        assert canonical_warmup(canonical) == canonical


@pytest.mark.parametrize("text, message", [
    ("cosine:100", "takes a warm-up like linear:20000"), ("linear", "takes a warm-up"),
    ("linear:1:2:3", "takes a warm-up"), ("linear:2e4", "whole number like 20000"),
    ("linear:0", "samples must be an integer >= 1"), ("step:100", "holds a learning rate first"),
    ("step:100:0", "start must be above 0"), ("linear:100:-1e-4", "start must be above 0"),
    ("linear:100:nan", "start must be a finite number"), ("linear:100:fast", "start must be a learning rate"),
    (3, "takes a warm-up")])
def test_a_bad_warmup_is_a_one_line_error_that_shows_the_form(text, message):
    with pytest.raises(UserError, match=message) as caught:
        parse_warmup(text)
    assert "\n" not in str(caught.value)


def test_the_rate_rises_linearly_or_steps_then_stays_at_lr():
    linear, step = Warmup("linear", 1000), Warmup("step", 1000, 1e-4)
    assert [linear.rate(1e-3, c) for c in (0, 250, 500, 1000, 5000)] == pytest.approx([0, 2.5e-4, 5e-4, 1e-3, 1e-3])
    assert Warmup("linear", 1000, 1e-4).rate(1e-3, 500) == pytest.approx(5.5e-4)
    assert [step.rate(1e-3, c) for c in (0, 999, 1000, 10**6)] == [1e-4, 1e-4, 1e-3, 1e-3]


# ---- training ------------------------------------------------------------------------
def test_each_step_trains_at_the_warmups_rate_of_the_samples_before_it():
    settings, task = TrainSettings.of("2d", **{k: v for k, v in BASE.items() if k != "progress"}, max_samples=150,
                                      lr=1e-3, lr_warmup="linear:60").resolve()
    trainer = Trainer(settings, task, torch.device("cpu"), lambda event: None, started=0.0)
    used = []
    real_step = trainer.state.optimizer.step

    def spy(*args, **kwargs):
        used.append(trainer.state.optimizer.param_groups[0]["lr"])
        return real_step(*args, **kwargs)

    trainer.state.optimizer.step = spy
    for _ in range(8):
        trainer.step()
    assert used == pytest.approx([1e-3 * min(1, 15 * i / 60) for i in range(8)])  # 0, 2.5e-4, ..., 1e-3, 1e-3


def test_no_warmup_leaves_the_optimizers_rate_alone_and_the_paper_run_unchanged(tmp_path):
    """Without a warm-up nothing sets Adam's rate: the run is the one before the setting existed."""
    plain = run(max_samples=120, lr=1e-3, checkpoint_dir=tmp_path / "a")
    none = run(max_samples=120, lr=1e-3, lr_warmup="none", checkpoint_dir=tmp_path / "b")
    assert plain["lr_warmup"] is None and none["lr_warmup"] is None and plain["key"] == none["key"]
    for name, value in params(tmp_path / "a").items():
        assert torch.equal(value, params(tmp_path / "b")[name]), name
    assert load_checkpoint(checkpoint_path(tmp_path / "a"))["key"].keys() == {
        "config", "task", "task_options", "depth", "channels", "batch_size", "seed", "lr"}  # as before the field


def test_a_step_warmup_is_the_lr_switch_of_the_init_search_as_one_run(tmp_path):
    """``--lr B --lr-warmup step:N:A`` to 2N samples gives exactly the parameters of a run at A to N whose
    checkpoint is resumed at B (results/evidence/cpu/init_search/lr_switch.py: the key and Adam's param
    groups rewritten, Adam's moments kept)."""
    whole = run(max_samples=240, lr=1e-2, lr_warmup="step:120:1e-3", checkpoint_dir=tmp_path / "whole")
    run(max_samples=120, lr=1e-3, checkpoint_dir=tmp_path / "switch")
    saved = load_checkpoint(checkpoint_path(tmp_path / "switch"))
    assert saved["counters"]["samples"] == 120
    saved["key"]["lr"] = 1e-2
    for group in saved["optimizer"]["param_groups"]:
        group["lr"] = 1e-2
    save_checkpoint(checkpoint_path(tmp_path / "switch"), saved)
    switched = run(max_samples=240, lr=1e-2, checkpoint_dir=tmp_path / "switch")
    assert switched["resumed_at"] == [120]
    a, b = params(tmp_path / "whole"), params(tmp_path / "switch")
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert [h["train_loss"] for h in whole["history"]] == [h["train_loss"] for h in switched["history"]]
    # and the two rates differ enough for the test to mean something: one rate throughout is another run
    run(max_samples=240, lr=1e-2, checkpoint_dir=tmp_path / "constant")
    constant = params(tmp_path / "constant")
    assert not all(torch.equal(constant[name], a[name]) for name in a)


def test_a_warmup_is_recorded_in_the_key_and_the_checkpoint_only_when_set(tmp_path):
    plain = run(max_samples=60, checkpoint_dir=tmp_path)
    warm = run(max_samples=60, lr_warmup="linear:60")
    assert warm["lr_warmup"] == "linear:60" and warm["key"] != plain["key"]
    assert plain["key"] == record_key({k: v for k, v in plain.items() if k != "lr_warmup"})  # old records' keys
    assert warm["key"] == record_key(warm)
    with pytest.raises(UserError, match="belongs to another run .*its lr_warmup None, not linear:60"):
        run(max_samples=120, lr_warmup="linear:60", checkpoint_dir=tmp_path)
    resumed = run(max_samples=120, checkpoint_dir=tmp_path)  # the run without one goes on
    assert resumed["resumed_at"] == [60]


def test_train_cli_takes_lr_warmup_and_refuses_a_bad_one_in_one_line(tmp_path):
    runner = CliRunner()
    args = ["train", "2d", "--task", "memorization", "--symbols", "3", "--channels", "6", "--max-samples", "30",
            "--results-dir", str(tmp_path)]
    result = runner.invoke(app, [*args, "--lr-warmup", "cosine:5"])
    assert result.exit_code == 2 and "takes a warm-up like linear:20000" in result.output
    assert not (tmp_path / "store" / "training").exists() or not any((tmp_path / "store" / "training").iterdir())
    result = runner.invoke(app, [*args, "--lr-warmup", "linear:30"])
    assert result.exit_code == 0, result.output
    listed = runner.invoke(app, ["results", "--results-dir", str(tmp_path), "--columns", "config,lr_warmup"])
    assert "linear:30" in listed.output


# ---- sweeps, plots and claims ---------------------------------------------------------
def test_a_sweep_crosses_lr_with_lr_warmup_and_none_keeps_the_cell_without_one(tmp_path):
    from tlstm_bench.sweeps.grid import expand, parse_filters, select
    from tlstm_bench.sweeps.spec import load_spec

    path = tmp_path / "s.toml"
    path.write_text('task = "memorization"\nconfigs = ["2d"]\ndepths = [1]\nchannels = 4\n'
                    '[train]\nmax_samples = 30\nlr = [1e-3, 1e-4]\nlr_warmup = ["none", "linear:30_000"]\n')
    cells = expand(load_spec(path))
    specs = {(c.spec["lr"], c.spec.get("lr_warmup")) for c in cells}
    assert len(cells) == 4 and specs == {(lr, w) for lr in (1e-3, 1e-4) for w in (None, "linear:30000")}
    assert sum("lr_warmup" not in c.spec for c in cells) == 2  # "none": no key of its own, the cell it was
    assert {c.label().split(" lr=")[1] for c in cells} >= {"0.001 warmup=linear:30000", "0.0001"}
    chosen = select(cells, parse_filters(["lr_warmup=linear:30000"]))
    assert len(chosen) == 2 and all(c.spec["lr_warmup"] == "linear:30000" for c in chosen)
    assert len(select(cells, parse_filters(["lr_warmup=none"]))) == 2
    with pytest.raises(UserError, match="--only lr_warmup"):
        parse_filters(["lr_warmup=soon"])
    for bad, message in (('"cosine:1"', "takes a warm-up"), ('["linear:5", "linear:5"]', "must not repeat"),
                         ("5", "must be a warm-up")):
        path.write_text(f'task = "memorization"\nconfigs = ["2d"]\ndepths = [1]\nchannels = 4\n'
                        f'[train]\nlr_warmup = {bad}\n')
        with pytest.raises(UserError, match=message) as caught:
            load_spec(path)
        assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_the_shipped_warmup_spec_names_its_lines_by_warmup_and_claims_count_none_of_them():
    from tlstm_bench.plotting import lr_lines
    from tlstm_bench.plotting.claims import CLAIMS, _matches
    from tlstm_bench.plotting.grid import sweep_file_grid

    configs, depths = sweep_file_grid("memorization-warmup")["train"]
    assert depths == [10] and all(" lr=0.001 warmup=linear:" in c for c in configs) and len(configs) == 2
    k5 = "3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2"
    row = dict(kind="train", collection="memorization-warmup", task="memorization", config=k5, depth=10, lr=1e-3,
               task_options={"symbols": 20, "alphabet": 64}, channels=100, batch_size=15)
    frame = pd.DataFrame([{**row, "lr_warmup": "linear:10000"}, {**row, "lr_warmup": float("nan")}])
    named, split = lr_lines(frame)
    assert list(named["config"]) == [f"{k5} lr=0.001 warmup=linear:10000", f"{k5} lr=0.001"]
    assert split == {"memorization-warmup"}
    claim = next(c for c in CLAIMS if c.task == "memorization" and c.depth == 10)
    assert [r.get("lr_warmup") for r in _matches(claim, frame)] == [pytest.approx(float("nan"), nan_ok=True)]
