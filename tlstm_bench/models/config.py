"""Architecture configurations: the paper's seven presets over independent knobs.

SPEC section 6. A configuration is either the stacked LSTM (``slstm``) or a tLSTM
given by five knobs: tensor dimension D (``dims``), kernel size K (``kernel``),
memory-cell convolution on/off (``memory_conv``), the normalisation of the memory
cell on its way to the hidden state (``norm``: none, ln or cn), and the window of the
memory-cell convolution (``window``: aligned or appendix, SPEC section 3 step 5).

Config strings
--------------
* a preset name: ``slstm, 2d, 2d-m, 2d-f, 3d, 3d-ln, 3d-cn``;
* a preset with knob overrides, or a bare ``tlstm`` with knobs:
  ``3d-cn:kernel=5``, ``tlstm:dims=4,kernel=3,memory_conv=0,norm=cn``, ``3d:window=appendix``,
  ``3d-cn:cell_kernel=shift,input_init=normal``.

The canonical string (``label``) is the preset name when the knobs are exactly a
preset's; a preset's knobs with the non-default window or initialisation are
``<preset>:window=appendix,cell_kernel=shift,...`` (never the bare preset name); anything else
is the full ``tlstm:dims=..,kernel=..,memory_conv=..,norm=..`` with the same non-default knobs
appended. A knob at its default is never written, so labels (and the keys and ids of sweep
cells and records, which hash them) of default models are unchanged.

Shape limits (:func:`check_kernel`, part of validating a configuration, and
:func:`check_shape`, a configuration at a depth) live here, at the bottom of the models, so
that the parameter counts, the builder and the memory estimate (:mod:`.memory`, which
explains them) all check them without importing each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..checks import MAX_DIM, integer, knobs_once, number
from ..errors import UserError
from ..vocab import ANCHOR_NAMES, CONFIG_NAMES

NORMS = ("none", "ln", "cn")
# The memory-cell convolution window (SPEC section 3 step 5): "aligned" reads offsets
# -a .. b per coordinate, like the hidden-state convolution (SPEC's choice, the
# default); "appendix" reads -a+1 .. b+1, appendix A.2's index expression applied to C
# as written (p .. p+2 for K = 3). See docs/fidelity.md.
WINDOWS = ("aligned", "appendix")
DEFAULT_WINDOW = WINDOWS[0]
# The initialisation knobs (module docstring) and their defaults, in the order labels write them.
CELL_KERNELS = ("uniform", "shift", "centre")
INPUT_INITS = ("uniform", "normal")
BIAS_INITS = ("zeros", "torch7")
INIT_DEFAULTS = {"cell_kernel": "uniform", "cell_kernel_bias": 3.0, "input_init": "uniform", "input_std": 1.0,
                 "bias_init": "zeros", "recurrent_scale": 1.0}
_INIT_CHOICES = {"cell_kernel": CELL_KERNELS, "input_init": INPUT_INITS, "bias_init": BIAS_INITS}
_INIT_NUMBERS = ("cell_kernel_bias", "input_std", "recurrent_scale")


@dataclass(frozen=True)
class ArchConfig:
    """One architecture. ``kind`` is ``"slstm"``, ``"tlstm"`` or ``"lstm"`` (the untied anchor,
    ``vocab.ANCHOR_NAMES``); knobs apply to tLSTMs."""

    kind: str = "tlstm"
    dims: int = 2  # D: tensor dimension (hidden state is P^(D-1) x M)
    kernel: int = 3  # K: kernel size along every tensor dimension
    memory_conv: bool = True  # the "-M" ablation turns this off
    norm: str = "none"  # none | ln | cn
    window: str = DEFAULT_WINDOW  # aligned | appendix: the memory-cell convolution's window
    # Initialisation (module docstring; models/init.py applies them):
    cell_kernel: str = INIT_DEFAULTS["cell_kernel"]  # the memory-cell kernel's start: uniform | shift | centre
    cell_kernel_bias: float = INIT_DEFAULTS["cell_kernel_bias"]  # shift / centre: the logit added to that entry
    input_init: str = INIT_DEFAULTS["input_init"]  # W^x: uniform +-1/sqrt(M) | normal N(0, input_std^2)
    input_std: float = INIT_DEFAULTS["input_std"]
    bias_init: str = INIT_DEFAULTS["bias_init"]  # biases other than the forget gate's: zeros | torch7
    recurrent_scale: float = INIT_DEFAULTS["recurrent_scale"]  # the recurrent weights' initial values times this
    name: str | None = None  # preset name when it is one

    # SPEC section 3: a = floor(K/2) reaches toward the input, b = K-1-a away from it.
    @property
    def reach_in(self) -> int:
        return self.kernel // 2

    @property
    def reach_out(self) -> int:
        return self.kernel - 1 - self.kernel // 2

    @property
    def feedback(self) -> bool:
        """Whether the kernel reaches away from the input (b > 0): K odd or K >= 4."""
        return self.reach_out > 0

    @property
    def kernel_entries(self) -> int:
        """<K> = K^(D-1)."""
        return self.kernel ** (self.dims - 1)

    def tensor_size(self, depth: int) -> int:
        """P = a*L, the largest P with L = ceil(P / a) (SPEC section 3, paper eq. 7)."""
        if self.kind != "tlstm":
            return depth  # P is "the number of layers" for a stacked LSTM
        return self.reach_in * depth

    def sequential_steps(self, seq_len: int, depth: int) -> int:
        """Sequential cell steps for a sequence of T: T*L layer by layer, T+L-1 for a tLSTM."""
        if self.kind != "tlstm":
            return seq_len * depth
        return seq_len + depth - 1

    @property
    def cell_window_shift(self) -> int:
        """How far the memory-cell window sits from the hidden one, away from the input, per
        coordinate: 0 for ``window=aligned``, 1 for ``window=appendix`` (SPEC section 3 step 5;
        :func:`tlstm_bench.models.tlstm.cell_window_shift` explains it)."""
        return 1 if self.window == "appendix" else 0

    def cell_kernel_entry(self) -> int | None:
        """The memory-cell kernel entry that ``cell_kernel`` raises (row-major, as the Q channels
        are ordered), or None for ``uniform``, no memory-cell convolution, or a window without it.

        ``shift``: the entry reading offset -1 in every coordinate (the neighbour one location
        toward the input along the diagonal), so the memory moves one location toward the output
        corner per step; ``centre``: offset 0 (the location itself).
        """
        if self.kind != "tlstm" or not self.memory_conv or self.cell_kernel == "uniform":
            return None
        first = -self.reach_in + self.cell_window_shift  # the window's lowest offset per coordinate
        step = (-1 if self.cell_kernel == "shift" else 0) - first
        if not 0 <= step < self.kernel:
            return None
        return sum(step * self.kernel ** j for j in range(self.dims - 1))

    @property
    def init(self) -> dict:
        """The initialisation knobs, defaults included (what records store as ``init``); the
        memory-cell kernel's only where there is a memory-cell convolution."""
        knobs = {name: getattr(self, name) for name in INIT_DEFAULTS}
        if self.kind != "tlstm" or not self.memory_conv:
            knobs.update(cell_kernel=None, cell_kernel_bias=None)
        elif self.cell_kernel == "uniform":
            knobs["cell_kernel_bias"] = None
        if self.input_init == "uniform":
            knobs["input_std"] = None
        return knobs

    @property
    def label(self) -> str:
        return format_config(self)

    def validate(self) -> "ArchConfig":
        if self.kind not in ("slstm", "tlstm", "lstm"):
            raise UserError(f"unknown model kind {self.kind!r}; use 'slstm', 'tlstm' or 'lstm'")
        if self.kind == "tlstm":
            if self.dims < 2:
                raise UserError(f"dims (D) must be >= 2, got {self.dims}")
            if self.kernel < 2:
                raise UserError(f"kernel (K) must be >= 2 so the input can reach the output, got {self.kernel}")
            check_kernel(self)
            if self.norm not in NORMS:
                raise UserError(f"unknown norm {self.norm!r}; use one of {', '.join(NORMS)}")
            if self.window not in WINDOWS:
                raise UserError(f"unknown window {self.window!r}; use one of {', '.join(WINDOWS)} "
                                "(the memory-cell convolution's window, SPEC section 3 step 5)")
            if self.window != DEFAULT_WINDOW and not self.memory_conv:
                raise UserError(f"window={self.window} chooses the memory-cell convolution's window, but "
                                "memory_conv=0 has no memory-cell convolution; drop the window knob")
        check_init(self)
        return self


