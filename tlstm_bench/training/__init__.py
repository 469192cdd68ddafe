"""Training: the loop with checkpoints and exact resume, and named presets.

``train(config, *, task, depth, ...) -> record`` (see :mod:`.loop`) and ``PRESETS``.
"""

from .checkpoint import CHECKPOINT_NAME, checkpoint_path
from .loop import LEARNING_RATE, train
from .presets import PRESETS, Preset, get_preset

__all__ = ["CHECKPOINT_NAME", "LEARNING_RATE", "PRESETS", "Preset", "checkpoint_path", "get_preset", "train"]
