"""Which cells of a sweep's grid (configuration x depth) a figure has, lacks, or saw fail.

The expected grid is the union of the sweep's shipped spec file (its ``configs`` and
``depths`` for the ``[train]`` / ``[runtime]`` table, read by the sweeps' own parser,
:func:`tlstm_bench.sweeps.spec.load_spec`, without importing torch) when the sweep is one, and
every configuration x every depth that appears in the records (so a hole in the middle of the
grid is reported even without a spec file).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..errors import UserError
from ..results.frame import config_order
from ..sweeps.spec import load_spec, shipped_spec
from ..vocab import LEARNING_RATE


@dataclass
class CellStatus:
    configs: list[str]
    depths: list[int]
    missing: list[tuple[str, int]] = field(default_factory=list)
    failed: list[tuple[str, int]] = field(default_factory=list)
    errors: dict[tuple[str, int], str] = field(default_factory=dict)


def sweep_file_grid(sweep: str) -> dict[str, tuple[list[str], list[int]]]:
    """{kind: (configs, depths)} from the shipped spec of ``sweep`` (the union of its tables of that
    kind: ``[[runtime]]`` may give several; a [train] table of several learning rates names its
    lines by them, :func:`lr_line`); {} when there is none, or it is not a valid spec."""
    path = shipped_spec(sweep)
    if path is None or not path.is_file():
        return {}
    try:
        spec = load_spec(path, check_values=False)
    except UserError:
        return {}
    grid: dict[str, tuple[list[str], list[int]]] = {}
    for section in spec.sections:
        configs, depths = grid.setdefault(section.kind, ([], []))
        train = section.kind == "train"
        lrs = section.settings.get("lr", (LEARNING_RATE,)) if train else ()
        warmups = section.settings.get("lr_warmup", (None,)) if train else ()
        names = ([lr_line(c, lr, w) for c in section.configs for lr in lrs for w in warmups]
                 if len(lrs) * len(warmups) > 1 else section.configs)
        configs += [c for c in names if c not in configs]
        depths += [d for d in section.depths if d not in depths]
    return grid


def lr_line(config: str, lr: float, warmup: "str | None" = None) -> str:
    """The line of a training run at one of several learning rates (or warm-ups):
    ``3d-cn lr=0.0001``, ``3d-cn lr=0.001 warmup=linear:10000``."""
    return f"{config} lr={lr:g}" + (f" warmup={warmup}" if warmup else "")


def cell_status(rows: pd.DataFrame, expected: "tuple[list[str], list[int]] | None" = None) -> CellStatus:
    """Expected, missing and failed (config, depth) cells for the records of one kind.

    ``expected``: (configs, depths) the sweep's spec file asks for, when known.
    """
    configs, depths = list(expected[0]) if expected else [], list(expected[1]) if expected else []
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
