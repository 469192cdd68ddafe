"""Sweep spec files: TOML (stdlib ``tomllib``), validated key by key.

The specs that ship with the package are package data (``tlstm_bench/sweeps/specs/``,
read with importlib.resources) and are named by their file name (``quick``); a user's
own spec is any path to a TOML file.

A spec names the task and the grid. Top-level keys are the defaults; a ``[train]`` table
makes training cells and a ``[runtime]`` table makes runtime cells, and each table may
override ``configs``, ``depths``, ``seeds``, ``budget``/``channels`` and ``timeout_s``::

    description = "Memorization (paper figure 4)"
    task = "memorization"            # or "runtime" for a runtime-only sweep
    configs = ["slstm", "2d", "3d-cn"]
    depths = [1, 4, 7, 10]
    seeds = [0]
    budget = "slstm:100"             # or channels = 100
    device = "cpu"                   # cpu | cuda | cuda:N
    timeout_s = 3600                 # per cell

    [train]
    preset = "memorization"          # a name in tlstm_bench.training.PRESETS
    max_samples = 5000000            # optional: epochs, batch_size, eval_every
    lr = 1e-4                        # optional: Adam's learning rate (default the paper's 0.001), or
                                     # a list of them, [1e-3, 1e-4]: one cell each
    lr_warmup = "linear:20000"       # optional: a warm-up to lr (train --lr-warmup), or a list
                                     # of them crossed with lr; "none" for none (the default)
    clip_grad_norm = 1.0             # optional: clip the gradient's norm to this (train --clip-grad-norm)
    time_limit_s = 480               # optional: each cell stops training after this, keeping its record
    early_stopping = false           # optional: stop early on valid (default: the preset's)
    options = { symbols = 20 }       # task options, passed on to train()

    [runtime]
    seq_len = 100
    repeats = 10
    warmup = 3
    implementations = ["default"]    # "default" = each model's default loop
    seeds = [0]
    # optional in [train] and [runtime]: precision = "tf32x3" (ieee, tf32x3, tf32; not ieee:
    # the triton kernels' tensor cores)

An implementation is used for the configurations that have it (``triton`` for the tLSTMs,
``cudnn`` for ``slstm`` and ``lstm``, ...), so one list serves a mixed grid. Different grids in
one sweep (each size with its own configurations and implementations) are several runtime
tables, written ``[[runtime]]``; each takes the same keys as ``[runtime]``, the top level's
under it, and no two may give the same cell::

    [[runtime]]                      # every configuration at M = 100
    channels = 100
    implementations = ["triton", "cuda-graph", "cudnn"]
    [[runtime]]                      # some of them at 10M parameters
    configs = ["2d", "3d-cn", "slstm", "lstm"]
    budget = "10M"
    implementations = ["triton", "cudnn"]

Every unknown key and bad value is a :class:`UserError` naming the file, the key and what
is allowed. This is the one reader of spec files: the runner reads them with every value checked
(configurations, sizes, presets and task options, which imports the model and task code), and
``plot`` reads the grid a sweep expects with ``check_values=False``: the same keys, types and
defaults, without importing torch.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .. import checks
from ..atomic import NotAFile, file_kind, read_regular_text
from ..checks import MAX_DIM, MAX_SEED
from ..errors import UserError
from ..vocab import (DEFAULT_DTYPE, DTYPES, MAX_REPEATS, PRECISIONS, TASK_NAMES, TIMING_REPEATS, TIMING_SEQ_LEN,
                     TIMING_WARMUP, missing_gpu, parse_device)
from ..warmup import USAGE, canonical_warmup

SHIPPED = "specs"  # the package's own specs: tlstm_bench/sweeps/specs/<name>.toml (package data)
DEFAULT_TIMEOUT_S = 3600.0  # per cell
MAX_TIMEOUT_S = 30 * 24 * 3600.0  # 30 days: more is a typo (and past what a timer can wait for)
# The most cells one spec may expand to: checked on the lists' lengths before any cell is built,
# so a grid of a million cells is one line at once, not minutes of expanding.
MAX_CELLS = 10_000

_GRID_KEYS = ("configs", "depths", "seeds", "budget", "channels", "timeout_s")
_TOP_KEYS = {"description", "task", "device", *_GRID_KEYS, "train", "runtime"}
_TRAIN_KEYS = {"preset", "max_samples", "epochs", "batch_size", "eval_every", "early_stopping", "options",
               "time_limit_s", "precision", "lr", "lr_warmup", "clip_grad_norm", *_GRID_KEYS}
_RUNTIME_KEYS = {"seq_len", "repeats", "warmup", "implementations", "threads", "dtype", "vocab",
                 "input_size", "output_size", "precision", *_GRID_KEYS}


@dataclass(frozen=True)
class Section:
    """The resolved settings of one kind of cell (defaults filled in from the top level)."""

    kind: str                      # "train" | "runtime"
    configs: tuple[str, ...]
    depths: tuple[int, ...]
    seeds: tuple[int, ...]
    budget: str | None
    channels: int | None
    timeout_s: float
    settings: dict = field(default_factory=dict)   # the kind's own keys (preset, seq_len, ...)


@dataclass(frozen=True)
class SweepSpec:
    name: str
    path: Path
    task: str
    device: str
    description: str = ""
    sections: tuple[Section, ...] = ()


class _Checker:
    """Validates values and phrases errors as ``FILE: key 'a.b' must be ..., got ...``."""

    def __init__(self, path: Path):
        self.path = path

    def error(self, key: str, what: str, value=None, *, show_value: bool = True) -> UserError:
        got = f", got {value!r}" if show_value else ""
        return UserError(f"{self.path}: key '{key}' {what}{got}")

    def keys(self, table: dict, allowed: set, prefix: str) -> None:
        for key in table:
            if key not in allowed:
                where = f"'{prefix}{key}'"
                section = f" in [{prefix[:-1]}]" if prefix else ""
                raise UserError(f"{self.path}: unknown key {where}{section}; allowed: {', '.join(sorted(allowed))}")

    def string(self, key: str, value, choices=None) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, "must be a non-empty string", value)
        if choices is not None and value not in choices:
            raise self.error(key, f"must be one of {', '.join(choices)}", value)
        return value

    def integer(self, key: str, value, *, minimum: int = 1, maximum: int | None = None) -> int:
        return checks.integer(value, f"{self.path}: key '{key}'", minimum=minimum, maximum=maximum)

    def number(self, key: str, value, maximum: float) -> float:
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0
                or value > maximum):
            raise self.error(key, f"must be a positive number of seconds up to {maximum:,.0f}", value)
        return float(value)

    def int_list(self, key: str, value, *, minimum: int, maximum: int | None = None) -> tuple[int, ...]:
        if not isinstance(value, list) or not value:
            raise self.error(key, f"must be a non-empty list of integers >= {minimum}", value)
        items = tuple(self.integer(f"{key}", v, minimum=minimum, maximum=maximum) for v in value)
        if len(set(items)) != len(items):
            raise self.error(key, "must not repeat a value", value)
        return items

    def str_list(self, key: str, value) -> tuple[str, ...]:
        if not isinstance(value, list) or not value:
            raise self.error(key, "must be a non-empty list of strings", value)
        items = tuple(self.string(key, v) for v in value)
        if len(set(items)) != len(items):
            raise self.error(key, "must not repeat a value", value)
        return items


def _check_config(check: _Checker, key: str, config: str) -> str:
    """The canonical string of ``config`` (``2D`` and ``tlstm:dims=2,kernel=3,...`` are ``2d``)."""
    from ..models import parse_config

    try:
        return parse_config(config).label
    except UserError as exc:
        # parse_config's message lists the valid names (an unknown name) or names the bad knob.
        raise UserError(f"{check.path}: key '{key}': {config!r} is not a configuration: {exc}") from None


def _canonical_configs(check: _Checker, key: str, configs: tuple[str, ...]) -> tuple[str, ...]:
    """Each configuration as its canonical string, the way cells and records name it.

    Two spellings of one model (``"2d"`` and ``" 2D"``, or ``"2d"`` and its knob string) are an
    error, as a repeated depth is: the grid would otherwise hold one model twice (or, merged,
    hide what was probably a typo for another configuration).
    """
    canonical: dict[str, str] = {}
    for config in configs:
        label = _check_config(check, key, config)
        if label in canonical:
            raise check.error(key, f"names one configuration twice: {canonical[label]!r} and {config!r} are both "
                              f"{label!r}; list it once", show_value=False)
        canonical[label] = config
    return tuple(canonical)


def _check_shapes(check: _Checker, key: str, configs: tuple[str, ...], depths: tuple[int, ...]) -> None:
    """Every configuration at every depth within the size limits (models.config.check_shape)."""
    from ..models import parse_config
    from ..models.config import check_shape

    for config in configs:
        for depth in depths:
            try:
                check_shape(parse_config(config), depth)
            except UserError as exc:
                raise UserError(f"{check.path}: key '{key}': {exc}") from None


def _check_budget(check: _Checker, key: str, value) -> str:
    from ..models import parse_budget

    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise check.error(key, "must be a number like 10M or 2500000, or slstm:M like slstm:100", value)
    try:
        parse_budget(value, input_size=10, output_size=10)
    except (UserError, ValueError):
        raise check.error(key, "must be a number like 10M or 2500000, or slstm:M like slstm:100", value) from None
    return str(value)


def _check_task(check: _Checker, task) -> str:
    allowed = ("runtime", *TASK_NAMES)
    if task not in allowed:
        raise check.error("task", f"must be one of {', '.join(allowed)}", task)
    return task


def _check_preset(check: _Checker, preset, task) -> str:
    from ..training import PRESETS

    if preset not in PRESETS:
        raise check.error("train.preset", f"must be one of {', '.join(PRESETS)}", preset)
    if task not in PRESETS[preset].tasks:
        raise check.error("train.preset", f"is for {', '.join(PRESETS[preset].tasks)}, not task {task!r}; "
                          f"presets for {task}: {', '.join(n for n, p in PRESETS.items() if task in p.tasks)}",
                          show_value=False)
    return preset


def _check_options(check: _Checker, task, options: dict, preset: str | None) -> None:
    """Option names, then their values as the task itself checks them (with the preset's
    options under them, as the cells will run), reading no data file."""
    from ..tasks import check_task_options, task_options
    from ..training import PRESETS

    allowed = [o for o in task_options(task) if o not in ("data_dir", "path")]
    for name in options:
        if name not in allowed:
            raise UserError(f"{check.path}: unknown key 'train.options.{name}' for task {task}; "
                            f"allowed: {', '.join(allowed)} (data files: tlstm-bench sweep --data-dir)")
    merged = {**(PRESETS[preset].task_options if preset else {}), **options}
    try:
        check_task_options(task, **merged)
    except UserError as exc:
        raise UserError(f"{check.path}: key 'train.options': {exc}") from None


def _grid(check: _Checker, kind: str, table: dict, top: dict, check_values: bool) -> dict:
    """A section's configs, depths, seeds, model size and timeout (its own, else the top level's)."""
    def pick(key):
        return (f"{kind}.{key}", table[key]) if key in table else (key, top.get(key))

    key, configs = pick("configs")
    if configs is None:
        raise UserError(f"{check.path}: no configurations: give 'configs' at the top or in [{kind}]")
    configs = check.str_list(key, configs)
    if check_values:
        configs = _canonical_configs(check, key, configs)
    key, depths = pick("depths")
    if depths is None:
        raise UserError(f"{check.path}: no depths: give 'depths' at the top or in [{kind}]")
    depths = check.int_list(key, depths, minimum=1, maximum=MAX_DIM)
    if check_values:
        _check_shapes(check, key, configs, depths)
    key, seeds = pick("seeds")
    seeds = (0,) if seeds is None else check.int_list(key, seeds, minimum=0, maximum=MAX_SEED)
    key, timeout = pick("timeout_s")
    timeout = DEFAULT_TIMEOUT_S if timeout is None else check.number(key, timeout, MAX_TIMEOUT_S)
    return dict(configs=configs, depths=depths, seeds=seeds, timeout_s=timeout,
                **_size(check, kind, table, top, check_values))


def _size(check: _Checker, kind: str, table: dict, top: dict, check_values: bool) -> dict:
    """budget and channels: a section's own choice replaces the top level's (either one)."""
    if "budget" in table or "channels" in table:
        source, prefix = table, f"{kind}."
    else:
        source, prefix = top, ""
    if "budget" in source and "channels" in source:
        raise UserError(f"{check.path}: give either '{prefix}budget' or '{prefix}channels', not both")
    budget = None
    if "budget" in source:
        budget = _check_budget(check, prefix + "budget", source["budget"]) if check_values else \
            _budget_text(check, prefix + "budget", source["budget"])
    channels = check.integer(prefix + "channels", source["channels"], maximum=MAX_DIM) if "channels" in source else None
    if budget is None and channels is None and not (kind == "train" and "preset" in table):
        raise UserError(f"{check.path}: no model size: give 'budget' (like 10M or slstm:100) or 'channels' "
                        f"at the top or in [{kind}] (or a [train] preset that sets one)")
    return dict(budget=budget, channels=channels)


def _budget_text(check: _Checker, key: str, value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise check.error(key, "must be a number like 10M or 2500000, or slstm:M like slstm:100", value)
    return str(value)


def _train_settings(check: _Checker, table: dict, top: dict, check_values: bool) -> dict:
    settings: dict = {}
    if "preset" in table:
        preset = check.string("train.preset", table["preset"])
        settings["preset"] = _check_preset(check, preset, top.get("task")) if check_values else preset
    for name in ("max_samples", "epochs", "batch_size", "eval_every"):
        if name in table:
            settings[name] = check.integer(f"train.{name}", table[name],
                                           maximum=MAX_DIM if name == "batch_size" else None)
    if "time_limit_s" in table:
        settings["time_limit_s"] = check.number("train.time_limit_s", table["time_limit_s"], MAX_TIMEOUT_S)
    if "lr" in table:  # in a cell's spec (and key) only when given: the specs without it keep their cells
        settings["lr"] = _learning_rates(check, table["lr"])
    if "lr_warmup" in table:  # as lr; a cell's spec names one only when it is not "none"
        settings["lr_warmup"] = _warmups(check, table["lr_warmup"])
    if "clip_grad_norm" in table:  # as lr: in a cell's spec (and key) only when given
        try:
            settings["clip_grad_norm"] = checks.number(table["clip_grad_norm"], "clip_grad_norm")
        except UserError:
            raise check.error("train.clip_grad_norm", "must be a positive number, the gradient norm to clip to "
                              "(like 1.0)", table["clip_grad_norm"]) from None
    if "early_stopping" in table:
        if not isinstance(table["early_stopping"], bool):
            raise check.error("train.early_stopping", "must be true or false", table["early_stopping"])
        settings["early_stopping"] = table["early_stopping"]
    options = table.get("options", {})
    if not isinstance(options, dict):
        raise check.error("train.options", "must be a table of task options like { digits = 3 }", options)
    for name, value in options.items():
        if not isinstance(value, (int, float, str, bool)):
            raise check.error(f"train.options.{name}", "must be a number, a string or a boolean", value)
    if check_values:
        _check_options(check, top.get("task"), options, settings.get("preset"))
    settings["options"] = dict(sorted(options.items()))
    settings.update(_precision(check, "train", table))
    return settings


def _learning_rates(check: _Checker, value) -> tuple[float, ...]:
    """``lr``: one learning rate, or a list of them (an axis of the grid, like the depths)."""
    try:  # checks.number: a finite number above 0, as `train --lr` takes
        items = tuple(checks.number(item, "lr") for item in (value if isinstance(value, list) and value else [value]))
    except UserError:
        raise check.error("train.lr", "must be a positive number, Adam's learning rate (like 1e-4), or a "
                          "list of them", value) from None
    if len(set(items)) != len(items):
        raise check.error("train.lr", "must not repeat a value", value)
    return items


def _warmups(check: _Checker, value) -> tuple["str | None", ...]:
    """``lr_warmup``: one warm-up (tlstm_bench/warmup.py) or a list of them, each canonical, None for "none"."""
    items = value if isinstance(value, list) and value else [value]
    if not all(isinstance(item, str) for item in items):
        raise check.error("train.lr_warmup", f"must be a warm-up {USAGE}, \"none\", or a list of them", value)
    try:
        warmups = tuple(canonical_warmup(item, "train.lr_warmup") for item in items)
    except UserError as exc:
        raise UserError(f"{check.path}: {exc}") from None
    if len(set(warmups)) != len(warmups):
        raise check.error("train.lr_warmup", "must not repeat a warm-up", value)
    return warmups


def _runtime_settings(check: _Checker, table: dict) -> dict:
    settings = {
        "seq_len": check.integer("runtime.seq_len", table.get("seq_len", TIMING_SEQ_LEN), maximum=MAX_DIM),
        "repeats": check.integer("runtime.repeats", table.get("repeats", TIMING_REPEATS), maximum=MAX_REPEATS),
        "warmup": check.integer("runtime.warmup", table.get("warmup", TIMING_WARMUP), minimum=0, maximum=MAX_REPEATS),
        "implementations": check.str_list("runtime.implementations", table.get("implementations", ["default"])),
        "threads": (check.integer("runtime.threads", table["threads"], maximum=checks.MAX_THREADS)
                    if "threads" in table else None),
        "dtype": check.string("runtime.dtype", table.get("dtype", DEFAULT_DTYPE), DTYPES),
    }
    for name in ("vocab", "input_size", "output_size"):
        settings[name] = check.integer(f"runtime.{name}", table[name], maximum=MAX_DIM) if name in table else None
    settings.update(_precision(check, "runtime", table))
    return settings


def _tables(check: _Checker, kind: str, value) -> list[dict]:
    """The tables of one kind: ``[runtime]`` is one, ``[[runtime]]`` a list of them (runtime only)."""
    if kind == "runtime" and isinstance(value, list):
        if not value or not all(isinstance(t, dict) for t in value):
            raise check.error(kind, "must be a table [runtime] or a list of tables [[runtime]]", value,
                              show_value=False)
        return value
    if not isinstance(value, dict):
        what = "a table [train] (one per spec)" if kind == "train" else "a table [runtime] or tables [[runtime]]"
        raise check.error(kind, f"must be {what}", value, show_value=False)
    return [value]


def _precision(check: "_Checker", kind: str, table: dict) -> dict:
    """{"precision": ...} when the spec names one (vocab.PRECISIONS), else {}: a cell's spec,
    and so its key, changes only when a precision is asked for."""
    if "precision" not in table:
        return {}
    return {"precision": check.string(f"{kind}.precision", table["precision"], PRECISIONS)}


def _section(check: _Checker, kind: str, table: dict, top: dict, check_values: bool = True) -> Section:
    allowed = _TRAIN_KEYS if kind == "train" else _RUNTIME_KEYS
    check.keys(table, allowed, f"{kind}.")
    grid = _grid(check, kind, table, top, check_values)
    settings = (_train_settings(check, table, top, check_values) if kind == "train"
                else _runtime_settings(check, table))
    if settings.get("time_limit_s", 0) >= grid["timeout_s"]:
        raise check.error("train.time_limit_s", f"must be below the cells' timeout_s ({grid['timeout_s']:,.0f} s): "
                          "a cell past its timeout is killed and keeps no record", settings["time_limit_s"])
    return Section(kind=kind, **grid, settings=settings)


def _check_cell_count(path: Path, data: dict) -> None:
    """A one-line error when the grid (configs x depths x seeds, x implementations for runtime,
    summed over the sections) has more than :data:`MAX_CELLS` cells, from the lists' lengths."""
    def length(table: dict, key: str) -> int:
        value = table.get(key, data.get(key))
        return len(value) if isinstance(value, list) else 1

    count = 0
    for kind in ("runtime", "train"):
        tables = data.get(kind)
        for table in tables if isinstance(tables, list) else [tables]:
            if isinstance(table, dict):
                count += (length(table, "configs") * length(table, "depths") * length(table, "seeds")
                          * length(table, "implementations" if kind == "runtime" else "lr")
                          * (length(table, "lr_warmup") if kind == "train" else 1))
    if count > MAX_CELLS:
        raise UserError(f"{path}: the grid has {count:,} cells, above the limit of {MAX_CELLS:,}; use fewer "
                        "configs, depths or seeds, or split it into several specs")


