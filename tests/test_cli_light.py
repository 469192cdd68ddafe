"""The CLI starts without torch; commands that only read results never import it."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import sys
from typer.testing import CliRunner
from tlstm_bench.cli import app
assert "torch" not in sys.modules, "importing the CLI imported torch"
for args in {commands!r}:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (args, result.output)
print("torch" in sys.modules)
"""


def run_without_torch(commands):
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(commands=commands)], capture_output=True,
                         text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().lower())


def test_help_does_not_import_torch():
    assert run_without_torch([["--help"], ["sweep", "--help"], ["train", "--help"]]) is False


def test_plot_and_results_read_the_store_without_torch(tmp_path):
    # The committed quick-sweep records serve as a real store.
    shutil.copytree(REPO / "results" / "evidence" / "cpu" / "store" / "quick", tmp_path / "store" / "quick",
                    ignore=shutil.ignore_patterns(".*"))
    folder = str(tmp_path)
    imported = run_without_torch([["plot", "quick", "--results-dir", folder],
                                  ["results", "quick", "--results-dir", folder, "--format", "csv"],
                                  ["results", "quick", "--results-dir", folder]])
    assert imported is False
    assert (tmp_path / "figures" / "quick-memorization.png").is_file()


CORE = ["tlstm_bench.vocab", "tlstm_bench.events", "tlstm_bench.checks", "tlstm_bench.models", "tlstm_bench.audit",
        "tlstm_bench.tasks", "tlstm_bench.training", "tlstm_bench.timing", "tlstm_bench.timing.counters",
        "tlstm_bench.timing.regress", "tlstm_bench.sweeps.spec", "tlstm_bench.sweeps.grid", "tlstm_bench.sweeps.cell",
        "tlstm_bench.sweeps.lock", "tlstm_bench.sweeps.runner", "tlstm_bench.sweeps.slurm", "tlstm_bench.sweeps.plan",
        "tlstm_bench.results", "tlstm_bench.results.frame", "tlstm_bench.results.view", "tlstm_bench.results.export",
        "tlstm_bench.plotting", "tlstm_bench.analysis", "tlstm_bench.analysis.visualize"]


def test_the_core_draws_nothing_and_its_vocabulary_needs_no_torch():
    """Only the CLI draws (with rich): training, timing, sweeps, results, plotting and the analysis
    report through callbacks (tlstm_bench.events) and import no rich. The names and defaults, and
    the sweep spec reader that plot uses, start without torch."""
    script = ("import importlib, sys\n"
              "from tlstm_bench import vocab\n"
              "from tlstm_bench.sweeps.spec import load_spec\n"
              "assert load_spec('quick', check_values=False).sections and vocab.ENWIK8_SYMBOLS == 205\n"
              "print('torch' in sys.modules)\n"
              f"for name in {CORE!r}:\n"
              "    importlib.import_module(name)\n"
              "print(sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.')))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "[]"]
