"""What addition and memorization share (paper section 3.2; Kalchbrenner et al. 2015).

Both are sequence-to-sequence over a small alphabet whose token 0 is the delimiter and
padding symbol ``-``. Training is online: every minibatch is freshly generated (the
paper's 5M samples, each seen once) and never equals one of the 100 test samples. The
test set is fixed by ``test_seed`` (the same for every configuration and training
seed), and the run stops the first time every answer symbol of the test set is right;
the number of training samples seen then is ``samples_to_solve``.

The loss is the mean NLL over all positions of the target sequence (the paper's
target includes the ``-`` padding); the metric is the symbol accuracy on the answer
positions only, plus the sequence accuracy (every answer symbol of a sample right).
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from .. import checks
from ..errors import UserError
from ..vocab import ALGORITHMIC_TEST_SIZE
from .base import Batch, Stream, Task

DELIM = 0  # token of '-'
TEST_SIZE = ALGORITHMIC_TEST_SIZE  # SPEC section 9: 100 test samples
TEST_SEED = 20171204  # fixed: every configuration and training seed sees the same test set
# Symbols (memorization) or digits (addition) at most: 500 times the paper's 20 and 15 already;
# longer sequences only make the test set and the minibatches too large to hold.
MAX_LENGTH = 10_000
MAX_TEST_SIZE = 100_000
# Digits kept of each answer position's accuracy (a multiple of 1/test_size: none is lost).
POSITION_DIGITS = 6


def count_at_most(base: int, exponent: int, cap: int = 2**64) -> int:
    """min(base^exponent, cap) without computing a huge power."""
    if exponent * math.log2(max(base, 1)) > math.log2(cap):
        return cap
    return min(base**exponent, cap)


class OnlineStream(Stream):
    """Fresh samples from a seeded generator; the generator's state is the position."""

    def __init__(self, task: "AlgorithmicTask", batch_size: int, seed: int):
        self.task, self.batch_size = task, batch_size
        self.generator = torch.Generator().manual_seed(seed)

    def next(self) -> Batch:
        x, y = self.task.fresh(self.batch_size, self.generator)
        return Batch(x, y)

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


class AlgorithmicTask(Task):
    online = True
    has_valid = False
    metric = "accuracy"
    forget_bias = 1.0
    batch_size = 15
    alphabet: str = "-"  # token i is alphabet[i]; alphabet[0] == '-'

    def __init__(self, *, test_seed: int = TEST_SEED, test_size: int = TEST_SIZE):
        self.test_seed, self.test_size = test_seed, test_size
        self.test_x, self.test_y = self.sample(self.test_size, torch.Generator().manual_seed(self.test_seed))
        self._test_rows = {tuple(row) for row in self.test_x.tolist()}
        if len(self._test_rows) >= self.distinct_sequences():
            # Training samples must differ from every test sample (fresh() redraws them), so
            # with none left a training batch could never be drawn.
            raise UserError(f"{self.name} with {self.describe_size()} has only {self.distinct_sequences()} distinct "
                            f"sequences and the {test_size}-sample test set holds all of them, so no training "
                            f"sample could differ from the test set; {self.larger_hint}")

    @classmethod
    def check_options(cls, *, test_seed: int = TEST_SEED, test_size: int = TEST_SIZE, **options) -> None:
        checks.seed(test_seed, "test_seed")
        checks.integer(test_size, "test_size", maximum=MAX_TEST_SIZE)

    # ---- what subclasses define -------------------------------------------------
    larger_hint: str = ""  # how to ask for a larger sample space (the error above)

    @property
    def seq_len(self) -> int:
        raise NotImplementedError

    def distinct_sequences(self) -> int:
        """How many different examples there are (capped at 2^64: plenty)."""
        raise NotImplementedError

    def describe_size(self) -> str:
        """The options that set the size of the sample space, in words."""
        raise NotImplementedError

    @property
    def answer(self) -> slice:
        """The answer positions (where the metric is measured)."""
        raise NotImplementedError

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` random examples: input and target tokens, each (n, T) int64."""
        raise NotImplementedError

    # ---- shared -----------------------------------------------------------------
    @property
    def eval_batch_size(self) -> int:
        return self.test_size  # the whole test set in one pass

    def model_io(self) -> dict:
        return {"vocab": len(self.alphabet)}

    def default_eval_every(self, batch_size: int) -> int:
        return 100 * batch_size

    def fresh(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Like :meth:`sample`, but redraws any example that is in the test set."""
        x, y = self.sample(n, generator)
        while True:
            clash = [i for i, row in enumerate(x.tolist()) if tuple(row) in self._test_rows]
            if not clash:
                return x, y
            x2, y2 = self.sample(len(clash), generator)
            x[clash], y[clash] = x2, y2

    def train_stream(self, batch_size: int, seed: int) -> Stream:
        return OnlineStream(self, batch_size, seed)

    def loss(self, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.y.reshape(-1))

    @torch.no_grad()
    def evaluate(self, model, split: str = "test", *, device="cpu") -> dict:
        """Symbol accuracy on the answer positions and sequence accuracy on the test set, and
        ``by_position``: the accuracy at each answer position, the first answer first (what a
        model has learned when it has not solved the task: a memorization model that recalls
        only the last symbol it read scores 1/n + chance).

        There is no validation split (the paper stops on the test set); ``valid`` is an error.
        """
        if split != "test":
            raise UserError(f"{self.name} has only a test set (the paper stops on it), not {split!r}")
        was_training = model.training
        model.eval()
        try:
            logits, _ = model(self.test_x.to(device))
        finally:
            model.train(was_training)
        pred = logits.argmax(-1).cpu()[:, self.answer]
        right = pred == self.test_y[:, self.answer]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).cpu(), self.test_y.reshape(-1)).item()
        return {"metric": right.float().mean().item(),
                "sequence_accuracy": right.all(dim=1).float().mean().item(),
                "loss": loss,
                "by_position": [round(v, POSITION_DIGITS) for v in right.float().mean(dim=0).tolist()]}

    # ---- text form, for docs, tests and eyeballing ------------------------------
    def encode_text(self, text: str) -> list[int]:
        """``"- 1 2 3 -"`` -> tokens."""
        try:
            return [self.alphabet.index(ch) for ch in text.split()]
        except ValueError:
            raise UserError(f"{text!r} has a symbol outside this task's alphabet {self.alphabet!r}") from None

    def decode(self, tokens) -> str:
        """Tokens -> ``"- 1 2 3 -"`` (the paper's notation)."""
        return " ".join(self.alphabet[int(t)] for t in tokens)