def parse_spec(data: dict, path: "str | Path", name: str | None = None, *, check_values: bool = True) -> SweepSpec:
    """Validate the dict of one TOML file and resolve the defaults of each section.

    ``check_values=False`` checks keys, types and ranges only: configuration names, budgets,
    presets and task options are taken as written (what ``plot`` needs: no torch).
    """
    path = Path(path)
    check = _Checker(path)
    check.keys(data, _TOP_KEYS, "")
    if "task" not in data:
        raise UserError(f"{path}: missing key 'task' (a task name like memorization, or \"runtime\")")
    task = _check_task(check, data["task"])
    device = check.string("device", data.get("device", "cpu"))
    parse_device(device, f"{path}: key 'device'")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise check.error("description", "must be a string", description)
    _check_cell_count(path, data)
    sections = tuple(_section(check, kind, table, data, check_values)
                     for kind in ("runtime", "train") if kind in data for table in _tables(check, kind, data[kind]))
    if not sections:
        raise UserError(f"{path}: nothing to run: add a [train] table, a [runtime] table, or both")
    if task == "runtime" and "train" in data:
        raise UserError(f"{path}: task \"runtime\" is for runtime-only sweeps; name a task to use [train]")
    return SweepSpec(name=name or path.stem, path=path, task=task, device=device, description=description,
                     sections=sections)


