"""The project's vocabulary: every name and default that more than one layer uses, defined once.

The models, tasks, timing, training, sweeps, plotting and the CLI all read their shared names
and defaults from here, so that two copies cannot drift apart. Nothing here imports torch
(:func:`torch_device` imports it when called), so the CLI, ``plot`` and ``results`` can use it
at start-up.

* configurations: the seven presets' names in the paper's order (SPEC section 6) and the
  paper's name for each;
* implementations: which sequence loop runs when none is named, and which need CUDA;
* tasks: their names, and what the models read and write for each when no data is at hand;
* runtime measurement: the protocol's defaults (SPEC section 8), and how CPU threads wait;
* training: the paper's learning rate (SPEC section 9);
* devices: the one parser of ``cpu``, ``cuda`` and ``cuda:N``.
"""

from __future__ import annotations

import os

from .errors import UserError

# ---- configurations (SPEC section 6) --------------------------------------------------------
CONFIG_NAMES = ("slstm", "2d", "2d-m", "2d-f", "3d", "3d-ln", "3d-cn")  # the paper's order
PAPER_NAMES = {
    "slstm": "sLSTM",
    "2d": "2D tLSTM",
    "2d-m": "2D tLSTM-M",
    "2d-f": "2D tLSTM-F",
    "3d": "3D tLSTM",
    "3d-ln": "3D tLSTM+LN",
    "3d-cn": "3D tLSTM+CN",
}

# Anchors: models that are not among the paper's seven, shown beside them so a reader sees what
# the usual alternative costs (marked as such in tables and figures). ``lstm``: the untied
# stacked LSTM, torch.nn.LSTM(M, M, num_layers=L), "what a user would pick instead".
ANCHOR_NAMES = {"lstm": "stacked LSTM (untied, not in the paper)"}

# ---- implementations (the sequence loops; the registries in tlstm_bench.models name them all) --
# What runs when no implementation is named, by build_model, timing, training and sweeps alike:
# the fastest correct path measured on a CPU (results/evidence/REPORT.md). Each is tested
# against the slow oracle for outputs and gradients (tests/test_equivalence.py).
DEFAULT_IMPLEMENTATION = {"tlstm": "fast", "slstm": "fused", "lstm": "cudnn"}
# The slow, obvious loop every other implementation is tested against.
ORACLE_IMPLEMENTATION = {"tlstm": "reference", "slstm": "loop", "lstm": "loop"}
# Implementations that run only on a CUDA device (``time ... --implementation all`` leaves them
# out on a CPU).
CUDA_IMPLEMENTATIONS = frozenset({"cuda-graph", "triton", "triton-graph"})
# Ways of running a whole training step rather than sequence loops of a model: the timing
# protocol builds the model with the loop named here and captures its forward + loss +
# backward as one CUDA graph (tlstm_bench.models.cuda_graph.GraphedStep). Without CUDA each
# says to use its loop instead.
GRAPHED_IMPLEMENTATIONS = {"cuda-graph": "fast", "triton-graph": "triton"}
# The precision of the products in float32 (docs/triton.md, "Precision"): "ieee", plain float32
# (no TF32), what every implementation computes and the default, so the paper's numbers stay
# comparable; "tf32x3" (three TF32 tensor-core products, close to float32) and "tf32" (one,
# about 3 decimal digits per product) only in the ``triton`` kernels' tl.dot tiles (``triton``,
# and ``triton-graph``, which captures them).
PRECISIONS = ("ieee", "tf32x3", "tf32")
DEFAULT_PRECISION = "ieee"
PRECISION_IMPLEMENTATIONS = frozenset({"triton", "triton-graph"})  # those that take a precision other than ieee


