"""Where data files are found, and the files the download command fetches.

Search order for a data directory: the ``data_dir`` argument (``--data-dir``), then
the environment variable ``TLSTM_BENCH_DATA``. Nothing is downloaded implicitly:
``tlstm-bench data download enwik8|mnist --data-dir D`` fetches and checks the files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

ENV_DATA = "TLSTM_BENCH_DATA"


@dataclass(frozen=True)
class Remote:
    """A file the download command fetches: where from, its size and md5."""

    name: str
    urls: tuple[str, ...]
    size: int
    md5: str


# Hutter Prize file (mattmahoney.net/dc/textdata.html): the zip holds one member,
# ``enwik8``, of 100,000,000 bytes with md5 a1fa5ffddb56f4953e226637dabbb36a.
ENWIK8_ZIP = Remote("enwik8.zip", ("https://mattmahoney.net/dc/enwik8.zip",), 36_445_475, "")
ENWIK8_SIZE = 100_000_000
ENWIK8_MD5 = "a1fa5ffddb56f4953e226637dabbb36a"

# The standard MNIST IDX files (sizes and md5s as published with torchvision's mirror).
_MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")
MNIST_FILES = tuple(
    Remote(name, tuple(m + name for m in _MNIST_MIRRORS), size, md5)
    for name, size, md5 in (
        ("train-images-idx3-ubyte.gz", 9_912_422, "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        ("train-labels-idx1-ubyte.gz", 28_881, "d53e105ee54ea40749a09fcbcd1e9432"),
        ("t10k-images-idx3-ubyte.gz", 1_648_877, "9fb629c4189551a2d022fa330f9573f3"),
        ("t10k-labels-idx1-ubyte.gz", 4_542, "ec29112dd5afa0611ce80d1b7f02629c"),
    )
)


def resolve_data_dir(data_dir: "str | Path | None", what: str) -> Path:
    """The data directory to read ``what`` from; a one-line error when there is none."""
    if data_dir is None:
        data_dir = os.environ.get(ENV_DATA) or None
    if data_dir is None:
        raise UserError(
            f"{what} needs its data files: pass --data-dir D (or set {ENV_DATA}); "
            f"online, fetch them with `tlstm-bench data download {what} --data-dir D`"
        )
    path = Path(data_dir).expanduser()
    if not path.is_dir():
        raise UserError(f"data directory {path} does not exist; create it with "
                        f"`tlstm-bench data download {what} --data-dir {path}` or pass another --data-dir")
    return path
