"""Fetch the enwik8 and MNIST files (for users who are online), checking size and md5.

Files are written to a temporary name and renamed into place only after their size
and checksum match, so an interrupted download never leaves a file that looks good.
A file already present and correct is not fetched again.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Callable

from ..atomic import temp_beside
from ..errors import UserError
from .data import ENWIK8_MD5, ENWIK8_SIZE, ENWIK8_ZIP, MNIST_FILES, Remote

DATASETS = ("enwik8", "mnist")
CHUNK = 1 << 20


def md5_of(path: Path) -> str:
    digest = hashlib.md5()  # integrity against the published checksums, not security
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def enwik8_zip_ok(path: Path) -> str | None:
    """None if ``path`` is the enwik8 zip (size, member size, member md5), else why not."""
    if path.stat().st_size != ENWIK8_ZIP.size:
        return f"size {path.stat().st_size:,} bytes, expected {ENWIK8_ZIP.size:,}"
    try:
        with zipfile.ZipFile(path) as zf:
            if zf.getinfo("enwik8").file_size != ENWIK8_SIZE:
                return f"its enwik8 member is not {ENWIK8_SIZE:,} bytes"
            digest = hashlib.md5()
            with zf.open("enwik8") as fh:
                for block in iter(lambda: fh.read(CHUNK), b""):
                    digest.update(block)
    except (zipfile.BadZipFile, KeyError, OSError, EOFError) as exc:
        return f"not a readable zip holding enwik8 ({exc})"
    return None if digest.hexdigest() == ENWIK8_MD5 else "md5 of enwik8 does not match"


def remote_ok(path: Path, remote: Remote) -> str | None:
    size = path.stat().st_size
    if size != remote.size:
        return f"size {size:,} bytes, expected {remote.size:,}"
    got = md5_of(path)
    return None if got == remote.md5 else f"md5 {got}, expected {remote.md5}"


def _silent(message: str) -> None:
    """The default ``log``: library code says nothing unless asked (the CLI passes its console)."""


def fetch(remote: Remote, dest: Path, check: Callable[[Path], str | None], log=_silent) -> Path:
    """Download ``remote`` to ``dest`` (trying each URL), keeping it only if ``check`` passes."""
    errors = []
    for url in remote.urls:
        fd, tmp = temp_beside(dest)  # the data file gets open()'s mode, not mkstemp's 0600
        try:
            log(f"fetching {url}")
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
                for block in iter(lambda: response.read(CHUNK), b""):
                    out.write(block)
            problem = check(Path(tmp))
            if problem is None:
                os.replace(tmp, dest)
                return dest
            errors.append(f"{url}: {problem}")
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            errors.append(f"{url}: {exc}")
        finally:
            Path(tmp).unlink(missing_ok=True)
    raise UserError(f"could not fetch {remote.name}: {'; '.join(errors)}")


def download(dataset: str, data_dir: "str | Path", *, force: bool = False, log=_silent) -> list[Path]:
    """Fetch ``enwik8`` (``enwik8.zip``) or ``mnist`` (four IDX .gz files) into ``data_dir``."""
    if dataset not in DATASETS:
        raise UserError(f"unknown dataset {dataset!r}; use one of {', '.join(DATASETS)}")
    folder = Path(data_dir).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create data directory {folder}: {exc}") from None
    if dataset == "enwik8":
        jobs = [(ENWIK8_ZIP, folder / ENWIK8_ZIP.name, enwik8_zip_ok)]
    else:
        jobs = [(r, folder / r.name, lambda p, r=r: remote_ok(p, r)) for r in MNIST_FILES]
    done = []
    for remote, dest, check in jobs:
        if dest.is_file() and not force:
            problem = check(dest)
            if problem is None:
                log(f"{dest} is already there and correct")
                done.append(dest)
                continue
            log(f"{dest} is there but wrong ({problem}); fetching it again")
        done.append(fetch(remote, dest, check, log=log))
    return done
