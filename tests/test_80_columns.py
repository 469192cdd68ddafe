"""Every screen a newcomer sees is readable at 80 columns: no line longer than 80 characters,
no header or word cut with '…', no sentence broken mid-line in the help, and flags shown as
flags (no ``<bool>`` as if they took a value)."""

from __future__ import annotations

import re


import pytest
import typer
from typer.testing import CliRunner

from tlstm_bench.cli import app

WIDTH = {"COLUMNS": "80"}


def _command_paths(command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [path]
    for name, sub in getattr(command, "commands", {}).items():
        paths += _command_paths(sub, path + (name,))
    return paths


HELP_PATHS = _command_paths(typer.main.get_command(app))


def assert_readable(text: str, width: int = 80) -> None:
    """No line over ``width`` characters and nothing truncated with an ellipsis."""
    for line in text.splitlines():
        assert len(line) <= width, f"{len(line)} characters: {line!r}"
        assert "…" not in line, f"cut: {line!r}"


def test_every_command_has_a_help_screen_checked_here():
    names = {" ".join(p) for p in HELP_PATHS}
    assert {"", "time", "train", "sweep", "results", "regress", "data download"} <= names


@pytest.mark.parametrize("path", HELP_PATHS, ids=lambda p: " ".join(p) or "tlstm-bench")
def test_help_fits_80_columns_and_shows_flags_as_flags(path):
    result = CliRunner().invoke(app, [*path, "--help"], env=WIDTH)
    assert result.exit_code == 0, result.output
    assert_readable(result.output)
    assert "<bool>" not in result.output
    # A docstring's own line breaks are not kept: a paragraph line of the help that stops short
    # of the width while the next line goes on with lower-case text is a sentence broken mid-line.
    lines = [line for line in result.output.splitlines() if line.startswith(" ") and "│" not in line]
    for line, after in zip(lines, lines[1:]):
        if after.strip() and after.strip()[0].islower():
            word = after.split()[0]
            assert len(line.rstrip()) + 1 + len(word) > 79, f"broken mid-line: {line!r} / {after!r}"


def test_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert re.fullmatch(r"tlstm-bench \d+\.\d+\.\d+\S*\n", result.output)


def test_early_stopping_flags_are_exclusive(tmp_path):
    result = CliRunner().invoke(app, ["train", "2d", "--preset", "memorization-small", "--early-stopping",
                                      "--no-early-stopping", "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "at most one of --early-stopping and --no-early-stopping" in result.output