def check_init(arch: ArchConfig) -> None:
    """The initialisation knobs: known values, numbers above 0, and each strength only with the
    choice it belongs to (part of validating a configuration)."""
    for name, choices in _INIT_CHOICES.items():
        if getattr(arch, name) not in choices:
            raise UserError(f"unknown {name} {getattr(arch, name)!r}; use one of {', '.join(choices)}")
    for name in _INIT_NUMBERS:
        number(getattr(arch, name), name)
    if arch.cell_kernel == "uniform":
        if arch.cell_kernel_bias != INIT_DEFAULTS["cell_kernel_bias"]:
            raise UserError("cell_kernel_bias is the strength of cell_kernel=shift or centre; "
                            "give one of them too, or drop cell_kernel_bias")
    elif arch.kind != "tlstm" or not arch.memory_conv:
        raise UserError(f"cell_kernel={arch.cell_kernel} sets how the memory-cell convolution's kernel starts, "
                        f"but {arch.kind if arch.kind != 'tlstm' else 'memory_conv=0'} has none; drop it")
    elif arch.cell_kernel_entry() is None:
        raise UserError(f"cell_kernel={arch.cell_kernel} needs a memory-cell kernel entry at offset "
                        f"{-1 if arch.cell_kernel == 'shift' else 0}, which window={arch.window} with "
                        f"kernel={arch.kernel} does not have; use window=aligned or a larger kernel")
    if arch.input_init == "uniform" and arch.input_std != INIT_DEFAULTS["input_std"]:
        raise UserError("input_std is the standard deviation of input_init=normal; give input_init=normal too, "
                        "or drop input_std")


