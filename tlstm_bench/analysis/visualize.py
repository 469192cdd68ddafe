"""The paper's figure 6: the memory cell's diagonal channel mean over time, for one example.

Paper section 3.4: "we record the channel mean (the mean over channels, e.g. it is of size
P x P for 3D tLSTMs) of the memory cell at each timestep, and visualize the diagonal
values of the channel mean from location p_in = [1, 1] (near the input) to p_out = [P, P]
(near the output)"; the values are normalised to [0, 1] and the columns are the steps
1 .. T + L - 1. We draw that bar, with the input above it and the output below it (read at
the output corner L - 1 steps after its input; the last L - 1 steps are the flush).

A model comes from a training checkpoint (``tlstm_bench.training``'s ``checkpoint.pt``: its
``key`` names the configuration, task, depth and channels; the best weights are used when
it holds them) or from a configuration, with weights from ``--state-dict`` or, failing
that, untrained: the figure then says so in its title.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure

from ..atomic import save_figure
from ..errors import UserError
from ..models import build_model, parse_config
from ..models.memory import check_fits, model_memory
from ..models.tlstm import TLSTM
from .trace import diagonal_channel_mean, trace_cells

DEFAULT_TASK = "memorization"
DEFAULT_DEPTH = 4
DEFAULT_CHANNELS = 32
MAX_TEXT_STEPS = 90  # beyond this many steps, inputs and outputs are drawn as strips, not text


@dataclass
class Loaded:
    model: TLSTM
    task: object
    trained: bool
    origin: str  # where the weights came from, for the title
    samples: int | None = None  # a training checkpoint's: the samples it was trained on


@dataclass
class Visualization:
    paths: list[Path]
    trained: bool
    origin: str
    values: np.ndarray  # (P, T + L - 1) diagonal channel means, before normalising
    notes: list[str] = field(default_factory=list)


def parse_task_options(items: "list[str] | None") -> dict:
    """``["digits=3", "source=digits"]`` -> {"digits": 3, "source": "digits"}."""
    options = {}
    for item in items or []:
        key, sep, value = (s.strip() for s in item.partition("="))
        if not sep or not key:
            raise UserError(f"--task-option takes KEY=VALUE like symbols=5 or source=digits, got {item!r}")
        options[key] = int(value) if value.lstrip("-").isdigit() else value
    return options


def _make_task(name: str, options: dict):
    from ..tasks import make_task  # the tasks package is only needed here

    return make_task(name, **options)


def _load_file(path: Path) -> dict:
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001  (any unreadable file is the user's to fix)
        raise UserError(f"cannot read {path} as a torch checkpoint or state_dict ({type(exc).__name__}); "
                        "give a training checkpoint.pt, a state_dict file or a configuration name") from None
    if not isinstance(payload, dict):
        raise UserError(f"{path} holds a {type(payload).__name__}, not a checkpoint or state_dict")
    return payload


def _weights(payload: dict) -> dict:
    """The model weights in a training checkpoint ({'model', 'best_state', ...}) or a bare state_dict."""
    if "model" in payload and isinstance(payload["model"], dict):
        best = payload.get("best_state")
        return best if isinstance(best, dict) and best else payload["model"]
    if all(isinstance(v, torch.Tensor) for v in payload.values()):
        return payload
    raise UserError("no model weights found: expected a training checkpoint (with 'model') or a state_dict")


def _load_weights(model: TLSTM, weights: dict, origin: str) -> None:
    try:
        model.load_state_dict(weights)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()
        detail = first[1].strip() if len(first) > 1 else first[0]
        raise UserError(f"the weights in {origin} do not fit {model.arch.label} L={model.depth} "
                        f"M={model.channels} ({detail}); give the matching --depth and --channels") from None


def checkpoint_file(source: str) -> Path | None:
    """The checkpoint file ``source`` names (the file, or a folder holding ``checkpoint.pt``), or
    None when it is a configuration name; a path to nothing is an error."""
    path = Path(source).expanduser()
    if path.is_dir():
        path = path / "checkpoint.pt"
    if path.is_file():
        return path
    if source.endswith((".pt", ".pth")) or "/" in source:
        raise UserError(f"no checkpoint at {source}; give an existing checkpoint or a configuration name")
    return None


def load_model(source: str, *, task: str | None = None, task_options: dict | None = None,
               depth: int | None = None, channels: int | None = None, budget: str | None = None,
               state_dict: "str | Path | None" = None, any_model: bool = False) -> Loaded:
    """A model and its task from a training checkpoint (file or folder) or a configuration.

    A tLSTM only (it has a memory-cell tensor to draw), unless ``any_model``: a checkpoint of
    any configuration then loads (``gradients`` reads sLSTM checkpoints too)."""
    path = checkpoint_file(source)
    if path is not None:
        payload = _load_file(path)
        key = payload.get("key")
        if not isinstance(key, dict) or "model" not in payload:
            raise UserError(f"{path} is not a training checkpoint (no 'key'); for a bare state_dict run "
                            f"`tlstm-bench visualize CONFIG --depth L --channels M --state-dict {path}`")
        asked = {"task": task, "depth": depth, "channels": channels}
        for name, value in asked.items():
            if value is not None and value != key.get(name):
                raise UserError(f"the checkpoint {path} was trained with {name}={key.get(name)}, not {value}; "
                                f"leave out --{name}")
        if budget is not None or state_dict is not None or task_options:
            raise UserError("a training checkpoint sets the model and task itself; leave out --budget, "
                            "--state-dict and --task-option")
        the_task = _make_task(key["task"], dict(key.get("task_options") or {}))
        model = build_model(key["config"], key["depth"], channels=key["channels"],
                            forget_bias=the_task.forget_bias, **the_task.model_io())
        if not any_model:
            _require_tlstm(model)
        _load_weights(model, _weights(payload), str(path))
        counters = payload.get("counters") if isinstance(payload.get("counters"), dict) else {}
        samples = counters.get("samples") if isinstance(counters.get("samples"), int) else None
        return Loaded(model, the_task, True, f"trained: {_training_summary(payload, the_task)} "
                                            f"({path.parent.name}/{path.name})", samples)
    arch = parse_config(source)
    if arch.kind != "tlstm":
        raise UserError(f"{arch.label} has no memory-cell tensor to draw; visualize a tLSTM "
                        "(2d, 2d-m, 2d-f, 3d, 3d-ln, 3d-cn or tlstm:...)")
    the_task = _make_task(task or DEFAULT_TASK, task_options or {})
    if channels is None and budget is None:
        channels = DEFAULT_CHANNELS
    # One example forward (its memory cells are kept for the figure): refused before the build if too large.
    need = model_memory(arch, depth or DEFAULT_DEPTH, channels=channels, budget=budget, batch=1,
                        seq_len=the_task.seq_len, backward=False, **the_task.model_io())
    check_fits(need, "cpu", f"drawing {arch.label} at L={depth or DEFAULT_DEPTH}", "lower the depth or --channels")
    model = build_model(arch, depth or DEFAULT_DEPTH, channels=channels, budget=budget,
                        forget_bias=the_task.forget_bias, **the_task.model_io())
    if state_dict is None:
        return Loaded(model, the_task, False, "UNTRAINED: random weights (pass a training checkpoint to see a "
                                              "trained model)")
    weights_path = Path(state_dict).expanduser()
    if not weights_path.is_file():
        raise UserError(f"no state_dict file at {weights_path}")
    _load_weights(model, _weights(_load_file(weights_path)), str(weights_path))
    return Loaded(model, the_task, True, f"weights: {weights_path}")


def best_checkpoint(sweep: str, *, task: str | None = None, root: "str | Path | None" = None) -> tuple[Path, dict]:
    """The checkpoint of the best trained tLSTM in a sweep (paper figure 6 draws "the best
    performing tLSTM" of each task): lowest BPC or highest accuracy, then fewest samples to
    solve. Sweep cells keep their checkpoint in ``<store>/<sweep>/.checkpoints/<cell id>/``."""
    from ..results.frame import read_frame
    from ..results.store import default_root

    store = Path(root) if root is not None else default_root()
    frame = read_frame([sweep], root=store)
    rows = frame[(frame["kind"] == "train") & (frame["status"] == "ok") & (frame["config"] != "slstm")]
    if task is not None:
        rows = rows[rows["task"] == task]
    rows = rows[rows["test_metric"].notna()]
    what = f" of task {task}" if task else ""
    if rows.empty:
        raise UserError(f"no trained tLSTM{what} in sweep {sweep}; run `tlstm-bench sweep {sweep}` first, "
                        "or give a checkpoint")
    from ..sweeps.cell import cell_checkpoint_dir
    from ..training import checkpoint_path

    folder = cell_checkpoint_dir(store, sweep, "")
    rows = rows[[checkpoint_path(cell_checkpoint_dir(store, sweep, str(i))).is_file() for i in rows["id"]]]
    if rows.empty:
        raise UserError(f"sweep {sweep} has trained tLSTMs{what} but no checkpoint of them in {folder} "
                        "(a sweep deletes a finished cell's checkpoint); train one with `tlstm-bench train CONFIG "
                        "--task TASK -L L --checkpoint-dir DIR` and run `tlstm-bench visualize DIR`")
    if rows["task"].nunique() > 1:
        raise UserError(f"sweep {sweep} trained several tasks ({', '.join(sorted(rows['task'].unique()))}); "
                        "pick one with --task")
    lower = (rows["metric"] == "bpc").all()
    order = rows.assign(_m=rows["test_metric"] * (1 if lower else -1),
                        _s=rows["samples_to_solve"].fillna(float("inf")))
    best = order.sort_values(["_m", "_s", "depth"], kind="stable").iloc[0]
    return folder / str(best["id"]) / "checkpoint.pt", best.drop(["_m", "_s"]).to_dict()


def _training_summary(payload: dict, task) -> str:
    """'3,000 samples, test accuracy 1.2%' from a training checkpoint's counters, if it has them."""
    counters = payload.get("counters") if isinstance(payload.get("counters"), dict) else {}
    parts = []
    if isinstance(counters.get("samples"), int):
        parts.append(f"{counters['samples']:,} samples")
    history = counters.get("history") or []
    last = history[-1] if history and isinstance(history[-1], dict) else {}
    if isinstance(last.get("metric"), (int, float)):
        split = "test" if getattr(task, "has_valid", True) is False else "valid"
        if getattr(task, "metric", "") == "accuracy":
            parts.append(f"last {split} accuracy {100 * last['metric']:.1f}%")
        else:
            parts.append(f"last {split} {getattr(task, 'metric', 'metric')} {last['metric']:.3f}")
    if counters.get("samples_to_solve") is not None:
        parts.append(f"solved after {counters['samples_to_solve']:,} samples")
    return ", ".join(parts) or "checkpoint"


def _require_tlstm(model) -> None:
    if not isinstance(model, TLSTM):
        raise UserError(f"{model.arch.label} has no memory-cell tensor to draw; visualize a tLSTM checkpoint")


def pick_example(task, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One example (x with batch 1, its target): the index-th test sample of an algorithmic
    task, otherwise the first training sample of a stream seeded with ``index``."""
    if index < 0:
        raise UserError(f"--example must be >= 0, got {index}")
    if hasattr(task, "test_x"):
        if index >= task.test_x.shape[0]:
            raise UserError(f"--example {index} is not a test sample: {task.name} has "
                            f"{task.test_x.shape[0]}, numbered 0 to {task.test_x.shape[0] - 1}")
        return task.test_x[index:index + 1], task.test_y[index:index + 1]
    batch = task.train_stream(1, index).next()
    return batch.x[:1], batch.y[:1]


def symbol_text(task, tokens) -> list[str]:
    """Tokens as the task writes them (alphabet, enwik8 bytes), else their numbers."""
    if hasattr(task, "alphabet"):
        return [task.alphabet[int(t)] for t in tokens]
    if hasattr(task, "symbols") and isinstance(task.symbols, list):
        out = []
        for t in tokens:
            ch = chr(task.symbols[int(t)])
            out.append(ch if ch.isprintable() and not ch.isspace() else "\u00b7")
        return out
    return [str(int(t)) for t in tokens]


def visualize(source: str, *, out: "str | Path | None" = None, figures: "str | Path | None" = None,
              example: int = 0, **load) -> Visualization:
    """Run the model on one example and draw figure 6 for it (PNG and PDF).

    ``out``: the output path without suffix; default ``<figures>/fig6-<task>-<config>-L<depth>``
    with ``figures`` the default workspace's ``figures/`` unless given.
    """
    loaded = load_model(source, **load)
    model, task = loaded.model, loaded.task
    x, target = pick_example(task, example)
    model.eval()
    with torch.no_grad():
        trace = trace_cells(model, x)
    diag = diagonal_channel_mean(model, trace.cells)[0].T.numpy()  # (P, steps)
    span = float(diag.max() - diag.min())
    normalised = (diag - diag.min()) / span if span > 0 else np.zeros_like(diag)
    fig = draw(loaded, x[0], target[0], trace.y[0], normalised)
    name = f"fig6-{task.name}-{model.arch.label}-L{model.depth}".replace(":", "_").replace(",", "_").replace("=", "")
    if out is None:
        from ..results.store import workspace

        out = Path(figures if figures is not None else workspace().figures) / name
    stem = Path(out)
    stem = stem.with_suffix("") if stem.suffix in (".png", ".pdf") else stem
    stem.parent.mkdir(parents=True, exist_ok=True)
    replaced = stem.with_suffix(".png").exists()
    save_figure(fig, stem)
    notes = [] if loaded.trained else ["the model is untrained (random weights); the figure shows the "
                                       "untrained network, not what a trained one learned"]
    if replaced:
        notes.append(f"replaced the figure that was at {stem.with_suffix('.png')} (--out keeps both)")
    return Visualization([stem.with_suffix(".png"), stem.with_suffix(".pdf")], loaded.trained, loaded.origin,
                         diag, notes)


def draw(loaded: Loaded, x: torch.Tensor, target: torch.Tensor, logits: torch.Tensor,
         values: np.ndarray) -> Figure:
    """Input strip, the (P x steps) bar, output strip; shared step axis 1 .. T + L - 1."""
    model, task = loaded.model, loaded.task
    size, steps = values.shape
    seq_len, delay = x.shape[0], model.depth - 1
    text = steps <= MAX_TEXT_STEPS
    fig = Figure(figsize=(min(18.0, max(7.0, 0.2 * steps + 3)), 2.2 + 0.28 * size), layout="constrained")
    grid = fig.add_gridspec(3, 2, height_ratios=[0.5, max(1.5, 0.28 * size), 0.7], width_ratios=[40, 1])
    ax_in = fig.add_subplot(grid[0, 0])
    ax = fig.add_subplot(grid[1, 0], sharex=ax_in)
    ax_out = fig.add_subplot(grid[2, 0], sharex=ax_in)
    _input_strip(ax_in, model, task, x, steps, text)
    image = ax.imshow(values, aspect="auto", cmap="viridis", vmin=0, vmax=1, extent=(0.5, steps + 0.5, size + 0.5, 0.5),
                      interpolation="nearest")
    ticks = sorted({1, size} | set(range(1, size + 1, max(1, size // 6))))
    ax.set_yticks(ticks, [f"{p} (p_in)" if p == 1 else f"{p} (p_out)" if p == size and size > 1 else str(p)
                          for p in ticks])
    ax.set_ylabel("diagonal location p")
    for a in (ax_in, ax, ax_out):
        if delay:
            a.axvspan(seq_len + 0.5, steps + 0.5, color="black", alpha=0.08, lw=0)
            a.axvline(seq_len + 0.5, color="white" if a is ax else "gray", lw=1, ls="--")
    fig.colorbar(image, cax=fig.add_subplot(grid[1, 1]), label="channel mean of C\n(normalised to [0, 1])")
    _output_strip(ax_out, model, task, target, logits.argmax(-1), seq_len, steps, text)
    ax_out.set_xlabel(f"step (1 .. T + L - 1 = {steps}; the shaded L - 1 = {delay} steps are the flush)")
    for a in (ax_in, ax):
        a.tick_params(labelbottom=False)
    arch = model.arch
    fig.suptitle(f"{task.name}: memory cell along the diagonal, {arch.label} (D={arch.dims}, K={arch.kernel}), "
                 f"L={model.depth}, P={model.tensor_size}, M={model.channels}\n"
                 + textwrap.fill(loaded.origin, 90),  # a long origin would run off the figure
                 fontsize="medium", color="black" if loaded.trained else "firebrick")
    return fig


def _input_strip(ax, model, task, x: torch.Tensor, steps: int, text: bool) -> None:
    """Input, one column per step; the last L - 1 steps are the flush (zero input)."""
    if model.tokens and text:
        for s, ch in enumerate(symbol_text(task, x), start=1):
            ax.text(s, 0.5, ch, ha="center", va="center", fontsize="small", family="monospace")
        ax.set_ylim(0, 1)
    else:
        strip = x.float().reshape(x.shape[0], -1).mean(-1).numpy()
        ax.imshow(np.append(strip, np.full(model.depth - 1, np.nan))[None, :], aspect="auto", cmap="gray_r",
                  extent=(0.5, steps + 0.5, 1, 0))
    ax.set_ylabel("input", rotation=0, ha="right", va="center")
    ax.set_yticks([])
    ax.set_xlim(0.5, steps + 0.5)


def _output_strip(ax, model, task, target: torch.Tensor, predicted: torch.Tensor, seq_len: int, steps: int,
                  text: bool) -> None:
    """Output: y_t is read at the output corner at step t + L - 1."""
    delay = model.depth - 1
    out_steps = np.arange(1, seq_len + 1) + delay
    if model.tokens and target.shape == predicted.shape and text:
        for s, want, got in zip(out_steps, symbol_text(task, target), symbol_text(task, predicted)):
            ax.text(s, 0.72, want, ha="center", va="center", fontsize="small", family="monospace", color="gray")
            ax.text(s, 0.25, got, ha="center", va="center", fontsize="small", family="monospace",
                    color="seagreen" if got == want else "firebrick")
        ax.set_yticks([0.72, 0.25], ["target", "output"])
        ax.set_ylim(0, 1)
    elif target.shape == predicted.shape:
        right = (predicted == target).float().numpy()
        ax.imshow(np.append(np.full(delay, np.nan), right)[None, :], aspect="auto", cmap="RdYlGn",
                  vmin=0, vmax=1, extent=(0.5, steps + 0.5, 1, 0))
        ax.set_yticks([0.5], ["output right"])
    else:  # one label for the sequence (MNIST): read at the last step
        label, guess = int(target.reshape(-1)[0]), int(predicted[-1])
        ax.text(steps, 0.5, f"label {label}, output {guess} ", ha="right", va="center", fontsize="small",
                color="seagreen" if label == guess else "firebrick")
        ax.set_yticks([])
        ax.set_ylim(0, 1)