def check_device_here(device: str) -> None:
    """A one-line error when ``device`` is a GPU this machine does not have.

    For a sweep whose cells run here (the local executor): refused before any cell starts,
    instead of one failed record per cell that later runs would skip as "failed earlier". Not
    checked when a spec is read: the shipped GPU specs must still plan (``--dry-run``) on a
    laptop, and SLURM jobs run on other machines.
    """
    have = missing_gpu(device)
    if have is not None:
        raise UserError(f"the sweep's device is {device}, but this machine has {have}; run it with --device cpu, "
                        "on a GPU machine, or with --executor slurm on GPU nodes")


def shipped_dir() -> Path:
    """The folder of the specs that ship with the package (read through importlib.resources)."""
    return Path(str(resources.files("tlstm_bench.sweeps").joinpath(SHIPPED)))


def available_specs() -> list[str]:
    """The names of the shipped specs."""
    folder = shipped_dir()
    return sorted(p.stem for p in folder.glob("*.toml")) if folder.is_dir() else []


def shipped_spec(name: str) -> Path | None:
    """The shipped spec called ``name``, or None."""
    path = shipped_dir() / f"{name}.toml"
    return path if path.is_file() else None


def find_spec(spec: "str | Path") -> Path:
    """A path to a TOML file (any path: the user's own spec), or the name of a shipped spec."""
    text = str(spec)
    as_path = checks.path_length(text, "sweep spec file")
    if as_path.suffix == ".toml" or "/" in text or as_path.is_file():
        if not as_path.is_file():
            what = (f"is {file_kind(as_path.stat().st_mode)}, not a regular file" if as_path.exists()
                    else "does not exist")
            raise UserError(f"sweep spec file {text} {what}; give a path to a .toml file or one of: "
                            f"{', '.join(available_specs())}")
        return as_path
    shipped = shipped_spec(text)
    if shipped is not None:
        return shipped
    raise UserError(f"unknown sweep {text!r}; choose one of: {', '.join(available_specs()) or '(none found)'}, "
                    f"or give a path to a .toml file")


