"""docs/fidelity.md: every knob and option its table names works.

The table's "knob" column is parsed; each code span in it is a CLI command line (its
options must exist on that command, their values and configurations must parse, and the
cheap commands are run), a sweep-spec snippet (it must validate), or a configuration
string (it must parse).
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.models import parse_budget, parse_config
from tlstm_bench.sweeps.spec import load_spec, parse_spec

DOC = Path(__file__).resolve().parents[1] / "docs" / "fidelity.md"
COMMANDS = get_command(app).commands
RUN = {"info", "budget", "audit", "sweep"}  # cheap enough to run here (sweep as --dry-run)


def table_rows() -> list[list[str]]:
    rows, inside = [], False
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            inside = line.startswith("## The table")
        elif inside and re.match(r"^\| \d+ \|", line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            assert len(cells) == 5, f"a row of the table has {len(cells)} cells, not 5: {line[:60]}"
            rows.append(cells)
    return rows


def knob_spans() -> list[str]:
    spans = []
    for cells in table_rows():
        found = re.findall(r"`([^`]+)`", cells[3])
        assert found or cells[3].startswith("none"), f"row {cells[0]}: no knob and not 'none': {cells[3]}"
        spans += found
    return spans


def test_the_table_covers_what_the_paper_leaves_open():
    text = " ".join(" ".join(cells[:2]) for cells in table_rows())
    for topic in ("Memory-cell convolution window", "Channel size", "Wikipedia training", "Parameter counts",
                  "Addition operands", "standard deviation", "Flush steps", "LN", "sLSTM baseline"):
        assert topic in text, topic
    assert len(knob_spans()) >= 10


def _check_command(tokens: list[str]) -> None:
    """Parse a command line with the command's own parser (types included), then check what
    it names: configurations parse, budgets parse, sweep specs load; run the cheap ones."""
    name, args = tokens[0], tokens[1:]
    command = COMMANDS[name]
    options = {opt for p in command.params for opt in (*p.opts, *getattr(p, "secondary_opts", ()))}
    for token in args:
        assert not token.startswith("--") or token in options, f"{name} has no option {token}"
    if name == "train" and all(a.startswith("--") or a.isdigit() or a.startswith("slstm:") for a in args):
        args = ["2d", *args]  # train needs a configuration to parse; the row is about the option
    params = command.make_context(name, list(args)).params  # raises on a bad value
    for config in [params[k] for k in ("config",) if params.get(k)] + list(params.get("configs") or []):
        parse_config(config)
    if params.get("budget") is not None:
        parse_budget(params["budget"], input_size=11, output_size=11)
    if name == "sweep":
        load_spec(params["spec"])
    if name in RUN:
        extra = ["--dry-run", "--results-dir", "/nonexistent-store"] if name == "sweep" else []
        result = CliRunner().invoke(app, tokens + extra)
        assert "error:" not in result.output and "Traceback" not in result.output, result.output
        # audit exits 1 when it finds a configuration that is not separable (3d-ln): that is its answer
        assert result.exit_code in ((0, 1) if name == "audit" else (0,)), result.output


def _check_spec_snippet(snippet: str) -> None:
    text = 'task = "enwik8"\nconfigs = ["2d"]\ndepths = [1]\nbudget = "10M"\n' + snippet.replace("] ", "]\n", 1)
    spec = parse_spec(tomllib.loads(text), DOC)
    key, _, value = snippet.split("]", 1)[1].partition("=")
    (section,) = [s for s in spec.sections if s.kind == snippet[1:snippet.index("]")]]
    assert section.settings[key.strip()] == tomllib.loads(f"v = {value.strip()}")["v"]


@pytest.mark.parametrize("span", knob_spans())
def test_every_knob_in_the_table_works(span):
    tokens = shlex.split(span)
    if tokens[0] in COMMANDS:
        _check_command(tokens)
    elif span.startswith("["):
        _check_spec_snippet(span)
    else:
        assert parse_config(span).kind == "tlstm"


def test_the_check_fails_on_a_knob_that_does_not_exist():
    with pytest.raises(AssertionError, match="no option --warp"):
        _check_command(["train", "--warp", "9"])
    with pytest.raises(Exception, match="unknown"):
        _check_command(["sweep", "addition-matched"])
    with pytest.raises(Exception, match="window"):
        parse_config("3d:window=centre")
