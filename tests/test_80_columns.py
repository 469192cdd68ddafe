"""Every screen a newcomer sees is readable at 80 columns: no line longer than 80 characters,
no header or word cut with '…', no sentence broken mid-line in the help, and flags shown as
flags (no ``<bool>`` as if they took a value). At any other width too: a width of 0 (or none a
table could use) reads as 80, at 40 columns no number is cut, and an ASCII locale gets ASCII
marks that keep the tables aligned."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tlstm_bench.cli import app

WIDTH = {"COLUMNS": "80"}
REPO = Path(__file__).resolve().parents[1]
EVIDENCE = str(REPO / "results" / "evidence" / "cpu")  # a committed store, read only


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


def assert_within(text: str, width: int) -> None:
    """No line over ``width``, unless it is one word (a path to copy, never broken); nothing cut."""
    for line in text.splitlines():
        assert len(line) <= width or len(line.split()) == 1, f"{len(line)} characters: {line!r}"
        assert "…" not in line, f"cut: {line!r}"


def invoke(args: list[str], columns: str = "80", code: int = 0) -> str:
    result = CliRunner().invoke(app, args, env={"COLUMNS": columns})
    assert result.exit_code == code, result.output
    return result.output


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


@pytest.mark.parametrize("path", HELP_PATHS, ids=lambda p: " ".join(p) or "tlstm-bench")
def test_usage_lines_name_arguments_as_one_item_and_dots(path):
    """``CONFIG...``, not typer's ``{configs}...`` and ``<list[str]>``."""
    text = CliRunner().invoke(app, [*path, "--help"], env=WIDTH).output
    assert not re.search(r"\{\w+\}", text) and "list[" not in text, text


def test_usage_of_time_and_plot_reads_like_click():
    assert "Usage: tlstm-bench time [OPTIONS] CONFIG..." in invoke(["time", "--help"])
    assert "Usage: tlstm-bench plot [OPTIONS] [SWEEP]..." in invoke(["plot", "--help"])
    assert "Missing argument 'CONFIG'" in invoke(["time"], code=2)


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


def _render(table, width: int = 80) -> str:
    import io

    from rich.console import Console

    from tlstm_bench.cli.tables import draw_table

    console = Console(width=width, record=True, file=io.StringIO())
    draw_table(console, table)
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
    assert "verdict" in result.output and result.output.count("│ regression │") == 2   # both tables, whole


def test_dry_run_is_one_line_per_cell_at_80_columns(tmp_path):
    result = CliRunner().invoke(app, ["sweep", "quick", "--dry-run", "--results-dir", str(tmp_path)], env=WIDTH)
    assert result.exit_code == 0, result.output
    assert_readable(result.output)
    rows = [line for line in result.output.splitlines() if line.startswith("│")]
    assert len(rows) == 28 and all(line.split("│")[1].strip() for line in rows)   # no continuation lines
    assert "train cells: memorization-small, 7,500 samples" in result.output


def test_a_one_cell_plan_in_blocks_breaks_its_configuration_between_knobs(tmp_path):
    """One cell of memorization-lr: its plan is one block, ``header  value`` a line; the knob
    string breaks after a comma, as in a table, instead of running past 80 columns."""
    text = invoke(["sweep", "memorization-lr", "--dry-run", "--only", "lr=1e-4", "--only", "depth=10",
                   "--results-dir", str(tmp_path)])
    assert_within(text, 80)  # the spec's path, whole, may run long on a line of its own
    assert "1 cell, 0 done" in text and "lr=0.0001" in text
    config = [line for line in text.splitlines() if line.startswith("config") or line.startswith("      ")]
    assert config[0].startswith("config    3d-cn:cell_kernel=shift,") and len(config) >= 2
    assert "".join(line.strip() for line in config).endswith("bias_init=torch7,recurrent_scale=2")


def test_a_sweep_run_and_its_summary_fit_80_columns(tmp_path, fake_env):
    from sweep_helpers import FAKE, RUNTIME_SPEC, write_spec

    spec = write_spec(tmp_path, RUNTIME_SPEC)
    result = CliRunner().invoke(app, ["sweep", str(spec), "--results-dir", str(tmp_path / "ws"), "--cell-fn", FAKE],
                                env=WIDTH)
    assert result.exit_code == 0, result.output
    assert_within(result.output, 80)  # the records' folder is a path to copy, whole, however long tmp_path is
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


