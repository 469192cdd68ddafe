"""The record schema: what one JSON file of the results store holds.

Every measurement is one record: a runtime measurement (``kind = "runtime"``, from
``tlstm-bench time``, a sweep's runtime cell, the benchmarks) or a training run
(``kind = "train"``, from ``tlstm-bench train``, a sweep's training cell). The typed
definition below is the schema; ``docs/results.md`` has the same fields as a table (a
test keeps the two equal). A record may hold further keys (a task's own details); they
are kept and exported, never required.

Records written before a field existed still load: :func:`normalise` fills ``kind``,
``task``, ``key`` and ``causal`` for them (see its docstring), and leaves every stored
value as it was.
"""

from __future__ import annotations

import hashlib
import json
import types
import typing
from typing import Literal, Optional, TypedDict

KINDS = ("runtime", "train")


class Identity(TypedDict, total=False):
    id: str                 # the file name without .json; a sweep cell's or train run's id hashes key + code_version
    collection: str         # the store folder: a sweep's name, "training" or "timing"
    kind: Literal["runtime", "train"]
    key: str                # hash of what determines the result (one cell): newest record per key wins
    sweep: Optional[str]    # the sweep that made it (None for `time`, `train`, benchmarks)
    spec: dict              # a sweep cell's full settings (what key hashes)
    task: str               # addition, memorization, enwik8, mnist, pmnist; "runtime" for a runtime-only run
    config: str             # canonical configuration string (slstm, 2d, ..., tlstm:dims=4,...)
    depth: int              # L
    seed: int
    status: Literal["ok", "failed"]
    error: Optional[str]    # one line, when failed
    causal: Optional[bool]  # measured: y_t depends on no later input (None: not recorded)
    wall_time_s: Optional[float]  # seconds the run (a sweep cell: its process) took


class Size(TypedDict, total=False):
    channels: Optional[int]     # M actually used
    tensor_size: Optional[int]  # P
    params: Optional[int]       # total trainable parameters
    budget: Optional[str]       # the budget asked for (10M, slstm:100) or None
    init: Optional[dict]        # the initialisation knobs (models.config: cell_kernel, input_init, ...), defaults too


class Runtime(TypedDict, total=False):
    implementation: str          # the sequence loop timed (fast, eager, fused, wavefront, ...)
    seq_len: int                 # T
    batch: int                   # 1 (the paper's definition)
    sequential_steps: int        # T*L or T+L-1
    input_size: Optional[int]
    output_size: Optional[int]
    dtype: str
    tf32: Optional[bool]         # CUDA: TF32 allowed in matmuls or cuDNN while timing (the tool turns it off)
    precision: Optional[str]     # ieee | tf32x3 | tf32: float32 products (runtime and train); null: ieee
    flush_denormal: bool
    clock: str                   # perf_counter | cuda_events
    warmup: int
    repeats: int
    runs_per_sample: int
    interleaved: bool
    ms_per_step: Optional[float]  # median ms of forward + loss + backward per timestep
    ms_q25: Optional[float]
    ms_q75: Optional[float]
    ms_iqr: Optional[float]
    samples: list                # every repeat's ms per step
    cpu_shares: list             # CPU only: each sample's CPU time over its wall time x threads
    cpu_share: Optional[float]   # their median: under vocab.CONTENDED_SHARE, a busy machine
    measurement: Optional[str]   # one id per measure_cases call: samples of one id pair round by round


class Train(TypedDict, total=False):
    preset: Optional[str]
    metric: str                  # bpc | accuracy
    valid_metric: Optional[float]
    test_metric: Optional[float]
    sequence_accuracy: Optional[float]
    test_by_position: Optional[list]  # algorithmic tasks: the test accuracy at each answer position
    test_loss: Optional[float]
    samples_seen: int
    samples_to_solve: Optional[int]
    solved: bool
    steps: int
    epochs_done: Optional[float]
    stop_reason: str
    stop_detail: str             # the stop reason in words (the last line train prints)
    history: list                # every evaluation (samples, train_loss, metric, ...; algorithmic: by_position)
    resumed_at: list             # the samples seen at each resume from a checkpoint
    task_options: dict
    task_info: dict
    batch_size: int
    lr: float
    lr_warmup: Optional[str]     # how the lr rose to lr (warmup.py: linear:20000, ...); null: none, the paper's
    clip_grad_norm: Optional[float]  # the gradient's total norm clipped to this before each step; null: none
    forget_bias: float
    max_samples: Optional[int]
    epochs: Optional[int]
    eval_every: int
    time_limit_s: Optional[float]  # seconds of wall time the run was allowed (None: no limit)
    patience: Optional[int]
    early_stopping: Optional[bool]  # whether the run could stop early (offline tasks; a preset may turn it off)
    sample_unit: str


class Provenance(TypedDict, total=False):
    code_version: str            # <package version>+src.<hash of the package source>
    git_commit: Optional[str]    # None when not run from a git checkout
    git_dirty: Optional[bool]
    package_version: str
    torch_version: str
    python_version: str
    device: str                  # cpu | cuda
    device_name: str             # GPU name, or the CPU model
    cuda_version: Optional[str]
    driver_version: Optional[str]  # the NVIDIA driver (CUDA), else None
    cudnn_version: Optional[int]
    triton_version: Optional[str]  # installed Triton, else None
    cpu_model: str
    threads: int
    omp_wait_policy: Optional[str]  # how OpenMP's waiting threads waited (OMP_WAIT_POLICY; None: unset)
    cpu_count: int
    host: str
    platform: str
    date: str                    # UTC, ISO 8601
    slurm_job_id: Optional[str]  # the SLURM job that ran a sweep cell ("<array id>_<task>"), else None
    migrated: dict               # fields added after the record was made, and how (results.migrate)
    source: dict                 # a record converted from another tool's output: which file, line and tool


