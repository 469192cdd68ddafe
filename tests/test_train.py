"""The training loop: learning, exact resume after a kill, NaN handling, presets, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.errors import UserError
from tlstm_bench.tasks.algorithmic import AlgorithmicTask
from tlstm_bench.training import PRESETS, checkpoint_path, train

torch.set_num_threads(1)  # small models: one thread is fastest and keeps runs comparable


def quick(**kwargs):
    """A run of a few dozen steps of a tiny model."""
    base = dict(task="memorization", depth=2, channels=6, max_samples=15 * 24, eval_every=15 * 8,
                progress=False, seed=1)
    base.update(kwargs)
    if "epochs" in kwargs:
        base.pop("max_samples")
    if base["task"] == "memorization":
        base.setdefault("symbols", 3)
    config = base.pop("config", "2d")
    return train(config, **base)


def final_params(checkpoint_dir):
    return torch.load(checkpoint_path(checkpoint_dir), weights_only=True)["model"]


def assert_same_params(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_a_few_steps_reduce_the_loss():
    record = quick(config="slstm", channels=16, max_samples=15 * 60, eval_every=15 * 20)
    losses = [h["train_loss"] for h in record["history"]]
    assert record["status"] == "ok" and len(losses) == 3
    assert losses[-1] < losses[0] - 0.2
    assert record["samples_seen"] == 900 and record["steps"] == 60
    assert record["metric"] == "accuracy" and 0.0 <= record["test_metric"] <= 1.0
    for field in ("config", "task", "preset", "depth", "channels", "tensor_size", "params", "valid_metric",
                  "sequence_accuracy", "samples_to_solve", "solved", "wall_time_s", "seed", "git_commit",
                  "torch_version", "device_name", "threads"):
        assert field in record
    assert record["valid_metric"] is None  # the algorithmic tasks have only a test set
    assert record["samples_per_s"] == pytest.approx(900 / record["wall_time_s"])  # issue 19: training speed
    # What the run learned, answer position by answer position: at every evaluation and at the end.
    assert len(record["test_by_position"]) == record["task_options"]["symbols"] == 3
    assert sum(record["test_by_position"]) / len(record["test_by_position"]) == pytest.approx(record["test_metric"])
    assert record["history"][-1]["by_position"] == record["test_by_position"]


def test_a_solved_task_stops_and_records_samples_to_solve(monkeypatch):
    # An evaluation that reports a solved test set at the third evaluation.
    calls = []

    def evaluate(self, model, split="test", *, device="cpu"):
        calls.append(split)
        return {"metric": 1.0 if len(calls) >= 3 else 0.5, "sequence_accuracy": 0.0, "loss": 1.0}

    monkeypatch.setattr(AlgorithmicTask, "evaluate", evaluate)
    record = quick(max_samples=15 * 100, eval_every=30)
    assert record["solved"] and record["samples_to_solve"] == 90 and record["samples_seen"] == 90
    assert record["stop_reason"] == "solved" and record["test_metric"] == 1.0
    assert record["stop_detail"].startswith("stopped: solved at sample 90 of at most 1,500")


@pytest.mark.parametrize("case", ["memorization", "enwik8", "digits"])
def test_checkpoint_kill_resume_equals_an_uninterrupted_run(tmp_path, case):
    if case == "memorization":
        kwargs = dict(config="3d-cn", depth=1, max_samples=15 * 20, eval_every=15 * 6, checkpoint_every=15 * 4)
        stop = 11  # killed 3 steps after the checkpoint at step 8
    elif case == "enwik8":
        rng = np.random.default_rng(0)
        (tmp_path / "enwik8").write_bytes(bytes(rng.choice(list(b"abcdefg <>"), 12_000).tolist()))
        kwargs = dict(config="slstm", task="enwik8", data_dir=tmp_path, seq_len=10, batch_size=8, epochs=2,
                      eval_every=8 * 40, checkpoint_every=8 * 25)
        stop = 160  # in the second epoch: the carried state and the data position must come back
    else:
        kwargs = dict(config="2d", task="mnist", source="digits", batch_size=50, epochs=2, eval_every=400,
                      checkpoint_every=200)
        stop = 30
    whole = quick(checkpoint_dir=tmp_path / "whole", **kwargs)
    with pytest.raises(KeyboardInterrupt):
        quick(checkpoint_dir=tmp_path / "cut", stop_after_steps=stop, **kwargs)
    resumed = quick(checkpoint_dir=tmp_path / "cut", **kwargs)
    assert resumed["resumed_at"] and resumed["resumed_at"][0] < resumed["samples_seen"]
    assert_same_params(final_params(tmp_path / "whole"), final_params(tmp_path / "cut"))
    assert resumed["history"] == whole["history"]
    assert resumed["test_metric"] == whole["test_metric"] and resumed["valid_metric"] == whole["valid_metric"]


def test_a_real_sigkill_then_resume_gives_the_same_parameters(tmp_path):
    kwargs = dict(config="2d", task="memorization", depth=2, channels=6, symbols=3, max_samples=15 * 150,
                  eval_every=15 * 50, checkpoint_every=15 * 5, seed=2, progress=False, threads=1)
    script = textwrap.dedent(f"""
        from tlstm_bench.training import train
        train({kwargs['config']!r}, **{ {k: v for k, v in kwargs.items() if k != 'config'}!r},
              checkpoint_dir={str(tmp_path / 'cut')!r})
    """)
    proc = subprocess.Popen([sys.executable, "-c", script])
    path = checkpoint_path(tmp_path / "cut")
    deadline = time.monotonic() + 120
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    at_kill = torch.load(path, weights_only=True)["counters"]["samples"]
    assert at_kill < kwargs["max_samples"]
    config = kwargs.pop("config")
    resumed = train(config, checkpoint_dir=tmp_path / "cut", **kwargs)
    whole = train(config, checkpoint_dir=tmp_path / "whole", **kwargs)
    assert resumed["resumed_at"] == [at_kill]
    assert_same_params(final_params(tmp_path / "whole"), final_params(tmp_path / "cut"))
    assert resumed["history"] == whole["history"]


def test_resume_says_so_and_refuses_another_runs_checkpoint(tmp_path, capsys):
    with pytest.raises(KeyboardInterrupt):
        quick(checkpoint_dir=tmp_path, stop_after_steps=20, progress=True)
    assert "resume from the checkpoint" in capsys.readouterr().err
    quick(checkpoint_dir=tmp_path, progress=True)
    assert "resuming from checkpoint" in capsys.readouterr().err
    with pytest.raises(UserError, match="belongs to another run"):
        quick(checkpoint_dir=tmp_path, seed=7)
    checkpoint_path(tmp_path).write_bytes(b"garbage")
    with pytest.raises(UserError, match="is corrupt"):
        quick(checkpoint_dir=tmp_path)


def test_a_nan_loss_gives_a_failed_record_not_a_metric(monkeypatch):
    real_loss = AlgorithmicTask.loss
    calls = []

    def loss(self, logits, batch):
        calls.append(1)
        value = real_loss(self, logits, batch)
        return value * float("nan") if len(calls) == 5 else value

    monkeypatch.setattr(AlgorithmicTask, "loss", loss)
    record = quick()
    assert record["status"] == "failed" and "nan" in record["error"] and "step 5" in record["error"]
    assert record["test_metric"] is None and record["valid_metric"] is None and record["sequence_accuracy"] is None
    assert not record["solved"] and record["samples_seen"] == 4 * 15


def test_presets_resolve_and_bad_settings_are_one_line_errors():
    assert {"memorization-small", "addition-small", "digits-small", "paper-addition", "paper-memorization",
            "paper-enwik8", "paper-mnist"} <= set(PRESETS)
    for preset in PRESETS.values():
        assert (preset.channels is None) != (preset.budget is None)
        assert (preset.max_samples is None) != (preset.epochs is None)
    with pytest.raises(UserError, match="is for memorization, not addition"):
        train("2d", task="addition", depth=1, preset="memorization-small")
    with pytest.raises(UserError, match="use --max-samples"):
        train("2d", task="addition", depth=1, channels=4, epochs=1)
    with pytest.raises(UserError, match="unknown preset"):
        train("2d", task="addition", depth=1, preset="huge")
    with pytest.raises(UserError, match="--channels M or --budget N"):
        train("2d", task="addition", depth=1)
    with pytest.raises(UserError, match="takes no --data-dir"):
        train("2d", task="addition", depth=1, channels=4, data_dir=".")


def test_paper_presets_are_literal_and_enwik8_trains_50_epochs():
    """SPEC section 7: M = 400 / 100 / 100 for every configuration; enwik8: 10M, 50 epochs, no early stop."""
    assert (PRESETS["paper-addition"].channels, PRESETS["paper-addition"].budget) == (400, None)
    assert (PRESETS["paper-memorization"].channels, PRESETS["paper-memorization"].budget) == (100, None)
    assert (PRESETS["paper-mnist"].channels, PRESETS["paper-mnist"].budget) == (100, None)
    assert PRESETS["paper-mnist"].early_stopping
    enwik8 = PRESETS["paper-enwik8"]
    assert (enwik8.budget, enwik8.epochs, enwik8.early_stopping) == ("10M", 50, False)


def _flat_validation(monkeypatch):
    """Every validation gives the same metric: no evaluation after the first is an improvement."""
    from tlstm_bench.tasks.mnist import MNIST

    monkeypatch.setattr(MNIST, "evaluate", lambda self, model, split, device="cpu": {"metric": 0.5, "loss": 1.0})


def test_early_stopping_is_an_option(monkeypatch):
    _flat_validation(monkeypatch)
    common = dict(task="mnist", depth=1, preset="digits-small", channels=4, epochs=2, batch_size=50,
                  eval_every=100, patience=2, progress=False)
    stopped = train("2d", **common)
    assert stopped["stop_reason"] == "early_stopping" and stopped["early_stopping"] is True
    assert stopped["patience"] == 2 and len(stopped["history"]) == 3  # one best, then two without improvement
    full = train("2d", **common, early_stopping=False)
    assert full["stop_reason"] == "epochs" and full["early_stopping"] is False and full["patience"] is None
    assert full["epochs_done"] == 2 and full["samples_seen"] > stopped["samples_seen"]
    # online tasks stop when solved; early stopping does not apply to them
    assert quick(max_samples=30)["early_stopping"] is None
    with pytest.raises(UserError, match="early_stopping must be true or false"):
        train("2d", **common, early_stopping="no")


def test_the_record_and_the_last_line_say_why_the_run_stopped(monkeypatch):
    """Issue 30: digits-small stopped at 7,542 of 12,570 samples and said nothing of why."""
    _flat_validation(monkeypatch)
    notes = []
    record = train("2d", task="mnist", depth=1, preset="digits-small", channels=4, epochs=2, batch_size=50,
                   eval_every=100, patience=2, progress=lambda e: notes.append(e.message) if e.kind == "note" else 0)
    total = round(2 * record["samples_seen"] / record["epochs_done"])  # two epochs
    assert record["stop_reason"] == "early_stopping"
    assert record["stop_detail"] == (f"stopped early at sample {record['samples_seen']:,} of {total:,}: valid "
                                     "accuracy 0.5000 (sample 100) was not beaten in 2 evaluations (--patience 2; "
                                     "--no-early-stopping trains on)")
    assert notes[-1] == record["stop_detail"]
    assert quick(max_samples=30)["stop_detail"] == "stopped at --max-samples 30, not solved"


def test_records_carry_the_window_in_the_config_string():
    record = quick(config="3d:window=appendix", max_samples=30)
    assert record["status"] == "ok" and record["config"] == "3d:window=appendix"
    assert record["params"] == quick(config="3d", max_samples=30)["params"]


def test_init_knobs_are_in_the_config_the_record_and_its_key(tmp_path):
    """An initialisation knob (docs/fidelity.md rows 13-17) never happens unasked, is in the record
    (its config string and ``init``), and is a run of its own: its own key and checkpoint."""
    plain, normal = quick(config="3d-cn", max_samples=30), quick(config="3d-cn:input_init=normal", max_samples=30)
    assert plain["config"] == "3d-cn" and normal["config"] == "3d-cn:input_init=normal"
    assert plain["init"]["input_init"] == "uniform" and normal["init"]["input_init"] == "normal"
    assert plain["init"]["cell_kernel"] == "uniform" and plain["init"]["bias_init"] == "zeros"
    assert plain["key"] != normal["key"] and plain["params"] == normal["params"]
    quick(config="3d-cn", checkpoint_dir=tmp_path, max_samples=30)
    with pytest.raises(UserError, match="belongs to another run"):
        quick(config="3d-cn:input_init=normal", checkpoint_dir=tmp_path, max_samples=60)
    with pytest.raises(UserError, match="unknown input_init"):
        quick(config="3d-cn:input_init=big")


def test_a_time_limit_stops_training_keeps_the_record_and_the_key(tmp_path):
    """--time-limit: the run stops, is evaluated and says why; the key is the unlimited run's,
    and the same command again goes on from the checkpoint instead of stopping at once."""
    limited = quick(time_limit_s=1e-6, checkpoint_dir=tmp_path)
    assert limited["status"] == "ok" and limited["stop_reason"] == "time_limit"
    assert limited["samples_seen"] == 0 and len(limited["history"]) == 1 and limited["time_limit_s"] == 1e-6
    assert limited["stop_detail"].startswith("stopped at --time-limit 1e-06 s, sample 0 of ")
    full = quick(checkpoint_dir=tmp_path)
    assert full["key"] == limited["key"] and full["time_limit_s"] is None
    assert full["stop_reason"] == "max_samples" and full["samples_seen"] == 15 * 24
    with pytest.raises(UserError, match="--time-limit must be above 0"):
        quick(time_limit_s=0)


def test_digits_preset_trains_mnist_offline_with_forget_bias_4():
    record = train("3d", task="pmnist", depth=1, preset="digits-small", channels=4, epochs=1, batch_size=50,
                   progress=False)
    assert record["status"] == "ok" and record["forget_bias"] == 4.0
    assert record["task_options"]["source"] == "digits" and record["task_info"]["seq_len"] == 64
    assert record["valid_metric"] is not None and record["test_metric"] is not None


# ---- the CLI ----------------------------------------------------------------------------
runner = CliRunner()


def one_line_error(result, code=2):
    assert result.exit_code == code, result.output
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert lines[-1].startswith("error:") and "Traceback" not in result.output
    return lines[-1]


def test_cli_trains_and_saves_the_record(tmp_path):
    result = runner.invoke(app, ["train", "2d", "--task", "memorization", "--symbols", "2", "--depth", "2",
                                 "--channels", "4", "--max-samples", "60", "--eval-every", "30",
                                 "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (path,) = (tmp_path / "store" / "training").glob("*.json")
    record = json.loads(path.read_text())
    assert record["task"] == "memorization" and record["samples_seen"] == 60 and record["status"] == "ok"
    assert record["causal"] is True


def test_cli_alphabet_is_a_task_option(tmp_path):
    """Issue 30: docs/tasks.md documented --alphabet (64) but train had no such option."""
    args = ["train", "2d", "--task", "memorization", "--symbols", "3", "--channels", "4", "--max-samples", "30",
            "--eval-every", "30", "--results-dir", str(tmp_path)]
    result = runner.invoke(app, [*args, "--alphabet", "5"])
    assert result.exit_code == 0, result.output
    (path,) = (tmp_path / "store" / "training").glob("*.json")
    record = json.loads(path.read_text())
    assert record["task_options"]["alphabet"] == 5  # what the built task reports: its symbols
    line = one_line_error(runner.invoke(app, [*args, "--alphabet", "65"]))
    assert "--alphabet" in line and "64" in line


def test_cli_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("TLSTM_BENCH_DATA", raising=False)
    line = one_line_error(runner.invoke(app, ["train", "2d", "--task", "wiki", "--channels", "4"]))
    assert "unknown task 'wiki'" in line
    line = one_line_error(runner.invoke(app, ["train", "2d", "--task", "enwik8", "--channels", "4"]))
    assert "--data-dir" in line
    line = one_line_error(runner.invoke(app, ["train", "2d", "--task", "mnist", "--channels", "4",
                                              "--data-dir", str(tmp_path / "missing")]))
    assert "does not exist" in line
    (tmp_path / "enwik8.zip").write_bytes(b"PK\x03\x04 truncated")
    line = one_line_error(runner.invoke(app, ["train", "2d", "--task", "enwik8", "--channels", "4",
                                              "--data-dir", str(tmp_path)]))
    assert "enwik8.zip" in line


def test_cli_exits_1_on_a_nan_and_saves_the_failed_record(tmp_path, monkeypatch):
    monkeypatch.setattr(AlgorithmicTask, "loss", lambda self, logits, batch: logits.sum() * float("inf"))
    result = runner.invoke(app, ["train", "slstm", "--task", "addition", "--digits", "1", "--channels", "4",
                                 "--max-samples", "30", "--results-dir", str(tmp_path)])
    assert "training failed" in one_line_error(result, code=1)
    (path,) = (tmp_path / "store" / "training").glob("*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "failed" and record["test_metric"] is None


def test_paper_defaults_without_a_preset():
    record = train("slstm", task="addition", digits=1, depth=1, channels=4, max_samples=30, progress=False)
    assert record["batch_size"] == 15 and record["lr"] == 1e-3 and record["forget_bias"] == 1.0
    assert record["samples_seen"] == 30 and record["preset"] is None
    with pytest.raises(UserError, match="not both"):
        train("slstm", task="mnist", source="digits", depth=1, channels=4, max_samples=30, epochs=1)


def test_a_finished_run_can_be_extended_with_a_larger_limit(tmp_path):
    quick(checkpoint_dir=tmp_path / "a", max_samples=15 * 6)
    longer = quick(checkpoint_dir=tmp_path / "a", max_samples=15 * 12)
    straight = quick(checkpoint_dir=tmp_path / "b", max_samples=15 * 12)
    assert longer["samples_seen"] == straight["samples_seen"] == 180
    assert_same_params(final_params(tmp_path / "a"), final_params(tmp_path / "b"))


# ---- a run's identity: killed or finished, run again, one record ------------------------------
SMALL_RUN = ["train", "2d", "--task", "memorization", "--symbols", "3", "--depth", "2", "--channels", "6",
             "--max-samples", str(15 * 240), "--seed", "2", "--threads", "1"]


def _records(results):
    return sorted((results / "store" / "training").glob("*.json"))


def _kill_at(args: list[str], moment: str, results, ck, delay: float) -> bool:
    """Start the real command line, SIGKILL it at ``moment``, and check the state it left; False when
    a kill meant to come before the first checkpoint came after it (retry sooner)."""
    proc = subprocess.Popen([sys.executable, "-m", "tlstm_bench", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    path = checkpoint_path(ck)
    start = time.monotonic()

    def reached() -> bool:
        if moment == "before-checkpoint":
            return time.monotonic() > start + delay
        return path.exists() if moment == "after-checkpoint" else bool(_records(results))

    while not reached() and proc.poll() is None and time.monotonic() < start + 120:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    if moment != "after-record":
        assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
        if moment == "before-checkpoint" and delay > 0 and (path.exists() or _records(results)):
            return False  # the kill came too late for this moment on a fast (or idle) machine: sooner
        assert not _records(results)
    return True


@pytest.mark.parametrize("moment", ["before-checkpoint", "after-checkpoint", "after-record"])
def test_a_train_command_killed_and_run_again_leaves_exactly_one_record(tmp_path, moment):
    """Issue 11: killed after writing its record, `train` resumed from its final checkpoint and wrote
    a second record with a new id. A run's id now comes from its settings and the code version: run
    again, it finishes (resuming from the checkpoint) and writes its record once, or does nothing."""
    results, ck = tmp_path / "res", tmp_path / "ck"
    every = 15 * 200 if moment == "before-checkpoint" else 15 * 40  # the first checkpoint: late, or soon
    args = [*SMALL_RUN, "--eval-every", str(every), "--checkpoint-every", str(every), "--checkpoint-dir", str(ck),
            "--results-dir", str(results)]
    for delay in (3.0, 1.5, 0.5, 0.0):  # a kill before the first checkpoint, however fast this machine
        if _kill_at(args, moment, results, ck, delay):
            break
        shutil.rmtree(results, ignore_errors=True)
        shutil.rmtree(ck, ignore_errors=True)
    if moment == "after-checkpoint":
        assert checkpoint_path(ck).exists()
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    (path,) = _records(results)
    written = path.read_bytes()
    record = json.loads(written)
    assert record["status"] == "ok" and record["samples_seen"] == 15 * 240 and record["id"] == path.stem
    once_more = runner.invoke(app, args)
    assert once_more.exit_code == 0 and "already trained" in once_more.stdout
    assert _records(results) == [path] and path.read_bytes() == written


def test_a_train_command_sent_sigterm_stops_as_on_ctrl_c_and_resumes(tmp_path):
    """``kill``, ``scancel`` or a batch job's time limit send SIGTERM: `train` died mid-line with no
    word of where to resume. It now stops as on Ctrl-C: the note, exit 130, no record; run again,
    it resumes from the checkpoint and finishes."""
    results, ck = tmp_path / "res", tmp_path / "ck"
    args = [*SMALL_RUN, "--eval-every", str(15 * 40), "--checkpoint-every", str(15 * 40), "--checkpoint-dir", str(ck),
            "--results-dir", str(results)]
    proc = subprocess.Popen([sys.executable, "-m", "tlstm_bench", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not checkpoint_path(ck).exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    flat = " ".join(err.split())  # the note wraps at the terminal's width, where depends on the folder's length
    assert "interrupted at sample" in flat and "by running the same command again" in flat
    assert not _records(results)
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and "resuming from checkpoint" in again.output, again.output
    (path,) = _records(results)
    assert json.loads(path.read_bytes())["samples_seen"] == 15 * 240


def test_a_run_stopped_between_its_final_checkpoint_and_its_record_writes_it_once(tmp_path):
    results, ck = tmp_path / "res", tmp_path / "ck"
    args = [*SMALL_RUN, "--eval-every", str(15 * 80), "--checkpoint-dir", str(ck), "--results-dir", str(results)]
    # the core alone: trained to the end and checkpointed, but no record (as if killed right then)
    train("2d", task="memorization", symbols=3, depth=2, channels=6, max_samples=15 * 240, eval_every=15 * 80,
          seed=2, threads=1, checkpoint_dir=ck, progress=False)
    first = runner.invoke(app, args)
    assert first.exit_code == 0 and "resuming" in first.output
    second = runner.invoke(app, args)
    assert second.exit_code == 0 and "already trained" in second.stdout
    assert len(_records(results)) == 1


def test_a_record_that_cannot_be_written_after_training_is_kept_and_the_error_says_where(tmp_path, monkeypatch):
    """Issue 11: the record write failed with a traceback after training and the result was lost."""
    import tlstm_bench.training as training

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    results = tmp_path / "res"
    real = training.train

    def train_then_break_the_store(*args, **kwargs):
        record = real(*args, **kwargs)
        (results / "store").mkdir(parents=True, exist_ok=True)
        (results / "store" / "training").write_text("a file where the records folder was")  # e.g. a full disk
        return record

    monkeypatch.setattr(training, "train", train_then_break_the_store)
    result = runner.invoke(app, ["train", "2d", "--task", "memorization", "--symbols", "2", "--channels", "4",
                                 "--max-samples", "60", "--results-dir", str(results)])
    line = one_line_error(result, code=1)
    kept = tmp_path / "cache" / "tlstm-bench" / "unsaved" / "training"
    assert str(kept) in line and "after the work was done" in line
    (path,) = kept.glob("*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and record["samples_seen"] == 60


def test_a_checkpoint_folder_that_cannot_be_written_is_refused_before_training(tmp_path):
    """Issue 11: a file as --checkpoint-dir crashed at the first checkpoint, after training began."""
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="is a file"):
        train("2d", task="memorization", symbols=3, depth=1, channels=4, max_samples=30, progress=False,
              checkpoint_dir=tmp_path / "file", checkpoint_every=15)


# ---- --keep-checkpoints: every checkpoint kept, each a whole one -------------------------------
def test_kept_checkpoints_are_every_checkpoint_and_each_resumes_from_there(tmp_path):
    from tlstm_bench.training.checkpoint import kept_path

    kwargs = dict(max_samples=15 * 12, eval_every=15 * 6, checkpoint_every=15 * 3)
    record = quick(checkpoint_dir=tmp_path / "a", keep_checkpoints=True, **kwargs)
    kept = sorted((tmp_path / "a" / "kept").iterdir())
    assert [p.name for p in kept] == [kept_path(tmp_path, n).name for n in (45, 90, 135, 180)]
    assert kept_path(tmp_path / "a", 45).name == "checkpoint-0000000045.pt"  # names sort in training order
    for path, samples in zip(kept, (45, 90, 135, 180)):
        assert torch.load(path, weights_only=True)["counters"]["samples"] == samples
    assert kept[-1].read_bytes() == checkpoint_path(tmp_path / "a").read_bytes()
    # Not part of the run: the same key, and no kept folder without the option.
    assert record["key"] == quick(checkpoint_dir=tmp_path / "b", **kwargs)["key"]
    assert not (tmp_path / "b" / "kept").exists()
    # A kept checkpoint is a whole one: put back as checkpoint.pt, the run goes on from there exactly.
    (tmp_path / "c").mkdir()
    shutil.copyfile(kept[1], checkpoint_path(tmp_path / "c"))
    again = quick(checkpoint_dir=tmp_path / "c", **kwargs)
    assert again["resumed_at"] == [90]
    assert_same_params(final_params(tmp_path / "a"), final_params(tmp_path / "c"))


def test_a_kill_between_a_checkpoint_and_its_kept_copy_loses_no_copy(tmp_path, monkeypatch):
    from tlstm_bench.training import loop as module

    real, calls = module.keep_copy, []

    def killed_on_the_second(path, keep):
        calls.append(keep.name)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the checkpoint at 90 is written, its copy is not
        real(path, keep)

    monkeypatch.setattr(module, "keep_copy", killed_on_the_second)
    kwargs = dict(max_samples=15 * 9, eval_every=15 * 6, checkpoint_every=15 * 3, keep_checkpoints=True)
    with pytest.raises(KeyboardInterrupt):
        quick(checkpoint_dir=tmp_path / "a", **kwargs)
    assert [p.name for p in (tmp_path / "a" / "kept").iterdir()] == ["checkpoint-0000000045.pt"]
    monkeypatch.setattr(module, "keep_copy", real)
    quick(checkpoint_dir=tmp_path / "a", **kwargs)
    assert sorted(p.name for p in (tmp_path / "a" / "kept").iterdir()) == [
        f"checkpoint-{n:010d}.pt" for n in (45, 90, 135)]


def test_keep_checkpoints_needs_a_checkpoint_folder(tmp_path):
    with pytest.raises(UserError, match="give --checkpoint-dir too"):
        quick(keep_checkpoints=True)
    result = CliRunner().invoke(app, ["train", "2d", "--task", "memorization", "--symbols", "3", "--channels", "4",
                                      "--keep-checkpoints", "--results-dir", str(tmp_path)])
    one_line_error(result)


def test_a_disk_that_refuses_a_kept_copy_is_a_warning_once_and_the_run_goes_on(tmp_path, monkeypatch):
    import errno

    from tlstm_bench.training import loop

    def full(path, keep):
        raise OSError(errno.ENOSPC, "No space left on device", str(keep))

    monkeypatch.setattr(loop, "keep_copy", full)
    args = ["train", "2d", "--task", "memorization", "--symbols", "3", "--channels", "4", "--max-samples", "45",
            "--eval-every", "15", "--checkpoint-dir", str(tmp_path / "C"), "--keep-checkpoints",
            "--results-dir", str(tmp_path / "R")]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert result.output.count("a kept checkpoint was not saved") == 1 and "No space left" in result.output
    assert checkpoint_path(tmp_path / "C").is_file()  # the checkpoint itself is saved
    (record,) = _records(tmp_path / "R")
    assert json.loads(record.read_bytes())["samples_seen"] == 45
