"""Named training presets: small ones for a laptop CPU, and the paper's full settings.

A preset fills in whatever the caller leaves out (task options, channels or budget,
how long to train, batch size, evaluation interval, patience); anything the caller
gives wins. The paper's settings (SPEC section 9-10; paper appendix): Adam at 1e-3,
batch 15 / 100 / 50, 5M online samples for the algorithmic tasks, 50 epochs on enwik8
(no early stopping: "we terminate training after 50 epochs"), early stopping on MNIST;
M = 400 (addition), 100 (memorization, MNIST) for every configuration, read literally
(SPEC section 7; the budget-matched reading is ``--budget slstm:400``, which a caller's
budget selects over the preset's channels), 10M parameters on enwik8.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TypeVar

from ..errors import UserError

# A TrainSettings (:mod:`.settings`); not imported, even for type checking: settings imports
# this module, and fill needs only the fields it replaces.
_Settings = TypeVar("_Settings")


@dataclass(frozen=True)
class Preset:
    name: str
    tasks: tuple[str, ...]  # the tasks it applies to; the first is the default task
    description: str
    task_options: dict = field(default_factory=dict)
    channels: int | None = None
    budget: str | None = None
    max_samples: int | None = None
    epochs: int | None = None
    batch_size: int | None = None
    eval_every: int | None = None
    patience: int | None = None
    early_stopping: bool = True  # stop after `patience` evaluations without improvement (validated tasks)

    def fill(self, settings: _Settings) -> _Settings:
        """``settings`` with what they leave out taken from this preset; what they give wins.

        The model size (channels or budget) and the length (max_samples or epochs) are taken as
        pairs: a caller's budget replaces the preset's channels, a caller's epochs its samples.
        """
        s = settings
        size = {} if s.channels is not None or s.budget is not None else dict(channels=self.channels,
                                                                             budget=self.budget)
        length = {} if s.max_samples is not None or s.epochs is not None else dict(max_samples=self.max_samples,
                                                                                   epochs=self.epochs)
        return replace(s, task_options={**self.task_options, **s.task_options}, **size, **length,
                       batch_size=s.batch_size or self.batch_size, eval_every=s.eval_every or self.eval_every,
                       patience=s.patience or self.patience,
                       early_stopping=self.early_stopping if s.early_stopping is None else s.early_stopping)


PRESETS: dict[str, Preset] = {p.name: p for p in (
    # ---- small: minutes on a 2-core CPU ------------------------------------------
    Preset("memorization-small", ("memorization",), "3 symbols out of 8, M=32, at most 90K samples",
           task_options={"symbols": 3, "alphabet": 8}, channels=32, max_samples=90_000, eval_every=750),
    Preset("addition-small", ("addition",), "2-digit addition, M=32, at most 120K samples",
           task_options={"digits": 2}, channels=32, max_samples=120_000, eval_every=750),
    Preset("digits-small", ("mnist", "pmnist"), "offline 8x8 digits (64 steps), M=16, batch 16, 10 epochs",
           task_options={"source": "digits"}, channels=16, epochs=10, batch_size=16, patience=4),
    Preset("enwik8-small", ("enwik8",), "M=32, 2000 subsequences, validation on 100K characters",
           task_options={"eval_chars": 100_000}, channels=32, max_samples=2000, batch_size=20, eval_every=500),
    # ---- the paper's settings (a GPU) ---------------------------------------------
    Preset("paper-addition", ("addition",), "15 digits, M=400 (every configuration), 5M samples",
           task_options={"digits": 15}, channels=400, max_samples=5_000_000, batch_size=15),
    Preset("paper-memorization", ("memorization",), "20 symbols, M=100 (every configuration), 5M samples",
           task_options={"symbols": 20}, channels=100, max_samples=5_000_000, batch_size=15),
    Preset("paper-enwik8", ("enwik8",), "10M parameters, batch 100 x 50 characters, 50 epochs, "
           "no early stopping", task_options={"seq_len": 50}, budget="10M", epochs=50, batch_size=100,
           patience=10, early_stopping=False),
    Preset("paper-mnist", ("mnist", "pmnist"), "IDX files, M=100 (every configuration), batch 50, "
           "early stopping", task_options={"source": "idx"}, channels=100, epochs=200, batch_size=50,
           patience=20),
)}


def get_preset(name: str | None) -> Preset | None:
    if name is None:
        return None
    if name not in PRESETS:
        raise UserError(f"unknown preset {name!r}; use one of {', '.join(PRESETS)}")
    return PRESETS[name]
