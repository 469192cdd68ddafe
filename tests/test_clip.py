"""The gradient clip (``--clip-grad-norm``, ``TrainSettings.clip_grad_norm``): that Adam steps on
the clipped gradient, that it is the same run whatever the sequence loop, how often it clipped in
the history, and where it is recorded (the record, its key and its checkpoint's only when set;
sweeps; claims, which show a clipped run and never count it)."""

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

from train_helpers import BASE, params, run

torch.set_num_threads(1)


def trainer(**kwargs) -> Trainer:
    base = {k: v for k, v in BASE.items() if k != "progress"}
    settings, task = TrainSettings.of("2d", **{**base, "max_samples": 150, **kwargs}).resolve()
    return Trainer(settings, task, torch.device("cpu"), lambda event: None, started=0.0)


def norms_at_adam(run_: Trainer, steps: int) -> list[float]:
    """The gradient's total norm that each of ``steps`` Adam steps is given."""
    seen, real_step = [], run_.state.optimizer.step

    def spy(*args, **kwargs):
        grads = [p.grad for p in run_.state.model.parameters() if p.grad is not None]
        seen.append(float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))))
        return real_step(*args, **kwargs)

    run_.state.optimizer.step = spy
    for _ in range(steps):
        run_.step()
    return seen


def test_adam_steps_on_the_gradient_clipped_to_the_norm_and_unclipped_without_it():
    plain = norms_at_adam(trainer(), 5)
    clipped = norms_at_adam(trainer(clip_grad_norm=0.05), 5)
    assert min(plain) > 0.1  # the clip below acts on every step: the test means something
    assert clipped == pytest.approx([0.05] * 5, rel=1e-5)
    assert norms_at_adam(trainer(clip_grad_norm=1e6), 5) == pytest.approx(plain, rel=1e-6)  # a clip above: none


@pytest.mark.parametrize("setting", ["none", "above every norm"])
def test_no_clip_and_a_clip_that_never_acts_leave_the_run_as_it_was(tmp_path, setting):
    plain = run(max_samples=120, checkpoint_dir=tmp_path / "a")
    other = run(max_samples=120, checkpoint_dir=tmp_path / "b", clip_grad_norm=None if setting == "none" else 1e6)
    for name, value in params(tmp_path / "a").items():
        assert torch.equal(value, params(tmp_path / "b")[name]), name
    assert plain["clip_grad_norm"] is None and "clipped" not in plain["history"][0]
    if setting == "none":
        assert other["key"] == plain["key"]
        assert load_checkpoint(checkpoint_path(tmp_path / "a"))["key"].keys() == {
            "config", "task", "task_options", "depth", "channels", "batch_size", "seed", "lr"}  # as before the field
    else:
        assert [h["clipped"] for h in other["history"]] == [0.0, 0.0]


def test_a_clip_that_acts_changes_the_run_and_the_history_says_how_often(tmp_path):
    run(max_samples=120, checkpoint_dir=tmp_path / "a")
    clipped = run(max_samples=120, checkpoint_dir=tmp_path / "b", clip_grad_norm=0.05)
    a, b = params(tmp_path / "a"), params(tmp_path / "b")
    assert not all(torch.equal(a[name], b[name]) for name in a)  # Adam's moments see other gradients
    assert [h["clipped"] for h in clipped["history"]] == [1.0, 1.0]  # 4 steps each, every one clipped
    assert all(h["grad_norm"] > 0.05 for h in clipped["history"])  # the norm before the clip


def test_the_progress_line_says_how_often_the_clip_acted():
    clipped, plain = trainer(clip_grad_norm=0.05), trainer()
    for run_ in (clipped, plain):
        for _ in range(4):
            run_.step()
        run_.evaluate()
    assert clipped._metric_text().endswith("clipped 100%") and "clipped" not in plain._metric_text()


@pytest.mark.parametrize("implementation", ["eager", "fast"])
def test_the_clipped_run_is_the_same_whatever_the_sequence_loop(implementation):
    reference = trainer(clip_grad_norm=0.05, implementation="reference")
    other = trainer(clip_grad_norm=0.05, implementation=implementation)
    for _ in range(3):
        reference.step(), other.step()
    for (name, a), b in zip(reference.state.model.named_parameters(), other.state.model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=name)


def test_a_clip_is_recorded_in_the_key_and_the_checkpoint_only_when_set(tmp_path):
    plain = run(max_samples=60, checkpoint_dir=tmp_path)
    clipped = run(max_samples=60, clip_grad_norm=1)
    assert clipped["clip_grad_norm"] == 1.0 and clipped["key"] != plain["key"]
    assert plain["key"] == record_key({k: v for k, v in plain.items() if k != "clip_grad_norm"})  # old records'
    assert clipped["key"] == record_key(clipped)
    with pytest.raises(UserError, match="belongs to another run .*its clip_grad_norm None, not 1.0"):
        run(max_samples=120, clip_grad_norm=1, checkpoint_dir=tmp_path)
    assert run(max_samples=120, checkpoint_dir=tmp_path)["resumed_at"] == [60]  # the run without one goes on


