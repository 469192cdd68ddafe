"""``triton``: the tLSTM sequence as fused Triton kernels, forward and backward.

Same computation as ``eager`` (:mod:`tlstm_bench.models.tlstm`, SPEC section 3) and the same
structure as ``fast``: one autograd Function over the whole (T+L-1)-step sequence,
preallocated buffers, a hand-written backward, and the gradient of W^h deferred to one
product over all steps. A step of every location (window gather, W^h product, activations,
softmax Q, memory-cell convolution, LN/CN, new c) is one step body (``forward.py``,
``backward.py``), run two ways:

* one kernel launch per step forward and backward (``forward_step``, ``backward_step``): the
  launches are the only barrier between programs, so every cross-program reduction (LN/CN
  statistics, the Q gradient) is deferred to the next launch, which waits anyway;
* one launch per sequence each way (``forward_persistent``, ``backward_persistent``): the
  same body in a loop over the steps with a grid barrier (atomics, ``common.grid_barrier``)
  where a launch boundary was. It needs every program resident: a cooperative launch, the
  grid no larger than the GPU's SMs. Used for float32 wherever that holds, unless the tuning
  table measured per step faster (``launch.Geometry`` decides; ``TLSTM_TRITON_PERSISTENT=0/1``
  forces either); the interpreter runs it only with one program (tests).

Tiles come per shape from a menu and a tuning table (``tiles.py``). float32 and float64
(float64 through a broadcast product the GPU compiler accepts in every Triton version, for
correctness checks). docs/triton.md has the design, the coverage and what was measured.

Package layout: ``common`` (device helpers, the barrier), ``forward``/``backward`` (the bodies
and their kernels), ``tiles`` (menu, table), ``launch`` (geometry, path, launches),
``autograd`` (the Function, the deferred products, ``run_triton``).
"""

from .autograd import TritonSequence, check_runnable, run_triton
from .common import INTERPRETED
from .launch import (Geometry, cooperative_launch_supported, forced, persistent_possible)
from .launch import _inverse_maps  # noqa: F401  (tests)

__all__ = ["Geometry", "INTERPRETED", "TritonSequence", "check_runnable", "cooperative_launch_supported",
           "forced", "persistent_possible", "run_triton"]
