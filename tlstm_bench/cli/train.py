"""``tlstm-bench train``: train one configuration on one task and save the record."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import UserError
from .app import ResultsDir, app, console, err_console, fail, handles_user_errors


@app.command()
@handles_user_errors
def train(
    config: Annotated[str, typer.Argument(help="slstm, 2d, 2d-m, 2d-f, 3d, 3d-ln, 3d-cn, or knobs like tlstm:dims=4")],
    task: Annotated[Optional[str], typer.Option(help="addition, memorization, enwik8, mnist or pmnist "
                                                     "(may be left out with a one-task --preset).")] = None,
    depth: Annotated[int, typer.Option("--depth", "-L", help="Depth L.")] = 1,
    budget: Annotated[Optional[str], typer.Option(help="Parameter budget: 10M, 2500000, or slstm:100.")] = None,
    channels: Annotated[Optional[int], typer.Option(help="Channel size M (instead of --budget).")] = None,
    preset: Annotated[Optional[str], typer.Option(help="Named settings: memorization-small, addition-small, "
                                                       "digits-small, enwik8-small, paper-addition, "
                                                       "paper-memorization, paper-enwik8, paper-mnist.")] = None,
    max_samples: Annotated[Optional[int], typer.Option(help="Stop after this many training samples.")] = None,
    epochs: Annotated[Optional[int], typer.Option(help="Stop after this many epochs (enwik8, mnist, pmnist).")] = None,
    batch_size: Annotated[Optional[int], typer.Option(help="Minibatch size (default: the paper's 15/100/50).")] = None,
    eval_every: Annotated[Optional[int], typer.Option(help="Training samples between evaluations.")] = None,
    patience: Annotated[Optional[int], typer.Option(help="Evaluations without improvement before early "
                                                         "stopping (enwik8, mnist).")] = None,
    early_stopping: Annotated[Optional[bool], typer.Option(
        "--early-stopping/--no-early-stopping",
        help="Stop after --patience evaluations without improvement on valid (default: the preset's; on for "
             "mnist, off for paper-enwik8, which trains the paper's 50 epochs).")] = None,
    lr: Annotated[float, typer.Option(help="Adam learning rate.")] = 1e-3,
    seed: Annotated[int, typer.Option(help="Seed of the model and of the training data order.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    threads: Annotated[Optional[int], typer.Option(help="CPU threads for torch (1 is often fastest for "
                                                        "small models on a busy CPU).")] = None,
    checkpoint_dir: Annotated[Optional[Path], typer.Option(help="Checkpoint here; rerun to resume.")] = None,
    checkpoint_every: Annotated[Optional[int], typer.Option(help="Samples between checkpoints "
                                                                 "(default: every evaluation).")] = None,
    data_dir: Annotated[Optional[Path], typer.Option(help="Data directory (default: $TLSTM_BENCH_DATA).")] = None,
    data: Annotated[Optional[Path], typer.Option(help="enwik8: the path of enwik8 or enwik8.zip.")] = None,
    digits: Annotated[Optional[int], typer.Option(help="addition: digits per integer (paper: 15).")] = None,
    symbols: Annotated[Optional[int], typer.Option(help="memorization: symbols to remember (paper: 20).")] = None,
    seq_len: Annotated[Optional[int], typer.Option(help="enwik8: subsequence length (paper: 50).")] = None,
    source: Annotated[Optional[str], typer.Option(help="mnist/pmnist: idx (the MNIST files) or digits "
                                                       "(scikit-learn's 8x8 digits, offline).")] = None,
    perm_seed: Annotated[Optional[int], typer.Option(help="pmnist: seed of the fixed pixel permutation.")] = None,
    implementation: Annotated[Optional[str], typer.Option(help="Sequence loop (tLSTM: fast (default), eager, "
                                                               "reference, cuda-graph, triton; sLSTM: fused (default), "
                                                               "wavefront, loop).")] = None,
    results_dir: ResultsDir = None,
) -> None:
    """Train CONFIG at depth L on a task; save the record in the results folder's store/training/.

    A run's record is named by its settings and the code version: run the same command again
    and it does nothing if that record is there (and resumes from --checkpoint-dir if it is not).
    Exits 1 if the run failed (NaN or infinite loss; the failed record is still saved) or its
    record could not be written (it is kept elsewhere; the message says where), 2 on bad input,
    130 when interrupted (rerun with the same --checkpoint-dir to resume).
    """
    from .. import checks
    from ..results import read_record, workspace
    from ..training import train as train_core
    from .save import save_records

    folder = workspace(results_dir)
    checks.output_dir(folder.root, "--results-dir")  # a bad folder fails before training, not after
    records = checks.output_dir(folder.store / "training", "the records folder")
    options = {"digits": digits, "symbols": symbols, "seq_len": seq_len, "source": source,
               "perm_seed": perm_seed, "path": data}

    def skip_if_recorded(run: dict) -> None:
        path = records / f"{run['id']}.json"
        try:
            done = path.is_file() and read_record(path).get("status") == "ok"
        except UserError:  # a corrupt record of this run: train again and replace it
            done = False
        if done:
            raise _Recorded(path)

    try:
        record = train_core(config, task=task, depth=depth, channels=channels, budget=budget, preset=preset,
                            max_samples=max_samples, epochs=epochs, batch_size=batch_size, seed=seed,
                            device=device, checkpoint_dir=checkpoint_dir, data_dir=data_dir, progress=True,
                            eval_every=eval_every, checkpoint_every=checkpoint_every, patience=patience,
                            early_stopping=early_stopping, lr=lr, implementation=implementation,
                            threads=threads, console=err_console, on_start=skip_if_recorded,
                            **{k: v for k, v in options.items() if v is not None})
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


class _Recorded(Exception):
    """Raised from ``on_start`` to skip a run whose record is already in the store."""

    def __init__(self, path: Path):
        super().__init__(str(path))
        self.path = path
