"""Training: the loop with checkpoints and exact resume, its settings, and named presets.

``train(settings) -> record`` (see :mod:`.loop`), :class:`TrainSettings` (:mod:`.settings`)
and ``PRESETS`` (:mod:`.presets`).
"""

from ..vocab import LEARNING_RATE
from .checkpoint import CHECKPOINT_NAME, RunState, checkpoint_path
from .loop import Trainer, train
from .presets import PRESETS, Preset, get_preset
from .settings import TrainSettings

__all__ = ["CHECKPOINT_NAME", "LEARNING_RATE", "PRESETS", "Preset", "RunState", "TrainSettings", "Trainer",
           "checkpoint_path", "get_preset", "train"]
