"""The paper's headline claims beside the best this tool has measured, from its records.

One row per claim (:data:`CLAIMS`), with the paper's number (taken from the paper's tables
in :mod:`.paper`, the one place they are copied), the best matching record and a status by
one rule (docs/fidelity.md, "The claims table"):

* **reproduced**: a training claim solved within 1.5x the paper's samples, or the paper's
  accuracy (BPC) reached at its printed precision; a runtime claim met (every tLSTM's time
  at L >= 5 within 1.5x its time at L = 1, each time its fastest implementation's at that
  depth; every tLSTM faster than the sLSTM);
* **not reproduced**: a record ran at least the paper's samples (the paper's full training:
  its early stopping, or 50 epochs of enwik8; runtime: every configuration measured at a
  depth >= 5 on a GPU) and fell short;
* **not run here**: otherwise; the row says how far the best record got.

A training claim counts the records of its task at the paper's settings (the task options,
M, batch 15 on the algorithmic tasks, the real MNIST files, Adam's learning rate 0.001) for the
3D tLSTM+CN at the claim's depth, with any initialisation or window knob (the paper states
neither, where it states the learning rate "in all tasks"). The
runtime claims count GPU records only (the paper's "GPU milliseconds"), compared within one
machine, size, T and precision, at the depths measured at or above the paper's L = 5.

Here, not in ``results/``: the paper's numbers live in :mod:`.paper` (the tables beside ours
use them too), and ``results`` may not import ``plotting``. Reads records only; never torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..errors import UserError
from ..results.frame import NUMERIC
from ..results.schema import FIELDS, normalise
from ..results.store import read_record
from ..vocab import ALGORITHMIC_TASKS, CONFIG_NAMES, CUDA_IMPLEMENTATIONS, LEARNING_RATE, PAPER_TEST_SIZES
from .paper import PAPER_TABLES

REPRODUCED, NOT_REPRODUCED, NOT_RUN = "reproduced", "not reproduced", "not run here"
WITHIN = 1.5            # "within 1.5x of the paper's samples" (and of L = 1's runtime)
PAPER_MIN_DEPTH = 5     # the runtime claims: at the depths measured at or above the paper's L = 5
PAPER_WIKI_EPOCHS = 50  # the paper's enwik8 training: "We terminate training after 50 epochs"
TLSTMS = tuple(c for c in CONFIG_NAMES if c != "slstm")
THE_MODEL = "3d-cn"     # every numeric claim is about the 3D tLSTM+CN
PAPER_LR = LEARNING_RATE  # "minimized by Adam with a learning rate of 0.001" (appendix, "in all tasks")


@dataclass(frozen=True)
class Claim:
    name: str                   # what the paper claims, short
    kind: str                   # samples | accuracy | bpc | runtime_flat | runtime_vs_slstm
    paper_text: str             # the paper's number as printed
    source: str                 # where in the paper
    paper: float | None = None  # the number: samples, accuracy in [0, 1], BPC
    task: str | None = None
    depth: int | None = None
    match: dict = field(default_factory=dict)  # record fields (and task_options) a record must have


@dataclass
class ClaimRow:
    claim: Claim
    status: str
    best: str                    # the best measured, or how far it got; "-" when nothing matches
    record: dict | None = None   # the record it comes from (its source, device, commit ...)
    aside: "ClaimRow | None" = None  # a better record at a learning rate, warm-up or clip not the paper's


# What a training claim's aside may differ in from the paper's settings: the learning rate and its
# warm-up, which the paper states ("Adam with a learning rate of 0.001", no schedule), and a clip
# of the gradient's norm, which it does not mention (so a clipped run is shown, not counted).
# Everything else (task, model, M, batch, test set) stays the claim's.
SCHEDULE = ("lr", "lr_warmup", "clip_grad_norm")


def _paper_cell(table: str, row: str, column: str) -> str:
    spec = PAPER_TABLES[table]
    values = next(r for r in spec["rows"] if r[0] == row)
    return values[1 + spec["columns"].index(column)]


def _number(text: str) -> float:
    """The paper's printing as a number: ``298K`` -> 298000, ``99.2`` (percent) stays 99.2."""
    return float(text[:-1]) * 1000 if text.endswith("K") else float(text)