_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")
_OPENERS = {"[": "array", "{": "inline table", '"""': "string", "'''": "string"}
_ONE_LINE_STRING = {'"': re.compile(r'"(?:[^"\\\n]|\\.)*"'), "'": re.compile(r"'[^'\n]*'")}


def _open_at(text: str) -> "tuple[str, int] | None":
    """The innermost array, inline table or multi-line string still open at the end of ``text``,
    as (what, its line), skipping comments and strings; None when nothing is open."""
    stack: list[tuple[str, int]] = []
    i, line = 0, 1
    while i < len(text):
        ch = text[i]
        if ch == "\n":
            line += 1
        elif ch == "#":
            i = text.find("\n", i)
            if i < 0:
                break
            continue
        elif text.startswith(('"""', "'''"), i):
            end = text.find(text[i:i + 3], i + 3)
            if end < 0:
                return _OPENERS[text[i:i + 3]], line
            line, i = line + text.count("\n", i, end), end + 3
            continue
        elif ch in "\"'":
            end = _ONE_LINE_STRING[ch].match(text, i)
            i = end.end() if end else i + 1  # an unterminated one ends at its line, as in TOML
            continue
        elif ch in "[{":
            stack.append((_OPENERS[ch], line))
        elif ch in "]}" and stack:
            stack.pop()
        i += 1
    return stack[-1] if stack else None