def test_time_left_is_the_producers_estimate_where_it_gives_one():
    """A sweep's own estimate (Event.left_s, given 10 s into the run) counts down from when it
    came; a floor reads "at least" (">"), and a floor of nothing says nothing."""
    from rich.progress import Task

    from tlstm_bench.cli.render import TimesColumn

    def shown(left):
        task = Task(0, "x", total=28, completed=14, _get_time=lambda: 30.0, fields={"first": 0, "left": left})
        task.start_time = 0.0
        return TimesColumn().render(task).plain

    assert shown((380.0, False, 10.0)) == "0:30 elapsed, ~6:00 left"
    assert shown((45.0, True, 10.0)) == "0:30 elapsed, >0:25 left"
    assert shown((0.0, True, 10.0)) == "0:30 elapsed"  # the average rate would say ~0:30 here
    assert shown(None) == "0:30 elapsed, ~0:30 left"


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_a_long_note_wraps_between_words_in_a_terminal_and_stays_whole_piped(terminal, monkeypatch):
    import io

    monkeypatch.delenv("COLUMNS", raising=False)   # piped with no width asked for: one line, for grep

    from rich.console import Console

    from tlstm_bench.cli.render import Renderer
    from tlstm_bench.events import Event

    message = ("ok train memorization 2d-f L=2 seed=0 preset memorization-small (223.5 s): test accuracy 0.2367, "
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


def test_a_long_note_piped_at_a_width_asked_for_wraps_between_words(monkeypatch):
    """``train``'s last line (its summary) was 104 columns at COLUMNS=80 piped."""
    import io

    from rich.console import Console

    from tlstm_bench.cli.render import Renderer
    from tlstm_bench.events import Event

    monkeypatch.setenv("COLUMNS", "80")
    message = ("3d-cn L=2 M=32 on memorization: test accuracy 1.0000 (sequences 1.00) solved after 6,750 samples "
               "[123 s] /a/long/path/" + "x" * 90)
    out = io.StringIO()
    with Renderer(Console(width=80, file=out, force_terminal=False, color_system=None)) as report:
        report(Event("note", message, level="ok"))
    lines = out.getvalue().splitlines()
    assert_within(out.getvalue(), 80)
    assert " ".join(lines).split() == message.split() and lines[-1] == "/a/long/path/" + "x" * 90
    assert any(line.endswith("solved after") or "6,750 samples" in line for line in lines)


def test_train_ends_within_80_columns(tmp_path):
    result = CliRunner().invoke(app, ["train", "2d", "--preset", "memorization-small", "--channels", "4",
                                      "--max-samples", "150", "--results-dir", str(tmp_path)], env=WIDTH)
    assert result.exit_code == 0, result.output
    assert_within(result.output, 80)
    assert re.search(r"on memorization: test accuracy [\d.]+% \(sequences [\d.]+%\) not solved in\s+150 samples",
                     result.output), result.output
    # An unsolved run says what it learned, answer by answer (3 symbols: three numbers).
    assert re.search(r"by answer position \(%\), first to last: \d+ \d+ \d+\n", result.output), result.output


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_a_bar_piped_into_a_log_writes_a_line_a_minute(terminal, monkeypatch):
    """A two-hour ``train`` under ``nohup`` wrote nothing to its log until it ended: a live bar
    draws nothing when piped. Piped, it now says where it is, at most once every ``log_every``
    seconds, named before its first line; a terminal's bar says that itself and gets no lines."""
    import io

    from rich.console import Console

    from tlstm_bench.cli.render import Renderer
    from tlstm_bench.events import Event

    monkeypatch.delenv("COLUMNS", raising=False)
    now = [1000.0]
    out = io.StringIO()
    console = Console(width=80, file=out, force_terminal=terminal, color_system=None)
    with Renderer(console, log_every=60, clock=lambda: now[0]) as report:
        report(Event("start", "3d-cn L=7 memorization", done=3000, total=172500))
        for at, done in [(10, 3300), (61, 4500), (70, 4650), (122, 6000)]:
            now[0] = 1000.0 + at
            report(Event("advance", f"loss 4.1  test accuracy 0.0{done // 1500}", done=done, total=172500))
    lines = [line for line in out.getvalue().splitlines() if line.startswith("  ") and "/172,500" in line]
    if terminal:
        assert not lines
        return
    assert out.getvalue().splitlines()[:2] == ["3d-cn L=7 memorization", lines[0]]
    # 1,500 samples of this run (it resumed at 3,000) in 61 s: the 168,000 left take ~1:53:52.
    assert lines == ["  4,500/172,500  1:01 elapsed, ~1:53:52 left  loss 4.1  test accuracy 0.03",
                     "  6,000/172,500  2:02 elapsed, ~1:52:51 left  loss 4.1  test accuracy 0.04"]


def test_a_bar_stopped_short_of_its_total_shows_no_time_left():
    """A run that solves early ends its bar with its count and elapsed time; the time left it had
    (``~29:02 left``) stayed on the screen, frozen."""
    import io
    import time

    from rich.console import Console

    from tlstm_bench.cli.render import Renderer
    from tlstm_bench.events import Event

    out = io.StringIO()
    with Renderer(Console(width=80, file=out, force_terminal=True, color_system=None)) as report:
        report(Event("start", "3d-cn L=2 memorization", done=0, total=7500))
        time.sleep(0.05)
        report(Event("advance", "loss 0.0012", done=5250, total=7500))
        report.bar.refresh()
        assert "left" in out.getvalue()   # while it runs, it says how long is left
        report(Event("end"))
    last = [line for line in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue()).replace("\r", "\n").splitlines()
            if "elapsed" in line][-1]
    assert "5,250/7,500" in last and "left" not in last, last


