"""Models: the seven configurations of the Tensorized LSTM paper, knobs, budgets."""

import torch

from ..errors import UserError
from . import oracle as _oracle  # noqa: F401  (registers the "reference" implementation)
from . import fast_tlstm as _fast_tlstm  # noqa: F401  (registers "fast")
from .budget import COMPONENTS, ParamCount, count_params, parse_budget, solve_channels
from .build import build_model
from .cuda_graph import check_runs_on
from ..vocab import CONFIG_NAMES, PAPER_NAMES
from .config import PRESETS, ArchConfig, format_config, parse_config
from .slstm import SLSTM, SLSTM_IMPLEMENTATIONS, SLSTMState
from .tlstm import TLSTM, TLSTM_IMPLEMENTATIONS, TLSTMState


def require_triton(what: str = "implementation 'triton'", instead: str = "or use implementation 'fast'"):
    """Triton, the module, or a :class:`UserError` naming ``what`` needs it and how to install it:
    Triton is an optional dependency (the ``gpu`` extra). The benchmark scripts use it too."""
    try:
        import triton
    except ImportError:
        raise UserError(f"{what} needs Triton: pip install -e \".[gpu]\" (or pip install triton)"
                        + (f"; {instead}" if instead else "")) from None
    return triton


def run_triton(model: TLSTM, z: torch.Tensor, state: TLSTMState):
    """``triton`` (:mod:`tlstm_bench.models.triton_tlstm`), imported on first use: nothing else
    imports Triton (:func:`require_triton`). Here, not in :mod:`.tlstm`: triton_tlstm imports
    tlstm, so tlstm importing it back would be a circle."""
    require_triton()
    from .triton_tlstm import run_triton as run

    return run(model, z, state)


TLSTM_IMPLEMENTATIONS["triton"] = run_triton  # lazy: imports Triton on first use (the gpu extra)


def training_implementation(model, batch: int, precision: str = "ieee") -> str:
    """The sequence loop a training run uses when none is named: ``triton`` for a tLSTM on a
    CUDA GPU where the shipped tuning table (``triton_tlstm/tuning.json``) measured it correct
    and faster than ``fast`` at this shape (M, locations, Kd, batch, dtype, precision, norm,
    memory-cell convolution: ``tiles.table_key``), or at a precision only triton has; the
    model's own default otherwise (also without Triton)."""
    if isinstance(model, TLSTM) and precision != "ieee":
        return "triton"  # the only loop that has it (on a CPU it says it needs CUDA)
    if not isinstance(model, TLSTM) or model.w_h.device.type != "cuda":
        return model.implementation
    try:
        import triton  # noqa: F401
    except ImportError:
        return model.implementation
    from .triton_tlstm.tiles import beats_fast

    dtype = str(model.w_h.dtype).removeprefix("torch.")
    shape = (model.channels, model.num_locations, model.arch.kernel_entries, batch, dtype, precision)
    features = dict(norm=model.arch.norm, memory_conv=model.arch.memory_conv)
    return "triton" if beats_fast(*shape, **features) else model.implementation

__all__ = [
    "ArchConfig", "CONFIG_NAMES", "COMPONENTS", "PAPER_NAMES", "PRESETS", "ParamCount", "SLSTM",
    "SLSTMState", "SLSTM_IMPLEMENTATIONS", "TLSTM", "TLSTMState", "TLSTM_IMPLEMENTATIONS",
    "build_model", "check_runs_on", "count_params", "format_config", "parse_budget", "parse_config",
    "require_triton", "solve_channels", "training_implementation",
]