PRESETS: dict[str, ArchConfig] = {
    "slstm": ArchConfig(kind="slstm", name="slstm"),
    "2d": ArchConfig(dims=2, kernel=3, memory_conv=True, norm="none", name="2d"),
    "2d-m": ArchConfig(dims=2, kernel=3, memory_conv=False, norm="none", name="2d-m"),
    "2d-f": ArchConfig(dims=2, kernel=2, memory_conv=True, norm="none", name="2d-f"),
    "3d": ArchConfig(dims=3, kernel=3, memory_conv=True, norm="none", name="3d"),
    "3d-ln": ArchConfig(dims=3, kernel=3, memory_conv=True, norm="ln", name="3d-ln"),
    "3d-cn": ArchConfig(dims=3, kernel=3, memory_conv=True, norm="cn", name="3d-cn"),
}
assert tuple(PRESETS) == CONFIG_NAMES  # the knobs of each name in tlstm_bench.vocab, in its order
ANCHORS: dict[str, ArchConfig] = {"lstm": ArchConfig(kind="lstm", name="lstm")}
assert tuple(ANCHORS) == tuple(ANCHOR_NAMES)

_KNOBS = {"dims", "kernel", "memory_conv", "norm", "window", *INIT_DEFAULTS}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _unknown_config(text: str) -> UserError:
    return UserError(
        f"unknown config {text!r}; use one of {', '.join(CONFIG_NAMES)} (or the anchor lstm) "
        "or knobs like 'tlstm:dims=4,kernel=5,memory_conv=1,norm=cn'"
    )


def parse_config(config: "str | ArchConfig") -> ArchConfig:
    """Turn a preset name, a knob string or an ArchConfig into a validated ArchConfig."""
    if isinstance(config, ArchConfig):
        return config.validate()
    if not isinstance(config, str):
        raise _unknown_config(str(config))
    text = config.strip().lower()
    base, _, knobs = text.partition(":")
    if base == "tlstm":
        arch = ArchConfig()
    elif base in PRESETS:
        arch = PRESETS[base]
    elif base in ANCHORS:
        arch = ANCHORS[base]
    else:
        raise _unknown_config(config)
    if not knobs:
        return arch.validate()
    knobs_once(config)  # tlstm:dims=2,dims=3 is a typo, not "the last wins"
    allowed = _KNOBS if arch.kind == "tlstm" else set(INIT_DEFAULTS)
    values = dict(_knob_value(item, config, allowed) for item in knobs.split(","))
    arch = replace(arch, name=None, **values)
    preset = next((n for n, p in PRESETS.items() if replace(p, name=None) == arch), None)
    return replace(arch, name=preset).validate()


