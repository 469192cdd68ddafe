"""Runtime measurement (SPEC section 8) and the runtime-vs-depth regression gate.

``measure_runtime`` is the pinned entry point: one configuration, one depth, one record.
``measure_cases`` times several (configuration, depth, implementation) cases with their
repeats interleaved, so ratios between them are measured under the same machine load.
"""

from .protocol import Case, default_implementation, measure_cases, measure_runtime, plan_cases
from .regress import RegressResult, regress

__all__ = ["Case", "RegressResult", "default_implementation", "measure_cases", "measure_runtime", "plan_cases",
           "regress"]
