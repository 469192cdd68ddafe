"""No import circles in the package (STYLE: "no import circles").

The graph is read from the source of every module: each ``import`` and ``from ... import``
anywhere in the file (module level, inside functions, under ``if TYPE_CHECKING``), relative
or absolute. ``from pkg import name`` points at ``pkg.name`` when that is a module, else at
``pkg``. Importing ``a.b`` also runs ``a/__init__``, but that is not counted as an edge:
a package's ``__init__`` re-exports its own modules, and that loop is the one Python allows.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tlstm_bench"


def _modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the package (a package by its ``__init__``)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module of the package (None: outside it)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def _edges(name: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """Module of the package -> line of the first import of it in ``path``."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            base_name = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{base_name}.{alias.name}"
                targets.append((sub if sub in modules else base_name, node.lineno))
    edges: dict[str, int] = {}
    for target, line in sorted(targets, key=lambda t: t[1]):
        module = _known(target, modules)
        if module is not None and module != name:
            edges.setdefault(module, line)
    return edges


def _graph() -> tuple[dict[str, dict[str, int]], dict[str, Path]]:
    modules = _modules()
    return {name: _edges(name, path, modules) for name, path in modules.items()}, modules


def _components(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def _one_cycle(start: str, component: list[str], graph: dict[str, dict[str, int]]) -> list[str]:
    """A shortest circle through ``start`` inside ``component`` (breadth first)."""
    inside = set(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start] + path[::-1][1:] + [start]
                if child in inside and child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no circle through {start}")  # cannot happen in a component


def _shortest_cycle(component: list[str], graph: dict[str, dict[str, int]]) -> list[str]:
    """A shortest circle of the component: the plainest one to show (and to break first)."""
    return min((_one_cycle(start, component, graph) for start in component), key=len)


def _describe(cycle: list[str], graph: dict[str, dict[str, int]], modules: dict[str, Path]) -> str:
    steps = [f"  {modules[a].relative_to(PACKAGE.parent)}:{graph[a][b]} imports {b}" for a, b in zip(cycle, cycle[1:])]
    return " -> ".join(cycle) + "\n" + "\n".join(steps)


def test_the_graph_sees_the_imports():
    graph, modules = _graph()
    assert len(modules) > 60 and sum(map(len, graph.values())) > 200  # an empty scan would pass anything
    # the kinds of import the scan must resolve, each seen in a known place
    assert "tlstm_bench.sweeps.lock" in graph["tlstm_bench.sweeps.runner"]  # from . import lock as locks
    assert "tlstm_bench.results" in graph["tlstm_bench.cli.time"]  # from ..results import workspace, in a function
    assert "tlstm_bench.models.config" in graph["tlstm_bench.models.build"]  # from .config import ...


def test_a_circle_is_found_and_named():
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3, "d": 4}, "d": {}, "e": {"e": 5}}
    assert _components(graph) == [["a", "b", "c"]]
    assert _one_cycle("b", ["a", "b", "c"], graph) == ["b", "c", "a", "b"]
    graph["b"]["a"] = 6  # a second, shorter circle in the same component
    assert _components(graph) == [["a", "b", "c"]]
    assert _shortest_cycle(["a", "b", "c"], graph) == ["a", "b", "a"]


def test_no_import_circles():
    graph, modules = _graph()
    circles = [_describe(_shortest_cycle(c, graph), graph, modules) + f"\n  (one circle among: {', '.join(c)})"
               for c in _components(graph)]
    assert not circles, f"{len(circles)} import circle(s):\n" + "\n".join(circles)
