"""Models: the seven configurations of the Tensorized LSTM paper, knobs, budgets."""

from . import oracle as _oracle  # noqa: F401  (registers the "reference" implementation)
from . import fast_tlstm as _fast_tlstm  # noqa: F401  (registers "fast")
from .budget import COMPONENTS, ParamCount, count_params, parse_budget, solve_channels
from .build import build_model
from ..vocab import CONFIG_NAMES, PAPER_NAMES
from .config import PRESETS, ArchConfig, format_config, parse_config
from .slstm import SLSTM, SLSTM_IMPLEMENTATIONS, SLSTMState
from .tlstm import TLSTM, TLSTM_IMPLEMENTATIONS, TLSTMState, run_triton

TLSTM_IMPLEMENTATIONS["triton"] = run_triton  # lazy: imports Triton on first use (the gpu extra)

__all__ = [
    "ArchConfig", "CONFIG_NAMES", "COMPONENTS", "PAPER_NAMES", "PRESETS", "ParamCount", "SLSTM",
    "SLSTMState", "SLSTM_IMPLEMENTATIONS", "TLSTM", "TLSTMState", "TLSTM_IMPLEMENTATIONS",
    "build_model", "count_params", "format_config", "parse_budget", "parse_config", "solve_channels",
]
