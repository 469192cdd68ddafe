"""The workspace and its results store: JSON records written atomically, one a file.

Workspace: one folder for everything the tool writes, ``--results-dir`` or
``$TLSTM_BENCH_RESULTS``, else ``./results`` under the current directory (never the
installed package's folder)::

    <workspace>/store/<collection>/<record id>.json   records (a sweep's name, ``training``, ``timing``)
    <workspace>/figures/                              plot and visualize output, tables.md
    <workspace>/baselines/                            regress --update's baselines

A record is written to a temporary file in the same folder and renamed into place
(``os.replace`` is atomic on POSIX), so a crash or a second writer never leaves a
half-written record, and two writers of the same id leave one whole record.

Names that become paths (collections, record ids; a sweep's name is its collection) must be
plain file names (:func:`check_name`), and the store never writes outside its folder,
whatever the name or a symbolic link says (:func:`record_path`). A record that is not what
the schema says (not JSON, not an object, a field of the wrong type) is reported as corrupt,
with its path and what to do, by every reader (:func:`read_record`); so is a path that is not a
regular file (a FIFO, a device), which no reader opens. An ``ok`` record is never replaced by
one that is not ``ok`` (:func:`put_record`), whoever writes it.

A record's file is named by its id. A record found under another id's name (copied or moved
there by hand) is nobody's there: it never counts as that file's record, a writer of that id
moves it into the collection's quarantine folder (``<collection>/.quarantine/``, never
deleted; :func:`quarantine`), and the reader leaves it out and says so (:func:`read_collection`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic import NotAFile, atomic_write, read_regular_text

try:
    import fcntl
except ImportError:  # not POSIX: no folder lock (see put_record)
    fcntl = None
from ..checks import output_dir
from ..errors import UserError
from .schema import record_problem

ENV_RESULTS = "TLSTM_BENCH_RESULTS"
DEFAULT_WORKSPACE = "results"
_PARTS = {"store", "figures", "baselines", "evidence"}
# A name that becomes a file or folder name: no separator, no "..", not hidden, not an option.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=,:@-]*")
NAME_MAX = 200
# The ids the tool gives records (a sweep cell's, a train run's, a `time` record's): 16 hex digits.
TOOL_ID = re.compile(r"[0-9a-f]{16}")
QUARANTINE = ".quarantine"  # <collection>/.quarantine/: records found under another id's file name


def check_name(what: str, name) -> str:
    """``name`` if it can be a file name in the store; else a one-line error saying what is allowed."""
    if isinstance(name, str) and len(name) <= NAME_MAX and _NAME.fullmatch(name) and ".." not in name:
        return name
    raise UserError(f"{what} {name!r} cannot be a file name in the results store: use letters, digits and "
                    f"._+=,:@- (starting with a letter or digit, no '..', at most {NAME_MAX} characters)")


@dataclass(frozen=True)
class Workspace:
    """The folder the tool writes to, and its parts."""

    root: Path
    source: str = field(default="the results folder", compare=False)  # how the user named it (errors)

    def check_writable(self, collection: str | None = None) -> Path:
        """A one-line error, before any work, when the folder (and ``store/<collection>``) cannot be
        written; returns the collection's folder (or the root)."""
        output_dir(self.root, self.source)
        return output_dir(self.store / collection, "the records folder") if collection else self.root

    @property
    def store(self) -> Path:
        return self.root / "store"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def baselines(self) -> Path:
        return self.root / "baselines"


def workspace(results_dir: "str | Path | None" = None) -> Workspace:
    """``results_dir``, else ``$TLSTM_BENCH_RESULTS``, else ``./results``.

    A folder that holds records directly (``<dir>/<collection>/*.json``, the layout before
    workspaces had a ``store/``) is a one-line error naming the folder to give instead; so is
    a file where the folder (or one above it) should be.
    """
    given = results_dir if results_dir is not None else os.environ.get(ENV_RESULTS)
    source = "--results-dir" if results_dir is not None else f"${ENV_RESULTS}" if given else "the results folder"
    root = Path(given or DEFAULT_WORKSPACE)
    output_dir(root, source, write=False)
    if not (root / "store").exists() and root.is_dir():
        holders = [p for p in root.iterdir() if p.is_dir() and p.name not in _PARTS and any(p.glob("*.json"))]
        if holders:
            raise UserError(f"{root} holds records directly ({holders[0].name}/*.json); a results folder keeps "
                            f"them under store/: move them to {root / 'store'}/, or give --results-dir "
                            f"{root.parent} if {root.name}/ is the store of that folder")
    return Workspace(root, source)


