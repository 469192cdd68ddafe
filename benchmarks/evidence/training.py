"""Part c: the paper-size tasks through ``train()``, resumed chunk by chunk so the time cap holds."""

from __future__ import annotations

import time
from pathlib import Path
import tempfile

from .common import FAILING, INJECTED, ORACLE, SAFETY
from .settings import TrainSpec


class TrainingPart:
    """Part c, mixed into the Worker: the training units."""

    def train_impl(self, spec: TrainSpec) -> str:
        """The fastest implementation that passed part a (by b1's time at the largest depth) and
        that train() can run (a model's sequence loop, not a graphed step); else the default."""
        from tlstm_bench.vocab import DEFAULT_IMPLEMENTATION, GRAPHED_IMPLEMENTATIONS

        family = "slstm" if spec.config == "slstm" else "tlstm"
        usable = [n for n in self.st.family_impls(family) if self.st.status(n) == "passed"
                  and n not in self.st.excluded() and n not in GRAPHED_IMPLEMENTATIONS and n not in (INJECTED, FAILING)]
        measured = self.st.best_ms("m100", spec.config, max(self.cfg.depths))
        timed = sorted((ms, n) for n, ms in measured.items() if n in usable)
        if timed:
            return timed[0][1]
        default = DEFAULT_IMPLEMENTATION[family]
        return default if default in usable else ORACLE[family]

    def _task(self, spec: TrainSpec):
        from tlstm_bench.tasks import make_task

        return make_task(spec.task, **spec.options)

    def train_step_s(self, spec: TrainSpec, impl: str) -> float:
        task = self._task(spec)
        steps_len = task.seq_len
        run = self.cost.run_s(impl, "m100", spec.config, spec.depth, spec.channels, steps_len, batch=spec.batch)
        return 1.5 * run + (0.004 if self.dev.type == "cuda" else 0.002)

    def train_first_estimate(self, spec: TrainSpec) -> float:
        impl = self.train_impl(spec)
        task = self._task(spec)
        eval_every = spec.eval_every or task.default_eval_every(spec.batch)
        setup = 2.0 if self.dev.type == "cuda" else 1.0
        return setup + self.train_step_s(spec, impl) * eval_every / spec.batch

    def unit_train(self, spec: TrainSpec) -> str | None:
        """Train through ``train()`` in chunks that each end on an evaluation, resuming from the
        checkpoint each time, until solved, the sample cap, the time cap or the budget."""
        import shutil

        impl = self.train_impl(spec)
        eval_every = spec.eval_every or self._task(spec).default_eval_every(spec.batch)
        cap_s = spec.time_share * self.args.budget_s
        ckdir = Path(tempfile.mkdtemp(prefix=f"gpu-evidence-{spec.key}-"))
        base = dict(config=spec.config, key=spec.key, task=spec.task, task_options=spec.options, depth=spec.depth,
                    channels=spec.channels, batch_size=spec.batch, implementation=impl, time_cap_s=round(cap_s, 1),
                    sample_cap=spec.sample_cap, paper_samples=spec.paper_samples, eval_every=eval_every)
        self.log(f"  training {spec.key}: {spec.config} L={spec.depth} M={spec.channels} ({impl}), "
                 f"time cap {cap_s:.0f} s, eval every {eval_every} samples")
        self.emit("training_progress", "c", **base, samples_seen=0, test_metric=None, wall_time_s=0.0)
        try:
            record, stop, chunks = self._train_chunks(spec, base, ckdir, time.time() + cap_s)
        except BaseException as exc:  # Stop, or an error: keep what the last checkpoint holds
            self._record_from_checkpoint(base, ckdir, exc)
            raise
        finally:
            shutil.rmtree(ckdir, ignore_errors=True)
        return self._record_training(spec, base, record, stop, chunks)

    def _train_chunks(self, spec: TrainSpec, base: dict, ckdir: Path, cap_at: float):
        """(last train() record or None, why it stopped, chunks run)."""
        from tlstm_bench.training import train

        eval_every, impl = base["eval_every"], base["implementation"]
        seen, record, chunks = 0, None, 0
        per_sample = self.train_step_s(spec, impl) / spec.batch
        overhead = 2.0 if self.dev.type == "cuda" else 0.5
        while True:
            left = min(cap_at - time.time(), self.budget.left() - self.reserve())
            affordable = int((left / SAFETY - overhead) / max(per_sample, 1e-9))
            chunk = min(affordable, spec.sample_cap - seen) // eval_every * eval_every
            if chunks == 0:
                chunk = min(chunk, eval_every)  # a short first chunk measures the throughput
            if chunk < eval_every:
                return record, "time cap" if cap_at - time.time() < self.budget.left() - self.reserve() else \
                    "budget", chunks
            t0 = time.time()
            record = train(spec.config, task=spec.task, depth=spec.depth, channels=spec.channels,
                           max_samples=seen + chunk, batch_size=spec.batch, eval_every=eval_every, seed=0,
                           device=str(self.dev), checkpoint_dir=ckdir, progress=False, implementation=impl,
                           threads=1 if self.dev.type == "cpu" else None, **spec.options)
            took, chunks = time.time() - t0, chunks + 1
            new, seen = record["samples_seen"] - seen, record["samples_seen"]
            per_sample = max(took - overhead, took / 2) / max(new, 1)
            self.log(f"  {spec.key}: {seen:,} samples, test accuracy {record['test_metric']}, "
                     f"{new / took:.0f} samples/s this chunk")
            stop = ("failed" if record["status"] != "ok" else "solved" if record["solved"]
                    else "sample cap" if seen >= spec.sample_cap else None)
            if stop:
                return record, stop, chunks
            self.emit("training_progress", "c", **base, samples_seen=seen, test_metric=record["test_metric"],
                      wall_time_s=record["wall_time_s"])

    def _record_from_checkpoint(self, base: dict, ckdir: Path, exc: BaseException) -> None:
        from tlstm_bench.training.checkpoint import checkpoint_path, load_checkpoint

        saved = load_checkpoint(checkpoint_path(ckdir))
        if saved is None:
            return
        c = saved["counters"]
        how = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"error: {type(exc).__name__}: {exc}"
        self.emit("training", "c", **base, status=how.split(":")[0], final=False, samples_seen=c["samples"],
                  samples_to_solve=c["samples_to_solve"], solved=c["samples_to_solve"] is not None,
                  history=c["history"], wall_time_s=c["wall_time"], stop=how, note="from the last checkpoint")

    def _record_training(self, spec: TrainSpec, base: dict, record: dict | None, stop: str, chunks: int) -> str:
        if record is None:
            self.emit("training", "c", **base, status="not run", final=True, stop=stop, samples_seen=0,
                      solved=False, note="not even one evaluation interval fitted")
            return f"not run ({stop})"
        keep = {k: record.get(k) for k in ("status", "error", "test_metric", "sequence_accuracy", "test_by_position",
                                           "test_loss", "samples_seen", "samples_to_solve", "solved", "steps",
                                           "wall_time_s", "history", "params", "tensor_size", "lr", "seed",
                                           "forget_bias", "flush_denormal", "task_info")}
        rate = record["samples_seen"] / record["wall_time_s"] if record["wall_time_s"] else None
        self.emit("training", "c", **base, **keep, final=True, stop=stop, chunks=chunks, samples_per_s=rate,
                  samples_per_s_note="all samples seen over the run's whole wall time (model builds, "
                                     "evaluations and checkpoints included)")
        self.log(f"  {spec.key}: {stop} after {record['samples_seen']:,} samples "
                 f"({record['wall_time_s']:.0f} s, {rate or 0:.0f} samples/s)")
        return f"stopped: {stop}" + (" (budget)" if stop == "budget" else "")
