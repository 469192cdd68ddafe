"""Character-level language modelling on enwik8 (paper section 3.1), metric BPC.

The file is the first 10^8 bytes of an English Wikipedia dump (the Hutter Prize
file), read raw or from ``enwik8.zip``. It is split by position into 90% / 5% / 5%
train / valid / test (exactly 90M / 5M / 5M for the real file; proportional for the
small files the tests write).

Symbols: each byte value that occurs anywhere in the file gets a token, in byte
order (205 for enwik8, as in the paper, so the models' input and output size is
205). Mapping to the symbols that occur (rather than to all 256 byte values) keeps
the paper's vocabulary; since the map is built from the whole file, valid and test
have no unknown symbol.

Batches (paper appendix): the training split is cut into B = 100 contiguous streams;
minibatch i holds, from every stream, the subsequence at offset 50*i and its
next-character targets. For the text ``"<page>..."`` (bytes 60 112 97 ...) with
length 3, stream 0 would give x = ``<pa`` and y = ``pag``. The recurrent state at the
end of a minibatch starts the next one (detached: truncated BPTT), and starts from
zero at the beginning of every epoch. One training sample is one subsequence of 50
characters. Evaluation runs the whole valid or test split the same way (state
carried, 100 streams; the fewer than 100 trailing characters that do not fill the
streams are dropped) and reports bits per character = mean NLL / ln 2.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from .. import checks
from ..errors import UserError
from .base import LN2, Batch, Stream, Task
from .data import ENWIK8_SIZE, resolve_data_dir

SPLIT = (0.90, 0.05, 0.05)
NAMES = ("enwik8", "enwik8.zip")


def find_enwik8(path: "str | Path | None" = None, data_dir: "str | Path | None" = None) -> Path:
    """The enwik8 file: ``path`` if given, else ``enwik8`` or ``enwik8.zip`` in the data dir."""
    if path is not None:
        path = Path(path).expanduser()
        if not path.is_file():
            raise UserError(f"enwik8 file {path} does not exist; pass the path of enwik8 or enwik8.zip")
        return path
    folder = resolve_data_dir(data_dir, "enwik8")
    for name in NAMES:
        if (folder / name).is_file():
            return folder / name
    raise UserError(f"no enwik8 or enwik8.zip in {folder}; fetch it with "
                    f"`tlstm-bench data download enwik8 --data-dir {folder}` or pass --data-dir")


def read_bytes(path: Path) -> bytes:
    """The file's bytes; a ``.zip`` gives its ``enwik8`` member (or its only member)."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                names = zf.namelist()
                member = "enwik8" if "enwik8" in names else (names[0] if len(names) == 1 else None)
                if member is None:
                    raise UserError(f"{path} holds {len(names)} files and none is named enwik8; "
                                    "pass the raw enwik8 file or its zip")
                return zf.read(member)
        if path.suffix == ".zip":
            raise UserError(f"{path} is not a valid zip file (truncated or corrupt); download it again")
        return path.read_bytes()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as exc:
        raise UserError(f"cannot read {path}: {exc}; download it again") from None


class SplitStream(Stream):
    """Minibatches of ``batch_size`` streams x ``seq_len`` characters, in order, epoch after epoch."""

    def __init__(self, data: torch.Tensor, batch_size: int, seq_len: int):
        self.streams = batchify(data, batch_size)  # (B, N)
        self.seq_len = seq_len
        self.offset = 0
        self.epoch = 0

    def next(self) -> Batch:
        if self.offset + 1 >= self.streams.shape[1]:
            self.offset = 0
            self.epoch += 1
        i, end = self.offset, min(self.offset + self.seq_len, self.streams.shape[1] - 1)
        self.offset = end
        return Batch(self.streams[:, i:end], self.streams[:, i + 1:end + 1], reset=i == 0)

    def state_dict(self) -> dict:
        return {"offset": self.offset, "epoch": self.epoch}

    def load_state_dict(self, state: dict) -> None:
        self.offset, self.epoch = state["offset"], state["epoch"]


