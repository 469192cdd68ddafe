"""Checks of user input that several commands share: one helper per kind of check.

* :func:`integer`: a whole number in a range (a count, a size, a seed);
* :func:`number`: a finite real number, positive unless told otherwise (a learning rate);
* :func:`knobs_once`: a configuration's knob string names each knob once;
* :func:`output_dir` and :func:`output_file`: a place the command will write to, checked
  before any work starts, so that a long run never ends in a write that cannot succeed;
* :func:`path_length`: a path the file system can take (no name in it, and not the whole,
  longer than it allows), for every path option;
* :func:`deadline`: ``$TLSTM_BENCH_DEADLINE``, the wall-clock time by which every run must have
  stopped and kept its record; :func:`duration`: a length of time (``90s``, ``45m``, ``2h``).

Each raises :class:`~tlstm_bench.errors.UserError` with one line that names the option and
says what is allowed. Nothing here imports torch, and nothing here writes anything.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

from .errors import UserError

# torch.manual_seed takes 64-bit seeds; a larger one is an OverflowError deep inside torch.
MAX_SEED = 2**63 - 1
MAX_THREADS = 1024  # torch.set_num_threads: more is a typo (it would start that many threads)
MAX_DIM = 2**31 - 1  # one tensor dimension (M, R, S), a depth, a sequence length: torch's 32-bit index kernels
ENV_DEADLINE = "TLSTM_BENCH_DEADLINE"


def integer(value, what: str, *, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` if it is an int (not a bool) in ``minimum .. maximum``, else a one-line error."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{what} must be an integer, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        allowed = f">= {minimum}" if value < minimum else f"<= {maximum:,}"
        shown = str(value) if abs(value) < 10**30 else f"a {len(str(abs(value)))}-digit number"
        raise UserError(f"{what} must be an integer {allowed}, got {shown}")
    return value


def seed(value, what: str = "--seed") -> int:
    """A seed: an integer from 0 to 2^63 - 1 (what torch's generators take)."""
    return integer(value, what, minimum=0, maximum=MAX_SEED)


def threads(value, what: str = "--threads") -> int:
    """A CPU thread count for torch: 1 to :data:`MAX_THREADS`."""
    return integer(value, what, maximum=MAX_THREADS)


def number(value, what: str) -> float:
    """``value`` as a float if it is a finite number above 0, else a one-line error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{what} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise UserError(f"{what} must be a finite number, got {value}")
    if value <= 0:
        raise UserError(f"{what} must be above 0, got {value}")
    return float(value)


def deadline(environ: "dict | None" = None) -> float | None:
    """``$TLSTM_BENCH_DEADLINE`` (of ``environ``, else this process's environment) as a UNIX time
    in seconds, or None where it is unset or empty.

    Set by whoever has a hard stop to meet (``benchmarks/device_run.sh``: a device call's time
    limit less what the final evaluation and the packing need): a training run stops there as
    at its time limit, is evaluated and keeps its record (``stop_reason = "deadline"``), and a
    sweep starts no cell after it. Not a setting: it is not part of a run's or a cell's identity."""
    text = (os.environ if environ is None else environ).get(ENV_DEADLINE, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"${ENV_DEADLINE} must be a UNIX time in seconds (as `date +%s` prints), got {text!r}; "
                        "unset it to run without one")
    return value


_UNITS = {"s": 1, "m": 60, "h": 3600}


def duration(text: str, what: str) -> float:
    """``90``, ``90s``, ``45m``, ``1.5h`` as seconds (above 0), else a one-line error."""
    value = str(text).strip().lower()
    scale = _UNITS.get(value[-1:], None)
    number_text = value[:-1] if scale is not None else value
    try:
        seconds = float(number_text) * (scale or 1)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise UserError(f"{what} must be a length of time such as 90s, 45m or 2h, got {text!r}")
    return seconds


def knobs_once(config, what: str = "config") -> None:
    """A one-line error when a knob string (``tlstm:dims=2,dims=3``) gives a knob twice: the
    last would win silently, and the user meant one of them."""
    if not isinstance(config, str) or ":" not in config:
        return
    seen = set()
    for item in config.partition(":")[2].split(","):
        key = item.partition("=")[0].strip().lower()
        if key in seen:
            raise UserError(f"{what} {config!r} gives the knob {key!r} twice; give each knob once")
        seen.add(key)


# What POSIX file systems allow where pathconf cannot say: a name (one component) and a whole path, in bytes.
NAME_BYTES, PATH_BYTES = 255, 4096


def shortened(text: str, keep: int = 60) -> str:
    """``text`` cut in its middle to about ``keep`` characters, so that a message stays one line."""
    return text if len(text) <= keep else f"{text[:keep // 2]}...{text[-(keep // 3):]} ({len(text):,} characters)"


def _limits(path: Path) -> tuple[int, int]:
    """(longest name, longest path) in bytes on the file system that would hold ``path``."""
    base = _nearest_existing(path) if len(os.fsencode(str(path))) < PATH_BYTES else Path(".")
    limits = []
    for name, default in (("PC_NAME_MAX", NAME_BYTES), ("PC_PATH_MAX", PATH_BYTES)):
        try:
            limits.append(os.pathconf(base, name))
        except (OSError, ValueError, AttributeError):
            limits.append(default)
    return limits[0], limits[1]


def path_length(path: "str | Path", what: str) -> Path:
    """``path`` if the file system can take it; else a one-line error saying what is too long."""
    path = Path(path).expanduser()
    longest_name, longest_path = _limits(path)
    whole = len(os.fsencode(str(path.absolute())))
    if whole >= longest_path:
        raise UserError(f"{what} {shortened(str(path))} is too long: {whole:,} bytes as a full path, the file "
                        f"system takes at most {longest_path - 1:,}; give a shorter path")
    name = max(path.parts, key=lambda part: len(os.fsencode(part)), default="")
    size = len(os.fsencode(name))
    if size > longest_name:
        part = ":" if name == str(path) else f": its part {shortened(name, 30)} is"
        raise UserError(f"{what} {shortened(str(path))} is too long{part} {size:,} bytes, a name on this file "
                        f"system takes at most {longest_name}; give a shorter one")
    return path


def _nearest_existing(path: Path) -> Path:
    """``path`` or the closest path above it that exists (what creating ``path`` needs)."""
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(".")


def output_dir(path: "str | Path", what: str, *, write: bool = True) -> Path:
    """A folder the command will write into (``write``) or read from: it exists as a folder,
    or can be created as one.

    Checked before any work, so that a long run never ends in a write that fails. Writability
    is probed with a real write (a temporary file, removed at once), which answers for
    permission bits, ACLs and read-only mounts alike; nothing is left behind.
    """
    path = path_length(path, what)
    base = _nearest_existing(path)
    if not base.is_dir():
        where = "is" if base == path else f"is inside {base}, which is"
        raise UserError(f"{what} {path} {where} a file, not a folder; give a folder (it is created if missing)")
    if write:
        try:
            fd, probe = tempfile.mkstemp(prefix=".tlstm-bench-probe.", dir=base)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise UserError(f"{what} {path} is not writable (cannot write in {base}: {exc.strerror or exc}); "
                            "give a folder you can write to") from None
    return path


def output_file(path: "str | Path", what: str) -> Path:
    """A file the command will write (or replace): not a folder, and its folder is writable."""
    path = path_length(path, what)
    if path.is_dir():
        raise UserError(f"{what} {path} is a folder; give a file name")
    output_dir(path.parent, f"{what} {path}: its folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise UserError(f"{what} {path} is read-only (not writable); give another file")
    return path
