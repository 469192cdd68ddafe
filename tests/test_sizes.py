"""Size bounds: shape limits without big numbers (models/config.py), the memory estimate and its
check (models/memory.py), the audit's work limit, and the algorithmic tasks that cannot draw a training sample."""

from __future__ import annotations

import json
import time

import pytest

from tlstm_bench import checks
from tlstm_bench.audit import AUDIT_WORK_LIMIT, audit_work, causal, check_auditable
from tlstm_bench.errors import UserError
from tlstm_bench.models import count_params, parse_config
from tlstm_bench.models import memory
from tlstm_bench.models.config import MAX_ENTRIES, check_shape
from tlstm_bench.models.memory import model_memory, run_memory
from tlstm_bench.tasks import check_task_options, make_task


@pytest.mark.parametrize("config", ["tlstm:dims=100000000", "tlstm:dims=10000", "tlstm:dims=32,kernel=2",
                                    "tlstm:dims=2,kernel=2000000000"])
def test_kernel_entries_above_2_to_the_30_are_refused_without_computing_them(config):
    start = time.perf_counter()
    with pytest.raises(UserError, match="kernel entries"):
        parse_config(config)
    assert time.perf_counter() - start < 0.5  # 3^(10^8 - 1) would take minutes to compute


def test_the_largest_allowed_shapes_still_parse_and_count_exactly():
    arch = parse_config("tlstm:dims=31,kernel=2")  # K^(D-1) = 2^30 exactly
    assert arch.kernel_entries == MAX_ENTRIES
    check_shape(parse_config("2d"), MAX_ENTRIES)  # 2D at L = 2^30: P^(D-1) = 2^30 locations
    with pytest.raises(UserError, match="locations"):
        check_shape(parse_config("3d"), 2**15 + 1)
    with pytest.raises(UserError, match="locations"):
        count_params("3d", 10**9, 4, 5, 5)


@pytest.mark.parametrize("value,what", [(0, ">= 1"), (-5, ">= 1"), (2**31, "<= 2,147,483,647"), (True, "integer"),
                                        ("3", "integer"), (2.0, "integer")])
def test_integer_checks_say_the_range(value, what):
    with pytest.raises(UserError, match=what):
        checks.integer(value, "x", maximum=2**31 - 1)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, 0.0, "0.1", None])
def test_number_checks_refuse_what_is_not_finite_and_positive(value):
    with pytest.raises(UserError):
        checks.number(value, "--lr")


def test_the_estimate_grows_with_every_size_and_holds_adams_moments_when_training():
    base = dict(channels=16, vocab=10, batch=4, seq_len=50)
    one = model_memory("3d", 2, **base)
    assert model_memory("3d", 4, **base).activations > one.activations  # L: more locations and steps
    assert model_memory("3d", 2, **{**base, "seq_len": 100}).activations > one.activations
    assert model_memory("3d", 2, **{**base, "batch": 8}).activations > one.activations
    assert model_memory("3d", 2, **{**base, "channels": 32}).total > one.total
    params = count_params("3d", 2, 16, 10, 10).total
    assert one.weights == params * 4 * 2  # parameters and gradients, float32
    assert model_memory("3d", 2, optimizer=True, **base).weights == params * 4 * 4
    assert model_memory("3d", 2, backward=False, **base).activations < one.activations
    assert model_memory("slstm", 2, dtype="float64", **base).weights == 2 * model_memory("slstm", 2, **base).weights


def test_the_estimate_of_the_16_tb_case_is_that_large():
    """`time 2d --depths 1000000` tried to allocate 16 TB in one tensor; the estimate holds at least that."""
    estimate = model_memory("2d", 1_000_000, channels=4, vocab=205, batch=1, seq_len=100)
    assert estimate.total > 16e12