def batchify(data: torch.Tensor, batch_size: int) -> torch.Tensor:
    """(N,) tokens -> (B, N // B): B contiguous streams, the remainder dropped."""
    length = data.shape[0] // batch_size
    return data[:length * batch_size].view(batch_size, length)


class Enwik8(Task):
    name = "enwik8"
    metric = "bpc"
    stateful = True
    forget_bias = 1.0
    batch_size = 100
    sample_unit = "subsequence"

    def __init__(self, *, path: "str | Path | None" = None, data_dir: "str | Path | None" = None,
                 seq_len: int = 50, eval_chars: int | None = None):
        self.check_options(seq_len=seq_len, eval_chars=eval_chars)
        self.seq_len = seq_len
        self.eval_chars = eval_chars
        self.path = find_enwik8(path, data_dir)
        raw = np.frombuffer(read_bytes(self.path), dtype=np.uint8)
        if raw.size < 200 * seq_len:
            raise UserError(f"{self.path} has only {raw.size} bytes; too short (or truncated) for a "
                            f"90/5/5 split into subsequences of {seq_len}; download it again")
        present = np.flatnonzero(np.bincount(raw, minlength=256))
        self.symbols = present.tolist()  # token i is byte value symbols[i]
        lookup = np.zeros(256, dtype=np.int64)
        lookup[present] = np.arange(present.size)
        tokens = torch.from_numpy(lookup[raw])
        n = tokens.shape[0]
        a, b = int(n * SPLIT[0]), int(n * (SPLIT[0] + SPLIT[1]))
        self.splits = {"train": tokens[:a], "valid": tokens[a:b], "test": tokens[b:]}

    @classmethod
    def check_options(cls, *, seq_len: int = 50, eval_chars: int | None = None, **files) -> None:
        checks.integer(seq_len, "--seq-len", maximum=ENWIK8_SIZE)
        if eval_chars is not None:
            checks.integer(eval_chars, "eval_chars", maximum=ENWIK8_SIZE)

    @property
    def vocab(self) -> int:
        return len(self.symbols)

    def options(self) -> dict:
        return {"path": str(self.path), "seq_len": self.seq_len, "eval_chars": self.eval_chars}

    def describe(self) -> dict:
        return {"vocab": self.vocab, "chars": {k: int(v.shape[0]) for k, v in self.splits.items()}}

    def model_io(self) -> dict:
        return {"vocab": self.vocab}

    def epoch_samples(self, batch_size: int) -> int:
        steps = -(-(self.splits["train"].shape[0] // batch_size - 1) // self.seq_len)
        return steps * batch_size

    def default_eval_every(self, batch_size: int) -> int:
        # ten evaluations an epoch (every 1800 minibatches, 9M characters, on the real file)
        return max(batch_size, self.epoch_samples(batch_size) // (10 * batch_size) * batch_size)

    def train_stream(self, batch_size: int, seed: int) -> Stream:
        return SplitStream(self.splits["train"], batch_size, self.seq_len)

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.y.reshape(-1))

    @torch.no_grad()
    def evaluate(self, model, split: str, *, device="cpu", batch_size: int = 100) -> dict:
        data = self.splits[split]
        if self.eval_chars is not None and split == "valid":
            data = data[:self.eval_chars + 1]
        batch_size = max(1, min(batch_size, data.shape[0] // (2 * self.seq_len)))
        stream = SplitStream(data, batch_size, self.seq_len)
        was_training = model.training
        model.eval()
        total, count, state = 0.0, 0, None
        try:
            while True:
                batch = stream.next()
                if stream.epoch:
                    break
                logits, state = model(batch.x.to(device), state)
                total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.y.to(device).reshape(-1),
                                         reduction="sum").item()
                count += batch.y.numel()
        finally:
            model.train(was_training)
        return {"metric": total / count / LN2, "loss": total / count, "chars": count}
