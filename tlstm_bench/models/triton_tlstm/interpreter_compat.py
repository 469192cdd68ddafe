"""Triton 3.6 and 3.7's CPU interpreter with NumPy 2.5: one fix, applied only where needed.

The interpreter hands a kernel's runtime integer arguments to it as one-element arrays, and a
loop bound such as ``tl.range(0, KD)`` turns one into a Python int with ``int(data)``. NumPy 2.5
made ``int()`` of a one-element array of one dimension an error (``TypeError: only
0-dimensional arrays can be converted to Python scalars``), so every kernel with a runtime loop
bound fails under ``TRITON_INTERPRET=1``. Triton 3.8 converts ``data.squeeze()`` instead. torch
2.11's CUDA wheels pin Triton 3.6 and, on Python 3.12 and newer, pip picks NumPy 2.5: the GPU
machine's own stack could not run this package's interpreter tests without this.

:func:`apply` wraps the interpreter's tensor patch so that ``__index__`` squeezes first, as
Triton 3.8 does. Compiled kernels never go through it; other Triton versions are left alone.
"""

from __future__ import annotations

import numpy as np

# Triton versions whose interpreter converts with int(data): 3.6 and 3.7 (3.8 squeezes).
AFFECTED = ((3, 6), (3, 7))


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def needed(triton_version: str, numpy_version: str) -> bool:
    """Whether this Triton's interpreter fails on this NumPy's scalar conversion."""
    return _version(triton_version) in AFFECTED and _version(numpy_version) >= (2, 5)


def _index(self) -> int:
    return int(self.handle.data.squeeze())


def apply() -> bool:
    """Patch the interpreter where :func:`needed` says so (idempotent); True if it did."""
    import triton
    from triton.runtime import interpreter

    if not needed(triton.__version__, np.__version__):
        return False
    original = interpreter._patch_lang_tensor
    if getattr(original, "tlstm_bench_compat", False):
        return True

    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", _index)  # restored with the rest after the call

    patch_lang_tensor.tlstm_bench_compat = True
    interpreter._patch_lang_tensor = patch_lang_tensor
    return True
