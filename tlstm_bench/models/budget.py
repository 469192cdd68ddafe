"""Exact parameter counts and the channel-size solver (SPEC section 7).

``count_params`` gives the trainable parameter count of a model that ``build_model``
would build, by component, from the formulas below, without building it; the tests
check that it equals ``sum(p.numel() for p in model.parameters())`` for every
configuration. With R inputs (vocabulary or input size), S outputs, M channels,
Kd = K^(D-1) kernel entries and N = P^(D-1) locations:

* input projection      ``R*M + M``                 (``w_x, b_x``)
* recurrent kernel      tLSTM: ``Kd*M*4M + 4M``     (``w_h, b_h`` gate channels G, I, F, O)
                        sLSTM: ``2*4M*M + 4M``      (``w_ih, w_hh, b``, shared by all layers)
* memory-kernel chans   ``Kd*M*Kd + Kd``            (the Q channels of ``w_h, b_h``; 0 for "-M")
* norm gains/biases     ``2*N*M``                   (``norm_gain, norm_bias``; 0 without LN/CN)
* output layer          ``M*S + S``                 (``w_y, b_y``)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UserError
from .config import ArchConfig, check_shape, parse_config

COMPONENTS = ("input_projection", "recurrent_kernel", "memory_kernel", "norm", "output_layer")


@dataclass(frozen=True)
class ParamCount:
    input_projection: int
    recurrent_kernel: int
    memory_kernel: int
    norm: int
    output_layer: int

    @property
    def total(self) -> int:
        return sum(self.as_dict().values())

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COMPONENTS}


def count_params(config: "str | ArchConfig", depth: int, channels: int, input_size: int,
                 output_size: int) -> ParamCount:
    """The exact trainable parameter count, by component (see the module docstring)."""
    arch = parse_config(config)
    check_shape(arch, depth)  # P^(D-1) below is then an ordinary number
    m, r, s = channels, input_size, output_size
    inp = r * m + m
    out = m * s + s
    if arch.kind != "tlstm":  # one layer's weights, shared (slstm) or one set per layer (lstm)
        layers = depth if arch.kind == "lstm" else 1
        return ParamCount(inp, layers * (8 * m * m + 4 * m), 0, 0, out)
    kd = arch.kernel_entries
    n = arch.tensor_size(depth) ** (arch.dims - 1)
    rec = kd * m * 4 * m + 4 * m
    mem = kd * m * kd + kd if arch.memory_conv else 0
    norm = 2 * n * m if arch.norm != "none" else 0
    return ParamCount(inp, rec, mem, norm, out)


_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9}
# A quadrillion parameters, a thousand times the largest models trained so far: above it a
# count is a typo, and the solver's M would leave the range of a tensor dimension.
MAX_BUDGET = 10**15
_NUMBER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgb]?)\s*$", re.IGNORECASE)


def parse_budget(budget: "int | str", *, input_size: int, output_size: int) -> int:
    """A budget as a parameter count: ``10000000``, ``"10M"``, ``"2.5m"``, ``"500K"``, or
    ``"slstm:400"`` (the count of an sLSTM with M=400 and the same inputs and outputs)."""
    if isinstance(budget, bool):
        raise UserError(f"malformed budget {budget!r}")
    if isinstance(budget, int):
        value = budget
    else:
        text = str(budget).strip()
        if text.lower().startswith("slstm:"):
            raw = text.split(":", 1)[1].strip()
            if not raw.isdigit() or int(raw) < 1:
                raise UserError(f"malformed budget {text!r}; write 'slstm:M' with an integer M >= 1, e.g. 'slstm:400'")
            value = count_params("slstm", 1, int(raw), input_size, output_size).total
            return _at_most(value, budget)
        match = _NUMBER.match(text)
        if not match:
            raise UserError(
                f"malformed budget {text!r}; give a parameter count like 10M, 500K, 2500000, or slstm:400"
            )
        digits, _, fraction = match.group(1).partition(".")
        if len(digits) > 16:
            raise UserError(f"budget {text[:24]}... is above {MAX_BUDGET:.0e} parameters; give a smaller budget")
        value = int(round(float(match.group(1)) * _SUFFIX[match.group(2).lower()]))
    if value < 1:
        raise UserError(f"budget must be a positive parameter count, got {budget!r}")
    return _at_most(value, budget)


def _at_most(value: int, budget) -> int:
    if value > MAX_BUDGET:
        raise UserError(f"budget {budget!r} is {value:.3g} parameters, above the {MAX_BUDGET:.0e} this tool "
                        "builds; give a smaller budget")
    return value


def slstm_budget_channels(budget) -> int | None:
    """M of a budget given as ``"slstm:M"`` (the paper's "M is 400" read as a budget), else None."""
    if isinstance(budget, str) and budget.strip().lower().startswith("slstm:"):
        raw = budget.strip().split(":", 1)[1].strip()
        if raw.isdigit() and int(raw) >= 1:
            return int(raw)
    return None


# The paper's "M" for parameter counts: Table 1's "50.1M" for 3D tLSTM+CN (L=6, M=1200)
# is that model's full count, 52,521,814, divided by 2^20 (SPEC section 7).
BINARY_MILLION = 2 ** 20


def solve_channels(config: "str | ArchConfig", depth: int, budget: int, input_size: int,
                   output_size: int) -> int:
    """The largest channel size M whose total count is not above ``budget``.

    The count grows strictly with M, so a doubling search then bisection finds it.
    """
    def total(m: int) -> int:
        return count_params(config, depth, m, input_size, output_size).total

    smallest = total(1)
    if smallest > budget:
        raise UserError(
            f"budget {budget:,} is too small for {parse_config(config).label} at depth {depth}: "
            f"even M=1 needs {smallest:,} parameters; raise the budget or lower the depth"
        )
    lo, hi = 1, 2
    while total(hi) <= budget:
        lo, hi = hi, hi * 2
    while hi - lo > 1:  # invariant: total(lo) <= budget < total(hi)
        mid = (lo + hi) // 2
        if total(mid) <= budget:
            lo = mid
        else:
            hi = mid
    return lo
