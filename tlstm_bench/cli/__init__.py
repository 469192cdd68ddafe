"""The command line: each command is a thin wrapper around one core function.

One module per subcommand; importing a module registers its command on ``app``.
"""

from ..vocab import default_omp_wait_policy

default_omp_wait_policy()  # before any command imports torch: its threads sleep when they wait

from . import audit, budget, claims, data, gradients, info, plot, regress, results, sweep, time, train, visualize  # noqa: F401  (register commands)
from .app import app, reflow_help

reflow_help(app)


def main() -> None:
    app(prog_name="tlstm-bench")