def check_precision(precision, implementation: str | None, what: str = "--precision") -> str:
    """``precision`` if ``implementation`` (None: the default, never a triton one) can run at it;
    a one-line error otherwise."""
    if precision not in PRECISIONS:
        raise UserError(f"{what} must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision != DEFAULT_PRECISION and implementation not in PRECISION_IMPLEMENTATIONS:
        raise UserError(f"{what} {precision} runs only in the triton kernels (tensor cores); "
                        f"add --implementation triton, or use {what} {DEFAULT_PRECISION}")
    return precision

# ---- tasks (paper section 3, SPEC section 9) ------------------------------------------------
TASK_NAMES = ("addition", "memorization", "enwik8", "mnist", "pmnist")
# enwik8 has 205 distinct byte values (paper section 3.1): the token vocabulary of its models,
# and the vocabulary runtime measurements use when none is given (the paper's 10M setting).
ENWIK8_SYMBOLS = 205
# MNIST and pMNIST read one pixel per step and predict one of ten digits.
MNIST_IO = {"input_size": 1, "output_size": 10}
# What a task's model reads and writes when its data files are absent (a runtime cell needs
# only the sizes).
TASK_IO_WITHOUT_DATA = {"enwik8": {"vocab": ENWIK8_SYMBOLS}, "mnist": MNIST_IO, "pmnist": MNIST_IO}
# The test sets the paper measures on (SPEC section 9): 100 samples of an algorithmic task (the
# default test_size), MNIST's t10k images, enwik8's last 5% of its 10^8 bytes. A result on a
# smaller one (a smaller test_size is easier to solve; a toy data file) is not the paper's
# measurement: ``claims`` does not count it.
ALGORITHMIC_TASKS = ("addition", "memorization")  # generated online; solved or not (samples to solve)
ALGORITHMIC_TEST_SIZE = 100
PAPER_TEST_SIZES = {**dict.fromkeys(ALGORITHMIC_TASKS, ALGORITHMIC_TEST_SIZE),
                    "mnist": 10_000, "pmnist": 10_000, "enwik8": 5_000_000}

# ---- runtime measurement (SPEC section 8) ---------------------------------------------------
TIMING_VOCAB = ENWIK8_SYMBOLS
TIMING_SEQ_LEN = 100     # T
TIMING_REPEATS = 20      # timed runs per case: 20 interleaved rounds let the sign test order two
                         # depths when 15 of their 20 paired ratios agree (10 rounds: 9 of 10)
TIMING_WARMUP = 3        # untimed runs per case first
DTYPE_BYTES = {"float32": 4, "float64": 8}  # the dtypes a run may use (timing, sweeps), and their size
DTYPES = tuple(DTYPE_BYTES)
DEFAULT_DTYPE = "float32"
MAX_REPEATS = 100_000    # timed or warm-up runs per case; more is a typo, not a measurement
# What one timed run is, in the words every table, figure and doc uses (SPEC section 8).
TIMED_PASS = "forward + loss + backward"
CPU_THREADS = 1          # CPU threads of a measurement unless asked: more threads on a shared
                         # machine wait for each other (2 threads beside a busy core: L2/L1 = 0.19)
# On a CPU each sample is the mean of enough back-to-back runs to last this long: a small model's
# run lasts about a millisecond, and on a shared machine one scheduler preemption is then the whole
# sample (single runs gave 0.04 and 0.5-1.4 ms/step for the same case at a load of ~10 on 2 cores).
CPU_MIN_SAMPLE_S = 0.05
# A record whose samples had less than this share of their wall time on the CPU (the process's CPU
# time over wall time x threads, median over the samples) was timed on a busy machine: the timing
# warns, and with more than one thread its depths are not ordered (results.view.contended).
CONTENDED_SHARE = 0.75

# How OpenMP's idle threads wait between parallel regions (torch's CPU threads: GNU OpenMP on
# Linux). By default a thread that is done spins for about 3 ms, so on a machine where another job
# holds a core every parallel region waits for the thread the scheduler took away: `train` at 2
# threads beside one training process ran 6-25x slower than at 1 thread; with PASSIVE (a waiting
# thread sleeps at once) it stayed within 8-16% of 1 thread, and cost 6-12% on an idle machine
# (benchmarks/omp_wait.py; docs/tasks.md, "Threads on a shared machine"). The CLI and the sweep
# cells set it before torch loads, unless the environment already does.
OMP_WAIT_POLICY = "PASSIVE"


def default_omp_wait_policy(environ=None) -> None:
    """Set ``OMP_WAIT_POLICY`` to :data:`OMP_WAIT_POLICY` in ``environ`` (``os.environ``) unless it
    is set. OpenMP reads it once, when torch loads: call this before anything imports torch."""
    (os.environ if environ is None else environ).setdefault("OMP_WAIT_POLICY", OMP_WAIT_POLICY)


# ---- training (SPEC section 9: Adam at 1e-3) ------------------------------------------------
LEARNING_RATE = 1e-3

# ---- devices --------------------------------------------------------------------------------
DEVICES = "cpu, cuda or cuda:N"


def parse_device(device, what: str = "--device") -> str:
    """``cpu``, ``cuda`` or ``cuda:N`` as given; a one-line error for anything else.

    Reads text only (no torch): whether this machine has that device is
    :func:`torch_device`'s question.
    """
    text = device if isinstance(device, str) else str(device)
    if text in ("cpu", "cuda") or (text.startswith("cuda:") and text[5:].isdigit()):
        return text
    raise UserError(f"{what} must be {DEVICES}, got {device!r}")


def gpu_count() -> int:
    """The CUDA devices torch can use here (0 without a usable GPU). Imports torch."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def missing_gpu(device: str) -> str | None:
    """Why ``device`` (already parsed) cannot be used on this machine, or None when it can."""
    if not device.startswith("cuda"):
        return None
    count = gpu_count()
    index = int(device[5:]) if device.startswith("cuda:") else 0
    if index < count:
        return None
    return (f"only {count} GPU(s)" if count else
            "no usable GPU (CUDA is not available: torch.cuda.is_available() is False)")


def torch_device(device, what: str = "--device"):
    """The ``torch.device`` for ``cpu``, ``cuda`` or ``cuda:N``, refused with one line when this
    machine lacks it. Imports torch."""
    import torch

    text = parse_device(device, what)
    why = missing_gpu(text)
    if why is not None:
        raise UserError(f"{what} {text} was asked for, but this machine has {why}; use {what} cpu")
    return torch.device(text)