def _knob_value(item: str, config: str, allowed: set) -> tuple[str, object]:
    """``key=value`` of a knob string as (knob, typed value)."""
    key, eq, raw = (s.strip() for s in item.partition("="))
    if not eq or key not in allowed:
        what = "the stacked LSTMs take only the initialisation knobs" if allowed != _KNOBS else "knobs are"
        raise UserError(f"bad knob {item!r} in config {config!r}; {what} {', '.join(sorted(allowed))} (key=value)")
    if key in ("dims", "kernel"):
        try:
            return key, int(raw)
        except ValueError:
            raise UserError(f"{key} must be an integer in config {config!r}, got {raw!r}") from None
    if key == "memory_conv":
        if raw not in _TRUE | _FALSE:
            raise UserError(f"memory_conv must be 0 or 1 in config {config!r}, got {raw!r}")
        return key, raw in _TRUE
    if key in _INIT_NUMBERS:
        try:
            return key, float(raw)
        except ValueError:
            raise UserError(f"{key} must be a number in config {config!r}, got {raw!r}") from None
    return key, raw


def _preset_of(arch: ArchConfig) -> str | None:
    """The preset whose structural knobs ``arch`` has (the window and the initialisation aside)."""
    bare = replace(arch, name=None, window=DEFAULT_WINDOW, **INIT_DEFAULTS)
    return next((n for n, p in PRESETS.items() if replace(p, name=None) == bare), None)


def _number_text(value: float) -> str:
    """The shortest text that parses back to ``value`` (3.0 -> "3", 0.5 -> "0.5")."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def changed_init(arch: ArchConfig) -> dict[str, str]:
    """The initialisation knobs that are not at their defaults, as text ({"cell_kernel": "shift"})."""
    return {name: _number_text(getattr(arch, name)) if name in _INIT_NUMBERS else getattr(arch, name)
            for name, default in INIT_DEFAULTS.items() if getattr(arch, name) != default}


def _extra_knobs(arch: ArchConfig) -> list[str]:
    """The window and initialisation knobs that are not at their defaults, as ``key=value``."""
    extra = [f"window={arch.window}"] if arch.window != DEFAULT_WINDOW else []
    return extra + [f"{name}={value}" for name, value in changed_init(arch).items()]


def format_config(arch: ArchConfig) -> str:
    """The canonical string for an ArchConfig (see the module docstring); it parses back to ``arch``."""
    extra = ",".join(_extra_knobs(arch))
    if arch.kind != "tlstm":
        return f"{arch.kind}:{extra}" if extra else arch.kind
    if arch.name and not extra:
        return arch.name
    preset = _preset_of(arch)
    if preset is not None:
        return f"{preset}:{extra}" if extra else preset
    mc = 1 if arch.memory_conv else 0
    text = f"tlstm:dims={arch.dims},kernel={arch.kernel},memory_conv={mc},norm={arch.norm}"
    return f"{text},{extra}" if extra else text


MAX_ENTRIES = 2**30  # K^(D-1) kernel entries, P^(D-1) locations


def _power_at_most(base: int, exponent: int, limit: int) -> bool:
    """Whether base^exponent <= limit, without computing a huge power."""
    if base <= 1 or exponent <= 0:
        return True
    if exponent * math.log2(base) > math.log2(limit) + 1:
        return False
    return base ** exponent <= limit


def check_kernel(arch: ArchConfig) -> None:
    """K^(D-1) kernel entries at most :data:`MAX_ENTRIES` (part of validating a configuration)."""
    if arch.kind == "tlstm" and not _power_at_most(arch.kernel, arch.dims - 1, MAX_ENTRIES):
        raise UserError(f"dims={arch.dims}, kernel={arch.kernel} gives K^(D-1) kernel entries above 2^30 "
                        f"(each location's window); no model that size fits a machine: lower dims or kernel")


def check_shape(arch: ArchConfig, depth: int, *sizes: "tuple[int | None, str]") -> None:
    """Depth L, the P^(D-1) locations it gives, and each ``(size, name)`` within the limits."""
    integer(depth, "depth (L)", maximum=MAX_DIM)
    for size, name in sizes:
        if size is not None:
            integer(size, name, maximum=MAX_DIM)
    if arch.kind == "tlstm" and not _power_at_most(arch.tensor_size(depth), arch.dims - 1, MAX_ENTRIES):
        raise UserError(f"{arch.label} at L={depth:,} has P^(D-1) = {arch.tensor_size(depth):,}^{arch.dims - 1} "
                        f"locations, above 2^30; no model that size fits a machine: lower the depth")
