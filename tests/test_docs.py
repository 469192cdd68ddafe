"""The README and docs/ are kept true: every relative link (and its #anchor) resolves inside the
repository, nothing points outside it (a clone has no ../shared/), and the spec's table of the
seven configurations (docs/spec.md section 6) is what the code builds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tlstm_bench import parse_config
from tlstm_bench.vocab import CONFIG_NAMES, PAPER_NAMES

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "results" / "evidence" / "REPORT.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to '-'."""
    heads = re.findall(r"^#+ (.*)$", page.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold no links
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_inside_the_repository(page):
    for target in links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.is_relative_to(ROOT), f"{page.name}: {target} points outside the repository"
        assert file.exists(), f"{page.name}: {target} does not exist"
        if anchor and file.suffix == ".md":
            assert anchor in anchors(file), f"{page.name}: {target}: no heading with that anchor"


def test_no_page_sends_the_reader_outside_the_repository():
    for page in PAGES:
        assert "../shared" not in page.read_text(), f"{page.name} points to ../shared"


def test_the_spec_is_linked_from_the_readme_and_the_models_page():
    assert "docs/spec.md" in (ROOT / "README.md").read_text()
    assert "(spec.md)" in (ROOT / "docs" / "models.md").read_text()


def test_the_spec_table_of_configurations_is_what_the_code_builds():
    text = (ROOT / "docs" / "spec.md").read_text()
    table = text[text.index("| name (CLI) | paper's name |"):].splitlines()[2:]
    rows = {}
    for line in table:
        if not line.startswith("|"):
            break
        name, paper, dims, kernel, conv, norm = (c.strip() for c in line.strip("|").split("|"))
        rows[name.strip("`")] = (paper, dims, kernel, conv, norm)
    assert list(rows) == list(CONFIG_NAMES)
    for name, (paper, dims, kernel, conv, norm) in rows.items():
        arch = parse_config(name)
        assert PAPER_NAMES[name] == paper
        if arch.kind == "slstm":
            assert (dims, kernel, conv, norm) == ("-", "-", "-", "-")
            continue
        assert (int(dims), int(kernel)) == (arch.dims, arch.kernel)
        assert conv == ("yes" if arch.memory_conv else "no")
        assert norm == ("-" if arch.norm == "none" else arch.norm.upper())


def test_the_link_check_fails_on_a_broken_link(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("[a](missing.md) [b](#nowhere)\n# Here\n")
    assert links(page) == ["missing.md", "#nowhere"]
    assert not (tmp_path / "missing.md").exists() and "nowhere" not in anchors(page) and "here" in anchors(page)


# ---- every flag the docs write exists (issue 30: docs/tasks.md named a --alphabet that train lacked) ----
# 1. On a command line (a code span or a code-block line: `tlstm-bench train 2d --depth 2`, or
#    `python -m tlstm_bench time ...`, up to a `&&`, `;`, pipe or comment), each flag after the
#    command must be an option of that command.
# 2. Any other flag must be an option of some command or, once the page has named a script of
#    benchmarks/, an option some script declares (add_argument).
COMMAND = re.compile(r"(?:tlstm-bench|python3? -m tlstm_bench)\s+([a-z][a-z-]*)(?:\s+([a-z][a-z-]*))?")
SCRIPT = re.compile(r"\bbenchmarks[/.][\w/.]+")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
DECLARED = re.compile(r"""add_argument\(\s*(?:["']-\w["']\s*,\s*)?["'](--[a-z0-9-]+)["']""")
SHELL_DECLARED = re.compile(r"^\s*(--[a-z0-9-]+)\)", re.M)  # a case arm of a shell script's option loop
SEPARATOR = re.compile(r"&&|\|\||;|\s\|\s|(?:^|\s)#")
# Flags of other tools, or of no command on purpose (each with why).
OTHER_TOOLS = {
    "--index-url": "pip's, in the CI example",
    "--short": "git status's",
    "--maxprocesses": "pytest-xdist's, in the README's test command",
    "--dist": "pytest-xdist's, in the README's test command",
    "--root": "the sweep's cell process (tlstm_bench/sweeps/cell.py), named to explain a design choice",
}


def command_options() -> dict[str, set[str]]:
    """{"train": {"--depth", ...}, "data download": {...}}: every command's options, from click."""
    import typer.main

    from tlstm_bench.cli import app

    root = typer.main.get_command(app)
    common = {o for p in root.params for o in p.opts if o.startswith("--")} | {"--help"}

    def walk(group, prefix: str) -> dict[str, set[str]]:
        found = {}
        for name, command in getattr(group, "commands", {}).items():
            path = f"{prefix} {name}".strip()
            found[path] = common | {o for p in command.params for o in (*p.opts, *getattr(p, "secondary_opts", ()))
                                    if o.startswith("--")}
            found.update(walk(command, path))
        return found

    return walk(root, "")


def script_options() -> set[str]:
    scripts = ROOT / "benchmarks"
    return ({m.group(1) for path in scripts.rglob("*.py") for m in DECLARED.finditer(path.read_text())}
            | {m.group(1) for path in scripts.rglob("*.sh") for m in SHELL_DECLARED.finditer(path.read_text())})


def _code(text: str):
    """(offset, code) of every code-block line and inline code span."""
    offset, fenced = 0, False
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            yield offset, line
        else:
            yield from ((offset + m.start(1), m.group(1)) for m in re.finditer(r"`([^`]+)`", line))
        offset += len(line)


def command_line_flags(text: str, commands: dict) -> dict[int, str]:
    """{offset of a flag: the command whose line it is on} (rule 1)."""
    found = {}
    for offset, code in _code(text):
        start = 0
        for end in [m.start() for m in SEPARATOR.finditer(code)] + [len(code)]:
            command = COMMAND.search(code, start, end)
            if command is not None:
                name = f"{command.group(1)} {command.group(2)}"
                name = name if name in commands else command.group(1)
                found.update({offset + m.start(): name for m in FLAG.finditer(code, command.end(), end)})
            start = end
    return found


def flags_not_found(page: Path, commands: dict, scripts: set) -> list[str]:
    text, problems = page.read_text(), []
    strict = command_line_flags(text, commands)
    anywhere = set().union(*commands.values())
    first_script = min((m.start() for m in SCRIPT.finditer(text)), default=len(text))
    for m in FLAG.finditer(text):
        flag, at = m.group(0), m.start()
        if at in strict:
            known, what = commands.get(strict[at], set()), f"an option of {strict[at]}"
        elif at > first_script:
            known, what = anywhere | scripts, "an option of any command or script"
        else:
            known, what = anywhere, "an option of any command"
        if flag not in known and flag not in OTHER_TOOLS:
            problems.append(f"{page.name}:{text.count(chr(10), 0, at) + 1}: {flag} is not {what}")
    return problems


@pytest.mark.parametrize("page", [p for p in PAGES if p.parent.name != "evidence"], ids=lambda p: p.name)
def test_every_flag_the_docs_write_exists(page):
    assert flags_not_found(page, command_options(), script_options()) == []


def test_the_flag_check_fails_on_a_flag_a_command_lacks(tmp_path):
    commands = {"train": {"--depth", "--symbols"}, "time": {"--depths"}}
    page = tmp_path / "p.md"
    page.write_text("`tlstm-bench train 2d --depth 2 --depths 3` and `tlstm-bench time --depths 2 && x --depth`\n\n"
                    "| memorization | `--symbols`, `--alphabet` |\n\n`benchmarks/ladder.py --skip`, `--seeds`\n")
    problems = [p.split(": ", 1)[1] for p in flags_not_found(page, commands, {"--skip"})]
    assert problems == ["--depths is not an option of train", "--alphabet is not an option of any command",
                        "--seeds is not an option of any command or script"]


GENERATED = re.compile(r"<!-- generated by: tlstm-bench (.*?) -->\n(.*?)<!-- end of generated -->", re.S)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_generated_blocks_are_what_their_command_prints(page, monkeypatch):
    """Issue 27: a GPU number a page shows is a record's, through a command, never typed: a block
    marked ``<!-- generated by: tlstm-bench ARGS -->`` holds exactly what that command prints."""
    import shlex

    from typer.testing import CliRunner

    from tlstm_bench.cli import app

    monkeypatch.chdir(ROOT)  # the commands name committed folders relative to the checkout
    for command, block in GENERATED.findall(page.read_text()):
        result = CliRunner().invoke(app, shlex.split(command), env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        assert block.strip() == result.stdout.strip(), f"{page.name}: `tlstm-bench {command}` now prints:\n{result.stdout}"


def test_the_readme_has_a_generated_gpu_table():
    commands = GENERATED.findall((ROOT / "README.md").read_text())
    assert any("--by-depth" in command and "evidence/gpu" in command for command, _ in commands)