def _samples_claim(task: str, depth: int, column: str, options: dict, channels: int) -> Claim:
    text = _paper_cell("table2", f"3D tLSTM+CN (L={depth})", column)
    return Claim(f"{task}, L={depth}", "samples", f"{text}", "Table 2", _number(text), task,
                 depth, {"task_options": options, "channels": channels, "batch_size": 15, "lr": PAPER_LR})


def _mnist_claim(task: str, depth: int) -> Claim:
    text = _paper_cell("table3", f"3D tLSTM+CN (L={depth})", "MNIST" if task == "mnist" else "pMNIST")
    return Claim(f"{'p' if task == 'pmnist' else ''}MNIST, L={depth}", "accuracy", f"{text}%",
                 "Table 3", _number(text) / 100, task, depth,
                 {"task_options": {"source": "idx"}, "channels": 100, "lr": PAPER_LR})


def _claims() -> list[Claim]:
    memo, add = {"symbols": 20, "alphabet": 64}, {"digits": 15}
    bpc = _paper_cell("table1", "3D tLSTM+CN (L=6, M=1200)", "BPC")
    return [
        Claim("every tLSTM's runtime flat in L", "runtime_flat", "~L=1's", "Sec. 3.2, Fig. 3-5"),
        Claim("every tLSTM faster than sLSTM, L=5", "runtime_vs_slstm", "< sLSTM", "Sec. 3.3, Fig. 5"),
        _samples_claim("memorization", 10, "Memorization # samples", memo, 100),
        _samples_claim("memorization", 7, "Memorization # samples", memo, 100),
        _samples_claim("addition", 7, "Addition # samples", add, 400),
        _samples_claim("addition", 10, "Addition # samples", add, 400),
        Claim("enwik8, L=6, M=1200", "bpc", f"{bpc}", "Table 1", float(bpc), "enwik8", 6,
              {"channels": 1200, "lr": PAPER_LR}),
        _mnist_claim("mnist", 3), _mnist_claim("mnist", 5), _mnist_claim("pmnist", 3), _mnist_claim("pmnist", 5),
    ]


CLAIMS: tuple[Claim, ...] = tuple(_claims())


# ---- reading the records -----------------------------------------------------------
EVIDENCE = Path("results") / "evidence"  # a checkout's committed evidence, from its top folder


def read_records(folder: "str | Path") -> pd.DataFrame:
    """Every record of every results folder under ``folder`` (each ``store/<collection>/``, and each
    ``records/`` folder of tool records such as the memorization ladder's), all versions (the best
    is wanted, not the newest), with ``source``: the record's file, relative to ``folder``."""
    folder = Path(folder)
    stores = sorted({folder / "store", *folder.glob("**/store")})
    places = [c for s in stores if s.is_dir() for c in sorted(s.iterdir())
              if c.is_dir() and not c.name.startswith(".")]
    places += sorted(r for r in folder.glob("**/records") if r.is_dir())
    rows = [{**normalise(read_record(path), place.name), "source": str(path.relative_to(folder))}
            for place in places for path in sorted(place.glob("*.json"))]
    if not rows:
        raise UserError(f"no result records under {folder}; give --results-dir a results folder (the committed "
                        f"evidence is {EVIDENCE}/ of a checkout of the repository: run claims from its top folder)")
    frame = pd.DataFrame(rows)
    for column in FIELDS:
        if column not in frame:
            frame[column] = None
    for column in NUMERIC:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


# ---- the rule --------------------------------------------------------------------------
def claim_rows(records: "pd.DataFrame | list[dict]") -> list[ClaimRow]:
    """One :class:`ClaimRow` per claim of :data:`CLAIMS`, from these records."""
    frame = pd.DataFrame(records) if isinstance(records, list) else records
    for column in ("kind", "status", "config", "task", "device", "depth"):
        if column not in frame:
            frame = frame.assign(**{column: None})
    ok = frame[frame["status"].fillna("ok") == "ok"]
    judge = {"samples": _samples, "accuracy": _accuracy, "bpc": _bpc, "runtime_flat": _runtime_flat,
             "runtime_vs_slstm": _runtime_vs_slstm}
    return [judge[claim.kind](claim, ok) for claim in CLAIMS]


