"""The one reader of the results store: records -> a pandas DataFrame.

``results``, ``plot``, ``visualize --best`` and the tables all read through
:func:`read_frame`, so they agree on which records count: one row per record,
normalised (:func:`tlstm_bench.results.schema.normalise`), every schema field present
as a column, and, unless ``all_versions``, only the newest record (by ``date``) of each
cell (``collection`` + ``key``): a cell measured again, by newer code or on purpose,
shows its latest result. A date ahead of this machine's clock cannot say which record is
newer (a writer's clock was wrong, or this one's is), so such a record never hides another:
it is shown beside the newest one dated before now, and a note says why
(:func:`newest_per_cell`). What a reader should know about the store (those notes, runs of
one runtime case far apart (:func:`rerun_notes`), records under another record's file name,
quarantined ones) is in ``frame.attrs["notes"]``.
Imports pandas, never torch.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import UserError
from ..vocab import CONFIG_NAMES
from .schema import FIELDS, normalise
from .store import QUARANTINE, collections as store_collections, default_root, read_collection
from .view import line_name, size_name

NUMERIC = ("depth", "seed", "channels", "tensor_size", "params", "seq_len", "threads", "ms_per_step", "ms_q25",
           "ms_q75", "ms_iqr", "valid_metric", "test_metric", "sequence_accuracy", "samples_seen",
           "samples_to_solve", "wall_time_s")
# How far ahead of this machine's clock a date may be before it is not believed (clocks of
# hosts sharing a store differ by a little).
FUTURE_SLACK = pd.Timedelta(minutes=10)
# Runs of one runtime case (same code, settings and machine) this far apart say that the
# machine's load changed between them (a CPU shared with other jobs: 2.1x here between an idle
# run and one beside three busy processes, the depth ratios the same): worth a note.
RERUN_SPREAD = 2.0


def config_order(config: str) -> tuple:
    """Sort key: the seven presets in the paper's order (SPEC section 6), knob strings after them."""
    return (CONFIG_NAMES.index(config), "") if config in CONFIG_NAMES else (len(CONFIG_NAMES), str(config))


def read_frame(names: "str | list[str] | None" = None, *, root: "str | Path | None" = None,
               all_versions: bool = False) -> pd.DataFrame:
    """Records of the named collections (default: all) under the store ``root`` (default: the
    default workspace's), one row each.

    Raises UserError when a named collection has no records or nothing is found.
    """
    root = Path(root) if root is not None else default_root()
    _check_store(root, names)
    present = store_collections(root) if root.is_dir() else []
    wanted = [names] if isinstance(names, str) else list(dict.fromkeys(names or present))
    unknown = [n for n in wanted if n not in present]
    if unknown:
        if (root / unknown[0]).exists() and not (root / unknown[0]).is_dir():
            raise UserError(f"{root / unknown[0]} is a file, not a folder of records; move it out of the store")
        have = f"there: {', '.join(present)}" if present else "the store is empty"
        raise UserError(f"no results for {unknown[0]!r} in {root} ({have}); run `tlstm-bench sweep` first "
                        f"or pass --results-dir")
    rows, notes = [], []
    for name in wanted:
        records, strangers, quarantined = read_collection(root / name)
        rows += [normalise(record, name) for record in records]
        notes += [f"left out {path}: it holds the record {other}, not {path.stem} (another record's "
                  f"file name; a sweep or a write of {path.stem} moves it to {name}/{QUARANTINE}/)"
                  for path, other in strangers]
        if quarantined:
            notes.append(f"{len(quarantined)} record(s) in {root / name / QUARANTINE}: found under another "
                         "record's file name, kept aside (they count nowhere; delete them when checked)")
    if not rows:
        raise UserError(f"no result records in {root}; run `tlstm-bench sweep` first or pass --results-dir")
    frame = _typed(pd.DataFrame(rows))
    notes += rerun_notes(frame)
    if not all_versions:
        notes += future_notes(frame)
        frame = newest_per_cell(frame)
    order = frame.assign(_c=frame["config"].map(config_order))
    order = order.sort_values(["collection", "kind", "task", "_c", "depth", "seed"], kind="stable",
                              key=lambda s: s.astype(str) if s.name in ("collection", "kind", "task") else s)
    frame = order.drop(columns="_c").reset_index(drop=True)
    frame.attrs["notes"] = notes
    return frame


