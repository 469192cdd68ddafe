"""The host side of a sequence's kernels: geometry and index maps, the choice of tiles and of
path (one launch per step, or one persistent launch per sequence), and the launches."""

from __future__ import annotations

from contextlib import contextmanager

import torch
import triton

from ...errors import UserError
from ...vocab import DEFAULT_PRECISION, PRECISIONS
from ..tlstm import HIDDEN_OFFSET, INPUT_SLOT, NORM_EPS, TLSTM, SequenceShapes
from . import deps as depmaps
from . import tiles as tiling
from .backward import backward_persistent, backward_step
from .common import INTERPRETED
from .forward import forward_persistent, forward_step

_FORCED: dict = {}  # set by `forced` (tests, benchmarks/triton_tune.py)


@contextmanager
def forced(menu: str | None = None, persistent: bool | None = None):
    """Run the sequences inside with this menu entry and/or path (None: the usual choice).
    ``persistent=True`` where it is impossible is a UserError, not a silent fallback."""
    if menu is not None and menu not in tiling.MENU:
        raise ValueError(f"unknown tile menu entry {menu!r}; known: {', '.join(tiling.MENU)}")
    saved = dict(_FORCED)
    _FORCED.update(menu=menu, persistent=persistent)
    try:
        yield
    finally:
        _FORCED.clear()
        _FORCED.update(saved)


def cooperative_launch_supported() -> bool:
    """Whether the installed Triton launches a cooperative grid (``launch_cooperative_grid``)."""
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:
        return False
    return "launch_cooperative_grid" in getattr(CUDAOptions, "__dataclass_fields__", {})


def persistent_possible(programs: int, device: torch.device) -> tuple[bool, str]:
    """(possible, why not). A grid barrier needs every program resident at once."""
    if INTERPRETED:
        return programs == 1, f"the interpreter runs programs one after another (this grid has {programs})"
    if device.type != "cuda":
        return False, "it needs a CUDA GPU"
    if not cooperative_launch_supported():
        return False, f"Triton {triton.__version__} has no cooperative launch (launch_cooperative_grid)"
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return programs <= sms, f"the grid has {programs} programs and the GPU {sms} SMs"


class Geometry(SequenceShapes):
    """Shapes, index maps (int32 for the kernels), tiles and path of one model at one batch,
    and the precision of its products (``precision``, asked; ``tensor_cores``, whether any
    product is a ``tl.dot`` that the precision changes)."""

    def __init__(self, model: TLSTM, seq_len: int, batch: int, precision: str = DEFAULT_PRECISION):
        super().__init__(model, seq_len)
        if precision not in PRECISIONS:
            raise UserError(f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)}")
        maps = _maps(model)
        self.hidden_index, self.cell_index, self.inv_hidden, self.inv_cell, self.input_entries = maps
        # The model's own int64 maps, flat, for the backward's torch gathers (views: nothing copied).
        self.hidden_long = model.hidden_index.reshape(-1)
        self.cell_long = model.cell_index.reshape(-1)
        dtype = str(model.w_h.dtype).removeprefix("torch.")
        self.menu, preferred = tiling.choose(self.m, self.n, self.kd, batch, dtype, precision, norm=self.norm,
                                             memory_conv=self.memory_conv)
        self.menu = _FORCED.get("menu") or self.menu
        menu = tiling.MENU[self.menu]
        self.tiles = tiling.tiles_for(menu, self.m, self.kd)
        if menu.unroll > 1 and self.inv_cell.shape[1] > self.tiles["KDP"]:  # backward.index_maps preloads it
            raise UserError(f"tile set {self.menu!r} preloads {self.tiles['KDP']} readers of a cell and this model "
                            f"has {self.inv_cell.shape[1]}; use a tile set without '-u3'")
        self.precision = precision
        self.tensor_cores = menu.tensor_cores(dtype) and precision != "ieee"
        # the kernels' constexpr: "ieee" where no product is a tl.dot (one compiled variant, not three)
        self.tiles["PRECISION"] = precision if menu.tensor_cores(dtype) else "ieee"
        self.nj = triton.cdiv(self.m, self.tiles["BM"])
        self.batch = batch
        rows = (1, batch * self.n) if menu.fold else (batch, self.n)
        self.grid = (rows[0], triton.cdiv(rows[1], self.tiles["BN"]), self.nj)
        self.persistent = _choose_path(self.grid, model.w_h.device, preferred)
        # the step flags' producer tables (forward, backward): only a persistent launch of a "flags" entry
        self.producers = _producers(model, self) if self.persistent and self.tiles["SYNC"] else None

    def describe(self) -> dict:
        """What ran, for a record: the tile-menu entry, the path, the grid, the precision."""
        return {"menu": self.menu, "persistent": self.persistent, "grid": list(self.grid),
                "precision": self.precision, "tensor_cores": self.tensor_cores}


