"""The import rule of docs/architecture.md: a layer imports only the layers above it in the table.

Read from the source (every import, also those inside functions), so a lazy import that breaks
the rule is caught too. The order below is the table's, top to bottom.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tlstm_bench"
ORDER = ["errors", "checks", "atomic", "vocab", "warmup", "events", "models", "audit", "tasks", "results", "training",
         "timing", "sweeps", "plotting", "analysis", "cli"]


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "tlstm_bench" and len(parts) > 1 else None


def _imports(path: Path) -> list[tuple[str, int]]:
    """(absolute module name, line) of every import in ``path``."""
    package = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            found.append((".".join(base + ([node.module] if node.module else [])), node.lineno))
        elif isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
    return found


def test_the_table_of_layers_is_the_one_in_the_architecture_page():
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| `([a-z_]+)(?:\.py|/)`", page, flags=re.M)  # the first name of each row
    assert rows == [n for n in ORDER if n not in ("checks", "atomic", "analysis")]
    layers = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
              if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())) and not p.name.startswith("__")}
    assert layers == set(ORDER)


def test_no_layer_imports_one_below_it():
    wrong, crossings = [], 0
    for path in PACKAGE.rglob("*.py"):
        me = _layer(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        if me in ("__init__", "__main__"):  # the package's entry points, above every layer
            continue
        for module, line in _imports(path):
            other = _layer(module)
            if other is None or other == me:
                continue
            crossings += 1
            if ORDER.index(other) > ORDER.index(me):
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}")
    assert crossings > 100  # the reader sees the imports (an empty scan would pass anything)
    assert not wrong, "\n".join(wrong)