def test_a_knob_search_is_a_table_at_80_columns_its_configurations_broken_between_knobs():
    """``results memorization-init-small`` fell back to one block of nine lines per record (216
    lines) at 80 and at 120 columns: one configuration of four knobs is 76 characters. Now its
    configuration breaks after the commas between its knobs, each knob whole, and the rest of
    the record stays on its first line."""
    from tlstm_bench.cli.tables import broken
    from rich.text import Text

    text = invoke(["results", "memorization-init-small", "--results-dir", EVIDENCE])
    assert_readable(text)
    lines = text.splitlines()
    assert "config" in lines[1] and "solved at" in lines[1]          # a grid with a header, not blocks
    four = "3d-cn:cell_kernel=shift,input_init=normal,bias_init=torch7,recurrent_scale=2"
    configs = []
    for line in lines[3:]:
        words = line.split()
        if len(words) > 1 and words[1].isdigit():           # a record's first line: config L seed ...
            configs.append(words[0])
        elif len(words) == 1 and configs and configs[-1].endswith(","):   # the config goes on
            configs[-1] += words[0]
    assert configs.count(four) == 3 and len(configs) == 24, configs
    assert len(lines) < 24 * 4 + 6
    assert re.search(r"^3d-cn\s+4\s+0\s+32\s+44,874\s+2\.3%\s+not by 45,000\s+ok", text, re.M)  # how far it got
    # greedy, after commas only, no piece broken; a piece wider than the width stays whole
    assert broken(Text(four), ",", 40).plain.split("\n") == ["3d-cn:cell_kernel=shift,",
                                                              "input_init=normal,bias_init=torch7,",
                                                              "recurrent_scale=2"]
    assert broken(Text("3d-cn:window=appendix"), ",", 5).plain == "3d-cn:window=appendix"


def test_results_keep_a_knob_string_whole_on_its_row():
    """``3d-cn:window=appendix`` was broken over two rows (``...append`` / ``ix``)."""
    text = invoke(["results", "window", "--results-dir", EVIDENCE])
    assert_readable(text)
    rows = [line for line in text.splitlines() if "window=appendix" in line]
    assert len(rows) == 16 and all(re.search(r"\b(2d|3d-cn):window=appendix\s+2\s", row) for row in rows), rows


def test_wide_results_draw_each_record_whole_on_one_line():
    """--wide is as wide as the table needs (the terminal may fold it): every record on one line."""
    text = invoke(["results", "quick", "--wide", "--results-dir", EVIDENCE])
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert len(rows) == 28 and all(re.search(r"│ [0-9a-f]{40} │", row) for row in rows)   # one line per record
    assert max(len(line) for line in rows) > 200 and "…" not in text


def test_results_keep_each_caption_part_with_its_value():
    """``code`` / ``0.1.0+src...`` were split over two lines."""
    text = invoke(["results", "quick", "--results-dir", EVIDENCE])
    assert_readable(text)
    assert re.search(r"code 0\.1\.0\+src\.\w+", text)
    assert re.search(r"torch 2\.\S+", text) and re.search(r"preset memorization-small", text)
    for line in text.splitlines():
        assert not re.search(r"\b(code|torch|preset|T=)$", line.rstrip()), line


