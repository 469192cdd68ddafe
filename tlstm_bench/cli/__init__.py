"""The command line: each command is a thin wrapper around one core function.

One module per subcommand; importing a module registers its command on ``app``.
"""

from . import audit, budget, info, plot, regress, results, sweep, time, visualize  # noqa: F401  (register commands)
from .app import app


def main() -> None:
    app()
