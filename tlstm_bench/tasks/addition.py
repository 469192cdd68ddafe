"""Addition of two n-digit integers (paper section 3.2 (a); default n = 15).

The network reads the two integers one digit per timestep, most significant digit
first, between ``-`` delimiters, then ``-`` padding; the target is ``-`` until the
last delimiter of the input, where the n+1 digits of the sum start (with a leading 0
when there is no carry out), then a final ``-``. Length T = 3n + 4. For n = 3 and
123 + 900 = 1023 (the paper's example)::

    position  0 1 2 3 4 5 6 7 8 9 10 11 12
    input     - 1 2 3 - 9 0 0 - - -  -  -
    target    - - - - - - - - 1 0 2  3  -
                              ^^^^^^^^^^^ answer positions 2n+2 .. 3n+2

Tokens: ``-`` is 0 and digit d is d + 1 (11 symbols). With output delay inside the
model, y_t is aligned with x_t, so at position 8 the model has read both numbers and
must emit the first digit of the sum. Each operand is an n-digit integer, uniform
on 10^(n-1) .. 10^n - 1 (the paper's "two 15-digit integers"): its first digit is
uniform on 1-9 and never 0, the other digits uniform on 0-9 (earlier versions drew
every digit on 0-9, so one operand in ten had a leading zero: docs/fidelity.md). The
sum still has n+1 digits, its first one 0 when there is no carry out.
"""

from __future__ import annotations

import torch

from .. import checks
from ..errors import UserError
from .algorithmic import DELIM, MAX_LENGTH, TEST_SEED, TEST_SIZE, AlgorithmicTask, count_at_most


class Addition(AlgorithmicTask):
    name = "addition"
    alphabet = "-0123456789"

    larger_hint = "use more --digits"

    def __init__(self, *, digits: int = 15, test_seed: int = TEST_SEED, test_size: int = TEST_SIZE):
        self.check_options(digits=digits, test_seed=test_seed, test_size=test_size)
        self.digits = digits
        super().__init__(test_seed=test_seed, test_size=test_size)

    @classmethod
    def check_options(cls, *, digits: int = 15, **options) -> None:
        checks.integer(digits, "--digits", maximum=MAX_LENGTH)
        super().check_options(**options)

    def distinct_sequences(self) -> int:
        # two operands, each of 9 * 10^(n-1) n-digit integers (no leading zero)
        return min(2**64, count_at_most(10, self.digits - 1, 2**32) * 9) ** 2

    def describe_size(self) -> str:
        return f"{self.digits}-digit operands"

    def options(self) -> dict:
        return {"digits": self.digits, "test_seed": self.test_seed, "test_size": self.test_size}

    @property
    def seq_len(self) -> int:
        return 3 * self.digits + 4

    @property
    def answer(self) -> slice:
        n = self.digits
        return slice(2 * n + 2, 3 * n + 3)

    def encode(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Operands as digit tensors (N, n), most significant first -> (input, target), (N, T)."""
        n = self.digits
        count = a.shape[0]
        # The sum's n+1 digits, least significant first, with the carry rippled along.
        total = torch.zeros(count, n + 1, dtype=torch.long)
        carry = torch.zeros(count, dtype=torch.long)
        for i in range(n):
            s = a[:, n - 1 - i] + b[:, n - 1 - i] + carry
            total[:, n - i] = s % 10
            carry = s // 10
        total[:, 0] = carry
        x = torch.full((count, self.seq_len), DELIM, dtype=torch.long)
        x[:, 1:n + 1] = a + 1
        x[:, n + 2:2 * n + 2] = b + 1
        y = torch.full((count, self.seq_len), DELIM, dtype=torch.long)
        y[:, self.answer] = total + 1
        return x, y

    def encode_numbers(self, a: str, b: str) -> tuple[list[int], list[int]]:
        """``("123", "900")`` -> (input tokens, target tokens) of one example."""
        if (len(a) != self.digits or len(b) != self.digits or not (a + b).isdigit()
                or a[0] == "0" or b[0] == "0"):
            raise UserError(f"give two {self.digits}-digit numbers (no leading zero), got {a!r} and {b!r}")
        x, y = self.encode(torch.tensor([[int(c) for c in a]]), torch.tensor([[int(c) for c in b]]))
        return x[0].tolist(), y[0].tolist()

    def sample(self, n: int, generator: torch.Generator):
        return self.encode(self._operands(n, generator), self._operands(n, generator))

    def _operands(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """n uniform n-digit integers as digits (N, n), most significant first, never 0."""
        digits = torch.randint(0, 10, (n, self.digits), generator=generator)
        digits[:, 0] = torch.randint(1, 10, (n,), generator=generator)
        return digits
