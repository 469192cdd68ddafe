"""Sequential MNIST and permuted MNIST (paper section 3.3), metric: accuracy.

An image is read one pixel per timestep in scanline order (784 steps of a 1-dimensional
real input, the grey level scaled to [0, 1]); the class is read from the output at the
last step only (the loss is computed there too). For pMNIST the pixels are first
reordered by one fixed random permutation (``perm_seed``; the same for every run). For
a 2x2 image [[0, 255], [128, 0]] the input is the sequence 0.0, 1.0, 0.502, 0.0 and
the target the label at step 4; with permutation (2, 0, 3, 1) it is 0.502, 0.0, 0.0, 1.0.

Sources (``source``):

* ``idx`` (default): the standard IDX files ``train-images-idx3-ubyte``,
  ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``
  (each raw or ``.gz``) in the data directory (or its ``mnist/`` or ``MNIST/raw/``
  folder). The 60000 training images are split into the first 50000 for training and
  the last 10000 for validation (the last sixth, for smaller files); test is t10k.
* ``digits``: scikit-learn's 8x8 handwritten digits (1797 real images, shipped with
  the package, so it runs offline): 64-step sequences, grey levels 0..16 scaled to
  [0, 1], shuffled once with a fixed seed and split 1257 / 270 / 270.

Training visits the training images in a fresh random order every epoch (a pure
function of the seed and the epoch number, so a resumed run sees the same order).
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from .. import checks
from ..errors import UserError
from ..vocab import MNIST_IO
from .base import Batch, Stream, Task, epoch_generator
from .data import resolve_data_dir

PERM_SEED = 0
DIGITS_SPLIT_SEED = 0
IDX_NAMES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
_IDX_TYPES = {0x08: np.uint8}


def read_idx(path: "str | Path") -> np.ndarray:
    """An IDX file (raw or gzip) as a uint8 array; a one-line error naming a corrupt file."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise UserError(f"cannot read {path}: {exc} (truncated or corrupt); download it again") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES or not 1 <= raw[3] <= 3:
        raise UserError(f"{path} is not an unsigned-byte IDX file (bad header); download it again")
    ndim = raw[3]
    if len(raw) < 4 + 4 * ndim:
        raise UserError(f"{path} is truncated (header cut short); download it again")
    shape = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    body = raw[4 + 4 * ndim:]
    expected = int(np.prod(shape))
    if len(body) != expected:
        raise UserError(f"{path} is truncated or corrupt: its header promises {expected} bytes of data, "
                        f"it holds {len(body)}; download it again")
    return np.frombuffer(body, dtype=np.uint8).reshape(shape)


def find_idx(folder: Path) -> dict[str, Path]:
    """The four IDX files in ``folder`` (or ``folder/mnist``, ``folder/MNIST/raw``), raw or .gz."""
    found, missing = {}, []
    for key, name in IDX_NAMES.items():
        for sub in (folder, folder / "mnist", folder / "MNIST" / "raw"):
            hits = [sub / n for n in (name, name + ".gz") if (sub / n).is_file()]
            if hits:
                found[key] = hits[0]
                break
        else:
            missing.append(name)
    if missing:
        raise UserError(f"MNIST files missing in {folder}: {', '.join(missing)} (raw or .gz); fetch them with "
                        f"`tlstm-bench data download mnist --data-dir {folder}` or use --source digits offline")
    return found


def load_idx_splits(data_dir) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """{split: (images (N, 784) float in [0, 1], labels (N,) int64)} from the IDX files."""
    files = find_idx(resolve_data_dir(data_dir, "mnist"))
    arrays = {key: read_idx(path) for key, path in files.items()}
    for part in ("train", "test"):
        images, labels = arrays[f"{part}_images"], arrays[f"{part}_labels"]
        if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
            raise UserError(f"{files[part + '_images']} and {files[part + '_labels']} do not match "
                            f"({images.shape} images, {labels.shape} labels); download them again")
        if labels.max(initial=0) > 9:
            raise UserError(f"{files[part + '_labels']} has labels above 9; it is not an MNIST label file")
    train_x = torch.from_numpy(arrays["train_images"].reshape(len(arrays["train_images"]), -1).astype(np.float32) / 255)
    train_y = torch.from_numpy(arrays["train_labels"].astype(np.int64))
    test_x = torch.from_numpy(arrays["test_images"].reshape(len(arrays["test_images"]), -1).astype(np.float32) / 255)
    test_y = torch.from_numpy(arrays["test_labels"].astype(np.int64))
    n_valid = len(train_y) // 6  # 10000 of 60000
    if n_valid < 1:
        raise UserError(f"{files['train_images']} has {len(train_y)} images; too few for a validation split")
    cut = len(train_y) - n_valid
    return {"train": (train_x[:cut], train_y[:cut]), "valid": (train_x[cut:], train_y[cut:]),
            "test": (test_x, test_y)}


