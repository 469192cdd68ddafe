"""tlstm-bench: is a deeper or wider recurrent model worth its parameters and its runtime?"""

from .errors import UserError

__version__ = "0.1.0"
__all__ = ["ArchConfig", "UserError", "build_model", "count_params", "parse_config", "__version__"]

# The model names are loaded on first use (PEP 562), so that the parts of the package that
# only read results (tlstm_bench.plotting) can be imported without importing torch.
_FROM_MODELS = {"ArchConfig", "build_model", "count_params", "parse_config"}


def __getattr__(name: str):
    if name in _FROM_MODELS:
        from . import models

        return getattr(models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
