"""``tlstm-bench train``: train one configuration on one task and save the record."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import UserError, term_interrupts
from ..vocab import DEFAULT_PRECISION, DEVICES, LEARNING_RATE, PRECISIONS, TASK_NAMES
from .app import ResultsDir, app, console, err_console, fail, handles_user_errors
from .render import Renderer

# The options, one line each in the command below.
Task = Annotated[Optional[str], typer.Option(help=f"{', '.join(TASK_NAMES)} (may be left out with a one-task "
                                                  "--preset).")]
Depth = Annotated[int, typer.Option("--depth", "-L", help="Depth L.")]
Budget = Annotated[Optional[str], typer.Option(help="Parameter budget: 10M, 2500000, or slstm:100.")]
Channels = Annotated[Optional[int], typer.Option(help="Channel size M (instead of --budget).")]
Preset = Annotated[Optional[str], typer.Option(help="Named settings: memorization-small, addition-small, "
                                                    "digits-small, enwik8-small, paper-addition, "
                                                    "paper-memorization, paper-enwik8, paper-mnist.")]
MaxSamples = Annotated[Optional[int], typer.Option(help="Stop after this many training samples.")]
Epochs = Annotated[Optional[int], typer.Option(help="Stop after this many epochs (enwik8, mnist, pmnist).")]
BatchSize = Annotated[Optional[int], typer.Option(help="Minibatch size (default: the paper's 15/100/50).")]
EvalEvery = Annotated[Optional[int], typer.Option(help="Training samples between evaluations.")]
Patience = Annotated[Optional[int], typer.Option(help="Evaluations without improvement before early "
                                                      "stopping (enwik8, mnist).")]
# Two plain flags rather than one --early-stopping/--no-early-stopping pair: the help then lists
# each on its own row, and the pair's wide name column no longer squeezes every option's help.
EarlyStopping = Annotated[bool, typer.Option(
    "--early-stopping", help="Stop after --patience evaluations without improvement on valid (default: the "
                             "preset's; on for mnist, off for paper-enwik8, which trains the paper's 50 epochs).")]
NoEarlyStopping = Annotated[bool, typer.Option("--no-early-stopping", help="Train to the end: no early stopping.")]
Lr = Annotated[float, typer.Option(help="Adam learning rate.")]
LrWarmup = Annotated[Optional[str], typer.Option(help="Warm-up to --lr (the paper has none): linear:N rises from 0 over "
                                                      "N samples, linear:N:START from START, step:N:START holds START "
                                                      "for N samples (docs/tasks.md).")]
ClipGradNorm = Annotated[Optional[float], typer.Option(help="Clip the gradient's total norm to this before each "
                                                           "Adam step (the paper states none; recorded).")]
Seed = Annotated[int, typer.Option(help="Seed of the model and of the training data order.")]
Device = Annotated[str, typer.Option(help=f"{DEVICES}.")]
Threads = Annotated[Optional[int], typer.Option(help="CPU threads for torch (default: every core; waiting threads "
                                                     "sleep unless OMP_WAIT_POLICY says otherwise; 1 is often "
                                                     "fastest for small models on a busy CPU).")]
CheckpointDir = Annotated[Optional[Path], typer.Option(help="Checkpoint here; rerun to resume.")]
TimeLimit = Annotated[Optional[float], typer.Option(help="Stop training after this many seconds, keeping the "
                                                         "record (stop reason time_limit); rerun to go on.")]
CheckpointEvery = Annotated[Optional[int], typer.Option(help="Samples between checkpoints (default: every "
                                                             "evaluation).")]
KeepCheckpoints = Annotated[bool, typer.Option(
    "--keep-checkpoints", help="Also keep every checkpoint, in CHECKPOINT_DIR/kept/ (one file each, named "
                               "by its samples), for `gradients` or `visualize` along the run.")]
DataDir = Annotated[Optional[Path], typer.Option(help="Data directory (default: $TLSTM_BENCH_DATA).")]
Data = Annotated[Optional[Path], typer.Option(help="enwik8: the path of enwik8 or enwik8.zip.")]
Digits = Annotated[Optional[int], typer.Option(help="addition: digits per integer (paper: 15).")]
Symbols = Annotated[Optional[int], typer.Option(help="memorization: symbols to remember (paper: 20).")]
Alphabet = Annotated[Optional[int], typer.Option(help="memorization: how many symbols they are drawn from "
                                                      "(paper: 64).")]
SeqLen = Annotated[Optional[int], typer.Option(help="enwik8: subsequence length (paper: 50).")]
Source = Annotated[Optional[str], typer.Option(help="mnist/pmnist: idx (the MNIST files) or digits (scikit-learn's "
                                                    "8x8 digits, offline).")]
PermSeed = Annotated[Optional[int], typer.Option(help="pmnist: seed of the fixed pixel permutation.")]
Implementation = Annotated[Optional[str], typer.Option(help="Sequence loop (tLSTM: fast (default), eager, reference, "
                                                            "triton; sLSTM: fused (default), cudnn, wavefront, loop).")]
Precision = Annotated[str, typer.Option(help=f"Products in float32: {', '.join(PRECISIONS)} (tensor cores: "
                                             "triton only; not ieee runs triton).")]


@app.command()
@handles_user_errors
def train(
    config: Annotated[str, typer.Argument(help="slstm, 2d, 2d-m, 2d-f, 3d, 3d-ln, 3d-cn, or knobs like tlstm:dims=4 "
                                               "or 3d-cn:cell_kernel=shift,input_init=normal (docs/models.md)")],
    task: Task = None, depth: Depth = 1, budget: Budget = None, channels: Channels = None, preset: Preset = None,
    max_samples: MaxSamples = None, epochs: Epochs = None, batch_size: BatchSize = None, eval_every: EvalEvery = None,
    patience: Patience = None, early_stopping: EarlyStopping = False,
    no_early_stopping: NoEarlyStopping = False, lr: Lr = LEARNING_RATE, lr_warmup: LrWarmup = None,
    clip_grad_norm: ClipGradNorm = None, seed: Seed = 0,
    device: Device = "cpu", threads: Threads = None, checkpoint_dir: CheckpointDir = None,
    checkpoint_every: CheckpointEvery = None, keep_checkpoints: KeepCheckpoints = False,
    time_limit: TimeLimit = None, data_dir: DataDir = None,
    data: Data = None, digits: Digits = None, symbols: Symbols = None, alphabet: Alphabet = None,
    seq_len: SeqLen = None, source: Source = None, perm_seed: PermSeed = None,
    implementation: Implementation = None, precision: Precision = DEFAULT_PRECISION, results_dir: ResultsDir = None,
) -> None:
    """Train CONFIG at depth L on a task; save the record in the results folder's store/training/.

    A run's record is named by its settings and the code version: run the same command again
    and it does nothing if that record is there (and resumes from --checkpoint-dir if it is not).
    Exits 1 if the run failed (NaN or infinite loss; the failed record is still saved) or its
    record could not be written (it is kept elsewhere; the message says where), 2 on bad input,
    130 when interrupted by Ctrl-C or SIGTERM (rerun with the same --checkpoint-dir to resume).
    """
    from .. import training
    from ..results import workspace
    from .save import save_records

    if early_stopping and no_early_stopping:
        raise UserError("give at most one of --early-stopping and --no-early-stopping")
    folder = workspace(results_dir)
    folder.check_writable("training")  # a bad folder fails before training, not after
    settings = training.TrainSettings(
        config, depth, task=task, preset=preset, channels=channels, budget=budget, max_samples=max_samples,
        epochs=epochs, batch_size=batch_size, eval_every=eval_every, patience=patience,
        early_stopping=True if early_stopping else (False if no_early_stopping else None), lr=lr, lr_warmup=lr_warmup,
        clip_grad_norm=clip_grad_norm, seed=seed, device=device, implementation=implementation,
        precision=precision, threads=threads, data_dir=data_dir, checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every, keep_checkpoints=keep_checkpoints, time_limit_s=time_limit,
        task_options={"digits": digits, "symbols": symbols, "alphabet": alphabet, "seq_len": seq_len,
                      "source": source, "perm_seed": perm_seed, "path": data})
    try:
        with term_interrupts(), Renderer(err_console) as report:
            record = training.train(settings, progress=report, on_start=lambda run: _skip_if_recorded(folder.store, run))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except _Recorded as done:
        console.print(f"already trained: {done.path} is this run's record (same settings, same code); "
                      "delete it to train again", highlight=False)
        return
    (path,) = save_records([record], "training", folder.store)
    console.print(f"record saved to {path}", highlight=False)
    if record["status"] != "ok":
        raise fail(f"training failed: {record['error']}", 1)


def _skip_if_recorded(store: Path, run: dict) -> None:
    """``on_start``: stop a run whose ``ok`` record is already in the store (a corrupt one is replaced; one
    its time limit or the deadline stopped goes on)."""
    from ..results.store import read_record, record_path

    path = record_path(store, "training", run["id"])  # the store's own name and link checks
    try:
        saved = read_record(path, missing_ok=True) or {}
        done = saved.get("status") == "ok" and saved.get("stop_reason") not in ("time_limit", "deadline")
    except UserError:  # a corrupt record of this run: train again and replace it
        done = False
    if done:
        raise _Recorded(path)


class _Recorded(Exception):
    """Raised from ``on_start`` to skip a run whose record is already in the store."""

    def __init__(self, path: Path):
        super().__init__(str(path))
        self.path = path