class Record(Identity, Size, Runtime, Train, Provenance, total=False):
    """One record of the results store (every group above; which ones depend on ``kind``)."""


FIELDS: tuple[str, ...] = tuple(Record.__annotations__)

# What determines a result, for records that carry no key of their own (``time`` and
# ``train`` records, benchmarks): hashing these gives the same key to a rerun of the
# same measurement, so the newest-record rule treats it as the same cell.
KEY_FIELDS = {
    "runtime": ("kind", "task", "config", "depth", "seed", "implementation", "channels", "budget", "input_size",
                "output_size", "seq_len", "dtype", "repeats", "warmup", "device", "device_name", "cpu_model",
                "threads"),
    "train": ("kind", "task", "config", "depth", "seed", "implementation", "channels", "budget", "preset",
              "task_options", "batch_size", "lr", "max_samples", "epochs", "eval_every", "patience",
              "early_stopping", "device"),
}
_COLLECTION_KINDS = {"timing": "runtime", "training": "train"}


def stable_hash(payload) -> str:
    """16 hex digits of sha256 over canonical JSON (sorted keys): a key or an id."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def versioned_id(key: str, code_version: str) -> str:
    """A record's id: its key and the code version that computed it (a sweep cell's, a ``train`` run's)."""
    return stable_hash({"key": key, "code_version": code_version})


# Training settings that enter a record's key (and its checkpoint's) only when set, so that the
# runs from before each existed keep their keys.
KEY_WHEN_SET = ("lr_warmup", "clip_grad_norm")


def record_key(record: dict) -> str:
    """The key of a record without one: a hash of the fields that determine its result. A
    ``precision`` other than ieee, a learning-rate warm-up and a gradient clip enter it too
    (without them it is the key it was before those fields existed)."""
    key = stable_hash({name: record.get(name) for name in KEY_FIELDS.get(record.get("kind"), ())})
    if record.get("precision") not in (None, "ieee"):
        key = stable_hash({"key": key, "precision": record["precision"]})
    for name in KEY_WHEN_SET:
        if record.get(name) is not None:
            key = stable_hash({"key": key, name: record[name]})
    return key


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# What a non-null value of each annotated type must be; JSON has one number type, so an int
# field takes 3.0 and a float field takes 3.
_CHECKS = {str: ("a string", lambda v: isinstance(v, str)),
           int: ("an integer", lambda v: _is_number(v) and float(v).is_integer()),
           float: ("a number", _is_number),
           bool: ("true or false", lambda v: isinstance(v, bool)),
           list: ("a list", lambda v: isinstance(v, list)),
           dict: ("an object", lambda v: isinstance(v, dict))}


def _check_of(hint) -> tuple[str, typing.Callable]:
    """(what it must be, test) of one field; ``Optional[X]`` is X (every field may be null)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]
    if typing.get_origin(hint) is Literal:
        values = typing.get_args(hint)
        return " or ".join(map(repr, values)), lambda v: isinstance(v, str) and v in values
    return _CHECKS[hint]


_FIELD_CHECKS = {name: _check_of(hint) for name, hint in typing.get_type_hints(Record).items()}


def record_problem(record) -> str | None:
    """What makes ``record`` (parsed JSON) not a record, in a few words; None if nothing.

    A record is a JSON object whose schema fields, where present and not null, have their
    schema's type (``date`` a string, ``depth`` an integer, ``status`` ok or failed, ...); a
    failed record leaves results null. Fields outside the schema are free.
    """
    if not isinstance(record, dict):
        kind = next((what for what, test in _CHECKS.values() if test(record)), "null")
        return f"{kind}, not a JSON object"
    for name, value in record.items():
        if value is not None and name in _FIELD_CHECKS and not _FIELD_CHECKS[name][1](value):
            return f"field {name!r} is {json.dumps(value, default=str)[:40]}, not {_FIELD_CHECKS[name][0]}"
    return None


def infer_kind(record: dict, collection: str | None = None) -> str | None:
    if record.get("kind") in KINDS:
        return record["kind"]
    if collection in _COLLECTION_KINDS:
        return _COLLECTION_KINDS[collection]
    if "ms_per_step" in record:
        return "runtime"
    if "metric" in record or "test_metric" in record:
        return "train"
    return None


def normalise(record: dict, collection: str) -> dict:
    """A stored record as the readers expect it; stored values are never changed.

    Filled where absent (records written before the field existed):
    ``collection`` (the folder), ``kind`` (from the collection or the fields), ``task``
    (``"runtime"`` for a runtime record), ``status`` (``"ok"``), ``key`` (:func:`record_key`)
    and ``causal`` (None: unknown; it is not computed here, which would need torch; see
    ``python -m tlstm_bench.results.migrate``).
    """
    out = dict(record)
    out["collection"] = collection
    out["kind"] = infer_kind(record, collection)
    if out.get("task") is None and out["kind"] == "runtime":
        out["task"] = "runtime"
    out.setdefault("status", "ok")
    if not out.get("key"):
        out["key"] = record_key(out)
    out.setdefault("causal", None)
    return out
