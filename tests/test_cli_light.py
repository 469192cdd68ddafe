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
