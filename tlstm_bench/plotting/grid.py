"""Which cells of a sweep's grid (configuration x depth) a figure has, lacks, or saw fail.

The expected grid is the union of: the sweep's shipped spec file (its ``configs`` and
``depths`` for the ``[train]`` / ``[runtime]`` table) when the sweep is one; a
grid named in the records' ``spec``; and every configuration x every depth that appears in
the records (so a hole in the middle of the grid is reported even without a spec file).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..results.frame import config_order
from ..sweeps.spec import shipped_spec

CONFIG_KEYS = ("configs", "configurations", "config")
DEPTH_KEYS = ("depths", "depth")


@dataclass
class CellStatus:
    configs: list[str]
    depths: list[int]
    missing: list[tuple[str, int]] = field(default_factory=list)
    failed: list[tuple[str, int]] = field(default_factory=list)
    errors: dict[tuple[str, int], str] = field(default_factory=dict)


def _as_list(value) -> list:
    if isinstance(value, (list, tuple)):
        return list(value)
    return []


def spec_grid(spec, kind: str) -> tuple[list[str], list[int]]:
    """(configs, depths) a record's sweep spec asks for, looking in ``spec[kind]``,
    ``spec["grid"]`` and ``spec`` itself; empty lists where it does not say."""
    if not isinstance(spec, dict):
        return [], []
    places = [spec.get(kind), spec.get("grid"), spec]
    configs, depths = [], []
    for place in places:
        if not isinstance(place, dict):
            continue
        if not configs:
            configs = next((_as_list(place[k]) for k in CONFIG_KEYS if _as_list(place.get(k))), [])
        if not depths:
            depths = next((_as_list(place[k]) for k in DEPTH_KEYS if _as_list(place.get(k))), [])
    try:
        return [str(c) for c in configs], [int(d) for d in depths]
    except (TypeError, ValueError):
        return [], []


def sweep_file_grid(sweep: str, path: "Path | None" = None) -> dict[str, tuple[list[str], list[int]]]:
    """{kind: (configs, depths)} from the shipped spec of ``sweep`` (or ``path``); {} when none is readable."""
    path = path if path is not None else shipped_spec(sweep)
    if path is None or not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    grid = {}
    for kind in ("train", "runtime"):
        table = data.get(kind)
        if not isinstance(table, dict):
            continue
        configs = table.get("configs", data.get("configs"))
        depths = table.get("depths", data.get("depths"))
        try:
            grid[kind] = ([str(c) for c in _as_list(configs)], [int(d) for d in _as_list(depths)])
        except (TypeError, ValueError):
            continue
    return grid


def cell_status(rows: pd.DataFrame, kind: str, expected: "tuple[list[str], list[int]] | None" = None) -> CellStatus:
    """Expected, missing and failed (config, depth) cells for the records of one kind.

    ``expected``: (configs, depths) the sweep's spec file asks for, when known.
    """
    configs, depths = list(expected[0]) if expected else [], list(expected[1]) if expected else []
    for spec in rows["spec"]:
        c, d = spec_grid(spec, kind)
        configs += c
        depths += d
    configs += [str(c) for c in rows["config"]]
    depths += [int(d) for d in rows["depth"].dropna()]
    configs = sorted(set(configs), key=config_order)
    depths = sorted(set(depths))
    status = CellStatus(configs, depths)
    ok = rows[rows["status"] == "ok"]
    done = {(c, int(d)) for c, d in zip(ok["config"], ok["depth"]) if pd.notna(d)}
    bad = rows[rows["status"] != "ok"]
    for c, d, err in zip(bad["config"], bad["depth"], bad["error"]):
        if pd.notna(d) and (c, int(d)) not in done:
            first = str(err).strip().splitlines()[0] if isinstance(err, str) and err.strip() else "no error message"
            status.errors.setdefault((c, int(d)), first[:200])
    for c in configs:
        for d in depths:
            if (c, d) in done:
                continue
            (status.failed if (c, d) in status.errors else status.missing).append((c, d))
    return status
