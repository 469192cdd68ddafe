"""What one training run is asked to do: :class:`TrainSettings`, checked when it is made.

The CLI (``tlstm-bench train``), the presets (:meth:`~.presets.Preset.fill`) and sweep cells
(:func:`tlstm_bench.sweeps.cell.execute`) all build one, and :func:`~.loop.train` runs it. A
field left None means "the preset's, else the paper's" (SPEC section 9, paper appendix);
:meth:`TrainSettings.resolve` fills in every one and builds the task. Nothing here imports
torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from .. import checks
from ..checks import MAX_DIM
from ..errors import UserError
from ..vocab import DEFAULT_PRECISION, LEARNING_RATE, TASK_NAMES, check_precision, parse_device
from ..warmup import canonical_warmup
from .presets import get_preset

DEFAULT_PATIENCE = 5
PAPER_MAX_SAMPLES = 5_000_000  # algorithmic tasks: 5M online samples
PAPER_EPOCHS = {"enwik8": 50, "mnist": 200, "pmnist": 200}


@dataclass(frozen=True)
class TrainSettings:
    """One training run's settings. Every value is checked when the object is made.

    Attributes:
        config: a configuration name or knob string (``3d-cn``, ``tlstm:dims=4``).
        depth: L.
        task: ``addition``, ``memorization``, ``enwik8``, ``mnist`` or ``pmnist`` (None: the
            preset's only task).
        task_options: the task's own options (digits, symbols, seq_len, source, path, ...).
        preset: a name from :data:`~.presets.PRESETS` that fills in what is not given.
        channels / budget: M, or a parameter budget (``10M``, ``slstm:100``).
        max_samples / epochs: how long (online tasks: samples only). None: the paper's.
        batch_size: None: the paper's (15, 100, 50). eval_every: samples between evaluations.
        patience: evaluations without improvement before early stopping (MNIST, enwik8).
        early_stopping: whether to stop early at all (None: the preset's, else on; the paper
            trains enwik8 for 50 epochs without it). Either way the test metric is measured
            with the parameters best on valid.
        lr: Adam's learning rate. seed: of the model and of the training data order.
        lr_warmup: how the learning rate rises to ``lr``, as :mod:`tlstm_bench.warmup` writes it
            (``linear:20000``, ``step:96000:1e-4``); None: ``lr`` from the first step, as the
            paper trains. Recorded, and in the run's key only when set.
        clip_grad_norm: clip the gradient's total norm (over every parameter) to this before
            each Adam step (None: no clipping; the paper states none, docs/fidelity.md row 13).
            Recorded, with how often it clipped; in the run's key only when set.
        device: ``cpu``, ``cuda`` or ``cuda:N``. implementation: the sequence loop (None: the
            model's default). threads: CPU threads for torch (process-wide).
        data_dir: where enwik8 / MNIST files are. checkpoint_dir: where to checkpoint and
            resume from. checkpoint_every: samples between checkpoints (None: every evaluation).
        keep_checkpoints: also keep every checkpoint, not only the latest, as
            ``<checkpoint_dir>/kept/checkpoint-<samples>.pt`` (each a whole checkpoint:
            ``gradients`` and ``visualize`` read it, and copied to ``checkpoint.pt`` it resumes
            from there). For studying how a run learns; not part of the run's key.
        time_limit_s: stop training after this many seconds of this run's wall time (None: no
            limit), evaluate, and record how far it got (``stop_reason = "time_limit"``): a run
            that must end inside a time budget (one device call) keeps its record. Not part of
            the run's key; run the same command again to go on (from its checkpoint, if any).
        precision: the products' precision in float32 (``vocab.PRECISIONS``): ``ieee`` (the
            default, every implementation) or ``tf32x3`` / ``tf32`` (the ``triton`` kernels'
            tensor cores; with no implementation named, it runs ``triton``).

    The initialisation (how W^x, the biases, the recurrent weights and the memory-cell kernel
    start) belongs to the configuration, not to these settings: ``3d-cn:input_init=normal``
    (:mod:`tlstm_bench.models.config`), so that every implementation builds the same model.
    """

    config: str
    depth: int
    task: str | None = None
    task_options: dict = field(default_factory=dict)
    preset: str | None = None
    channels: int | None = None
    budget: "str | int | None" = None
    max_samples: int | None = None
    epochs: int | None = None
    batch_size: int | None = None
    eval_every: int | None = None
    patience: int | None = None
    early_stopping: bool | None = None
    lr: float = LEARNING_RATE
    lr_warmup: str | None = None
    clip_grad_norm: float | None = None
    seed: int = 0
    device: str = "cpu"
    implementation: str | None = None
    threads: int | None = None
    data_dir: "str | Path | None" = None
    checkpoint_dir: "str | Path | None" = None
    checkpoint_every: int | None = None
    keep_checkpoints: bool = False
    time_limit_s: float | None = None
    precision: str = DEFAULT_PRECISION

    def __post_init__(self):
        if self.early_stopping is not None and not isinstance(self.early_stopping, bool):
            raise UserError(f"early_stopping must be true or false, got {self.early_stopping!r}")
        for value, what in ((self.max_samples, "--max-samples"), (self.epochs, "--epochs"),
                            (self.eval_every, "--eval-every"), (self.patience, "--patience"),
                            (self.checkpoint_every, "--checkpoint-every")):
            if value is not None:
                checks.integer(value, what)
        if self.batch_size is not None:
            checks.integer(self.batch_size, "--batch-size", maximum=MAX_DIM)
        checks.seed(self.seed)
        if not isinstance(self.keep_checkpoints, bool):
            raise UserError(f"keep_checkpoints must be true or false, got {self.keep_checkpoints!r}")
        if self.keep_checkpoints and self.checkpoint_dir is None:
            raise UserError("--keep-checkpoints keeps the checkpoints of --checkpoint-dir; give --checkpoint-dir too")
        object.__setattr__(self, "lr", checks.number(self.lr, "--lr"))
        object.__setattr__(self, "lr_warmup", canonical_warmup(self.lr_warmup))
        if self.clip_grad_norm is not None:
            object.__setattr__(self, "clip_grad_norm", checks.number(self.clip_grad_norm, "--clip-grad-norm"))
        if self.threads is not None:
            checks.threads(self.threads)
        parse_device(self.device)
        if self.time_limit_s is not None:
            object.__setattr__(self, "time_limit_s", checks.number(self.time_limit_s, "--time-limit"))
        check_precision(self.precision, self.implementation or ("triton" if self.precision != DEFAULT_PRECISION
                                                                 else None))
        # A task option left None is not given (the CLI passes every option it has).
        object.__setattr__(self, "task_options", {k: v for k, v in self.task_options.items() if v is not None})

    @classmethod
    def of(cls, config: str, **keywords) -> "TrainSettings":
        """Settings from keywords: the fields above; any other keyword is a task option."""
        names = {f.name for f in fields(cls)}
        given = {k: v for k, v in keywords.items() if k in names}
        options = {**given.pop("task_options", {}), **{k: v for k, v in keywords.items() if k not in names}}
        return cls(config=config, **given, task_options=options)

    def resolve(self):
        """(these settings with every default filled in, the task they train on).

        What the caller gave wins; then the preset's; then the paper's. Raises a one-line
        :class:`UserError` when they do not fit together (a preset for another task, epochs
        on an online task, no model size, ...).
        """
        from ..tasks import TASKS, make_task, task_options

        preset = get_preset(self.preset)
        name = self.task or (preset.tasks[0] if preset else None)
        if name is None:
            raise UserError(f"give --task ({', '.join(TASK_NAMES)}) or a --preset")
        if name not in TASKS:
            raise UserError(f"unknown task {name!r}; use one of {', '.join(TASK_NAMES)}")
        if preset is not None and name not in preset.tasks:
            raise UserError(f"preset {preset.name} is for {', '.join(preset.tasks)}, not {name}")
        s = replace(self, task=name) if preset is None else preset.fill(replace(self, task=name))
        options = dict(s.task_options)
        if s.data_dir is not None:
            if "data_dir" not in task_options(name):
                raise UserError(f"task {name} generates its data; it takes no --data-dir")
            options["data_dir"] = s.data_dir
        s._check_length_and_size()
        task = make_task(name, **options)
        batch_size = s.batch_size or task.batch_size
        max_samples, epochs = s.max_samples, s.epochs
        if max_samples is None and epochs is None:
            max_samples, epochs = (PAPER_MAX_SAMPLES, None) if task.online else (None, PAPER_EPOCHS[name])
        early = (True if s.early_stopping is None else s.early_stopping) and not task.online
        return replace(s, task_options=options, batch_size=batch_size, max_samples=max_samples, epochs=epochs,
                       eval_every=s.eval_every or task.default_eval_every(batch_size),
                       patience=s.patience or DEFAULT_PATIENCE, early_stopping=early), task

    def _check_length_and_size(self) -> None:
        from ..tasks import TASKS

        if self.max_samples is not None and self.epochs is not None:
            raise UserError("give --max-samples or --epochs, not both")
        if TASKS[self.task].online and self.epochs is not None:
            raise UserError(f"{self.task} trains online on fresh samples (no epochs); use --max-samples")
        if self.channels is None and self.budget is None:
            raise UserError("give --channels M or --budget N (or a --preset that sets one)")
