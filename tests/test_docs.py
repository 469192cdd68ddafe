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