def load_digits_splits() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """scikit-learn's 8x8 digits, shuffled once and split 1257 / 270 / 270."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise UserError("the offline digits need scikit-learn: pip install 'tlstm-bench[digits]'") from None
    digits = load_digits()
    x = torch.from_numpy(digits.data.astype(np.float32) / 16.0)  # (1797, 64), grey levels 0..16
    y = torch.from_numpy(digits.target.astype(np.int64))
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(DIGITS_SPLIT_SEED))
    x, y = x[order], y[order]
    n_hold = 270
    return {"train": (x[:-2 * n_hold], y[:-2 * n_hold]), "valid": (x[-2 * n_hold:-n_hold], y[-2 * n_hold:-n_hold]),
            "test": (x[-n_hold:], y[-n_hold:])}


class ShuffledStream(Stream):
    """Minibatches over a fixed training set, reshuffled every epoch."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int):
        self.x, self.y, self.batch_size, self.seed = x, y, batch_size, seed
        self.epoch, self.index = 0, 0
        self._order = None

    def order(self) -> torch.Tensor:
        if self._order is None:
            self._order = torch.randperm(len(self.y), generator=epoch_generator(self.seed, self.epoch))
        return self._order

    def next(self) -> Batch:
        if self.index >= len(self.y):
            self.epoch, self.index, self._order = self.epoch + 1, 0, None
        rows = self.order()[self.index:self.index + self.batch_size]
        self.index += len(rows)
        return Batch(self.x[rows].unsqueeze(-1), self.y[rows])

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.index, self._order = state["epoch"], state["index"], None


class MNIST(Task):
    name = "mnist"
    metric = "accuracy"
    forget_bias = 4.0
    batch_size = 50
    sample_unit = "image"
    permuted = False

    def __init__(self, *, source: str = "idx", data_dir=None, perm_seed: int = PERM_SEED,
                 eval_batch_size: int = 500):
        self.check_options(source=source, perm_seed=perm_seed, eval_batch_size=eval_batch_size)
        self.source, self.perm_seed, self.eval_batch_size = source, perm_seed, eval_batch_size
        self.splits = load_idx_splits(data_dir) if source == "idx" else load_digits_splits()
        pixels = self.splits["train"][0].shape[1]
        self.permutation = None
        if self.permuted:
            self.permutation = torch.randperm(pixels, generator=torch.Generator().manual_seed(perm_seed))
            self.splits = {k: (x[:, self.permutation], y) for k, (x, y) in self.splits.items()}

    @classmethod
    def check_options(cls, *, source: str = "idx", perm_seed: int = PERM_SEED, eval_batch_size: int = 500,
                      **files) -> None:
        if source not in ("idx", "digits"):
            raise UserError(f"unknown --source {source!r}; use idx (the MNIST files) or digits (offline 8x8)")
        checks.seed(perm_seed, "--perm-seed")
        checks.integer(eval_batch_size, "eval_batch_size", maximum=1_000_000)

    @property
    def seq_len(self) -> int:
        return self.splits["train"][0].shape[1]

    def options(self) -> dict:
        opts = {"source": self.source}
        if self.permuted:
            opts["perm_seed"] = self.perm_seed
        return opts

    def describe(self) -> dict:
        return {"seq_len": self.seq_len, "sizes": {k: len(v[1]) for k, v in self.splits.items()}}

    def model_io(self) -> dict:
        return dict(MNIST_IO)

    def epoch_samples(self, batch_size: int) -> int:
        return len(self.splits["train"][1])

    def default_eval_every(self, batch_size: int) -> int:
        return self.epoch_samples(batch_size)  # once an epoch

    def train_stream(self, batch_size: int, seed: int) -> Stream:
        x, y = self.splits["train"]
        return ShuffledStream(x, y, batch_size, seed)

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(logits[:, -1], batch.y)  # the paper: loss at the last timestep

    @torch.no_grad()
    def evaluate(self, model, split: str, *, device="cpu") -> dict:
        x, y = self.splits[split]
        was_training = model.training
        model.eval()
        right, total_loss = 0, 0.0
        try:
            for i in range(0, len(y), self.eval_batch_size):
                logits, _ = model(x[i:i + self.eval_batch_size].unsqueeze(-1).to(device))
                last = logits[:, -1].cpu()
                target = y[i:i + self.eval_batch_size]
                right += (last.argmax(-1) == target).sum().item()
                total_loss += F.cross_entropy(last, target, reduction="sum").item()
        finally:
            model.train(was_training)
        return {"metric": right / len(y), "loss": total_loss / len(y)}


class PermutedMNIST(MNIST):
    name = "pmnist"
    permuted = True
