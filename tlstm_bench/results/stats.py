"""Paired ratios of interleaved timings and a distribution-free interval for their median.

Used by the CI gate (``timing.regress``) and by the ≈ rule of every runtime view
(``results.view.unresolved``); pure Python, so it sits in the results layer, below both.

The gate times its cases in interleaved rounds (round r times every case once before
round r+1 starts), so the two timings of one round met the same machine load. The ratio
of two cases is therefore taken round by round (paired), and its median is estimated
with the order-statistic interval of the sign test: with n paired ratios sorted, the
interval [x_(k), x_(n+1-k)] holds the true median with probability >= ``level`` for the
largest k whose two binomial tails sum to at most 1 - level. It assumes only that the
rounds are independent draws; no normality, no resampling (so no random seed), and it
widens by itself when a run is noisy.
"""

from __future__ import annotations

import math
import statistics


def paired_ratios(numerator: list[float], denominator: list[float]) -> list[float]:
    """Round-by-round ratios of two cases timed in the same interleaved rounds."""
    if len(numerator) != len(denominator) or not numerator:
        raise ValueError("paired ratios need two equally long, non-empty sample lists")
    return [a / b for a, b in zip(numerator, denominator)]


def _binom_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """(median, low, high): the sign-test interval for the median at confidence >= ``level``.

    With too few values for that confidence (n < 6 at 95%) the interval is the whole range.
    """
    if not values:
        raise ValueError("no values")
    s = sorted(values)
    n = len(s)
    k = 0  # 1-based order statistic of the lower end; 0: none reaches the level
    for j in range(1, n // 2 + 1):
        if 2 * _binom_cdf_half(j - 1, n) <= 1 - level:
            k = j
    if k == 0:
        return statistics.median(s), s[0], s[-1]
    return statistics.median(s), s[k - 1], s[n - k]