def _base(config: str) -> str:
    return str(config).split(":")[0]


def _matches(claim: Claim, frame: pd.DataFrame) -> list[dict]:
    """The train records of the claim's task, model, depth and settings, as dicts (the first of
    :func:`_partition`)."""
    return _partition(claim, frame)[0]


def _partition(claim: Claim, frame: pd.DataFrame) -> tuple[list[dict], list[dict]]:
    """(at the paper's settings, at another schedule): the train records of the claim's task,
    model and depth tested on the paper's whole test set (:func:`whole_test_set`), with the rest of
    the claim's settings, as dicts; the first without a learning-rate warm-up (``lr_warmup``: not
    the paper's setting, which trains at its lr from the first step) or a gradient clip
    (``clip_grad_norm``) and at the paper's lr, the second at another learning rate or with a
    warm-up or a clip (:data:`SCHEDULE`; a record that does not say its lr is in neither)."""
    rows = frame[(frame["kind"] == "train") & (frame["task"] == claim.task) & (frame["depth"] == claim.depth)
                 & (frame["config"].map(_base) == THE_MODEL)]
    papers, others = [], []
    for record in rows.to_dict("records"):
        if not whole_test_set(record):
            continue
        options = record.get("task_options") or {}
        if not (all(options.get(k) == v for k, v in claim.match.get("task_options", {}).items()) and all(
                _same(record.get(k), v) for k, v in claim.match.items() if k not in ("task_options", *SCHEDULE))):
            continue
        if (all(field_value(record, name) is None for name in SCHEDULE if name != "lr")
                and _same(record.get("lr"), claim.match.get("lr", PAPER_LR))):
            papers.append(record)
        elif field_value(record, "lr") is not None:
            others.append(record)
    return papers, others


def schedule_text(record: dict) -> str:
    """``lr 0.0001``, ``lr 0.001 after warm-up linear:30000``, ``lr 0.001, clip 1``: what an aside's
    record ran at."""
    warmup, clip = field_value(record, "lr_warmup"), field_value(record, "clip_grad_norm")
    return (f"lr {field_value(record, 'lr'):g}" + (f" after warm-up {warmup}" if warmup else "")
            + (f", clip {clip:g}" if clip else ""))


def _judged(claim: Claim, frame: pd.DataFrame, judge) -> ClaimRow:
    """The claim's row from its records at the paper's settings (``judge(claim, records)``), with
    ``aside`` where a record at another learning rate or warm-up (the rest of the claim's settings
    the same) did better than the row's: what the claim's result may depend on, shown, never
    counted."""
    papers, others = _partition(claim, frame)
    row = judge(claim, papers)
    if others:
        aside = judge(claim, others)
        if aside.record is not None and (row.record is None or _better(claim, aside.record, row.record)):
            row.aside = aside
    return row


def _better(claim: Claim, a: dict, b: dict) -> bool:
    """Whether record ``a`` did better on the claim than ``b``: solved sooner (or at all), else a
    higher test accuracy (a lower BPC)."""
    if claim.kind == "samples":
        def rank(r):  # solved first, by samples; then by accuracy
            solved = bool(r.get("solved")) and field_value(r, "samples_to_solve") is not None
            return (0, field_value(r, "samples_to_solve")) if solved else (1, -(field_value(r, "test_metric") or 0.0))
        return rank(a) < rank(b)
    sign = -1 if claim.kind == "bpc" else 1
    return sign * (field_value(a, "test_metric") or 0.0) > sign * (field_value(b, "test_metric") or 0.0)