def test_check_fits_refuses_above_the_memory_available_and_says_both(monkeypatch):
    estimate = run_memory(parse_config("2d"), 3, channels=8, input_size=5, output_size=5, tokens=True,
                          params=1000, batch=2, seq_len=20)
    monkeypatch.setattr(memory, "available_memory", lambda device: (estimate.total, "available RAM"))
    memory.check_fits(estimate, "cpu", "timing it", "lower it")  # exactly fits
    monkeypatch.setattr(memory, "available_memory", lambda device: (estimate.total - 1, "available RAM"))
    with pytest.raises(UserError, match=r"timing it needs at least .* more than the .* of available RAM; lower it"):
        memory.check_fits(estimate, "cpu", "timing it", "lower it")
    monkeypatch.setattr(memory, "available_memory", lambda device: None)  # unknown: not refused
    memory.check_fits(estimate, "cpu", "timing it", "lower it")


def test_available_memory_is_known_here():
    room = memory.available_memory("cpu")
    assert room is not None and room[0] > 0


def test_the_audit_refuses_work_of_minutes_and_causal_says_not_measured():
    assert audit_work("3d-cn", 10) < AUDIT_WORK_LIMIT < audit_work("3d-cn", 100)
    check_auditable("3d-cn", 10)
    for config, depth in (("3d-cn", 100), ("2d", 10**6), ("slstm", 1000)):
        with pytest.raises(UserError, match="would take"):
            check_auditable(config, depth)
        assert causal(config, depth) is None
    assert causal("3d-ln", 2) is False and causal("3d-cn", 2) is True


@pytest.mark.parametrize("config", ["tlstm:dims=3,kernel=301", "tlstm:dims=12,kernel=3", "tlstm:dims=2,kernel=10001"])
def test_an_audit_of_a_huge_window_is_refused_not_attempted(config):
    """These crashed `info` (its causal check) and `audit` with an allocation error of 98-377 GB, or
    hung: the work and size of an audit count the K^(D-1) window too."""
    with pytest.raises(UserError, match="would (take|build a model)"):
        check_auditable(config, 1)
    assert causal(config, 1) is None
    check_auditable("tlstm:dims=4,kernel=3", 2)  # knobs of ordinary size are still measured
    assert causal("tlstm:dims=4,kernel=3", 2) is True


@pytest.mark.parametrize("task,options", [("memorization", dict(symbols=2, alphabet=4)),
                                          ("memorization", dict(symbols=1, alphabet=8)),
                                          ("addition", dict(digits=1, test_size=1000))])
def test_a_test_set_holding_every_sequence_is_refused_instead_of_redrawing_forever(task, options):
    """The training sampler redraws any sample of the test set: with none left it looped forever."""
    with pytest.raises(UserError, match="distinct sequences"):
        make_task(task, **options)
    with pytest.raises(UserError, match="distinct sequences"):
        check_task_options(task, **options)


def test_a_small_sample_space_the_test_set_does_not_cover_still_trains():
    task = make_task("addition", digits=1)  # 81 sequences, 100 draws: 54 distinct in the test set
    assert task.distinct_sequences() == 81
    x, _ = task.fresh(200, __import__("torch").Generator().manual_seed(0))
    assert not {tuple(r) for r in x.tolist()} & task._test_rows


def test_data_tasks_check_their_options_without_reading_data(tmp_path, monkeypatch):
    monkeypatch.delenv("TLSTM_BENCH_DATA", raising=False)
    check_task_options("enwik8", seq_len=50)  # no data file anywhere: only the options are checked
    check_task_options("mnist", source="idx")
    with pytest.raises(UserError, match="--seq-len"):
        check_task_options("enwik8", seq_len=0)
    with pytest.raises(UserError, match="--source"):
        check_task_options("pmnist", source="svhn")
    with pytest.raises(UserError, match="--perm-seed"):
        check_task_options("pmnist", perm_seed="x")


def test_info_of_a_huge_window_prints_its_card_with_causal_not_measured():
    from typer.testing import CliRunner

    from tlstm_bench.cli import app

    out = CliRunner().invoke(app, ["info", "tlstm:dims=3,kernel=301", "--vocab", "10", "--channels", "8", "--json"])
    assert out.exit_code == 0, out.output
    card = json.loads(out.stdout)
    assert card["causal"] is None and card["params"] > 10**10