def _opened_where(text: str, message: str) -> str:
    """Where the array (inline table, string) that tomllib stopped in was opened, when that is an
    earlier line than the one it names: tomllib reports an unclosed array at the next key."""
    at = _TOML_AT.search(message)
    if at is not None:
        row, column = int(at.group(1)), int(at.group(2))
        lines = text.split("\n")
        text = "\n".join(lines[:row - 1] + [lines[row - 1][:column - 1] if row <= len(lines) else ""])
    elif "end of document" not in message:
        return ""
    found = _open_at(text)
    if found is None or (at is not None and found[1] >= int(at.group(1))):
        return ""
    what, line = found
    hint = "; is a ',' or ']' missing?" if what == "array" else ""
    return f" (inside the {what} opened at line {line}{hint})"


def load_spec(spec: "str | Path", *, check_values: bool = True) -> SweepSpec:
    """Find, read and validate one spec file (``check_values``: see :func:`parse_spec`)."""
    path = find_spec(spec)
    try:
        text = read_regular_text(path)  # checked again as it is opened: a swap since find_spec never blocks
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}{_opened_where(text, str(exc))}") from None
    except RecursionError:
        raise UserError(f"{path}: a value is nested too deeply to read (arrays or tables inside each other "
                        "hundreds of times); a spec needs lists of plain values") from None
    except NotAFile as exc:
        raise UserError(f"sweep spec file {path} is {exc.what}, not a regular file; give a path to a .toml file") \
            from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the spec: {exc}") from None
    return parse_spec(data, path, check_values=check_values)
