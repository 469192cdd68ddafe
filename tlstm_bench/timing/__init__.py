"""Runtime measurement (SPEC section 8) and the runtime-vs-depth regression gate.

``measure_cases`` is the one entry point every caller times through: several (configuration,
depth, implementation) cases, warmed up to a steady state, their repeats interleaved, so
ratios between them are measured under the same machine load; ``measure_runtime`` is its
one-case form. ``StepRun`` is one case's forward + loss + backward, for callers that count
or profile a step rather than time it.
"""

from .measure import measure_cases, measure_runtime
from .protocol import Case, StepRun, default_implementation, implementations_of, plan_cases
from .regress import RegressResult, regress

__all__ = ["Case", "RegressResult", "StepRun", "default_implementation", "implementations_of", "measure_cases",
           "measure_runtime", "plan_cases", "regress"]
