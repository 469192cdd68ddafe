"""Memorization of n random symbols out of 64 (paper section 3.2 (b); default n = 20).

The network reads ``-``, the n symbols, then n + 1 ``-``; the target is ``-`` for the
first n + 1 positions, then the n symbols again, then a final ``-``. Length T = 2n + 2.
For n = 5 (the paper's example)::

    position  0 1 2 3 4 5 6 7 8 9 10 11
    input     - a b c c b - - - - -  -
    target    - - - - - - a b c c b  -
                          ^^^^^^^^^ answer positions n+1 .. 2n

Tokens: ``-`` is 0 and the 64 symbols are 1..64, written ``a-z A-Z 0-9 + *``
(65 symbols in all, as in the paper). Symbols are drawn uniformly with replacement.
``alphabet`` (default 64) draws them from the first ``alphabet`` symbols only, with
the vocabulary shrunk to match (``alphabet + 1`` tokens): a smaller problem for a quick
run on a CPU, in the same format.
"""

from __future__ import annotations

import torch

from .. import checks
from ..errors import UserError
from .algorithmic import DELIM, MAX_LENGTH, TEST_SEED, TEST_SIZE, AlgorithmicTask, count_at_most

SYMBOLS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+*"
assert len(SYMBOLS) == 64


class Memorization(AlgorithmicTask):
    name = "memorization"
    larger_hint = "use more --symbols or a larger alphabet"

    def __init__(self, *, symbols: int = 20, alphabet: int = 64, test_seed: int = TEST_SEED,
                 test_size: int = TEST_SIZE):
        self.check_options(symbols=symbols, alphabet=alphabet, test_seed=test_seed, test_size=test_size)
        self.symbols = symbols
        self.alphabet = "-" + SYMBOLS[:alphabet]
        super().__init__(test_seed=test_seed, test_size=test_size)

    @classmethod
    def check_options(cls, *, symbols: int = 20, alphabet: int = 64, **options) -> None:
        checks.integer(symbols, "--symbols", maximum=MAX_LENGTH)
        checks.integer(alphabet, "--alphabet (the paper: 64)", minimum=2, maximum=64)
        super().check_options(**options)

    def distinct_sequences(self) -> int:
        return count_at_most(len(self.alphabet) - 1, self.symbols)

    def describe_size(self) -> str:
        return f"{self.symbols} symbols out of {len(self.alphabet) - 1}"

    def options(self) -> dict:
        return {"symbols": self.symbols, "alphabet": len(self.alphabet) - 1, "test_seed": self.test_seed,
                "test_size": self.test_size}

    @property
    def seq_len(self) -> int:
        return 2 * self.symbols + 2

    @property
    def answer(self) -> slice:
        return slice(self.symbols + 1, 2 * self.symbols + 1)

    def encode(self, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Symbols (N, n) as tokens 1..64 -> (input, target), each (N, T)."""
        n = self.symbols
        x = torch.full((s.shape[0], self.seq_len), DELIM, dtype=torch.long)
        x[:, 1:n + 1] = s
        y = torch.full_like(x, DELIM)
        y[:, self.answer] = s
        return x, y

    def encode_symbols(self, text: str) -> tuple[list[int], list[int]]:
        """``"abccb"`` -> (input tokens, target tokens) of one example."""
        if len(text) != self.symbols or any(ch not in self.alphabet[1:] for ch in text):
            raise UserError(f"give {self.symbols} symbols out of {self.alphabet[1:]!r}, got {text!r}")
        x, y = self.encode(torch.tensor([[self.alphabet.index(ch) for ch in text]]))
        return x[0].tolist(), y[0].tolist()

    def sample(self, n: int, generator: torch.Generator):
        return self.encode(torch.randint(1, len(self.alphabet), (n, self.symbols), generator=generator))