def _choose_path(grid: tuple, device: torch.device, preferred: bool | None) -> bool:
    """Persistent or per step. Forced (tests, tuner) or TLSTM_TRITON_PERSISTENT=1: persistent,
    or a one-line error where it is impossible; =0: per step. Otherwise (auto): what the
    tuning table or ``tiles.default_choice`` prefers (persistent for float32) where it is
    possible here, else per step. The barrier was shown right on an H100 (13 and 130
    programs, results/evidence/gpu/2026-11-26-h100-2/); a cooperative launch refuses a grid
    that cannot be resident, so the barrier cannot wait on a program that never starts."""
    want = _FORCED.get("persistent")
    mode = tiling.persistent_mode()
    if mode not in ("auto", "on", "off"):
        raise UserError(f"{tiling.PERSISTENT_ENV}={mode!r} is not one of auto, 0, 1; unset it or pick one")
    if want is None and mode != "auto":
        want = mode == "on"
    possible, why = persistent_possible(grid[0] * grid[1] * grid[2], device)
    if want is None:
        return possible and not INTERPRETED and preferred is True
    if want and not possible:
        raise UserError(f"the persistent triton kernels cannot run here: {why}; "
                        f"set {tiling.PERSISTENT_ENV}=0 (one launch per step)")
    return want


def _inverse_maps(hidden_index: torch.Tensor, cell_index: torch.Tensor):
    """Inverses of the model's index maps (N, Kd each), for the backward's gathers.

    Returns ``inv_hidden`` (N, Kd): the location whose entry k reads hidden location t,
    or -1; ``inv_cell`` (N, R): entries n*Kd + k of every window that reads cell
    location t, -1 padded; ``input_entries`` (P, 2): the (location, entry) pairs that
    read z. Built from the maps alone: the window geometry is never recomputed.
    """
    n, kd = hidden_index.shape
    hidden = hidden_index.tolist()
    inv_hidden = [[-1] * kd for _ in range(n)]
    input_entries = []
    for src in range(n):
        for k, slot in enumerate(hidden[src]):
            if slot >= HIDDEN_OFFSET:
                t = slot - HIDDEN_OFFSET
                if inv_hidden[t][k] != -1:
                    raise RuntimeError("hidden_index reads one location twice through one kernel entry; "
                                       "the triton backward assumes windows are translations")
                inv_hidden[t][k] = src
            elif slot == INPUT_SLOT:
                input_entries.append((src, k))
    readers: list[list[int]] = [[] for _ in range(n)]
    for src, row in enumerate(cell_index.tolist()):
        for k, t in enumerate(row):
            readers[t].append(src * kd + k)
    width = max(len(r) for r in readers)
    inv_cell = [r + [-1] * (width - len(r)) for r in readers]
    return (torch.tensor(inv_hidden, dtype=torch.int32), torch.tensor(inv_cell, dtype=torch.int32),
            torch.tensor(input_entries, dtype=torch.long).reshape(-1, 2))


def _maps(model: TLSTM):
    """The index maps and their inverses on the model's device, cached per map version."""
    hidx, cidx = model.hidden_index, model.cell_index
    key = (hidx.device, hidx.data_ptr(), hidx._version, cidx.data_ptr(), cidx._version)
    cached = model.__dict__.get("_triton_maps")
    if cached is not None and cached[0] == key:
        return cached[1]
    inv_hidden, inv_cell, input_entries = _inverse_maps(hidx.cpu(), cidx.cpu())
    dev = hidx.device
    maps = (hidx.to(torch.int32).contiguous(), cidx.to(torch.int32).contiguous(), inv_hidden.to(dev),
            inv_cell.to(dev), input_entries.to(dev))
    model.__dict__["_triton_maps"] = (key, maps)
    return maps


def _producers(model: TLSTM, geo: Geometry) -> tuple[torch.Tensor, torch.Tensor]:
    """The step flags' (forward, backward) producer tables (``deps.py``) on the model's device,
    cached per map version and geometry, as ``_maps`` caches the maps (built once: a CUDA graph
    that captures a later call copies nothing to the device)."""
    key = (model.__dict__["_triton_maps"][0], geo.grid, geo.batch, geo.tiles["BN"], geo.tiles["FOLD"])
    cache = model.__dict__.setdefault("_triton_producers", {})
    if key not in cache:
        cache[key] = tuple(t.to(model.w_h.device) for t in depmaps.tables(geo))
    return cache[key]


