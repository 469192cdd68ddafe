"""tlstm-bench: is a deeper or wider recurrent model worth its parameters and its runtime?"""

from .errors import UserError
from .models import ArchConfig, build_model, count_params, parse_config

__version__ = "0.1.0"
__all__ = ["ArchConfig", "UserError", "build_model", "count_params", "parse_config", "__version__"]