def test_plot_wraps_its_lists_between_items_only(tmp_path):
    """``2d-f `` / ``L=1`` and ``runtime slstm`` / ``L=10`` were split over two lines."""
    shutil.copytree(Path(EVIDENCE) / "store", tmp_path / "store", ignore=shutil.ignore_patterns(".*"))
    text = invoke(["plot", "quick", "timing", "--results-dir", str(tmp_path)])
    assert_within(text, 80)
    lists = re.findall(r"^  (?:not solved|not causal[^:]*|runtime (?:within|not resolved)[^:]*|missing[^:]*): (.*(?:\n    .*)*)", text,
                       flags=re.M)
    assert len(lists) >= 4, text
    for items in lists:
        for line in items.splitlines():   # each line holds whole items: a line breaks between two
            for item in line.strip().rstrip(",").split(", "):
                assert re.fullmatch(r"(train |runtime )?\S+( \(\w+\))? L=\S+", item), (item, text)
    assert "quick-memorization.png" in text and "quick-memorization.pdf" in text


def test_a_spec_path_is_never_broken(tmp_path):
    """A wheel's spec lives under site-packages: its path, longer than a line, ran ``.../quic`` /
    ``k.toml``; a path a user copies runs long on a line of its own instead."""
    shipped = REPO / "tlstm_bench" / "sweeps" / "specs" / "quick.toml"
    spec = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "tlstm_bench" / "sweeps" / "specs" / "quick.toml"
    spec.parent.mkdir(parents=True)
    shutil.copy(shipped, spec)
    assert len(str(spec)) > 80
    text = invoke(["sweep", str(spec), "--dry-run", "--results-dir", str(tmp_path / "ws")])
    assert_within(text, 80)
    assert any(str(spec) in line for line in text.splitlines()), text


# ---- any width: 0 or garbage reads as 80; at 40, no number is cut ----------------------------
ZERO_WIDTH_SCRIPT = """
import json, sys
from typer.testing import CliRunner
from tlstm_bench.cli import app   # imported at the width under test, as a shell starts it
print(json.dumps([[CliRunner().invoke(app, args).exit_code, CliRunner().invoke(app, args).output]
                  for args in json.loads(sys.argv[1])]))
"""


def test_a_width_of_zero_prints_as_80_columns(tmp_path):
    """COLUMNS=0 printed nothing at all, error messages, --help and --version included (the
    exit codes were right)."""
    commands = [["--version"], ["--help"], ["results", "--help"], ["nope"], ["time"],
                ["results", "window", "--results-dir", EVIDENCE], ["sweep", "--dry-run", "--results-dir", str(tmp_path)]]
    runs = {}
    for columns in ("0", "80"):
        out = subprocess.run([sys.executable, "-c", ZERO_WIDTH_SCRIPT, json.dumps(commands)], capture_output=True,
                             text=True, cwd=REPO, timeout=300, env={**os.environ, "COLUMNS": columns})
        assert out.returncode == 0, out.stderr
        runs[columns] = json.loads(out.stdout)
    for args, (code, text), at_80 in zip(commands, runs["0"], runs["80"]):
        assert text.strip() and [code, text] == at_80, args


@pytest.mark.parametrize("columns", ["5", "-1", "wide"])
@pytest.mark.parametrize("args", [["--version"], ["--help"], ["info", "no-such-config"],
                                  ["results", "window", "--results-dir", EVIDENCE]], ids=lambda a: " ".join(a)[:20])
def test_a_width_no_table_could_use_prints_as_80_columns(args, columns):
    at_80 = CliRunner().invoke(app, args, env=WIDTH)
    result = CliRunner().invoke(app, args, env={"COLUMNS": columns})
    assert result.output.strip() and result.output == at_80.output
    assert result.exit_code == at_80.exit_code


def numbers(text: str) -> Counter:
    return Counter(re.findall(r"\d+(?:[.,]\d+)*", text))


def assert_numbers_whole(wide: str, narrow: str, width: int = 40) -> None:
    """Every number of the wide output is in the narrow one, as often; no line over the width
    but a single word; nothing cut."""
    assert_within(narrow, width)
    missing = numbers(wide) - numbers(narrow)
    assert not missing, f"cut or lost at {width} columns: {dict(missing)}\n{narrow}"