def _check_store(root: Path, names) -> None:
    """A one-line error when ``root`` is not a store folder: a file, or missing with its results folder."""
    if root.exists() and not root.is_dir():
        raise UserError(f"the results store {root} is a file, not a folder; move it away or pass --results-dir")
    if not root.exists() and not root.parent.is_dir():
        what = f"results for {names!r}" if isinstance(names, str) else "results"
        raise UserError(f"no results folder {root.parent}, so no {what}; run `tlstm-bench sweep` first "
                        "or pass --results-dir")


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Every schema field a column; numbers numeric, ``config`` and ``task`` text."""
    for column in FIELDS:
        if column not in frame:
            frame[column] = None
    for column in NUMERIC:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame["config"] = frame["config"].astype(str)
    frame["task"] = frame["task"].where(frame["task"].notna(), frame["kind"]).astype(str)
    return frame


def _dates(frame: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(each row's date, whether it lies ahead of this machine's clock by more than :data:`FUTURE_SLACK`)."""
    dates = pd.to_datetime(frame["date"], errors="coerce", utc=True, format="ISO8601")
    return dates, dates > pd.Timestamp.now(tz="UTC") + FUTURE_SLACK


def newest_per_cell(frame: pd.DataFrame) -> pd.DataFrame:
    """One record per cell (``collection`` + ``key``), the one with the newest ``date``; and every
    record dated ahead of now besides, since its date cannot say which is newer."""
    dates, ahead = _dates(frame)
    dated = frame.assign(_date=dates)
    believed = dated[~ahead].sort_values("_date", na_position="first", kind="stable")
    newest = believed.drop_duplicates(subset=["collection", "key"], keep="last")
    return pd.concat([newest, dated[ahead]]).sort_index().drop(columns="_date")


def rerun_notes(frame: pd.DataFrame, keys=None) -> list[str]:
    """A note per collection naming the runtime cases (``key``, one code version, one host) whose
    runs' medians are RERUN_SPREAD or more apart; ``keys``: only these cases. Every run of a case
    is kept in the store and the newest shown, so without it a reader sees one run of the two."""
    if not {"kind", "status", "key", "code_version", "ms_per_step"} <= set(frame.columns):
        return []
    runs = frame[(frame["kind"] == "runtime") & (frame["status"].fillna("ok") == "ok")
                 & (pd.to_numeric(frame["ms_per_step"], errors="coerce") > 0)]
    if keys is not None:
        runs = runs[runs["key"].isin(list(keys))]
    apart: dict[str, dict] = {}  # collection -> case name -> (widest spread, its runs)
    by = ["collection", "key", "code_version"] + (["host"] if "host" in runs else [])  # the key names no host
    for (collection, *_), case in runs.groupby(by, dropna=False, sort=True):
        ms = case["ms_per_step"].astype(float)
        if len(case) < 2 or ms.max() < RERUN_SPREAD * ms.min():
            continue
        found, name = apart.setdefault(collection, {}), _case_name(case.iloc[0])
        if name not in found or ms.max() / ms.min() > found[name][0]:
            found[name] = (ms.max() / ms.min(), case)
    notes = []
    for collection, found in apart.items():
        cases = sorted(found.items(), key=lambda item: (config_order(item[1][1].iloc[0]["config"]),
                                                        item[1][1].iloc[0]["depth"], item[0]))
        ratios = [ratio for _, (ratio, _) in cases]
        spread = f"x{min(ratios):.1f}" + (f"-{max(ratios):.1f}" if max(ratios) - min(ratios) >= 0.05 else "")
        shares = pd.to_numeric(pd.concat([runs_of.get("cpu_share", pd.Series(dtype=float))
                                          for _, (_, runs_of) in cases]), errors="coerce").dropna()
        share = (f", with {shares.min():.0%} to {shares.max():.0%} of a CPU" if len(shares)
                 and shares.max() - shares.min() >= 0.1 else "")
        names = ", ".join(name for name, _ in cases[:4]) + (f" and {len(cases) - 4} more" if len(cases) > 4 else "")
        notes.append(f"{collection}: {len(cases)} case{'s' if len(cases) > 1 else ''} timed more than once (same "
                     f"code, settings and machine) differ {spread} between runs ({names}{share}): the machine's "
                     "load changed between them; compare cases timed in one run (`results --all-versions` lists "
                     "each run)")
    return notes


def _case_name(row) -> str:
    return f"{row['config']} L={row['depth']:.0f} {line_name(row)} {size_name(row)}"


def future_notes(frame: pd.DataFrame) -> list[str]:
    """A note for each record dated ahead of now that shares its cell with another record."""
    dates, ahead = _dates(frame)
    cells = frame.groupby(["collection", "key"], dropna=False)["key"].transform("size")
    now = pd.Timestamp.now(tz="UTC").strftime("%Y-%m-%d %H:%M")
    return [f"{row.collection}/{row.id}: dated {row.date}, ahead of this machine's clock ({now} UTC); "
            "a date ahead of now cannot say which record of its cell is newer, so it is shown beside "
            "the newest one dated before now" for row in frame[ahead & (cells > 1)].itertuples()]
