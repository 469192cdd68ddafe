"""A sweep's runtime cells are timed a configuration at a time (issue 23): the first cell of a
group times every depth interleaved and leaves the siblings' records; a sibling takes its own."""

from __future__ import annotations

import json

import pytest

from tlstm_bench.sweeps import runtime_group
from tlstm_bench.timing import measure


def _spec(depth: int, **extra) -> dict:
    return {"kind": "runtime", "task": "runtime", "config": "2d", "depth": depth, "seed": 0,
            "implementation": "default", "timed_with": [1, 2], "vocab": 7, "input_size": None,
            "output_size": None, "seq_len": 3, "device": "cpu", "repeats": 3, "warmup": 1, "threads": 1,
            "dtype": "float32", "channels": 3, "budget": None, "machine": {"cpu": "test"}, **extra}


@pytest.fixture
def calls(monkeypatch):
    """Every measure_cases call the group makes: the depths it timed together."""
    seen = []
    original = measure.measure_cases

    def spy(cases, **kwargs):
        seen.append([c.depth for c in cases])
        return original(cases, **kwargs)

    monkeypatch.setattr(measure, "measure_cases", spy)
    monkeypatch.setattr("tlstm_bench.timing.measure_cases", spy)
    return seen


def test_the_first_cell_times_every_depth_together_and_the_sibling_takes_its_record(tmp_path, calls):
    first = runtime_group.time_runtime_cell(_spec(1), tmp_path)
    second = runtime_group.time_runtime_cell(_spec(2), tmp_path)
    assert calls == [[1, 2]]  # one interleaved measurement for both depths
    assert (first["depth"], second["depth"]) == (1, 2)
    assert first["timed_with"] == second["timed_with"] == [1, 2]
    assert first["timing_group"] == second["timing_group"] == runtime_group.group_key(_spec(1))
    assert len(first["samples"]) == len(second["samples"]) == 3 and first["interleaved"]
    assert first["measurement"] == second["measurement"]  # their samples pair round by round (the ≈ rule)


def test_a_cpu_spec_without_threads_is_timed_with_one_thread_and_50_ms_samples(tmp_path, calls):
    record = runtime_group.time_runtime_cell(_spec(1, threads=None, timed_with=[1]), tmp_path)
    assert record["threads"] == 1 and record["runs_per_sample"] > 1 and record["cpu_share"] > 0


def test_another_group_is_timed_on_its_own(tmp_path, calls):
    runtime_group.time_runtime_cell(_spec(1), tmp_path)
    runtime_group.time_runtime_cell(_spec(1, config="2d-m"), tmp_path)
    assert calls == [[1, 2], [1, 2]]


@pytest.mark.parametrize("content", ["{not json", json.dumps({"group": "someone else", "records": {}, "failed": {}}),
                                     json.dumps([1, 2])])
def test_a_corrupt_or_foreign_group_file_is_timed_again_never_trusted(tmp_path, calls, content):
    runtime_group.time_runtime_cell(_spec(1), tmp_path)
    (path,) = tmp_path.glob("*.json")
    path.write_text(content)
    record = runtime_group.time_runtime_cell(_spec(2), tmp_path)
    assert calls == [[1, 2], [1, 2]] and record["depth"] == 2
    assert json.loads(path.read_text())["group"] == runtime_group.group_key(_spec(1))  # rewritten whole


def test_a_failed_depth_fails_its_cell_only_and_is_timed_again_on_retry(tmp_path, monkeypatch, calls):
    import timing_helpers

    timing_helpers.register_failing()
    try:
        ok = runtime_group.time_runtime_cell(_spec(1, implementation="fails", timed_with=[1]), tmp_path)
    except RuntimeError as exc:
        ok = exc
    finally:
        timing_helpers.unregister_broken()
    assert isinstance(ok, RuntimeError) and "CUDA error" in str(ok)
    with pytest.raises(RuntimeError):  # a retry measures again (and fails again here)
        timing_helpers.register_failing()
        try:
            runtime_group.time_runtime_cell(_spec(1, implementation="fails", timed_with=[1]), tmp_path)
        finally:
            timing_helpers.unregister_broken()
    assert calls == [[1], [1]]
