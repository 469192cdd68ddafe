"""The paper's five tasks behind one interface (:class:`Task`): batches, loss, metric.

``make_task(name, **options)`` builds one: ``addition`` (digits), ``memorization``
(symbols), ``enwik8`` (path, data_dir, seq_len), ``mnist`` and ``pmnist`` (source,
data_dir, perm_seed). Each module's docstring walks through one encoded example.
"""

from __future__ import annotations

import inspect

from ..errors import UserError
from ..vocab import TASK_NAMES
from .addition import Addition
from .base import Batch, Stream, Task
from .enwik8 import Enwik8
from .memorization import Memorization
from .mnist import MNIST, PermutedMNIST

# Each task class by its name (the names and their order: tlstm_bench.vocab.TASK_NAMES).
TASKS: dict[str, type[Task]] = {cls.name: cls for cls in (Addition, Memorization, Enwik8, MNIST, PermutedMNIST)}
assert tuple(TASKS) == TASK_NAMES


def task_options(name: str) -> list[str]:
    """The keyword options the task ``name`` accepts."""
    return [p for p in inspect.signature(TASKS[name].__init__).parameters if p != "self"]


def _known(name: str, options: dict) -> type[Task]:
    if name not in TASKS:
        raise UserError(f"unknown task {name!r}; use one of {', '.join(TASKS)}")
    allowed = task_options(name)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise UserError(f"task {name} has no option {', '.join(unknown)}; its options are {', '.join(allowed)}")
    return TASKS[name]


def make_task(name: str, **options) -> Task:
    """Build a task by name; unknown names and options are one-line errors."""
    return _known(name, options)(**options)


def check_task_options(name: str, **options) -> None:
    """Validate a task's options as building it would, without reading a data file.

    The algorithmic tasks read none and are cheap to build (a 100-sample test set), so they are
    built: that also refuses a sample space the test set covers. The others check their
    options' types and ranges (:meth:`Task.check_options`).
    """
    cls = _known(name, options)
    if cls.online:
        cls(**options)
    else:
        cls.check_options(**options)


__all__ = ["Addition", "Batch", "Enwik8", "MNIST", "Memorization", "PermutedMNIST", "Stream", "TASKS", "Task",
           "check_task_options", "make_task", "task_options"]
