"""The ≈ rule (results.view.unresolved): when a measurement can order two depths, on synthetic
records; `time`'s table, `results` and the figures apply the same rule (issue 30 item 1)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tlstm_bench.results import view
from tlstm_bench.results.view import depth_ratio, unresolved, unresolved_pairs


def within_spread(frame: pd.DataFrame) -> set:
    """The row labels ``results`` marks ≈ (view.runtime_marks)."""
    return {label for label, mark in view.runtime_marks(frame).items() if view.WITHIN_SPREAD in mark}


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


# The ↓ mark: the data order two depths at the same M the wrong way (the deeper faster).
FASTER = [0.8 * x for x in L1]  # L=2 faster than L=1 in every round


def test_a_resolved_fall_at_the_same_m_is_marked_falls_not_within_spread():
    first, second = _record(1, L1), _record(2, FASTER)
    assert view.falls(first, second) and not unresolved(first, second)
    assert view.depth_marks({1: first, 2: second}) == {1: view.FALLS, 2: view.FALLS}
    assert view.ratio_mark(first, second) == view.FALLS
    assert not view.falls(first, _record(2, L2))  # deeper and slower: the order the work says


def test_a_fall_is_not_marked_at_another_m_nor_where_the_data_cannot_order_it():
    smaller = dict(_record(2, FASTER), channels=12)  # a budget's smaller M at the greater depth
    assert not view.falls(_record(1, L1), smaller)
    assert view.depth_marks({1: _record(1, L1), 2: smaller}) == {1: "", 2: ""}
    noisy = [a * f for a, f in zip(L1, [0.5, 1.3, 0.6, 1.2, 0.7, 1.1, 0.6, 1.4, 0.8, 0.9])]
    assert not view.falls(_record(1, L1), _record(2, noisy))  # ≈ instead
    unknown = {k: v for k, v in _record(2, FASTER).items() if k != "channels"}
    assert not view.falls(_record(1, L1), unknown)


def test_a_depth_can_carry_both_marks_one_per_neighbour():
    """L=1-2 cannot be ordered, L=2-3 falls: L=2 shows both, ≈ first."""
    l2 = [a * f for a, f in zip(L1, [0.5, 1.3, 0.6, 1.2, 0.7, 1.1, 0.6, 1.4, 0.8, 0.9])]
    records = {1: _record(1, L1), 2: _record(2, l2), 3: _record(3, [0.7 * x for x in l2])}
    assert view.depth_marks(records) == {1: view.WITHIN_SPREAD, 2: view.WITHIN_SPREAD + view.FALLS, 3: view.FALLS}


def test_time_results_and_by_depth_mark_a_fall_and_say_why(tmp_path):
    from tlstm_bench.cli.time import runtime_table
    from tlstm_bench.results.by_depth import by_depth
    from tlstm_bench.results.frame import read_frame

    records = [_record(1, L1), _record(2, L2), _record(3, [0.95 * x for x in L2])]  # L=3 faster than L=2
    cells = [list(column) for column in zip(*runtime_table(records, [1, 2, 3]).rows)]
    assert [c[0][0] for c in cells[3:6]] == ["0", view.FALLS, view.FALLS]
    assert not cells[6][0].startswith(view.FALLS)  # L3/L1 still rises
    (tmp_path / "c").mkdir()
    for r in records:
        record = {**r, "id": f"rt{r['depth']}", "key": f"rt{r['depth']}", "kind": "runtime", "task": "runtime",
                  "seq_len": 20, "device": "cpu", "device_name": "test-cpu", "torch_version": "2.x", "causal": True,
                  "error": None, "date": f"2026-11-29T0{r['depth']}:00:00+00:00"}
        (tmp_path / "c" / f"rt{r['depth']}.json").write_text(json.dumps(record))
    frame = read_frame("c", root=tmp_path)
    built = view.build_view(frame)
    column = [c.header for c in built.tables[0].columns].index("ms/step")
    assert [row[column].startswith(view.FALLS) for row in built.tables[0].rows] == [False, True, True]
    assert view.FALLS_NOTE in built.notes
    tables, notes = by_depth(frame)
    assert [c.startswith(view.FALLS) for c in tables[0].rows[0][2:5]] == [False, True, True]
    assert view.FALLS_NOTE in notes


def test_results_compares_the_depths_of_one_size_only():
    """An M = 100 line and a 10M line of one configuration are two lines: the newest record at
    each depth is never one size's against the other's."""
    m100 = [_record(1, L1), _record(2, L2)]
    big = [dict(_record(d, [10 * x for x in L1], measurement="b"), channels=895, budget="10M") for d in (1, 2)]
    frame = pd.DataFrame([m100[0], big[0], m100[1], big[1]])  # interleaved, as a store lists them
    assert within_spread(frame) == {1, 3}  # 10M L=1 and L=2 timed alike: ≈; M = 100: ordered
    assert view.runtime_marks(frame) == {1: view.WITHIN_SPREAD, 3: view.WITHIN_SPREAD}


def test_the_figure_names_a_fall_and_ascii_prints_it_as_v():
    from tlstm_bench.cli.screen import STAND_INS
    from tlstm_bench.plotting.figures import runtime_falls, runtime_overlaps

    records = [_record(1, L1), _record(2, L2), _record(3, [0.95 * x for x in L2])]
    frame = pd.DataFrame(records).assign(budget=None)
    assert runtime_falls(frame) == ["2d L=2-3"] and runtime_overlaps(frame) == []
    assert STAND_INS[view.FALLS] == "v"
