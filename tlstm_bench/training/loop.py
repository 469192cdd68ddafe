"""The training loop: Adam, periodic evaluation, early stopping, checkpoints, exact resume.

What happens (paper appendix, SPEC section 9):

* the model is built with the task's input/output sizes and forget-gate bias (4 for
  MNIST/pMNIST, 1 otherwise) and trained with Adam at lr 1e-3 on the mean NLL;
* every ``eval_every`` training samples it is evaluated: on the test set for the
  online algorithmic tasks (the run stops the first time every answer symbol is right,
  recording ``samples_to_solve``, as in the paper), on the validation set otherwise
  (keeping the best parameters; the run stops after ``patience`` evaluations without
  improvement, and the test metric is measured with the best parameters);
* with ``checkpoint_dir``, model, optimizer, data position, carried recurrent state,
  RNG state and counters (:class:`~.checkpoint.RunState`) are saved atomically at every
  evaluation and every ``checkpoint_every`` samples; run again with the same settings and it
  resumes from there and ends with exactly the parameters of an uninterrupted run (same
  seed, same machine and thread count); with ``keep_checkpoints`` every checkpoint is also
  kept, as ``kept/checkpoint-<samples>.pt`` beside the latest;
* with ``time_limit_s`` the run stops after that many seconds of wall time, is evaluated and
  records how far it got (``stop_reason = "time_limit"``; run it again to go on); so it does at
  ``$TLSTM_BENCH_DEADLINE`` (a UNIX time: :func:`tlstm_bench.checks.deadline`), with
  ``stop_reason = "deadline"``;
* a NaN or infinite training loss stops the run: :func:`train` then *returns* a record
  with ``status="failed"``, an ``error`` message and every metric ``None`` (it does not
  raise, so a sweep can store the failed cell; the CLI exits 1). Bad arguments and bad
  data files raise :class:`~tlstm_bench.errors.UserError`.

:func:`train` is the whole run; :class:`Trainer` is the run in parts (build, resume, step,
evaluate, checkpoint, finish). Progress goes to the ``progress`` reporter
(:mod:`tlstm_bench.events`); nothing is printed unless asked for.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Callable

import torch

from .. import checks
from ..atomic import clean_stale_temps, disk_problem
from ..audit import causal
from ..errors import UserError
from ..events import Event, Progress, Reporter, note, reporter
from ..models import build_model, training_implementation
from ..models.memory import check_fits, model_memory
from ..results import code_version, provenance
from ..results.schema import KEY_WHEN_SET, record_key, versioned_id
from ..results.view import metric_text, whole_percents
from ..tasks import Task
from ..vocab import ALGORITHMIC_TASKS, torch_device
from ..warmup import parse_warmup
from .checkpoint import (Counters, RunState, checkpoint_path, keep_copy, kept_path, load_checkpoint,
                         save_checkpoint)
from .settings import TrainSettings


def train(config: "str | TrainSettings", *, progress: Progress = False, on_start: Callable[[dict], None] | None = None,
          stop_after_steps: int | None = None, **settings) -> dict:
    """Train one model on one task and return its record (see the module docstring).

    Args:
        config: a :class:`TrainSettings`, or a configuration name (``3d-cn``,
            ``tlstm:dims=4``) with the settings as keywords: ``depth``, ``task``,
            ``channels`` / ``budget``, ``preset``, ... (the fields of TrainSettings); any
            other keyword is a task option (``digits``, ``symbols``, ``seq_len``, ``source``).
        progress: a reporter of :mod:`tlstm_bench.events`, True for plain lines on stderr,
            or False (the default): silence.
        on_start: called with the run's identity (the record's settings, ``key`` and ``id``)
            once the model is built, before the checkpoint is read and the first step; it
            may raise to stop the run (the CLI skips a run whose record it already has).
        stop_after_steps: test hook that simulates a kill: raise ``KeyboardInterrupt``
            right after optimizer step N, before anything of that step is checkpointed.
    """
    started = time.monotonic()
    asked = config if isinstance(config, TrainSettings) else TrainSettings.of(config, **settings)
    if isinstance(config, TrainSettings) and settings:
        raise TypeError(f"give the settings in the TrainSettings, not as keywords too: {', '.join(settings)}")
    if stop_after_steps is not None:
        checks.integer(stop_after_steps, "stop_after_steps")
    deadline = checks.deadline()
    resolved, task = asked.resolve()
    device = torch_device(resolved.device)
    if resolved.checkpoint_dir is not None:  # before training, not at the first checkpoint
        checks.output_dir(resolved.checkpoint_dir, "--checkpoint-dir")
    _check_memory(resolved, task, device)
    if resolved.threads is not None:
        torch.set_num_threads(resolved.threads)
    # Decaying recurrent states produce subnormal floats, which slow CPU arithmetic
    # 10-100x (SPEC section 8); flushing them to zero changes nothing measurable.
    torch.set_flush_denormal(True)
    trainer = Trainer(resolved, task, device, reporter(progress), started=started, deadline=deadline)
    if on_start is not None:
        on_start(dict(trainer.record))
    trainer.resume()
    trainer.run(stop_after_steps)
    return trainer.finish()


def _check_memory(s: TrainSettings, task: Task, device: torch.device) -> None:
    """Refuse, before the model is built, a run that cannot fit: the training pass (parameters,
    gradients, Adam's moments, a minibatch's activations) or the evaluation pass."""
    size = dict(channels=s.channels, budget=s.budget, seq_len=task.seq_len, optimizer=True, **task.model_io())
    passes = (model_memory(s.config, s.depth, batch=s.batch_size, **size),
              model_memory(s.config, s.depth, batch=task.eval_batch_size, backward=False, **size))
    check_fits(max(passes, key=lambda e: e.total), str(device),
               f"training {s.config} at L={s.depth} on {task.name} (batch {s.batch_size}, T={task.seq_len})",
               "lower --batch-size, the depth or --channels/--budget")


# What a failed run's record holds of its metrics: none (a diverged model's numbers mean nothing).
NO_METRICS = {"valid_metric": None, "test_metric": None, "sequence_accuracy": None, "test_by_position": None}

# Why a run stopped where running it again goes on (with a larger limit, more time, a later deadline).
EXTENDABLE = ("max_samples", "epochs", "time_limit", "deadline")

# What a checkpoint must match to be resumed (a subset of the record's identity); the settings of
# ``KEY_WHEN_SET`` (a warm-up, a gradient clip) too when the run has them, so that the checkpoints
# of runs without them still fit.
CHECKPOINT_KEY = ("config", "task", "task_options", "depth", "channels", "batch_size", "seed", "lr")


def checkpoint_key(record: dict) -> dict:
    """What of a run's identity its checkpoint must match (:data:`CHECKPOINT_KEY`, and the warm-up
    and the clip when set)."""
    key = {k: record[k] for k in CHECKPOINT_KEY}
    key.update({k: record[k] for k in KEY_WHEN_SET if record.get(k) is not None})
    return key


def _identity(model, task: Task, s: TrainSettings, device: torch.device) -> dict:
    """What determines the run's result (a record's identity), with its ``key`` and ``id``.

    The key hashes the fields that ``results.schema.KEY_FIELDS["train"]`` names, as a sweep
    cell's does; the id adds the code version. Running the same command again (killed or
    finished) gives the same id, so its record is replaced, never duplicated.
    """
    head = {
        "kind": "train", "config": model.arch.label, "task": task.name, "preset": s.preset, "depth": s.depth,
        "channels": model.channels, "tensor_size": model.tensor_size,
        "params": sum(p.numel() for p in model.parameters()), "budget": s.budget,
        "task_options": task.options(), "task_info": task.describe(), "metric": task.metric,
        "batch_size": s.batch_size, "lr": s.lr, "lr_warmup": s.lr_warmup, "clip_grad_norm": s.clip_grad_norm,
        "forget_bias": task.forget_bias,
        "max_samples": s.max_samples, "epochs": s.epochs, "eval_every": s.eval_every,
        "patience": s.patience if s.early_stopping else None,
        "early_stopping": s.early_stopping if not task.online else None, "sample_unit": task.sample_unit,
        "implementation": model.implementation, "seed": s.seed, "flush_denormal": True, "device": device.type,
        "init": model.arch.init, "time_limit_s": s.time_limit_s,
    }
    # The initialisation knobs are in the config string (and so in the key); the time limit is not.
    # The precision, the warm-up and the clip are in every record, in the key only when not the
    # default (record_key).
    head["precision"] = s.precision
    head["key"] = record_key(head)
    head["id"] = versioned_id(head["key"], code_version())
    return head


def choose_loop(model, s: TrainSettings) -> None:
    """The model's sequence loop and precision for this run: the one named, else on a CUDA GPU
    the fastest correct one the shipped tuning table measured for this shape
    (``models.training_implementation``: ``fast`` unless a device run showed ``triton`` faster);
    the record names it (``implementation``, ``precision``)."""
    if s.implementation is None:
        model.implementation = training_implementation(model, s.batch_size, s.precision)
    model.precision = s.precision


def _detach(state):
    if state is None:
        return None
    return type(state)(*(t.detach() for t in state))


class Trainer:
    """One training run in parts: built here, then :meth:`resume`, :meth:`run`, :meth:`finish`.

    ``state`` (a :class:`RunState`) is everything a checkpoint holds; ``record`` the run's
    identity, completed by :meth:`finish`. ``deadline``: a UNIX time at which the run stops as
    at its time limit (``stop_reason = "deadline"``).
    """

    def __init__(self, settings: TrainSettings, task: Task, device: torch.device, report: Reporter, *,
                 started: float, deadline: float | None = None):
        s = self.settings = settings
        self.task, self.device, self.report, self.started = task, device, report, started
        self.deadline = deadline
        torch.manual_seed(s.seed)
        model = build_model(s.config, s.depth, channels=s.channels, budget=s.budget, forget_bias=task.forget_bias,
                            implementation=s.implementation, **task.model_io())
        model.to(device)
        choose_loop(model, s)
        optimizer = torch.optim.Adam(model.parameters(), lr=s.lr)
        stream = task.train_stream(s.batch_size, s.seed)
        self.record = _identity(model, task, s, device)
        self.state = RunState(checkpoint_key(self.record), model, optimizer, stream)
        self.warmup = parse_warmup(s.lr_warmup)
        self.path = checkpoint_path(s.checkpoint_dir) if s.checkpoint_dir is not None else None
        self.epoch_samples = task.epoch_samples(s.batch_size)
        self.checkpoint_every = s.checkpoint_every or s.eval_every
        self.total = s.max_samples if s.max_samples is not None else s.epochs * self.epoch_samples
        self.failed: str | None = None  # why the run failed (a non-finite loss), once it has
        self.refused: set[str] = set()  # the writes a full or read-only disk refused (each said once)

    @property
    def counters(self):
        return self.state.counters

    def resume(self) -> None:
        """Continue from the checkpoint, if there is one (it must be this run's)."""
        if self.path is not None:  # a run killed mid-write left its half-written temporary file
            for left in clean_stale_temps(self.path):
                note(self.report, f"removed {left.name}, a checkpoint write a killed run left unfinished", "detail")
        saved = load_checkpoint(self.path) if self.path is not None else None
        if saved is None:
            return
        if saved["key"] != self.state.key:
            other, mine = saved["key"], self.state.key
            differ = [f"its {name} {other.get(name)}, not {mine.get(name)}" for name in ("lr", *KEY_WHEN_SET)
                      if other.get(name) != mine.get(name)]
            raise UserError(f"checkpoint {self.path} belongs to another run ({other['config']}, {other['task']}, "
                            f"L={other['depth']}, seed {other['seed']}" + "".join(f"; {d}" for d in differ)
                            + "); use another --checkpoint-dir or delete it")
        try:
            self.state.restore(saved, self.device)
        except (RuntimeError, KeyError, ValueError, TypeError, IndexError) as exc:  # right format, other weights
            raise UserError(f"checkpoint {self.path} does not fit this model ({type(exc).__name__}: "
                            f"{str(exc).splitlines()[0][:200]}); delete it to start over") from None
        c = self.counters
        if self.settings.keep_checkpoints:  # a kill between the checkpoint and its kept copy lost the copy
            kept = kept_path(self.settings.checkpoint_dir, c.samples)
            clean_stale_temps(kept)
            if not kept.is_file():
                self.keep()
        c.resumed_at.append(c.samples)
        if c.stop_reason in EXTENDABLE:
            c.stop_reason = None  # a finished run may be extended with a larger limit (or more time)
        note(self.report, f"resuming from checkpoint {self.path} at sample {c.samples:,} (step {c.step:,})")

    def finished(self) -> bool:
        """Whether the run has stopped (solved, early stopping) or reached its length."""
        c, s = self.counters, self.settings
        if c.stop_reason is not None:
            return True
        if s.time_limit_s is not None and time.monotonic() - self.started >= s.time_limit_s:
            c.stop_reason = "time_limit"
        elif s.max_samples is not None and c.samples >= s.max_samples:
            c.stop_reason = "max_samples"
        elif s.epochs is not None and c.samples >= s.epochs * self.epoch_samples:
            c.stop_reason = "epochs"
        elif self.deadline is not None and time.time() >= self.deadline:
            c.stop_reason = "deadline"
            note(self.report, f"stopped at sample {c.samples:,}: ${checks.ENV_DEADLINE} has passed", "warning")
        return c.stop_reason is not None

    def step(self) -> float | None:
        """One minibatch: forward, loss, backward, Adam. Its loss, or None if the loss is not
        finite (nothing is updated then, and ``failed`` says why)."""
        st, c, task = self.state, self.counters, self.task
        batch = st.stream.next()
        if task.stateful and batch.reset:
            st.carried = None
        batch = batch.to(self.device)
        logits, new_state = st.model(batch.x, st.carried if task.stateful else None)
        loss = task.loss(logits, batch)
        value = loss.item()  # the step's one device sync: the check below and the running mean share it
        if not math.isfinite(value):
            self.failed = (f"training loss became {value} at step {c.step + 1} (sample {c.samples:,}); "
                           "no metric is reported. Try a smaller --lr or another seed")
            return None
        st.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.warmup is not None:  # the rate of this step, from the samples before it (so a resume agrees)
            rate = self.warmup.rate(self.settings.lr, c.samples)
            for group in st.optimizer.param_groups:
                group["lr"] = rate
        if self.settings.clip_grad_norm is not None:
            self._clip()
        st.optimizer.step()
        if task.stateful:
            st.carried = _detach(new_state)  # truncated BPTT: the state goes on, the graph does not
        c.step += 1
        c.samples += len(batch)
        c.loss_sum += value
        c.loss_count += 1
        return value

    def _clip(self) -> None:
        """Clip the gradient's total norm to ``clip_grad_norm``; count the steps it clipped and sum
        the norms before the clip, for the next evaluation's history entry."""
        limit, c = self.settings.clip_grad_norm, self.counters
        norm = float(torch.nn.utils.clip_grad_norm_(self.state.model.parameters(), limit))
        c.clipped += norm > limit
        c.norm_sum += norm

    def evaluate(self) -> dict:
        """Evaluate now; update best / solved / early stopping. Returns the result dict."""
        c, s, task, st = self.counters, self.settings, self.task, self.state
        result = task.evaluate(st.model, "test" if task.online else "valid", device=self.device)
        mean = (lambda total: total / c.loss_count) if c.loss_count else (lambda total: None)
        entry = {"samples": c.samples, "step": c.step, "train_loss": mean(c.loss_sum)}
        if s.clip_grad_norm is not None:  # how the clip acted since the last evaluation
            entry.update(clipped=mean(c.clipped), grad_norm=mean(c.norm_sum))
        c.loss_sum, c.loss_count, c.clipped, c.norm_sum = 0.0, 0, 0, 0.0
        c.history.append({**entry, **result})
        c.last_eval = c.samples
        if task.online:
            if result["metric"] >= 1.0 and c.samples_to_solve is None:
                c.samples_to_solve = c.samples
                c.stop_reason = "solved"
        elif task.better(result["metric"], c.best):
            c.best, c.bad_evals = result["metric"], 0
            st.best_state = copy.deepcopy({k: v.detach().cpu() for k, v in st.model.state_dict().items()})
        else:
            c.bad_evals += 1
            if s.early_stopping and c.bad_evals >= s.patience:
                c.stop_reason = "early_stopping"
        return result

    def checkpoint(self) -> None:
        """Save the whole state now (nothing without a checkpoint folder)."""
        if self.path is None:
            return
        c = self.counters
        c.last_checkpoint = c.samples  # the schedule moves on even when the write fails
        wall_time = c.wall_time + time.monotonic() - self.started
        saved = self._written(lambda: save_checkpoint(self.path, self.state.payload(wall_time=wall_time)),
                              "checkpoint not saved",
                              "but a kill now loses the progress since the last checkpoint saved")
        if saved and self.settings.keep_checkpoints:
            self.keep()

    def keep(self) -> None:
        """Copy the checkpoint just saved to ``kept/`` (``keep_checkpoints``)."""
        self._written(lambda: keep_copy(self.path, kept_path(self.settings.checkpoint_dir, self.counters.samples)),
                      "a kept checkpoint was not saved")

    def _written(self, write, what: str, then: str = "") -> bool:
        """Call ``write``; whether it wrote. A full or read-only disk is a warning, once per ``what``:
        the run goes on, its record is what matters. Any other error is raised."""
        try:
            write()
        except OSError as exc:
            problem = disk_problem(exc)
            if problem is None:
                raise
            if what not in self.refused:
                note(self.report, f"{what}: {problem}; training goes on and its record is kept"
                                  + (f", {then}" if then else ""), "warning")
                self.refused.add(what)
            return False
        return True

    def run(self, stop_after_steps: int | None = None) -> None:
        """Step until the run is finished or fails; evaluate and checkpoint on schedule."""
        c, s = self.counters, self.settings
        self.report(Event("start", f"{self.state.model.arch.label} L={s.depth} {self.task.name}",
                          done=min(c.samples, self.total), total=self.total))
        self.state.model.train()
        try:
            while not self.finished():
                loss = self.step()
                if loss is None:
                    break
                if stop_after_steps is not None and c.step >= stop_after_steps:
                    raise KeyboardInterrupt(f"stop_after_steps={stop_after_steps}")
                evaluated = c.samples // s.eval_every > c.last_eval // s.eval_every
                if evaluated:
                    self.evaluate()
                if evaluated or c.samples // self.checkpoint_every > c.last_checkpoint // self.checkpoint_every:
                    self.checkpoint()
                self.report(Event("advance", f"loss {loss:.4f}{self._metric_text()}",
                                  done=min(c.samples, self.total), total=self.total))
        except KeyboardInterrupt:
            where = (f"; resume from the checkpoint in {self.path.parent} (sample {c.last_checkpoint:,}) "
                     "by running the same command again") if self.path is not None else ""
            note(self.report, f"interrupted at sample {c.samples:,}{where}", "warning")
            raise
        finally:
            self.report(Event("end"))

    def _metric_text(self) -> str:
        if not self.counters.history:
            return ""
        split, last = "test" if self.task.online else "valid", self.counters.history[-1]
        clipped = f"  clipped {last['clipped']:.0%}" if last.get("clipped") is not None else ""
        return f"  {split} {self.task.metric} {metric_text(self.task.metric, last['metric'])}{clipped}"

    def finish(self) -> dict:
        """The final evaluation (the last state for online tasks, the best on valid otherwise),
        the last checkpoint, and the complete record."""
        c, task, record = self.counters, self.task, self.record
        record["causal"] = causal(self.state.model.arch, self.settings.depth)
        if self.failed is not None:
            return self._failed_record()
        if not c.history or c.last_eval != c.samples:
            self.evaluate()
        if task.online:
            test, valid_metric = c.history[-1], None
        else:
            if self.state.best_state is not None:
                self.state.model.load_state_dict(self.state.best_state)
            valid_metric = c.best
            test = task.evaluate(self.state.model, "test", device=self.device)
        self.checkpoint()
        c.wall_time += time.monotonic() - self.started
        record.update(
            status="ok", error=None, valid_metric=valid_metric, test_metric=test["metric"],
            sequence_accuracy=test.get("sequence_accuracy"), test_loss=test.get("loss"),
            test_by_position=test.get("by_position"),
            samples_seen=c.samples, samples_to_solve=c.samples_to_solve, solved=c.samples_to_solve is not None,
            steps=c.step, epochs_done=(c.samples / self.epoch_samples) if self.epoch_samples else None,
            stop_reason=c.stop_reason, stop_detail=stop_detail(c, self.settings, self.total, task),
            history=c.history, resumed_at=c.resumed_at, wall_time_s=c.wall_time,
            # samples seen per second of training wall time, evaluations and checkpoints included
            samples_per_s=c.samples / c.wall_time if c.wall_time > 0 else None,
        )
        for name in ("valid_metric", "test_metric"):
            value = record[name]
            if value is not None and not math.isfinite(value):
                record.update(status="failed", error=f"{name} is {value}: the model diverged", **NO_METRICS)
                break
        note(self.report, summary(record), "ok" if record["status"] == "ok" else "error")
        if record.get("test_by_position") and not record["solved"]:  # what an unsolved run has learned
            note(self.report, position_line(record["test_by_position"]), "detail")
        note(self.report, record["stop_detail"], "detail")
        return {**record, **provenance(self.device)}

    def _failed_record(self) -> dict:
        c, record = self.counters, self.record
        record.update(status="failed", error=self.failed, **NO_METRICS, samples_seen=c.samples,
                      samples_to_solve=None, solved=False, steps=c.step, stop_reason="non_finite_loss",
                      stop_detail=f"stopped: {self.failed}", history=c.history, resumed_at=c.resumed_at,
                      wall_time_s=c.wall_time + time.monotonic() - self.started)
        note(self.report, f"failed: {self.failed}", "error")
        return {**record, **provenance(self.device)}


def stop_detail(c: Counters, s: TrainSettings, total: int, task: Task) -> str:
    """Why the run stopped, in words (the record's ``stop_detail``; the CLI prints it last)."""
    if c.stop_reason == "solved":
        return f"stopped: solved at sample {c.samples:,} of at most {total:,} (the whole test set right)"
    if c.stop_reason == "early_stopping":
        best = next((h["samples"] for h in c.history if h["metric"] == c.best), None)
        at = f" (sample {best:,})" if best is not None else ""
        return (f"stopped early at sample {c.samples:,} of {total:,}: valid {task.metric} {c.best:.4f}{at} was not "
                f"beaten in {s.patience} evaluations (--patience {s.patience}; --no-early-stopping trains on)")
    if c.stop_reason == "epochs":
        return f"stopped after its {s.epochs} epochs ({c.samples:,} samples)"
    if c.stop_reason == "max_samples":
        unsolved = task.online and c.samples_to_solve is None
        return f"stopped at --max-samples {s.max_samples:,}" + (", not solved" if unsolved else "")
    if c.stop_reason in ("time_limit", "deadline"):
        when = f"--time-limit {s.time_limit_s:g} s" if c.stop_reason == "time_limit" else f"${checks.ENV_DEADLINE}"
        return f"stopped at {when}, sample {c.samples:,} of {total:,} (run again with its checkpoint to go on)"
    return f"stopped: {c.stop_reason}"


def position_line(by_position: list) -> str:
    """The test accuracy at each answer position, in whole percent, the first answer first."""
    return "test accuracy by answer position (%), first to last: " + whole_percents(by_position)


def summary(record: dict) -> str:
    """One line: what was trained and how it did."""
    parts = [f"{record['config']} L={record['depth']} M={record['channels']} on {record['task']}:"]
    if record["valid_metric"] is not None:
        parts.append(f"valid {record['metric']} {metric_text(record['metric'], record['valid_metric'])},")
    if record["test_metric"] is not None:
        parts.append(f"test {record['metric']} {metric_text(record['metric'], record['test_metric'])}")
    if record["sequence_accuracy"] is not None:
        parts.append(f"(sequences {metric_text('accuracy', record['sequence_accuracy'])})")
    if record["task"] in ALGORITHMIC_TASKS:
        parts.append(f"solved after {record['samples_to_solve']:,} samples" if record["solved"]
                     else f"not solved in {record['samples_seen']:,} samples")
    parts.append(f"[{record['wall_time_s']:.0f} s]")
    return " ".join(parts)
