"""Broken implementations for the failure-containment tests of the timing API (tests/test_timing.py).

They are registered by a ``prepare`` function that ``measure_cases`` runs first in every process
it times in (module-level, so a spawned worker can unpickle it; this folder is on the worker's
sys.path as it is on pytest's).

* ``poison``: its first call raises a RuntimeError worded like a CUDA error and leaves the process
  "poisoned": every later call of ``fast`` in that process raises too. That is what a sticky CUDA
  error does (after a failed graph capture every CUDA call fails), without a GPU.
* ``crash``: the process dies (``os._exit``) on its 2nd call, as a segfault in a kernel would.
"""

from __future__ import annotations

import os

from tlstm_bench.models import TLSTM_IMPLEMENTATIONS

_STATE = {"poisoned": False, "calls": 0}


def _poison(model, z, state):
    _STATE["poisoned"] = True
    raise RuntimeError("CUDA error: an illegal memory access was encountered (simulated)")


def _crash(model, z, state):
    _STATE["calls"] += 1
    if _STATE["calls"] >= 2:
        os._exit(3)
    return _FAST(model, z, state)


def _fast_unless_poisoned(model, z, state):
    if _STATE["poisoned"]:
        raise RuntimeError("CUDA error: an illegal memory access was encountered (sticky, simulated)")
    return _FAST(model, z, state)


_FAST = TLSTM_IMPLEMENTATIONS["fast"]


def register_broken() -> None:
    """``prepare`` hook: register ``poison`` and ``crash``, and make ``fast`` fail once poisoned."""
    TLSTM_IMPLEMENTATIONS.update(poison=_poison, crash=_crash, fast=_fast_unless_poisoned)


def _fails(model, z, state):
    raise RuntimeError("CUDA error: an illegal memory access was encountered (simulated, not sticky)")


def register_failing() -> None:
    """Register ``fails``: raises on every call, and leaves the process healthy."""
    TLSTM_IMPLEMENTATIONS["fails"] = _fails


def unregister_broken() -> None:
    for name in ("poison", "crash", "fails"):
        TLSTM_IMPLEMENTATIONS.pop(name, None)
    TLSTM_IMPLEMENTATIONS["fast"] = _FAST
    _STATE.update(poisoned=False, calls=0)


def count_params(run, record) -> dict:
    """``inspect`` hook: a field computed in the process that holds the run."""
    return {"inspected_params": sum(p.numel() for p in run.model.parameters()), "inspected_pid": os.getpid()}