def _sync_args(geo: Geometry, table: torch.Tensor | None) -> dict:
    """The persistent kernels' step-flag arguments: none for the grid barrier (their defaults);
    with flags, one zeroed int32 a program and the producer table."""
    if table is None:
        return {}
    flags = torch.zeros(table.shape[0], dtype=torch.int32, device=table.device)
    return dict(SYNC=1, DEPW=table.shape[1], flags_ptr=flags, deps_ptr=table)


def _semaphore(device: torch.device) -> torch.Tensor:
    """The grid barrier's zeroed uint32 counter (int32 zeros viewed as uint32: torch has few
    uint32 kernels, and a view needs none)."""
    return torch.zeros(1, dtype=torch.int32, device=device).view(torch.uint32)


def _launch_options(geo: Geometry) -> dict:
    t = geo.tiles
    opts = dict(NORM=geo.norm_code, MEMCONV=geo.memory_conv, FOLD=t["FOLD"], PRECISION=t["PRECISION"], BN=t["BN"],
                BM=t["BM"], KDP=t["KDP"], NJP=t["NJP"], UNROLL=t["UNROLL"], DEFER=t["DEFER"], num_warps=t["num_warps"])
    if geo.persistent and not INTERPRETED:
        opts["launch_cooperative_grid"] = True
    if t["maxnreg"] is not None and not INTERPRETED:  # a compile option (the interpreter has none)
        opts["maxnreg"] = t["maxnreg"]
    return opts


def launch_forward(geo: Geometry, bufs: tuple, params: tuple, steps: int) -> None:
    """All forward steps: S + 1 launches (the last finishes h of step S-1), 2S with a split tile set
    (``tiles.Menu.split``: h_{s-1} by a launch of its own before step s), or one."""
    z_all, hs, cs, acts, pmean, pm2, mean, rstd = bufs
    consts = dict(BK=geo.tiles["BK"], **_launch_options(geo))
    args = (z_all, hs, cs, acts, pmean, pm2, mean, rstd, *params, geo.hidden_index, geo.cell_index)
    sizes = (geo.batch, geo.n, geo.m, geo.g, geo.kd, geo.nj, NORM_EPS)
    split = geo.tiles["SPLIT"]
    if geo.persistent:
        sem = _semaphore(z_all.device)
        sync = _sync_args(geo, geo.producers[0] if geo.producers else None)
        forward_persistent[geo.grid](*args, sem, steps, *sizes, **consts, **sync, SPLIT=split)
        return
    for s in range(steps + 1):
        if split and 0 < s < steps:  # h_{s-1} alone, then step s reading it (FIRST: h is in hs)
            forward_step[geo.grid](*args, s, steps, *sizes, FIRST=False, FINISH=True, **consts)
            forward_step[geo.grid](*args, s, steps, *sizes, FIRST=True, FINISH=False, **consts)
        else:
            forward_step[geo.grid](*args, s, steps, *sizes, FIRST=(s == 0), FINISH=(s == steps), **consts)


def launch_backward(geo: Geometry, cs, acts, mean, rstd, params: tuple, g: dict, grads: tuple) -> None:
    """All backward steps, S-1 .. 0: S launches, or one."""
    steps = acts.shape[0]
    consts = dict(BG=geo.tiles["BG"], **_launch_options(geo))
    args = (cs, acts, mean, rstd, *params, geo.cell_index, geo.inv_hidden, geo.inv_cell, g["das"], g["e1"],
            g["e2"], g["dcs"], g["dns"], g["pa"], g["pb"], g["dql"], g["dq1"], g["dq2"], *grads)
    sizes = (geo.seq_len, geo.depth - 1, geo.batch, geo.n, geo.m, geo.g, geo.kd, geo.nj, geo.inv_cell.shape[1])
    if geo.persistent:
        sem = _semaphore(acts.device)
        sync = _sync_args(geo, geo.producers[1] if geo.producers else None)
        backward_persistent[geo.grid](*args, sem, steps, *sizes, **consts, **sync)
        return
    for s in range(steps - 1, -1, -1):
        backward_step[geo.grid](*args, s, *sizes, HAS_NEXT=(s < steps - 1), **consts)