def default_root() -> Path:
    """The store of the default workspace."""
    return workspace().store


def _clean(value):
    """JSON cannot hold NaN/inf: store them as null (a failed record says why elsewhere)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def record_path(root: "str | Path", collection: str, record_id: str) -> Path:
    """``<root>/<collection>/<record_id>.json``; a one-line error if a name is not a plain file name
    or the path resolves (through a link) outside the store."""
    check_name("collection", collection)
    check_name("record id", record_id)
    root = Path(root)
    path = root / collection / f"{record_id}.json"
    if not path.resolve().is_relative_to(root.resolve()):
        raise UserError(f"{path} resolves to {path.resolve()}, outside the results store {root.resolve()} "
                        "(a symbolic link?); the store neither reads nor writes through it: remove the link")
    return path


def write_record(record: dict, collection: str, *, root: "str | Path | None" = None,
                 record_id: str | None = None) -> Path:
    """Atomically write ``record`` as ``<root>/<collection>/<record_id>.json`` and return the path
    (unless an ``ok`` record is there and this one is not: see :func:`put_record`).

    ``root`` is a store (default: the default workspace's).
    """
    record_id = record_id or record.get("id") or uuid.uuid4().hex[:16]
    put_record(record, collection, root=root, record_id=record_id)
    return record_path(root if root is not None else default_root(), collection, record_id)


def put_record(record: dict, collection: str, *, root: "str | Path | None" = None,
               record_id: str | None = None) -> dict:
    """Write ``record`` unless it would replace an ``ok`` record with one that is not ``ok``;
    return the record the store now holds (this one, or the ``ok`` one kept).

    The one rule that keeps a finished result: whatever two processes racing on one cell do
    (a claim broken by hand, a lock folder deleted), a failure never replaces a success. The
    check and the rename happen under an exclusive lock of the collection's folder (flock;
    where the filesystem has none, the window is the few microseconds between them).
    """
    record_id = record_id or record.get("id") or uuid.uuid4().hex[:16]
    path = record_path(root if root is not None else default_root(), collection, record_id)
    record = {**record, "id": record_id, "collection": collection}
    path.parent.mkdir(parents=True, exist_ok=True)
    with _folder_locked(path.parent):
        try:
            there = read_record(path, missing_ok=True)
        except UserError:  # a corrupt record (or a special file) is replaced
            there = None
        if there is not None and stranger(there, record_id):  # not this id's: kept aside, never counted
            _move_to_quarantine(path)
            there = None
        if record.get("status") != "ok" and there is not None and there.get("status") == "ok":
            return there
        atomic_write(path, lambda fh: json.dump(_clean(record), fh, indent=1, sort_keys=True, default=str))
    return record


def stranger(record: dict, record_id: str) -> bool:
    """Whether ``record``, found in the file of ``record_id``, is another record's (its id says so)."""
    return isinstance(record.get("id"), str) and record["id"] != record_id


def quarantine(path: Path, record_id: str) -> Path | None:
    """Move the record at ``path`` (the file of ``record_id``) into its collection's quarantine
    folder if it is another record's (:func:`stranger`), and return where it went; None if it
    is not (any more: checked again under the folder's lock, against a writer of the right one)."""
    with _folder_locked(path.parent):
        try:
            there = read_record(path, missing_ok=True)
        except UserError:
            return None
        return _move_to_quarantine(path) if there is not None and stranger(there, record_id) else None


