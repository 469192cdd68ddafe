"""Grid expansion: a spec becomes cells, each with a stable id.

A cell's ``spec`` holds everything that determines its result (kind, task, configuration,
depth, seed, model size, device and the kind's settings; a runtime cell also the machine
it is measured on: accelerator, CPU model, CPU count). ``key`` hashes that spec; ``id``
hashes the key together with the code version (a hash of the package's source files,
:func:`tlstm_bench.results.provenance.code_version`), so the same cell computed by
different code gets a new id (and a new record), the same code rerun finds its record
and skips it, and a commit that changes no code (docs, results, tests) changes no id.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError
from ..results.provenance import code_version
from ..results.schema import stable_hash, versioned_id
from ..vocab import CUDA_IMPLEMENTATIONS, LEARNING_RATE, TASK_IO_WITHOUT_DATA, TIMING_VOCAB
from ..warmup import NONE, canonical_warmup
from .spec import SweepSpec


@dataclass(frozen=True)
class Cell:
    """One run: ``spec`` is what determines the result; ``id`` also covers the code version."""

    sweep: str
    spec: dict
    key: str
    id: str
    code_version: str
    timeout_s: float

    @property
    def kind(self) -> str:
        return self.spec["kind"]

    def label(self) -> str:
        s = self.spec
        if s.get("channels") is not None:
            size = f"M={s['channels']}"
        else:
            size = f"budget={s['budget']}" if s.get("budget") is not None else f"preset {s.get('preset')}"
        extra = ""
        if s["kind"] == "runtime" and s.get("implementation") != "default":
            extra = f" impl={s['implementation']}"
        if s.get("lr") is not None:
            extra += f" lr={s['lr']:g}"
        if s.get("lr_warmup") is not None:
            extra += f" warmup={s['lr_warmup']}"
        if s.get("clip_grad_norm") is not None:
            extra += f" clip={s['clip_grad_norm']:g}"
        what = s["kind"] if s["task"] == s["kind"] else f"{s['kind']} {s['task']}"  # not "runtime runtime"
        return f"{what} {s['config']} L={s['depth']} seed={s['seed']} {size}{extra}"


def make_cell(sweep: str, spec: dict, code: str, timeout_s: float) -> Cell:
    key = stable_hash(spec)
    return Cell(sweep=sweep, spec=spec, key=key, id=versioned_id(key, code),
                code_version=code, timeout_s=timeout_s)


def _implementation_ok(config: str, implementation: str) -> bool:
    """Whether a named sequence loop exists for this configuration ("default" always does)."""
    if implementation == "default":
        return True
    from ..models import parse_config
    from ..timing import implementations_of

    return implementation in implementations_of(parse_config(config).kind)


def needs_cuda(implementation: str, device: str) -> bool:
    """Whether a runtime cell of ``implementation`` cannot run on ``device``: ``triton``,
    ``cuda-graph`` and ``triton-graph`` run only on a CUDA GPU (``vocab.CUDA_IMPLEMENTATIONS``). Such cells are left
    out of a sweep on another device, and the plan says how many (:func:`left_out`), as ``time
    --implementation all`` leaves them out: planned, they could only fail."""
    return implementation in CUDA_IMPLEMENTATIONS and not device.startswith("cuda")


def left_out(spec: SweepSpec, device: str | None = None, filters: dict[str, set[str]] | None = None, *,
             code: str | None = None, machine: dict | None = None) -> dict[str, int]:
    """{implementation: number of cells} of the runtime cells :func:`expand` leaves out on
    ``device`` (default: the spec's), because they need a CUDA GPU; {} when none.

    ``filters`` (:func:`parse_filters`, the sweep's ``--only``): count only the left-out cells
    they select, as the plan holds only the cells they select. ``code`` and ``machine`` as for
    :func:`expand` (what an ``id`` or ``key`` filter compares with)."""
    device = device or spec.device
    implementations = [implementation for section in spec.sections if section.kind == "runtime"
                       for implementation in section.settings["implementations"]]
    if not any(needs_cuda(implementation, device) for implementation in implementations):
        return {}
    cells = _expand(spec, code=code, device=device, machine=machine, left_out=True)
    if filters:
        cells = select(cells, filters)
    counts = dict.fromkeys(implementations, 0)   # in the spec's order
    for cell in cells:
        counts[cell.spec["implementation"]] += 1
    return {k: v for k, v in counts.items() if v}


def runtime_io(spec: SweepSpec, section) -> dict:
    """``vocab`` or ``input_size``/``output_size`` for a runtime cell: the section's, else the task's."""
    given = {k: section.settings.get(k) for k in ("vocab", "input_size", "output_size")}
    if any(v is not None for v in given.values()):
        return given
    if spec.task == "runtime":
        return {"vocab": TIMING_VOCAB, "input_size": None, "output_size": None}
    from ..tasks import make_task

    options = {}
    train = next((s for s in spec.sections if s.kind == "train"), None)
    if train is not None:
        if train.settings.get("preset"):
            from ..training import PRESETS

            options.update(PRESETS[train.settings["preset"]].task_options)
        options.update(train.settings.get("options", {}))
    try:
        io = make_task(spec.task, **options).model_io()
    except UserError:
        io = TASK_IO_WITHOUT_DATA[spec.task]  # only the sizes are needed to time it
    return {"vocab": None, "input_size": None, "output_size": None, **io}


def expand(spec: SweepSpec, *, code: str | None = None, device: str | None = None,
           machine: dict | None = None) -> list[Cell]:
    """All cells of a spec, in a fixed order: runtime first (quick), then training.

    ``machine``: what runtime cells are measured on (default: this machine,
    :func:`tlstm_bench.results.provenance.machine`); a runtime measured on another machine
    is another cell.
    """
    return _expand(spec, code=code, device=device, machine=machine, left_out=False)


def _expand(spec: SweepSpec, *, code: str | None, device: str | None, machine: dict | None,
            left_out: bool) -> list[Cell]:
    """:func:`expand`; with ``left_out``, instead the runtime cells it leaves out on ``device``
    because they need a CUDA GPU (:func:`needs_cuda`), as they would be (for :func:`left_out`)."""
    from ..results.provenance import machine as this_machine

    code = code if code is not None else code_version()
    device = device or spec.device
    cells: list[Cell] = []
    for section in spec.sections:
        common = {"kind": section.kind, "task": spec.task, "budget": section.budget,
                  "channels": section.channels, "device": device}
        if section.kind == "runtime":
            settings = {k: v for k, v in section.settings.items() if k != "implementations"}
            settings.update(runtime_io(spec, section))
            settings["machine"] = machine if machine is not None else this_machine(device)
            for implementation in section.settings["implementations"]:
                if not any(_implementation_ok(c, implementation) for c in section.configs):
                    raise UserError(f"{spec.path}: key 'runtime.implementations': {implementation!r} is not a "
                                    f"sequence loop of any configuration in this sweep; use \"default\" or a "
                                    f"registered name")
            for config in section.configs:
                for implementation in section.settings["implementations"]:
                    if (not _implementation_ok(config, implementation)
                            or needs_cuda(implementation, device) != left_out):
                        continue
                    for depth in section.depths:
                        for seed in section.seeds:
                            # timed_with: the depths timed together with this one (sweeps/runtime_group.py)
                            cells.append(make_cell(spec.name, {
                                **common, "config": config, "depth": depth, "seed": seed,
                                "implementation": implementation, "timed_with": sorted(section.depths),
                                **settings}, code, section.timeout_s))
        elif not left_out:
            settings = {k: v for k, v in section.settings.items() if k not in ("lr", "lr_warmup")}
            # lr and lr_warmup: axes, in a cell's spec (and key) only when given (a warm-up: when not "none")
            lrs = [{"lr": lr} for lr in section.settings["lr"]] if "lr" in section.settings else [{}]
            warmups = [{"lr_warmup": w} if w is not None else {} for w in section.settings.get("lr_warmup", (None,))]
            lrs = [{**lr, **warmup} for lr in lrs for warmup in warmups]
            for config in section.configs:
                for lr in lrs:
                    for depth in section.depths:
                        for seed in section.seeds:
                            cells.append(make_cell(spec.name, {
                                **common, "config": config, "depth": depth, "seed": seed, **settings, **lr},
                                code, section.timeout_s))
    if not left_out:
        _check_distinct(spec, cells)
    return cells


def _check_distinct(spec: SweepSpec, cells: list[Cell]) -> None:
    """A one-line error when two tables of the spec give the same cell (one measurement twice,
    whichever depths it is timed with)."""
    seen: set[str] = set()
    for cell in cells:
        what = stable_hash({k: v for k, v in cell.spec.items() if k != "timed_with"})
        if what in seen:
            raise UserError(f"{spec.path}: two [[runtime]] tables give the same cell ({cell.label()}); "
                            "list it in one of them")
        seen.add(what)


FILTER_KEYS = ("id", "key", "kind", "task", "config", "depth", "seed", "implementation", "channels", "budget",
               "device", "preset", "lr", "lr_warmup")


def parse_filters(only: "list[str] | tuple[str, ...]") -> dict[str, set[str]]:
    """``["config=2d,3d", "depth=1"]`` -> {"config": {"2d", "3d"}, "depth": {"1"}}."""
    filters: dict[str, set[str]] = {}
    for item in only or ():
        name, sep, values = item.partition("=")
        name = name.strip()
        if not sep or not values.strip():
            raise UserError(f"--only takes KEY=V1,V2 like config=2d,3d-cn or depth=1,4, got {item!r}")
        if name not in FILTER_KEYS:
            raise UserError(f"--only: unknown key {name!r}; use one of {', '.join(FILTER_KEYS)}")
        split = split_configs if name == "config" else (lambda text: text.split(","))
        filters.setdefault(name, set()).update(v.strip() for v in split(values) if v.strip())
    for value in filters.get("lr", ()):
        if _number(value) is None:
            raise UserError(f"--only lr takes learning rates like lr=1e-3,1e-4, got {value!r}")
    _warmup_texts(filters.get("lr_warmup", set()))  # a bad warm-up: its one-line error now
    return filters


def _warmup_texts(wanted: set[str]) -> set[str]:
    """``--only lr_warmup=`` values as cells name them (``linear:20_000`` is ``linear:20000``)."""
    return {canonical_warmup(w, "--only lr_warmup") or NONE for w in wanted}


def _number(text) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def split_configs(text: str) -> list[str]:
    """``"2d,3d-cn:cell_kernel=shift,input_std=3,slstm"`` -> ["2d", "3d-cn:cell_kernel=shift,input_std=3",
    "slstm"]: a config's overrides are comma-separated too, so a piece with ``=`` and no ``:``
    continues the config before it."""
    configs: list[str] = []
    for piece in text.split(","):
        if configs and "=" in piece and ":" not in piece:
            configs[-1] += "," + piece
        else:
            configs.append(piece)
    return configs


def select(cells: list[Cell], filters: dict[str, set[str]]) -> list[Cell]:
    """Cells matching every filter (values compared as text; ids match by prefix)."""
    def value(cell: Cell, name: str) -> str:
        if name in ("id", "key"):
            return getattr(cell, name)
        return str(cell.spec.get(name))

    def ok(cell: Cell) -> bool:
        for name, wanted in filters.items():
            if name == "lr":  # as numbers (1e-4 is 0.0001); a cell that names none trains at the default
                if cell.kind != "train" or cell.spec.get("lr", LEARNING_RATE) not in {_number(w) for w in wanted}:
                    return False
                continue
            if name == "lr_warmup":  # as written by warmup.py ("none": a cell with none)
                if cell.kind != "train" or cell.spec.get("lr_warmup", NONE) not in _warmup_texts(wanted):
                    return False
                continue
            have = value(cell, name)
            if name in ("id", "key"):
                if not any(have.startswith(w) for w in wanted):
                    return False
            elif have not in wanted:
                return False
        return True

    return [c for c in cells if ok(c)]
