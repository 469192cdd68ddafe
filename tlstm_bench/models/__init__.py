"""Models: the seven configurations of the Tensorized LSTM paper, knobs, budgets."""

import torch

from ..errors import UserError
from . import oracle as _oracle  # noqa: F401  (registers the "reference" implementation)
from . import fast_tlstm as _fast_tlstm  # noqa: F401  (registers "fast")
from .budget import COMPONENTS, ParamCount, count_params, parse_budget, solve_channels
from .build import build_model
from ..vocab import CONFIG_NAMES, PAPER_NAMES
from .config import PRESETS, ArchConfig, format_config, parse_config
from .slstm import SLSTM, SLSTM_IMPLEMENTATIONS, SLSTMState
from .tlstm import TLSTM, TLSTM_IMPLEMENTATIONS, TLSTMState


def run_triton(model: TLSTM, z: torch.Tensor, state: TLSTMState):
    """``triton`` (:mod:`tlstm_bench.models.triton_tlstm`), imported on first use: Triton is
    an optional dependency (the ``gpu`` extra) and nothing else imports it. Here, not in
    :mod:`.tlstm`: triton_tlstm imports tlstm, so tlstm importing it back would be a circle."""
    try:
        import triton  # noqa: F401
    except ImportError:
        raise UserError("implementation 'triton' needs Triton: pip install -e \".[gpu]\" (or pip install triton); "
                        "or use implementation 'fast'") from None
    from .triton_tlstm import run_triton as run

    return run(model, z, state)


TLSTM_IMPLEMENTATIONS["triton"] = run_triton  # lazy: imports Triton on first use (the gpu extra)

__all__ = [
    "ArchConfig", "CONFIG_NAMES", "COMPONENTS", "PAPER_NAMES", "PRESETS", "ParamCount", "SLSTM",
    "SLSTMState", "SLSTM_IMPLEMENTATIONS", "TLSTM", "TLSTMState", "TLSTM_IMPLEMENTATIONS",
    "build_model", "count_params", "format_config", "parse_budget", "parse_config", "solve_channels",
]
