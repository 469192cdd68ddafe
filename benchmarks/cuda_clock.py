"""The clock of the device scripts (``triton_tune.py``, ``triton_session.py``): one call timed
with CUDA events on a GPU, with ``perf_counter`` in a CPU dry run. Import it from a script run
as ``python3 benchmarks/<script>.py`` (its folder is then on ``sys.path``)."""

from __future__ import annotations

import time

import torch


def sync(device: str) -> None:
    """Wait for the GPU's queued work (nothing to wait for on a CPU)."""
    if device == "cuda":
        torch.cuda.synchronize()


def timed_ms(fn, device: str) -> float:
    """Milliseconds of one ``fn()``: between two CUDA events recorded around it on a GPU (the
    GPU's time, the host's queueing excluded once the queue is ahead), wall time on a CPU."""
    if device != "cuda":
        start = time.perf_counter()
        fn()
        return 1000 * (time.perf_counter() - start)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)