def _move_to_quarantine(path: Path) -> Path:
    """Rename ``path`` into ``<its folder>/.quarantine/`` under a name nothing there has (call it
    with the folder locked)."""
    folder = path.parent / QUARANTINE
    folder.mkdir(exist_ok=True)
    target, n = folder / path.name, 1
    while os.path.lexists(target):
        n += 1
        target = folder / f"{path.stem}.{n}{path.suffix}"
    os.rename(path, target)
    return target


@contextlib.contextmanager
def _folder_locked(folder: Path):
    """Hold an exclusive flock on ``folder`` (released when its descriptor closes)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError, AttributeError):  # NFS may refuse flock on a folder: go on without
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# What moving a corrupt record out of the store leads to, by its collection (else a sweep's).
_REDO = {"training": "the same train command then trains that run again",
         "timing": "rerun `time` to measure it again"}


def _corrupt_hint(path: Path) -> str:
    if not TOOL_ID.fullmatch(path.stem):  # no id of ours: a file a person put there, not a cell or a run
        return "it is not a record (records are named by their id): move it out of the store"
    redo = _REDO.get(path.parent.name, "a sweep then runs that cell again")
    return f"fix it, or move it out of the store ({redo})"


def read_record(path: "str | Path", *, missing_ok: bool = False) -> dict | None:
    """One record; a one-line error naming the file when it is not a record (:func:`record_problem`)
    or not a regular file (never opened: a FIFO would block the reader).

    ``missing_ok``: None when there is no such file (else that is an error too).
    """
    path = Path(path)
    try:
        text = read_regular_text(path)
    except (FileNotFoundError, NotADirectoryError):
        if missing_ok:
            return None
        raise UserError(f"no result record {path}") from None
    except UnicodeDecodeError:
        raise UserError(f"corrupt result record {path}: not UTF-8 text; {_corrupt_hint(path)}") from None
    except NotAFile as exc:
        raise UserError(f"{path} is not a regular file ({exc.what}), where the store keeps only records; "
                        "move it out of the store") from None
    except OSError as exc:
        raise UserError(f"cannot read result record {path}: {exc.strerror or exc}; make it readable, "
                        f"or move it out of the store") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "empty" if not text.strip() else f"not JSON ({exc})"
        raise UserError(f"corrupt result record {path}: {what}; {_corrupt_hint(path)}") from None
    problem = record_problem(record)
    if problem:
        raise UserError(f"corrupt result record {path}: {problem}; {_corrupt_hint(path)}")
    return record


def collections(root: "str | Path") -> list[str]:
    """The collections of a store that hold at least one record; a one-line error for a folder
    of records whose name is not text (bytes that are not UTF-8: no table or file can name it)."""
    base = Path(root)
    names = sorted(p.name for p in base.glob("*") if p.is_dir() and any(p.glob("*.json")))
    for name in names:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise UserError(f"the folder {os.fsencode(name)!r} in {base} holds records but its name is not UTF-8 "
                            "text; rename it (a sweep's name: letters, digits and ._+=,:@-)") from None
    return names


def load_records(collection: str | None = None, *, root: "str | Path | None" = None) -> list[dict]:
    """Every record under ``root`` (or one collection), as stored, in file-name order."""
    base = Path(root if root is not None else default_root())
    folders = [base / collection] if collection else [base / name for name in collections(base)]
    return [read_record(path) for folder in folders for path in sorted(folder.glob("*.json"))]


def read_collection(folder: Path) -> tuple[list[dict], list[tuple[Path, str]], list[Path]]:
    """The records of one collection's folder, in file-name order, less those found under another
    id's file name: (records, [(path, its record's id)] of those left out, the quarantined files).

    Only a file named like an id the tool gives (:data:`TOOL_ID`) is judged: records named by
    hand (the evidence's) keep their names.
    """
    kept, strangers = [], []
    for path in sorted(folder.glob("*.json")):
        record = read_record(path)
        if TOOL_ID.fullmatch(path.stem) and stranger(record, path.stem):
            strangers.append((path, record["id"]))
        else:
            kept.append(record)
    held = folder / QUARANTINE
    quarantined = sorted(held.glob("*.json")) if held.is_dir() else []
    return kept, strangers, quarantined
