"""Sweep spec files: the shipped specs, the paper's sweeps, and a one-line error for every bad key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tlstm_bench.errors import UserError
from tlstm_bench.sweeps.grid import expand
from tlstm_bench.sweeps.spec import available_specs, find_spec, load_spec, shipped_dir

from sweep_helpers import RUNTIME_SPEC, write_spec


PAPER_SWEEPS = {"addition": 400, "memorization": 100, "mnist": 100, "pmnist": 100}


@pytest.mark.parametrize("name", ["quick", "runtime", "wiki", *PAPER_SWEEPS, *(f"{n}-budget" for n in PAPER_SWEEPS)])
def test_shipped_specs_load_and_expand(name):
    spec = load_spec(name)
    assert spec.name == name
    cells = expand(spec, code="v")
    assert cells and len({c.id for c in cells}) == len(cells)


@pytest.mark.parametrize("name, channels", PAPER_SWEEPS.items())
def test_paper_sweeps_are_literal_and_budget_variants_match(name, channels):
    """SPEC section 7: the paper's M for every configuration; <name>-budget: the count of an sLSTM with it."""
    literal = expand(load_spec(name), code="v")
    assert {c.kind for c in literal} == {"runtime", "train"}
    assert all(c.spec["channels"] == channels and c.spec["budget"] is None for c in literal)
    matched = expand(load_spec(f"{name}-budget"), code="v")
    assert all(c.spec["budget"] == f"slstm:{channels}" and c.spec["channels"] is None for c in matched)
    strip = ("budget", "channels")
    assert ([{k: v for k, v in c.spec.items() if k not in strip} for c in literal]
            == [{k: v for k, v in c.spec.items() if k not in strip} for c in matched])  # only the size differs


def test_wiki_trains_50_epochs_without_early_stopping():
    train = [c for c in expand(load_spec("wiki"), code="v") if c.kind == "train"]
    assert train and all(c.spec["early_stopping"] is False and c.spec["budget"] == "10M" for c in train)
    from tlstm_bench.training import PRESETS

    assert {PRESETS[c.spec["preset"]].epochs for c in train} == {50}


def test_quick_exercises_every_configuration_and_both_kinds():
    from tlstm_bench.models import CONFIG_NAMES

    cells = expand(load_spec("quick"), code="v")
    runtime = [c for c in cells if c.kind == "runtime"]
    assert {c.spec["config"] for c in runtime} == set(CONFIG_NAMES)
    assert len({c.spec["depth"] for c in runtime}) >= 2
    assert any(c.kind == "train" for c in cells)


def test_find_spec_by_name_and_path(tmp_path):
    import tlstm_bench

    assert find_spec("quick") == shipped_dir() / "quick.toml"
    assert shipped_dir().is_relative_to(Path(tlstm_bench.__file__).parent)   # package data, not the checkout
    path = write_spec(tmp_path, RUNTIME_SPEC)
    assert find_spec(str(path)) == path
    with pytest.raises(UserError, match="unknown sweep 'nope'.*quick"):
        find_spec("nope")
    assert "quick" in available_specs()


