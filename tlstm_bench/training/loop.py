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
  RNG state and counters are saved atomically at every evaluation and every
  ``checkpoint_every`` samples; run again with the same arguments and it resumes from
  there and ends with exactly the parameters of an uninterrupted run (same seed, same
  machine and thread count);
* a NaN or infinite training loss stops the run: :func:`train` then *returns* a record
  with ``status="failed"``, an ``error`` message and every metric ``None`` (it does not
  raise, so a sweep can store the failed cell; the CLI exits 1). Bad arguments and bad
  data files raise :class:`~tlstm_bench.errors.UserError`.
"""

from __future__ import annotations

import copy
import math
import time

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from .. import checks
from ..audit import causal
from ..errors import UserError
from ..models import build_model
from ..models.memory import MAX_DIM, check_fits, model_memory
from ..results import code_version, provenance
from ..results.schema import record_key, versioned_id
from ..tasks import TASKS, Task, make_task, task_options
from .checkpoint import checkpoint_path, load_checkpoint, save_checkpoint
from .presets import get_preset

LEARNING_RATE = 1e-3
DEFAULT_PATIENCE = 5
PAPER_MAX_SAMPLES = 5_000_000  # algorithmic tasks: 5M online samples
PAPER_EPOCHS = {"enwik8": 50, "mnist": 200, "pmnist": 200}


def _positive(value, what: str):
    """None, or an integer >= 1 (a count of samples, epochs, evaluations)."""
    return None if value is None else checks.integer(value, what)


def _settings(task, preset, channels, budget, max_samples, epochs, batch_size, eval_every, patience,
              data_dir, options, early_stopping=None):
    """Merge the preset with what the caller gave (the caller wins) and build the task."""
    p = get_preset(preset)
    if early_stopping is not None and not isinstance(early_stopping, bool):
        raise UserError(f"early_stopping must be true or false, got {early_stopping!r}")
    name = task or (p.tasks[0] if p else None)
    if name is None:
        raise UserError(f"give --task ({', '.join(TASKS)}) or a --preset")
    if name not in TASKS:
        raise UserError(f"unknown task {name!r}; use one of {', '.join(TASKS)}")
    if p is not None and name not in p.tasks:
        raise UserError(f"preset {p.name} is for {', '.join(p.tasks)}, not {name}")
    opts = dict(p.task_options) if p else {}
    opts.update({k: v for k, v in options.items() if v is not None})
    if data_dir is not None:
        if "data_dir" not in task_options(name):
            raise UserError(f"task {name} generates its data; it takes no --data-dir")
        opts["data_dir"] = data_dir
    if channels is None and budget is None and p is not None:
        channels, budget = p.channels, p.budget
    if max_samples is None and epochs is None and p is not None:
        max_samples, epochs = p.max_samples, p.epochs
    if p is not None:
        batch_size = batch_size or p.batch_size
        eval_every = eval_every or p.eval_every
        patience = patience or p.patience
        early_stopping = p.early_stopping if early_stopping is None else early_stopping
    for value, what in ((max_samples, "--max-samples"), (epochs, "--epochs"), (eval_every, "--eval-every"),
                        (patience, "--patience")):
        _positive(value, what)
    if batch_size is not None:
        checks.integer(batch_size, "--batch-size", maximum=MAX_DIM)
    if max_samples is not None and epochs is not None:
        raise UserError("give --max-samples or --epochs, not both")
    if TASKS[name].online and epochs is not None:
        raise UserError(f"{name} trains online on fresh samples (no epochs); use --max-samples")
    if channels is None and budget is None:
        raise UserError("give --channels M or --budget N (or a --preset that sets one)")
    the_task = make_task(name, **opts)
    batch_size = batch_size or the_task.batch_size
    if max_samples is None and epochs is None:
        if the_task.online:
            max_samples = PAPER_MAX_SAMPLES
        else:
            epochs = PAPER_EPOCHS[name]
    return dict(task=the_task, preset=p.name if p else None, channels=channels, budget=budget,
                max_samples=max_samples, epochs=epochs, batch_size=batch_size,
                eval_every=eval_every or the_task.default_eval_every(batch_size),
                patience=patience or DEFAULT_PATIENCE,
                early_stopping=(True if early_stopping is None else early_stopping) and not the_task.online)


def _device(device) -> torch.device:
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise UserError(f"unknown device {device!r}; use cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda was asked for but this torch has no usable GPU; use --device cpu")
    return device


def _check_memory(config, depth: int, s: dict, task: Task, device: torch.device) -> None:
    """Refuse, before the model is built, a run that cannot fit: the training pass (parameters,
    gradients, Adam's moments, a minibatch's activations) or the evaluation pass."""
    size = dict(channels=s["channels"], budget=s["budget"], seq_len=task.seq_len, optimizer=True,
                **task.model_io())
    passes = (model_memory(config, depth, batch=s["batch_size"], **size),
              model_memory(config, depth, batch=task.eval_batch_size, backward=False, **size))
    check_fits(max(passes, key=lambda e: e.total), str(device),
               f"training {config} at L={depth} on {task.name} (batch {s['batch_size']}, T={task.seq_len})",
               "lower --batch-size, the depth or --channels/--budget")


def _identity(model, task: Task, s: dict, *, depth: int, seed: int, lr: float, device: torch.device) -> dict:
    """What determines the run's result (a record's identity), with its ``key`` and ``id``.

    The key hashes the fields that ``results.schema.KEY_FIELDS["train"]`` names, as a sweep
    cell's does; the id adds the code version. Running the same command again (killed or
    finished) gives the same id, so its record is replaced, never duplicated.
    """
    head = {
        "kind": "train", "config": model.arch.label, "task": task.name, "preset": s["preset"], "depth": depth,
        "channels": model.channels, "tensor_size": model.tensor_size,
        "params": sum(p.numel() for p in model.parameters()), "budget": s["budget"],
        "task_options": task.options(), "task_info": task.describe(), "metric": task.metric,
        "batch_size": s["batch_size"], "lr": lr, "forget_bias": task.forget_bias, "max_samples": s["max_samples"],
        "epochs": s["epochs"], "eval_every": s["eval_every"], "patience": s["patience"] if s["early_stopping"] else None,
        "early_stopping": s["early_stopping"] if not task.online else None, "sample_unit": task.sample_unit,
        "implementation": model.implementation, "seed": seed, "flush_denormal": True, "device": device.type,
    }
    head["key"] = record_key(head)
    head["id"] = versioned_id(head["key"], code_version())
    return head


def _detach(state):
    if state is None:
        return None
    return type(state)(*(t.detach() for t in state))


def train(config, *, task=None, depth, channels=None, budget=None, preset=None, max_samples=None, epochs=None,
          batch_size=None, seed=0, device="cpu", checkpoint_dir=None, data_dir=None, progress=True,
          eval_every=None, checkpoint_every=None, patience=None, early_stopping=None, lr=LEARNING_RATE,
          implementation=None, threads=None, console: Console | None = None, stop_after_steps=None,
          on_start=None, **task_options) -> dict:
    """Train ``config`` at depth L on ``task`` and return one record (see the module docstring).

    Args:
        config: a configuration name or knob string (``3d-cn``, ``tlstm:dims=4``).
        task: ``addition``, ``memorization``, ``enwik8``, ``mnist`` or ``pmnist`` (may be
            left out when the preset names one task).
        depth: L. channels / budget: M, or a parameter budget (``10M``, ``slstm:100``).
        preset: a name from :data:`PRESETS` filling in what is not given.
        max_samples / epochs: how long (online tasks: samples only). Default: the paper's.
        batch_size: default the paper's (15, 100, 50). eval_every: samples between evaluations.
        checkpoint_dir: where to checkpoint and resume from. checkpoint_every: samples
            between checkpoints (default: at every evaluation).
        patience: evaluations without improvement before early stopping (MNIST, enwik8).
        early_stopping: whether to stop early at all (default: the preset's, else on; the
            paper trains enwik8 for 50 epochs without it). Either way the test metric
            is measured with the parameters best on valid.
        threads: CPU threads for torch (``torch.set_num_threads``; process-wide). On a
            small model on a busy machine 1 thread can be many times faster than several.
        stop_after_steps: test hook that simulates a kill: raise ``KeyboardInterrupt``
            right after optimizer step N, before anything of that step is checkpointed.
        on_start: called with the run's identity (the record's settings, ``key`` and ``id``)
            once the model is built, before the checkpoint is read and the first step; it
            may raise to stop the run (the CLI skips a run whose record it already has).
        **task_options: the task's own options (digits, symbols, seq_len, source, path, ...).
    """
    started = time.monotonic()
    console = console or Console(stderr=True, quiet=not progress)
    s = _settings(task, preset, channels, budget, max_samples, epochs, batch_size, eval_every, patience,
                  data_dir, task_options, early_stopping)
    the_task: Task = s["task"]
    dev = _device(device)
    _positive(checkpoint_every, "--checkpoint-every")
    _positive(stop_after_steps, "stop_after_steps")
    checks.seed(seed)
    lr = checks.number(lr, "--lr")
    if checkpoint_dir is not None:  # before training, not at the first checkpoint
        checks.output_dir(checkpoint_dir, "--checkpoint-dir")
    _check_memory(config, depth, s, the_task, dev)

    if threads is not None:
        torch.set_num_threads(checks.threads(threads))
    # Decaying recurrent states produce subnormal floats, which slow CPU arithmetic
    # 10-100x (SPEC section 8); flushing them to zero changes nothing measurable.
    torch.set_flush_denormal(True)
    torch.manual_seed(seed)
    model = build_model(config, depth, channels=s["channels"], budget=s["budget"],
                        forget_bias=the_task.forget_bias, implementation=implementation, **the_task.model_io())
    model.to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    stream = the_task.train_stream(s["batch_size"], seed)
    key = {"config": model.arch.label, "task": the_task.name, "task_options": the_task.options(), "depth": depth,
           "channels": model.channels, "batch_size": s["batch_size"], "seed": seed, "lr": lr}
    record = _identity(model, the_task, s, depth=depth, seed=seed, lr=lr, device=dev)
    if on_start is not None:
        on_start(dict(record))
    epoch_samples = the_task.epoch_samples(s["batch_size"])
    eval_every = s["eval_every"]
    checkpoint_every = checkpoint_every or eval_every

    st = {"step": 0, "samples": 0, "history": [], "best": None, "bad_evals": 0, "samples_to_solve": None,
          "last_eval": 0, "last_checkpoint": 0, "wall_time": 0.0, "resumed_at": [], "stop_reason": None,
          "loss_sum": 0.0, "loss_count": 0}
    best_state = None
    carried = None
    path = checkpoint_path(checkpoint_dir) if checkpoint_dir is not None else None
    saved = load_checkpoint(path) if path is not None else None
    if saved is not None:
        if saved["key"] != key:
            raise UserError(f"checkpoint {path} belongs to another run ({saved['key']['config']}, "
                            f"{saved['key']['task']}, L={saved['key']['depth']}, seed {saved['key']['seed']}); "
                            "use another --checkpoint-dir or delete it")
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        stream.load_state_dict(saved["stream"])
        torch.set_rng_state(saved["rng"])
        st = saved["counters"]
        best_state = saved["best_state"]
        if saved["carried"] is not None:
            kind = type(model.zero_state(1, torch.zeros(1)))
            carried = kind(*(t.to(dev) for t in saved["carried"]))
        st["resumed_at"].append(st["samples"])
        if st["stop_reason"] in ("max_samples", "epochs"):
            st["stop_reason"] = None  # a finished run may be extended with a larger limit
        console.print(f"[bold]resuming[/] from checkpoint {path} at sample {st['samples']:,} (step {st['step']:,})")

    def checkpoint():
        if path is None:
            return
        st["last_checkpoint"] = st["samples"]
        st_saved = dict(st, wall_time=st["wall_time"] + time.monotonic() - started)
        save_checkpoint(path, {
            "key": key, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "stream": stream.state_dict(), "rng": torch.get_rng_state(), "counters": st_saved,
            "best_state": best_state,
            "carried": None if carried is None else [t.detach().cpu() for t in carried],
        })

    def finished() -> bool:
        if st["stop_reason"] is not None:
            return True
        if s["max_samples"] is not None and st["samples"] >= s["max_samples"]:
            st["stop_reason"] = "max_samples"
        elif s["epochs"] is not None and st["samples"] >= s["epochs"] * epoch_samples:
            st["stop_reason"] = "epochs"
        return st["stop_reason"] is not None

    def evaluate():
        """Evaluate now; update best / solved / early stopping. Returns the result dict."""
        nonlocal best_state
        result = the_task.evaluate(model, "test" if the_task.online else "valid", device=dev)
        train_loss = st["loss_sum"] / st["loss_count"] if st["loss_count"] else None
        st["loss_sum"], st["loss_count"] = 0.0, 0
        st["history"].append({"samples": st["samples"], "step": st["step"], "train_loss": train_loss, **result})
        st["last_eval"] = st["samples"]
        if the_task.online:
            if result["metric"] >= 1.0 and st["samples_to_solve"] is None:
                st["samples_to_solve"] = st["samples"]
                st["stop_reason"] = "solved"
        elif the_task.better(result["metric"], st["best"]):
            st["best"], st["bad_evals"] = result["metric"], 0
            best_state = copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()})
        else:
            st["bad_evals"] += 1
            if s["early_stopping"] and st["bad_evals"] >= s["patience"]:
                st["stop_reason"] = "early_stopping"
        return result

    total = s["max_samples"] if s["max_samples"] is not None else s["epochs"] * epoch_samples
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("loss {task.fields[loss]}"), TextColumn("{task.fields[metric]}"),
               TimeElapsedColumn(), TimeRemainingColumn()]

    def metric_text() -> str:
        if not st["history"]:
            return ""
        return f"{'test' if the_task.online else 'valid'} {the_task.metric} {st['history'][-1]['metric']:.4f}"
    failed = None
    model.train()
    with Progress(*columns, console=console, disable=not progress, transient=False) as bar:
        bar_id = bar.add_task(f"{model.arch.label} L={depth} {the_task.name}", total=total,
                              completed=min(st["samples"], total), loss="-", metric=metric_text())
        try:
            while not finished():
                batch = stream.next()
                if the_task.stateful and batch.reset:
                    carried = None
                batch = batch.to(dev)
                logits, new_state = model(batch.x, carried if the_task.stateful else None)
                loss = the_task.loss(logits, batch)
                if not torch.isfinite(loss):
                    failed = (f"training loss became {loss.item()} at step {st['step'] + 1} "
                              f"(sample {st['samples']:,}); no metric is reported. Try a smaller --lr or another seed")
                    break
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                if the_task.stateful:
                    carried = _detach(new_state)  # truncated BPTT: the state goes on, the graph does not
                st["step"] += 1
                st["samples"] += len(batch)
                st["loss_sum"] += loss.item()
                st["loss_count"] += 1
                if stop_after_steps is not None and st["step"] >= stop_after_steps:
                    raise KeyboardInterrupt(f"stop_after_steps={stop_after_steps}")
                evaluated = False
                if st["samples"] // eval_every > st["last_eval"] // eval_every:
                    evaluate()
                    evaluated = True
                if evaluated or st["samples"] // checkpoint_every > st["last_checkpoint"] // checkpoint_every:
                    checkpoint()
                bar.update(bar_id, completed=min(st["samples"], total), loss=f"{loss.item():.4f}",
                           metric=metric_text())
        except KeyboardInterrupt:
            where = (f"; resume from the checkpoint in {path.parent} (sample {st['last_checkpoint']:,}) "
                     "by running the same command again") if path is not None else ""
            console.print(f"[yellow]interrupted[/] at sample {st['samples']:,}{where}")
            raise
    record["causal"] = causal(model.arch, depth)
    if failed is not None:
        record.update(status="failed", error=failed, valid_metric=None, test_metric=None, sequence_accuracy=None,
                      samples_seen=st["samples"], samples_to_solve=None, solved=False, steps=st["step"],
                      stop_reason="non_finite_loss", history=st["history"], resumed_at=st["resumed_at"],
                      wall_time_s=st["wall_time"] + time.monotonic() - started)
        console.print(f"[bold red]failed:[/] {failed}")
        return {**record, **provenance(dev)}

    # The final evaluation: the last state for online tasks, the best on valid otherwise.
    if not st["history"] or st["last_eval"] != st["samples"]:
        evaluate()
    if the_task.online:
        test = st["history"][-1]
        valid_metric = None
    else:
        if best_state is not None:
            model.load_state_dict(best_state)
        valid_metric = st["best"]
        test = the_task.evaluate(model, "test", device=dev)
    checkpoint()
    st["wall_time"] += time.monotonic() - started
    record.update(
        status="ok", error=None, valid_metric=valid_metric, test_metric=test["metric"],
        sequence_accuracy=test.get("sequence_accuracy"), test_loss=test.get("loss"),
        samples_seen=st["samples"], samples_to_solve=st["samples_to_solve"],
        solved=st["samples_to_solve"] is not None, steps=st["step"],
        epochs_done=(st["samples"] / epoch_samples) if epoch_samples else None,
        stop_reason=st["stop_reason"], history=st["history"], resumed_at=st["resumed_at"],
        wall_time_s=st["wall_time"],
    )
    for name in ("valid_metric", "test_metric"):
        value = record[name]
        if value is not None and not math.isfinite(value):
            record.update(status="failed", error=f"{name} is {value}: the model diverged", valid_metric=None,
                          test_metric=None, sequence_accuracy=None)
            break
    console.print(_summary(record))
    return {**record, **provenance(dev)}


def _summary(record: dict) -> str:
    parts = [f"{record['config']} L={record['depth']} M={record['channels']} on {record['task']}:"]
    if record["valid_metric"] is not None:
        parts.append(f"valid {record['metric']} {record['valid_metric']:.4f},")
    parts.append(f"test {record['metric']} {record['test_metric']:.4f}")
    if record["sequence_accuracy"] is not None:
        parts.append(f"(sequences {record['sequence_accuracy']:.2f})")
    if record["task"] in ("addition", "memorization"):
        parts.append(f"solved after {record['samples_to_solve']:,} samples" if record["solved"]
                     else f"not solved in {record['samples_seen']:,} samples")
    parts.append(f"[{record['wall_time_s']:.0f} s]")
    return " ".join(parts)
