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


# ---- the screens other than --help ------------------------------------------------------------
def _timing(config, depth, median, q25, q75, impl="fast"):
    return {"config": config, "implementation": impl, "depth": depth, "channels": 100, "ms_per_step": median,
            "ms_q25": q25, "ms_q75": q75, "ms_iqr": q75 - q25}


def _render(renderable) -> str:
    from rich.console import Console

    console = Console(width=80, record=True, file=open("/dev/null", "w"))
    console.print(renderable)
    return console.export_text()


def test_time_table_fits_80_columns_and_marks_depths_within_the_spread():
    from tlstm_bench.cli.time import runtime_table

    records = [_timing("slstm", 1, 1.297, 1.2, 1.4, "wavefront"), _timing("slstm", 4, 1.688, 1.1, 2.4, "wavefront"),
               _timing("slstm", 7, 2.025, 2.0, 2.05, "wavefront"), _timing("slstm", 10, 13.045, 12.9, 13.1, "wavefront"),
               _timing("3d-cn", 1, 0.767, 0.75, 0.78), _timing("3d-cn", 4, 3.630, 3.5, 3.7),
               _timing("3d-cn", 7, 5.250, 5.2, 5.3), _timing("3d-cn", 10, 19.015, 18.0, 20.0)]
    text = _render(runtime_table(records, [1, 4, 7, 10]))
    assert_readable(text)
    header = next(line for line in text.splitlines() if "config" in line)
    for name in ("impl", "L=1", "L=10", "L10/L1"):
        assert name in header
    rows = [line for line in text.splitlines() if line.startswith("│ slstm") or line.startswith("│ 3d-cn")]
    assert "wavefront" in rows[0]
    # slstm's L=1 and L=4 quartiles overlap (and L=4's and L=7's); L=10 and the ratio are clear.
    assert "≈1.297" in rows[0] and "≈1.688" in rows[0] and "≈2.025" in rows[0] and "≈13.045" not in rows[0]
    assert "10.06" in rows[0] and "≈10.06" not in rows[0]
    assert "≈" not in rows[1]


def test_time_ratio_is_marked_when_the_first_and_last_depth_overlap():
    from tlstm_bench.cli.time import runtime_table

    text = _render(runtime_table([_timing("2d", 1, 1.0, 0.5, 1.5), _timing("2d", 3, 1.2, 0.9, 1.6)], [1, 3]))
    assert "≈1.20" in text


def test_regress_tables_fit_80_columns(monkeypatch):
    import importlib

    from test_regress import _fake_result

    core = importlib.import_module("tlstm_bench.timing.regress")
    monkeypatch.setattr(core, "regress", lambda **kw: _fake_result())
    result = CliRunner().invoke(app, ["regress", "--quick"], env=WIDTH)
    assert result.exit_code == 1
    assert_readable(result.output)
    assert "verdict" in result.output and "│ regression │" in result.output and "  regression  " in result.output


def test_dry_run_is_one_line_per_cell_at_80_columns(tmp_path):
    result = CliRunner().invoke(app, ["sweep", "quick", "--dry-run", "--results-dir", str(tmp_path)], env=WIDTH)
    assert result.exit_code == 0, result.output
    assert_readable(result.output)
    rows = [line for line in result.output.splitlines() if line.startswith("│")]
    assert len(rows) == 28 and all(line.split("│")[1].strip() for line in rows)   # no continuation lines
    assert "train cells: memorization-small, 7,500 samples" in result.output


def test_a_sweep_run_and_its_summary_fit_80_columns(tmp_path, fake_env):
    from sweep_helpers import FAKE, RUNTIME_SPEC, write_spec

    spec = write_spec(tmp_path, RUNTIME_SPEC)
    result = CliRunner().invoke(app, ["sweep", str(spec), "--results-dir", str(tmp_path / "ws"), "--cell-fn", FAKE],
                                env=WIDTH)
    assert result.exit_code == 0, result.output
    assert_readable(result.output)
    assert "sweep t: 8 cells; ran 8 (8 ok, 0 failed); wall time" in result.output
    assert "already done" not in result.output   # a zero count is left out


def test_progress_line_keeps_count_elapsed_and_time_left_whole_at_80_columns():
    import io

    from rich.console import Console

    from tlstm_bench.cli.render import Renderer
    from tlstm_bench.events import Event

    out = io.StringIO()
    console = Console(width=80, file=out, force_terminal=True, color_system=None)
    with Renderer(console) as report:
        report(Event("start", "tlstm:dims=3,kernel=3,memory_conv=1,norm=cn L=2 memorization", done=0, total=7500))
        report(Event("advance", "loss 1.8642  test accuracy 0.3333" * 3, done=3750, total=7500))
        report.bar.refresh()
        frame = out.getvalue()
    lines = [line for line in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", frame).replace("\r", "\n").splitlines()
             if line.strip()]
    assert any("3,750/7,500" in line and "elapsed" in line and "left" in line for line in lines), lines
    assert all(len(line) <= 80 for line in lines)
    assert any(line.startswith("  loss 1.8642") for line in lines)


def test_time_left_is_the_average_rate_since_the_start_of_this_run():
    from rich.progress import Task

    from tlstm_bench.cli.render import TimesColumn

    task = Task(0, "x", total=100, completed=60, _get_time=lambda: 30.0, fields={"first": 40})
    task.start_time = 0.0
    # 20 samples in this run's 30 s (it resumed at 40): the 40 left take about 60 s more.
    assert TimesColumn().render(task).plain == "0:30 elapsed, ~1:00 left"


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_a_long_note_wraps_between_words_in_a_terminal_and_stays_whole_piped(terminal):
    import io

    from rich.console import Console

    from tlstm_bench.cli.render import Renderer
    from tlstm_bench.events import Event

    message = ("ok train memorization 2d-f L=2 seed=0 memorization-small size (223.5 s): test accuracy 0.2367, "
               "M=32, solved after 5,250 samples")
    out = io.StringIO()
    with Renderer(Console(width=80, file=out, force_terminal=terminal, color_system=None)) as report:
        report(Event("note", message, level="ok"))
    lines = out.getvalue().splitlines()
    if terminal:
        assert all(len(line) <= 80 for line in lines) and len(lines) == 2
        assert " ".join(lines).split() == message.split()   # no word cut
    else:
        assert lines == [message]
