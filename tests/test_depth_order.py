"""The ≈ rule (results.view.unresolved): when a measurement can order two depths, on synthetic
records; `time`'s table, `results` and the figures apply the same rule (issue 30 item 1)."""

from __future__ import annotations

import pandas as pd
import pytest

from tlstm_bench.results import view
from tlstm_bench.results.view import depth_ratio, unresolved, unresolved_pairs, within_spread


def _record(depth: int, samples: list[float], *, measurement="m1", share=0.99, threads=1, config="2d") -> dict:
    s = sorted(samples)
    q25, q75 = s[len(s) // 4], s[(3 * len(s)) // 4]
    return {"config": config, "implementation": "fast", "depth": depth, "status": "ok", "threads": threads,
            "ms_per_step": s[len(s) // 2], "ms_q25": q25, "ms_q75": q75, "ms_iqr": q75 - q25, "samples": samples,
            "measurement": measurement, "cpu_share": share, "channels": 16}


# Ten interleaved rounds whose load swings 3x from round to round: the depths' spreads overlap
# wholly, yet every round timed L=2 about 10% slower than L=1.
LOAD = [1.0, 2.5, 1.2, 3.0, 1.1, 2.0, 1.4, 2.8, 1.0, 1.6]
L1 = [0.2 * x for x in LOAD]
L2 = [0.22 * x for x in LOAD]


def test_paired_rounds_order_two_depths_whose_spreads_overlap():
    first, second = _record(1, L1), _record(2, L2)
    assert view.spread_overlaps({1: view.quartiles(first), 2: view.quartiles(second)})  # the old rule: ≈
    assert not unresolved(first, second)
    assert depth_ratio(first, second) == pytest.approx(1.1)


def test_a_ratio_below_one_from_noisy_rounds_is_marked():
    """L2 "faster" by its medians, but its rounds go both ways: the interval contains 1."""
    l2 = [a * f for a, f in zip(L1, [0.5, 1.3, 0.6, 1.2, 0.7, 1.1, 0.6, 1.4, 0.8, 0.9])]
    first, second = _record(1, L1), _record(2, l2)
    assert second["ms_per_step"] / first["ms_per_step"] < 1 and depth_ratio(first, second) < 1
    assert unresolved(first, second)


def test_a_clean_ratio_below_one_is_not_marked_when_every_round_says_so():
    """The rule is statistics, not a wish: a depth faster in every round (a budget's smaller M)."""
    first, second = _record(1, L1), _record(2, [0.8 * x for x in L1])
    assert not unresolved(first, second) and depth_ratio(first, second) == pytest.approx(0.8)


def test_records_timed_apart_fall_back_to_their_spreads():
    first, second = _record(1, L1, measurement="a"), _record(2, L2, measurement="b")
    assert unresolved(first, second)  # IQRs overlap
    assert depth_ratio(first, second) == pytest.approx(second["ms_per_step"] / first["ms_per_step"])
    apart = _record(2, [3 * x for x in L1], measurement="b")
    assert not unresolved(first, apart)
    old = {k: v for k, v in _record(1, L1).items() if k not in ("measurement", "cpu_share", "samples")}
    assert unresolved(old, second)  # an old record: the quartiles, as before


def test_too_few_rounds_cannot_order_anything():
    first, second = _record(1, L1[:5]), _record(2, [3 * x for x in L1[:5]])
    assert unresolved(first, second)  # 5 pairs: no 95% sign-test interval exists
    first, second = _record(1, L1[:6]), _record(2, [3 * x for x in L1[:6]])
    assert not unresolved(first, second)


def test_several_threads_on_a_busy_machine_are_marked_one_thread_is_not():
    busy = dict(share=0.4)
    assert unresolved(_record(1, L1, threads=2, **busy), _record(2, L2, threads=2, **busy))
    assert not unresolved(_record(1, L1, threads=2), _record(2, L2, threads=2))  # idle: 99%
    assert not unresolved(_record(1, L1, **busy), _record(2, L2, **busy))  # one thread: the pairs decide


def test_a_load_that_hit_the_two_depths_unequally_is_marked():
    assert unresolved(_record(1, L1, share=0.9), _record(2, L2, share=0.6))
    assert not unresolved(_record(1, L1, share=0.9), _record(2, L2, share=0.8))


def test_results_and_time_mark_the_same_pairs():
    from tlstm_bench.cli.time import runtime_table

    records = [_record(1, L1), _record(2, L2), _record(3, [0.23 * x for x in reversed(LOAD)]),
               _record(1, L1, config="3d", measurement="x"), _record(2, L2, config="3d", measurement="y")]
    # 2d: L1-L2 ordered (paired); L2-L3 timed together but the rounds disagree; 3d: timed apart
    pairs = unresolved_pairs({r["depth"]: r for r in records[:3]})
    assert pairs == [(2, 3)]
    frame = pd.DataFrame(records)
    assert within_spread(frame) == {1, 2, 3, 4}  # row labels: 2d L=2, L=3, both 3d rows
    table = runtime_table(records, [1, 2, 3])
    cells = [list(column) for column in zip(*table.rows)]  # by column
    assert not cells[3][0].startswith("≈") and cells[4][0].startswith("≈") and cells[5][0].startswith("≈")
    assert cells[3][1].startswith("≈") and cells[4][1].startswith("≈")