def _same(value, wanted) -> bool:
    """A record's setting is the claim's: numbers to float rounding (an lr of 0.1 ** 3 is the
    paper's 1e-3), anything else equal."""
    if isinstance(wanted, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return math.isclose(value, wanted, rel_tol=1e-9)
    return value == wanted


def whole_test_set(record: dict) -> bool:
    """Whether a train record was tested on the paper's whole test set (``PAPER_TEST_SIZES``): an
    algorithmic task's ``test_size`` (its default where the record has none), the test images or
    characters its data held (``task_info``; a record that does not say is not counted)."""
    need = PAPER_TEST_SIZES.get(record.get("task"))
    if need is None:
        return True
    if record.get("task") in ALGORITHMIC_TASKS:
        return ((field_value(record, "task_options") or {}).get("test_size") or need) >= need
    info = field_value(record, "task_info") or {}
    held = (info.get("sizes") or info.get("chars") or {}).get("test")
    return held is not None and held >= need


def field_value(record: dict, name: str):
    """A record's field, None where it is missing or NaN (a frame's empty cell)."""
    value = record.get(name)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _samples(claim: Claim, frame: pd.DataFrame) -> ClaimRow:
    return _judged(claim, frame, _samples_of)


def _samples_of(claim: Claim, records: list[dict]) -> ClaimRow:
    solved = sorted((r for r in records if r.get("solved") and field_value(r, "samples_to_solve")),
                    key=lambda r: r["samples_to_solve"])
    if solved and solved[0]["samples_to_solve"] <= WITHIN * claim.paper:
        return ClaimRow(claim, REPRODUCED, f"solved at {_k(solved[0]['samples_to_solve'])}", solved[0])
    # unsolved: the highest test accuracy, the fewer samples on a tie (not the longest run: a short
    # run that learned more is the better measurement; the status still asks whether any ran long)
    best = solved[0] if solved else max(records, default=None, key=lambda r: (
        field_value(r, "test_metric") or 0.0, -(field_value(r, "samples_seen") or 0)))
    if best is None:
        return ClaimRow(claim, NOT_RUN, "-")
    text = (f"solved at {_k(best['samples_to_solve'])}" if best in solved
            else f"{_percent(best.get('test_metric'))} after {_k(field_value(best, 'samples_seen') or 0)}")
    ran_enough = any(max(field_value(r, "samples_seen") or 0, field_value(r, "samples_to_solve") or 0) >= claim.paper
                     for r in records)
    return ClaimRow(claim, NOT_REPRODUCED if ran_enough else NOT_RUN, text, best)


def _finished(record: dict) -> bool:
    """The run trained as the paper's did: to its early stopping (or the paper's epochs on enwik8)."""
    if record.get("task") == "enwik8":
        return (field_value(record, "epochs_done") or 0) >= PAPER_WIKI_EPOCHS
    return record.get("stop_reason") == "early_stopping"


def _accuracy(claim: Claim, frame: pd.DataFrame) -> ClaimRow:
    """Higher is better; reached at the paper's printed precision (one decimal of a percent)."""
    return _metric(claim, frame, max, lambda v: f"{_percent(v)}",
                   lambda v: round(v * 100, 1) >= round(claim.paper * 100, 1))


def _bpc(claim: Claim, frame: pd.DataFrame) -> ClaimRow:
    """Lower is better; reached at the paper's printed precision (three decimals)."""
    return _metric(claim, frame, min, lambda v: f"{v:.3f} BPC", lambda v: round(v, 3) <= claim.paper)


def _metric(claim: Claim, frame: pd.DataFrame, best_of, text_of, reached) -> ClaimRow:
    """The best test metric of the claim's records (``best_of``: max or min), reproduced when it
    ``reached`` the paper's; else not reproduced once a run trained as the paper's did."""
    def judge(claim: Claim, records: list[dict]) -> ClaimRow:
        return _metric_of(claim, records, best_of, text_of, reached)

    return _judged(claim, frame, judge)


def _metric_of(claim: Claim, records: list[dict], best_of, text_of, reached) -> ClaimRow:
    records = [r for r in records if field_value(r, "test_metric") is not None]
    if not records:
        return ClaimRow(claim, NOT_RUN, "-")
    best = best_of(records, key=lambda r: r["test_metric"])
    text = f"{text_of(best['test_metric'])} ({_epochs(best)})"
    if reached(best["test_metric"]):
        return ClaimRow(claim, REPRODUCED, text, best)
    return ClaimRow(claim, NOT_REPRODUCED if any(map(_finished, records)) else NOT_RUN, text, best)


# ---- runtime -------------------------------------------------------------------------------
_MACHINE = ("device_name", "seq_len", "dtype")


def _size(record: dict) -> str:
    """What makes two runtime records the same size: their parameter budget where they were
    built to one (each configuration and depth then has its own M: the paper's comparison, at a
    fixed parameter number), else their M."""
    budget, channels = field_value(record, "budget"), field_value(record, "channels")
    return str(budget) if budget else f"M={int(channels)}" if channels is not None else "M=?"


def _gpu_times(frame: pd.DataFrame) -> dict:
    """{(machine, T, dtype, size, batch, precision): {config: {implementation: {depth: record}}}} of
    the GPU runtime records of the seven presets (size: :func:`_size`; the fastest record of each
    cell; a record without a batch or precision timed batch 1 in ieee float32). A record that
    failed, or whose implementation failed its check against the oracle (``wrong``, ``valid``
    false, ``check_ok`` false: a device session times those anyway), never counts."""
    rows = frame[(frame["kind"] == "runtime") & (frame["device"] == "cuda") & frame["config"].isin(CONFIG_NAMES)]
    groups: dict = {}
    for record in rows.to_dict("records"):
        if field_value(record, "ms_per_step") is None or not _trusted(record):
            continue
        batch, precision = field_value(record, "batch"), field_value(record, "precision")
        key = tuple(str(record.get(k)) for k in _MACHINE) + (_size(record), int(batch or 1), precision or "ieee")
        cell = groups.setdefault(key, {}).setdefault(record["config"], {}).setdefault(record["implementation"], {})
        depth = int(record["depth"])
        if depth not in cell or record["ms_per_step"] < cell[depth]["ms_per_step"]:
            cell[depth] = record
    return groups


def _trusted(record: dict) -> bool:
    def flag(name: str) -> bool | None:  # None when absent; numpy's bools from a bool column too
        value = field_value(record, name)
        return None if value is None else bool(value)

    return ((field_value(record, "status") or "ok") == "ok" and flag("wrong") is not True
            and flag("valid") is not False and flag("check_ok") is not False)


def _on_the_gpu(by_impl: dict) -> bool:
    """Whether a tLSTM was timed with a GPU implementation (``cuda-graph``, ``triton``,
    ``triton-graph``) and not only with a per-op loop (``fast``, ``eager``: a kernel launch per
    op, so ~0.4 ms a step at any L and any size on a GPU). Where it was not, its group does not
    count for the runtime claims: the loop's time is the launches', flat in L because it is slow
    everywhere, and says nothing of the model (the first H100 run timed the 10M models so)."""
    return any(impl in CUDA_IMPLEMENTATIONS for impl in by_impl)


def _gpu_only(by_impl: dict) -> dict:
    """A tLSTM's GPU implementations' timings only: a per-op loop's time at one depth beside a
    GPU implementation's at another compares launches with the model."""
    return {impl: depths for impl, depths in by_impl.items() if impl in CUDA_IMPLEMENTATIONS}


def _flat_ratio(by_impl: dict) -> tuple[float, dict, dict] | None:
    """(slowest of the fastest times at the depths >= 5) / (fastest time at L = 1), each the fastest over
    the GPU implementations at that depth: the model's runtime as a user gets it. Not the flattest
    implementation's own ratio: a launch-bound loop (``fast`` on a GPU, ~400 us a step at any L)
    is flat because it is slow everywhere, which says nothing of the model."""
    by_impl = _gpu_only(by_impl)
    deep = [d for d in {d for depths in by_impl.values() for d in depths} if d >= PAPER_MIN_DEPTH]
    first = _fastest(by_impl, 1)
    if first is None or not deep:
        return None
    worst = max((_fastest(by_impl, d) for d in deep), key=lambda r: r["ms_per_step"])  # every L >= 5
    return worst["ms_per_step"] / first["ms_per_step"], worst, first


def _runtime_flat(claim: Claim, frame: pd.DataFrame) -> ClaimRow:
    outcomes = []  # per group: {config: (ratio, record, L = 1's record)} of the tLSTMs measured there
    for configs in _gpu_times(frame).values():
        ratios = {c: r for c in TLSTMS
                  if c in configs and _on_the_gpu(configs[c]) and (r := _flat_ratio(configs[c])) is not None}
        if ratios:
            outcomes.append(ratios)
    if not outcomes:
        return ClaimRow(claim, NOT_RUN, _gpu_reach(frame))
    best = min(outcomes, key=lambda o: (-len(o), max(r for r, _, _ in o.values())))
    worst = max(best, key=lambda c: best[c][0])
    ratio, record, first = best[worst]
    how = record["implementation"]
    if first["implementation"] != how:  # each depth's fastest: say so where they differ
        how += f"; L=1: {first['implementation']}"
    text = f"{worst} x{ratio:.2f} at L={int(record['depth'])} ({how}, {_size(record)})"
    if len(best) < len(TLSTMS):
        return ClaimRow(claim, NOT_RUN, f"{len(best)} of {len(TLSTMS)} measured; {text}", record)
    return ClaimRow(claim, REPRODUCED if ratio <= WITHIN else NOT_REPRODUCED, text, record)


def _gpu_reach(frame: pd.DataFrame, *, slstm: bool = False) -> str:
    """How far the GPU records got, for a runtime claim they do not settle: how many tLSTMs were
    timed with a GPU implementation, to which depth, and (``slstm``) whether the sLSTM was."""
    times = _gpu_times(frame).values()
    depths: dict = {}  # tLSTM -> the depths a GPU implementation timed, over every group
    for configs in times:
        for c in TLSTMS:
            if c in configs and _on_the_gpu(configs[c]):
                depths.setdefault(c, set()).update(d for by in _gpu_only(configs[c]).values() for d in by)
    if not depths:
        return "no GPU records"
    text = f"{len(depths)} of {len(TLSTMS)} tLSTMs on a GPU, to L={max(max(d) for d in depths.values())}"
    return text + ("" if not slstm or any("slstm" in configs for configs in times) else ", no sLSTM")


def _fastest(by_impl: dict, depth: int) -> dict | None:
    times = [depths[depth] for depths in by_impl.values() if depth in depths]
    return min(times, key=lambda r: r["ms_per_step"], default=None)


def _runtime_vs_slstm(claim: Claim, frame: pd.DataFrame) -> ClaimRow:
    candidates = []  # (slowest tLSTM / sLSTM, depth, the slowest tLSTM's record)
    for configs in _gpu_times(frame).values():
        if "slstm" not in configs or not all(c in configs and _on_the_gpu(configs[c]) for c in TLSTMS):
            continue
        for depth in sorted({d for by in configs["slstm"].values() for d in by if d >= PAPER_MIN_DEPTH}):
            fastest = {c: _fastest(configs[c] if c == "slstm" else _gpu_only(configs[c]), depth)
                       for c in ("slstm", *TLSTMS)}
            if all(fastest.values()):
                slowest = max(TLSTMS, key=lambda c: fastest[c]["ms_per_step"])
                ratio = fastest[slowest]["ms_per_step"] / fastest["slstm"]["ms_per_step"]
                candidates.append((ratio, depth, fastest[slowest]))
    if not candidates:
        return ClaimRow(claim, NOT_RUN, _gpu_reach(frame, slstm=True))
    ratio, depth, record = min(candidates, key=lambda c: c[0])
    text = f"slowest {record['config']} x{ratio:.2f} sLSTM, L={depth}, {_size(record)}"
    return ClaimRow(claim, REPRODUCED if ratio < 1 else NOT_REPRODUCED, text, record)


# ---- text -----------------------------------------------------------------------------
def _k(samples) -> str:
    return f"{samples / 1000:,.1f}K".replace(".0K", "K")


def _percent(value) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f}%"


def _epochs(record: dict) -> str:
    done = field_value(record, "epochs_done")
    return f"{done:.0f} epochs" if done is not None else f"{_k(field_value(record, 'samples_seen') or 0)} samples"


def record_label(record: dict) -> str:
    """Where a row's record comes from, short: the device and the commit (or the code version)."""
    device = str(field_value(record, "device_name") or field_value(record, "device") or "?")
    gpu = next((w for w in device.split() if any(ch.isdigit() for ch in w)), None)
    where = gpu if record.get("device") == "cuda" and gpu else str(record.get("device") or "?")
    commit = record.get("git_commit")
    version = str(record.get("code_version") or "").rpartition(".")[2]
    return f"{where} {commit[:7] if isinstance(commit, str) and commit else version[:7] or '?'}"
