"""Which cells of a sweep's grid (configuration x depth) a figure has, lacks, or saw fail.

The expected grid is the union of: the sweep's spec file (``sweeps/<sweep>.toml``, its
``configs`` and ``depths`` for the ``[train]`` / ``[runtime]`` table) when there is one; a
grid named in the records' ``spec``; and every configuration x every depth that appears in
the records (so a hole in the middle of the grid is reported even without a spec file).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

SPEC_DIRS = (Path("sweeps"), Path(__file__).resolve().parents[2] / "sweeps")  # as tlstm_bench.sweeps looks

# SPEC section 6 order; knob strings and other names sort after these.
CONFIG_ORDER = ("slstm", "2d", "2d-m", "2d-f", "3d", "3d-ln", "3d-cn")
CONFIG_KEYS = ("configs", "configurations", "config")
DEPTH_KEYS = ("depths", "depth")


def config_order(config: str) -> tuple:
    return (CONFIG_ORDER.index(config), "") if config in CONFIG_ORDER else (len(CONFIG_ORDER), config)


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


def sweep_file_grid(sweep: str) -> dict[str, tuple[list[str], list[int]]]:
    """{kind: (configs, depths)} from ``sweeps/<sweep>.toml``; {} when there is no readable file."""
    for folder in SPEC_DIRS:
        path = folder / f"{sweep}.toml"
        if not path.is_file():
            continue
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
    return {}


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