@pytest.mark.parametrize("value", [0, -1, float("nan"), "fast", True])
def test_a_bad_clip_is_a_one_line_error(value):
    with pytest.raises(UserError, match="--clip-grad-norm must be") as caught:
        TrainSettings("2d", 1, clip_grad_norm=value)
    assert "\n" not in str(caught.value)


def test_train_cli_takes_clip_grad_norm_and_results_show_it(tmp_path):
    runner = CliRunner()
    args = ["train", "2d", "--task", "memorization", "--symbols", "3", "--channels", "6", "--max-samples", "30",
            "--results-dir", str(tmp_path)]
    result = runner.invoke(app, [*args, "--clip-grad-norm", "-1"])
    assert result.exit_code == 2 and "--clip-grad-norm must be above 0" in result.output
    assert not (tmp_path / "store" / "training").exists() or not any((tmp_path / "store" / "training").iterdir())
    result = runner.invoke(app, [*args, "--clip-grad-norm", "0.5"])
    assert result.exit_code == 0, result.output
    listed = runner.invoke(app, ["results", "--results-dir", str(tmp_path), "--columns", "config,clip_grad_norm"])
    assert "clip" in listed.output and "0.5" in listed.output


def test_a_sweep_table_clips_its_cells_and_a_bad_clip_is_one_line(tmp_path):
    from tlstm_bench.sweeps.grid import expand
    from tlstm_bench.sweeps.spec import load_spec

    path = tmp_path / "s.toml"
    head = 'task = "memorization"\nconfigs = ["2d"]\ndepths = [1, 2]\nchannels = 4\n[train]\nmax_samples = 30\n'
    path.write_text(head)
    plain = expand(load_spec(path))
    path.write_text(head + "clip_grad_norm = 5\n")
    cells = expand(load_spec(path))
    assert [c.spec["clip_grad_norm"] for c in cells] == [5.0, 5.0] and all(" clip=5" in c.label() for c in cells)
    assert all("clip_grad_norm" not in c.spec for c in plain)  # without it: the cells, and keys, as before
    assert {c.key for c in cells}.isdisjoint(c.key for c in plain)
    for bad in ("0", '"often"', "[1, 2]"):
        path.write_text(head + f"clip_grad_norm = {bad}\n")
        with pytest.raises(UserError, match="train.clip_grad_norm.* must be a positive number") as caught:
            load_spec(path)
        assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_claims_show_a_clipped_run_aside_and_never_count_it():
    from tlstm_bench.plotting.claims import CLAIMS, _partition, schedule_text

    claim = next(c for c in CLAIMS if c.task == "memorization" and c.depth == 10)
    row = dict(kind="train", collection="training", task="memorization", config="3d-cn", depth=10, lr=1e-3,
               task_options={"symbols": 20, "alphabet": 64}, channels=100, batch_size=15, lr_warmup=float("nan"))
    frame = pd.DataFrame([{**row, "clip_grad_norm": 1.0}, {**row, "clip_grad_norm": float("nan")}])
    papers, others = _partition(claim, frame)
    assert len(papers) == 1 and len(others) == 1 and others[0]["clip_grad_norm"] == 1.0
    assert schedule_text(others[0]) == "lr 0.001, clip 1"


def test_a_checkpoint_from_before_the_clip_counters_resumes_as_it_would_have(tmp_path):
    """Checkpoints written before ``clipped`` and ``norm_sum`` existed (the committed
    results/carry/ one among them) lack them; they resume, to the same parameters."""
    run(max_samples=60, checkpoint_dir=tmp_path / "old")
    run(max_samples=60, checkpoint_dir=tmp_path / "new")
    saved = load_checkpoint(checkpoint_path(tmp_path / "old"))
    for name in ("clipped", "norm_sum"):
        del saved["counters"][name]
    save_checkpoint(checkpoint_path(tmp_path / "old"), saved)
    old = run(max_samples=120, checkpoint_dir=tmp_path / "old")
    new = run(max_samples=120, checkpoint_dir=tmp_path / "new")
    assert old["resumed_at"] == new["resumed_at"] == [60]
    for name, value in params(tmp_path / "new").items():
        assert torch.equal(value, params(tmp_path / "old")[name]), name


@pytest.mark.parametrize("change", ["an unknown counter", "a counter missing"])
def test_a_checkpoint_of_another_format_is_still_refused_in_one_line(tmp_path, change):
    run(max_samples=60, checkpoint_dir=tmp_path)
    saved = load_checkpoint(checkpoint_path(tmp_path))
    if change == "an unknown counter":
        saved["counters"]["later"] = 1
    else:
        del saved["counters"]["samples"]
    save_checkpoint(checkpoint_path(tmp_path), saved)
    with pytest.raises(UserError, match="not in the format this version of tlstm-bench writes") as caught:
        run(max_samples=120, checkpoint_dir=tmp_path)
    assert "\n" not in str(caught.value)
