"""The separability audit (SPEC section 3, "Separability").

For a configuration and depth, build a small random model with ``build_model`` in
float64, take the full Jacobian of every output y_t with respect to every input x_t',
and check that y_t depends on x_t and on no later input. This measures the model
``build_model`` returns; nothing here knows which configurations ought to pass.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

import torch

from .errors import UserError
from .models import build_model, parse_config

# Float64 Jacobian entries that are zero by construction come out exactly 0; anything
# above this is a real dependence, not rounding.
TOLERANCE = 1e-12

# The Jacobian takes one backward pass per output value (2 (L + 3) of them), each through
# every step and every location, so the audit's work grows like L^3 (sLSTM, 2D) to L^4
# (3D) and beyond. Work units (below) of 1.5-3.5 us each on a shared 2-core CPU: the
# limit is 15-35 s (3d up to L=38, 2d up to L=134, slstm up to L=48, D=4 up to L=18).
AUDIT_WORK_LIMIT = 10_000_000
_SLSTM_LAYER_STEP = 40  # work units of one sLSTM layer step (a Python-level loop) against one location step
# A location step gathers and multiplies its K^(D-1) window; the presets' windows (at most 9
# entries) are one work unit, a larger window costs proportionally more (and its index maps
# hold locations x window entries, so this bound keeps them small too).
_PRESET_WINDOW = 9


def audit_work(config, depth: int, *, channels: int = 3) -> int:
    """Work units of :func:`audit_one` (passes x steps x locations x window / 9, times (M/3)^2)."""
    arch = parse_config(config)
    seq_len = depth + 3
    passes = 2 * seq_len
    if arch.kind != "tlstm":
        per_pass = seq_len * depth * _SLSTM_LAYER_STEP
    else:
        window = max(1.0, arch.kernel_entries / _PRESET_WINDOW)
        per_pass = (seq_len + depth - 1) * arch.tensor_size(depth) ** (arch.dims - 1) * window
    return int(passes * per_pass * max(1.0, (channels / 3) ** 2))


# The audit's model is tiny (M = 3, two inputs and outputs): the presets have at most a few
# thousand parameters there. A window of K^(D-1) entries per location can still make it
# billions (the memory-cell kernel is one K^(D-1) vector per location), which no machine holds.
AUDIT_PARAMS_LIMIT = 10_000_000


def check_auditable(config, depth: int, *, channels: int = 3) -> None:
    """A one-line error when the audit of ``config`` at ``depth`` would take more than about 30 s,
    or its model would not be small."""
    from .models.budget import count_params
    from .models.config import check_shape

    arch = parse_config(config)
    check_shape(arch, depth, (channels, "channels (M)"))
    if audit_work(arch, depth, channels=channels) > AUDIT_WORK_LIMIT:
        raise UserError(f"the separability audit of {arch.label} at L={depth} with M={channels} would take "
                        f"minutes to hours (its work grows like L^3 to L^4); audit smaller depths or channels")
    params = count_params(arch, depth, channels, 2, 2).total
    if params > AUDIT_PARAMS_LIMIT:
        raise UserError(f"the separability audit of {arch.label} at L={depth} with M={channels} would build a model "
                        f"of {params:,} parameters (window of K^(D-1) = {arch.kernel_entries:,} entries); "
                        f"audit smaller channels, kernel or dims")


@dataclass(frozen=True)
class AuditResult:
    config: str
    depth: int
    separable: bool
    max_leak: float  # largest |dy_t / dx_t'| over t' > t
    min_own: float  # smallest over t of max |dy_t / dx_t|: y_t must see x_t
    seq_len: int

    @property
    def verdict(self) -> str:
        if self.separable:
            return "separable"
        if self.max_leak > TOLERANCE:
            return "leaks future input"
        return "blind to current input"

    def as_dict(self) -> dict:
        return {**asdict(self), "verdict": self.verdict}


def jacobian(model, x: torch.Tensor) -> torch.Tensor:
    """J[t, s, t', r] = d y_t[s] / d x_t'[r] for one sequence x of shape (T, R)."""
    def outputs(inp):
        return model(inp.unsqueeze(0))[0][0]

    return torch.autograd.functional.jacobian(outputs, x)


def audit_one(config, depth: int, *, channels: int = 3, input_size: int = 2, output_size: int = 2,
              seq_len: int | None = None, seed: int = 0, implementation: str | None = None,
              device: str = "cpu") -> AuditResult:
    """Measure separability of ``config`` at ``depth`` on a small random float64 model (on ``device``)."""
    arch = parse_config(config)
    check_auditable(arch, depth, channels=channels)
    torch.manual_seed(seed)
    model = build_model(arch, depth, input_size=input_size, output_size=output_size,
                        channels=channels, implementation=implementation).double()
    # Random, non-trivial parameters: norm gains/biases start at 1/0, perturb everything.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    model.to(device)  # after the perturbation, so the parameters are the same on every device
    return audit_model(model, seq_len=seq_len if seq_len is not None else depth + 3, label=arch.label)


def audit_model(model, *, seq_len: int, label: str | None = None) -> AuditResult:
    """Measure separability of a real-input float64 ``model`` on one random sequence.

    ``seq_len`` should exceed the depth so that a leak of up to L-1 steps has room to show.
    """
    device = next(model.parameters()).device
    x = torch.randn(seq_len, model.input_size, dtype=torch.float64).to(device)  # drawn on the CPU: same x anywhere
    jac = jacobian(model, x).abs().amax(dim=(1, 3))  # (T, T'): max over output and input features
    max_leak = float(torch.triu(jac, diagonal=1).max()) if seq_len > 1 else 0.0
    min_own = float(torch.diagonal(jac).min())
    # Blind means no path from x_t to y_t, which gives exactly 0. A real path through a deep
    # random model can be far below TOLERANCE (3d-cn at L=10: ~5e-13) and is still a path.
    separable = max_leak <= TOLERANCE and min_own > 0.0
    return AuditResult(label or model.arch.label, model.depth, separable, max_leak, min_own, seq_len)


def causal(config, depth: int) -> bool | None:
    """Whether ``config`` at ``depth`` is causal: y_t depends on no later input, measured.

    The audit of :func:`audit_one` (a small random float64 model of exactly this
    configuration and depth; every knob is in the canonical config string), cached per
    canonical string and depth for the life of the process. The global RNG is left as it
    was, so callers (training, timing) draw the same numbers with or without this check.
    None (not measured) when the audit would take too long or its model be too large
    (:func:`check_auditable`).
    """
    return _causal(parse_config(config).label, int(depth))


@functools.lru_cache(maxsize=None)
def _causal(label: str, depth: int) -> bool | None:
    with torch.random.fork_rng(devices=[]):
        try:
            return audit_one(label, depth).max_leak <= TOLERANCE  # audit_one checks it is auditable first
        except UserError:  # too slow or too large to measure here
            return None


def explain(config) -> str | None:
    """Why a configuration can leak, from its definition (shown only when a leak is measured)."""
    arch = parse_config(config)
    if arch.kind == "tlstm" and arch.norm == "ln":
        return ("LN normalises the memory cell over all locations at once, so the output "
                "location sees the statistics of locations the newest input has already reached")
    return None