@pytest.mark.parametrize("change, message", [
    ("colour = 1", r"unknown key 'colour'; allowed: .*configs"),
    ("[runtime.extra]", r"unknown key 'runtime.extra' in \[runtime\]; allowed: .*seq_len"),
    ("depths = [0, 2]", r"key 'depths' must be an integer >= 1, got 0"),
    ("depths = [1, 1]", r"key 'depths' must not repeat"),
    ('configs = ["2d", "4d-x"]', r"key 'configs': '4d-x' is not a configuration"),
    ('budget = "lots"', r"key 'budget' must be a number like 10M"),
    ('device = "tpu"', r"key 'device' must be cpu, cuda or cuda:N"),
    ("timeout_s = -5", r"key 'timeout_s' must be a positive number"),
])
def test_malformed_top_level_keys(tmp_path, change, message):
    text = RUNTIME_SPEC.replace("depths = [1, 2]\n", "") if change.startswith("depths") else RUNTIME_SPEC
    text = text.replace('configs = ["slstm", "2d", "2d-m", "3d"]\n', "") if change.startswith("configs") else text
    text = text.replace("channels = 8\n", "") if change.startswith("budget") else text
    text = text.replace("timeout_s = 60\n", "") if change.startswith("timeout") else text
    if change.startswith("["):
        text = text + change + "\nx = 1\n"
    else:
        text = change + "\n" + text
    path = write_spec(tmp_path, text)
    with pytest.raises(UserError, match=message) as info:
        load_spec(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("text, message", [
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n', r"nothing to run"),
    ('configs=["2d"]\ndepths=[1]\nchannels=8\n[runtime]\n', r"missing key 'task'"),
    ('task = "chess"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[runtime]\n', r"key 'task' must be one of runtime, "),
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\n[runtime]\n', r"no model size"),
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\nbudget="1M"\n[runtime]\n', r"either 'budget' or"),
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[runtime]\ndtype="int8"\n',
     r"key 'runtime.dtype' must be one of float32"),
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[runtime]\nrepeats=0\n',
     r"key 'runtime.repeats' must be an integer >= 1"),
    ('task = "addition"\nconfigs=["2d"]\ndepths=[1]\n[train]\npreset="memorization-small"\n',
     r"key 'train.preset' is for memorization, not task 'addition'"),
    ('task = "addition"\nconfigs=["2d"]\ndepths=[1]\n[train]\npreset="fast"\n', r"key 'train.preset' must be one of"),
    ('task = "addition"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[train]\noptions={symbols=3}\n',
     r"unknown key 'train.options.symbols' for task addition; allowed: digits"),
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[runtime]\nimplementations=["warp"]\n',
     r"'warp' is not a sequence loop"),
    ('task = "runtime"\nconfigs = [\n', r"not valid TOML"),
    ('task = "memorization"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[train]\nearly_stopping="no"\n',
     r"key 'train.early_stopping' must be true or false"),
    ('task = "memorization"\nconfigs=["2d-m:window=appendix"]\ndepths=[1]\nchannels=8\n[runtime]\n',
     r"not a configuration.*memory_conv=0"),
])
def test_malformed_specs(tmp_path, text, message):
    path = write_spec(tmp_path, text)
    with pytest.raises(UserError, match=message) as info:
        expand(load_spec(path), code="v")
    assert str(path) in str(info.value)


@pytest.mark.parametrize("text, opened, reported", [
    ('task = "runtime"\nconfigs = ["2d", "3d"\ndepths = [1, 2]\nchannels = 8\n[runtime]\n', 2, 3),
    ('task = "runtime"\n# a comment with [ and "\nconfigs = [\n  "2d", # ] not closed\n  "3d[",\n'
     'depths = [1]\n', 3, 6),
    ('task = "runtime"\ndepths = [\n  [1,\n  2]\nchannels = 8\n', 2, 5),
    ('task = "runtime"\ndepths = [1,\n', 2, "end of document"),
])
def test_an_unclosed_array_is_reported_at_the_line_that_opened_it(tmp_path, text, opened, reported):
    """Issue 30: tomllib names the line where it noticed (the next key); the message names both."""
    path = write_spec(tmp_path, text)
    with pytest.raises(UserError) as info:
        load_spec(path)
    message = str(info.value)
    where = reported if isinstance(reported, str) else f"line {reported}"
    assert where in message and f"array opened at line {opened}" in message, message
    assert "\n" not in message


def test_a_toml_error_inside_a_line_adds_no_opening_line(tmp_path):
    path = write_spec(tmp_path, 'task = "runtime"\nconfigs = ["2d" "3d"]\n')
    with pytest.raises(UserError, match="not valid TOML") as info:
        load_spec(path)
    assert "opened at" not in str(info.value)


def test_a_misspelt_config_lists_the_valid_names_once(tmp_path):
    """Issue 30: the spec's prefix and parse_config's message each listed the seven names."""
    path = write_spec(tmp_path, RUNTIME_SPEC.replace('"3d"]', '"3dd"]'))
    with pytest.raises(UserError, match="'3dd'") as info:
        load_spec(path)
    message = str(info.value)
    assert message.count("2d-m") == 1 and message.count("knobs like") == 1, message
    assert str(path) in message and "key 'configs'" in message
