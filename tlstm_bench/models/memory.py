"""Size bounds: the largest shapes a model may have, and the memory a run needs.

Both are checked before anything is allocated, so a size no machine can hold is a one-line
error at once instead of a hang or an allocator failure minutes later.

* **Shape limits** (:func:`.config.check_shape`; they live in :mod:`.config`, below the
  parameter counts and the builder that check them, which this module imports). K^(D-1)
  kernel entries and P^(D-1) locations at most 2^30 each (:data:`.config.MAX_ENTRIES`),
  every tensor dimension (M, R, S, L) at most 2^31 - 1 (:data:`tlstm_bench.checks.MAX_DIM`,
  torch's 32-bit index kernels). The powers are compared through logarithms, so
  ``tlstm:dims=100000000`` is refused without computing 3^(D-1), a number of 48 million
  digits. No model that fits a machine comes near these limits; they keep every
  count an ordinary number.
* **Memory** (:func:`run_memory`, :func:`check_fits`). A lower estimate of the bytes one
  forward + backward pass holds at its peak, from D, K, L, M, T, the batch and the dtype:
  parameters and their gradients (with Adam's two moments when training), the input, the
  logits with their gradient, and the per-step buffers of the sequence loop (the ``fast``
  tLSTM keeps, for each of the T + L - 1 steps and each of the P^(D-1) locations, the
  hidden and memory states, the gate activations (4M, plus K^(D-1) memory-kernel
  channels) and their gradients; the sLSTM keeps its gates and states for each of the
  T * L layer steps). Other implementations hold at least as much. A run whose estimate is
  above the memory available (free RAM, or free GPU memory on CUDA) is refused with the
  estimate in the error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from ..vocab import DEFAULT_DTYPE, DTYPE_BYTES
from .budget import count_params
from .build import resolve_channels, resolve_io
from .config import ArchConfig, check_shape, parse_config


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a run holds at its peak (a lower estimate), by part."""

    weights: int      # parameters, gradients, and Adam's moments when training
    activations: int  # the sequence loop's per-step buffers, kept for the backward pass
    data: int         # the input, the logits and their gradient

    @property
    def total(self) -> int:
        return self.weights + self.activations + self.data

    def describe(self) -> str:
        return (f"{human_bytes(self.total)} (weights {human_bytes(self.weights)}, activations "
                f"{human_bytes(self.activations)}, input and output {human_bytes(self.data)})")


def human_bytes(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} PB"  # pragma: no cover


def run_memory(arch: ArchConfig, depth: int, *, channels: int, input_size: int, output_size: int,
               tokens: bool, params: int, batch: int, seq_len: int, dtype: str = DEFAULT_DTYPE,
               optimizer: bool = False, backward: bool = True) -> MemoryEstimate:
    """A lower estimate of the peak bytes of one pass (see the module docstring).

    ``params``: the model's parameter count (``count_params(...).total``). ``optimizer``: Adam's
    two moments are held too (training). ``backward``: the pass is differentiated (a forward
    without gradients, an evaluation, keeps the forward buffers only).
    """
    e = DTYPE_BYTES[dtype]
    m, b, t = channels, batch, seq_len
    weights = params * e * ((2 if backward else 1) + (2 if optimizer else 0))
    data = b * t * (8 if tokens else input_size * e) + b * t * output_size * e * (3 if backward else 1)
    if arch.kind != "tlstm":
        # gates (4M), c and h of every layer at every step
        per_step = b * depth * 6 * m
        steps = t
    else:
        n, kd = arch.tensor_size(depth) ** (arch.dims - 1), arch.kernel_entries
        gates = 4 * m + (kd if arch.memory_conv else 0)
        # forward: [0, z, h] slots, c, gate activations, tanh(N(c)), the convolved c
        forward = (2 + n) * m + n * m + n * gates + n * m + (n * m if arch.memory_conv else 0)
        # backward: the gradients of the slots, of c and of the pre-activations
        per_step = b * (forward + ((2 + n) * m + n * m + n * gates if backward else 0))
        steps = t + depth - 1
        data += 2 * n * kd * 8  # the gather index maps (int64)
    return MemoryEstimate(weights, steps * per_step * e + b * steps * m * e, data)


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_room() -> int | None:
    """What a cgroup v2 memory limit still allows this process (a container's real limit)."""
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
    except (OSError, ValueError):
        return None
    return None if limit == "max" else max(0, int(limit) - used)


def available_memory(device: str = "cpu") -> tuple[int, str] | None:
    """(bytes, what they are) a new allocation may still use on ``device``; None when unknown."""
    if str(device).startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return free, f"free memory on {device}"
    known = [v for v in (_meminfo_available(), _cgroup_room()) if v is not None]
    return (min(known), "available RAM") if known else None


def check_fits(estimate: MemoryEstimate, device: str, what: str, advice: str) -> None:
    """A one-line error when ``estimate`` is above the memory available on ``device``."""
    room = available_memory(device)
    if room is not None and estimate.total > room[0]:
        raise UserError(f"{what} needs at least {estimate.describe()}, more than the {human_bytes(room[0])} "
                        f"of {room[1]}; {advice}")


def model_memory(config, depth: int, *, channels: int | None = None, budget=None, vocab: int | None = None,
                 input_size: int | None = None, output_size: int | None = None, batch: int, seq_len: int,
                 dtype: str = DEFAULT_DTYPE, optimizer: bool = False, backward: bool = True) -> MemoryEstimate:
    """:func:`run_memory` of the model ``build_model`` would build from these arguments, without
    building it (the shape limits and the model's own arguments are checked first)."""
    arch = parse_config(config)
    check_shape(arch, depth)
    r, s, tokens = resolve_io(vocab, input_size, output_size)
    m = resolve_channels(arch, depth, channels, budget, r, s)
    params = count_params(arch, depth, m, r, s).total
    return run_memory(arch, depth, channels=m, input_size=r, output_size=s, tokens=tokens, params=params,
                      batch=batch, seq_len=seq_len, dtype=dtype, optimizer=optimizer, backward=backward)
