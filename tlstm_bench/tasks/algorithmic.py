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

import torch
from torch.nn import functional as F

from ..errors import UserError
from .base import Batch, Stream, Task

DELIM = 0  # token of '-'
TEST_SIZE = 100
TEST_SEED = 20171204  # fixed: every configuration and training seed sees the same test set


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
        if test_size < 1:
            raise UserError(f"test_size must be >= 1, got {test_size}")
        self.test_seed, self.test_size = int(test_seed), int(test_size)
        self.test_x, self.test_y = self.sample(self.test_size, torch.Generator().manual_seed(self.test_seed))
        self._test_rows = {tuple(row) for row in self.test_x.tolist()}

    # ---- what subclasses define -------------------------------------------------
    @property
    def seq_len(self) -> int:
        raise NotImplementedError

    @property
    def answer(self) -> slice:
        """The answer positions (where the metric is measured)."""
        raise NotImplementedError

    def sample(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` random examples: input and target tokens, each (n, T) int64."""
        raise NotImplementedError

    # ---- shared -----------------------------------------------------------------
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
        """Symbol accuracy on the answer positions and sequence accuracy on the test set.

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
                "loss": loss}

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