NARROW_COMMANDS = [["results", "--results-dir", EVIDENCE], ["results", "window", "--results-dir", EVIDENCE],
                   ["results", "timing", "--columns", "config,depth,ms_per_step,ms_q25,ms_q75,threads,device,"
                    "error", "--results-dir", EVIDENCE],
                   ["budget", "--budget", "slstm:100"], ["info", "2d", "--channels", "400"],
                   ["audit", "2d", "3d", "--depths", "1,2"]]


@pytest.mark.parametrize("args", NARROW_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_numbers_stay_whole_at_40_columns(args):
    """COLUMNS=40 cut every number of ``results`` to ``0…``."""
    assert_numbers_whole(invoke(args, "200"), invoke(args, "40"))


def test_the_sweep_plan_keeps_its_numbers_whole_at_40_columns(tmp_path):
    args = ["sweep", "quick", "--dry-run", "--results-dir", str(tmp_path)]
    assert_numbers_whole(invoke(args, "200"), invoke(args, "40"))


def test_regress_keeps_its_numbers_whole_at_40_columns(monkeypatch):
    import importlib

    from test_regress import _fake_result

    core = importlib.import_module("tlstm_bench.timing.regress")
    monkeypatch.setattr(core, "regress", lambda **kw: _fake_result())
    assert_numbers_whole(invoke(["regress", "--quick"], "200", code=1), invoke(["regress", "--quick"], "40", code=1))


def test_the_time_table_keeps_its_numbers_whole_at_40_columns():
    from tlstm_bench.cli.time import runtime_table

    records = [_timing("slstm", d, 1.297 * d, 1.2 * d, 1.4 * d, "wavefront") for d in (1, 4, 7, 10)]
    table = runtime_table(records, [1, 4, 7, 10])
    narrow = _render(table, 40)
    assert_numbers_whole(_render(table, 200), narrow)
    assert "\nL=10    12.970 (2.000)\n" in narrow   # one block per row: a median and its IQR on a line


def test_a_failed_sweep_summary_keeps_ids_and_errors_whole_at_40_columns(tmp_path, fake_env, monkeypatch):
    from sweep_helpers import FAKE, RUNTIME_SPEC, write_spec

    from tlstm_bench.sweeps.plan import plan_sweep

    monkeypatch.setenv("FAKE_PLAN", '{"2d": "raise"}')
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    text = invoke(["sweep", str(spec), "--results-dir", str(tmp_path / "ws"), "--cell-fn", FAKE], "40", code=1)
    assert_within(text, 40)
    plan = plan_sweep(str(spec), root=tmp_path / "ws" / "store")
    failed = [cell.id[:10] for cell in plan.cells if cell.spec["config"] == "2d"]
    assert len(failed) == 2 and all(re.search(rf"\b{i}\b", text) for i in failed), text
    assert " ".join(text.split()).count("loss is nan at step 3") >= 4   # the two notes and the summary's rows


# ---- an ASCII locale: ASCII marks, aligned tables, footnotes that name the marks used --------
@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C", "PYTHONUTF8": "0",
                                                                 "PYTHONCOERCECLOCALE": "0"}],
                         ids=["PYTHONIOENCODING=ascii", "LC_ALL=C"])
def test_an_ascii_locale_gets_ascii_marks_and_aligned_tables(env):
    run = {**os.environ, "COLUMNS": "80", **env}
    out = subprocess.run([sys.executable, "-m", "tlstm_bench", "results", "quick", "--results-dir", EVIDENCE],
                         capture_output=True, env=run, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode("ascii")   # nothing but ASCII
    assert "\\u" not in text, text
    assert_readable(text)
    tables = re.findall(r"^\+-[-+]*\+$\n(?:^[|+].*$\n)+", text, flags=re.M)
    assert len(tables) == 2, text   # runtime and train records
    for table in tables:
        assert len({len(line) for line in table.splitlines()}) == 1, table   # aligned: one width per table
    assert "3d-ln* " in text and "\n* not causal" in text       # the mark used is the mark explained
    assert "~0.080" in text and "\n~ not resolved" in text
    helped = subprocess.run([sys.executable, "-m", "tlstm_bench", "results", "--help"], capture_output=True,
                            env=run, cwd=REPO, timeout=120)
    assert "marked * (its numbers" in " ".join(helped.stdout.decode("ascii").split())
