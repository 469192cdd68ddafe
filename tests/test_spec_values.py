"""Sweep spec values checked at plan time (issue 11): what is accepted, and how it is named.

The refusals themselves (bad option values, float16, two spellings of a configuration, a GPU
this machine lacks) are cases of the bad-input battery, ``tests/test_bad_inputs.py``.
"""

from __future__ import annotations

import textwrap
import tomllib

import pytest
import torch

from tlstm_bench.errors import UserError
from tlstm_bench.sweeps.grid import expand
from tlstm_bench.sweeps.spec import available_specs, check_device_here, load_spec, parse_spec, shipped_spec


def spec(text: str):
    return parse_spec(tomllib.loads(textwrap.dedent(text)), "/tmp/t.toml")


def test_configurations_are_named_canonically_in_cells_and_so_in_records():
    s = spec("""
        task = "memorization"
        configs = [" 2D", "tlstm:dims=3,kernel=3,memory_conv=1,norm=cn", "3d:window=appendix"]
        depths = [1]
        channels = 4
        [train]
        max_samples = 30
    """)
    assert s.sections[0].configs == ("2d", "3d-cn", "3d:window=appendix")
    assert [c.spec["config"] for c in expand(s, code="x", machine={})] == ["2d", "3d-cn", "3d:window=appendix"]


def test_a_spelling_of_a_configuration_is_the_same_cell_as_its_canonical_name():
    text = """
        task = "memorization"
        configs = [{}]
        depths = [1]
        channels = 4
        [train]
        max_samples = 30
    """
    ids = [expand(spec(text.format(c)), code="x", machine={})[0].id
           for c in ('"2d"', '"2D"', '"tlstm:dims=2,kernel=3,memory_conv=1,norm=none"')]
    assert len(set(ids)) == 1


@pytest.mark.parametrize("name", available_specs())
def test_shipped_specs_name_their_configurations_canonically_so_their_cell_ids_do_not_change(name):
    path = shipped_spec(name)
    raw = tomllib.loads(path.read_text())
    tables = [t for kind in ("runtime", "train") if kind in raw
              for t in (raw[kind] if isinstance(raw[kind], list) else [raw[kind]])]  # [[runtime]]: several
    for section, table in zip(load_spec(name).sections, tables, strict=True):
        given = table.get("configs", raw.get("configs"))
        assert list(section.configs) == given


def test_options_are_checked_with_the_presets_options_under_them():
    base = """
        task = "memorization"
        configs = ["2d"]
        depths = [1]
        [train]
        preset = "memorization-small"
        options = {{ symbols = {} }}
    """
    assert spec(base.format(2)).sections[0].settings["options"] == {"symbols": 2}  # 64 of 8^2 sequences: fine
    with pytest.raises(UserError, match="only 8 distinct sequences"):  # 8^1: all in the test set
        spec(base.format(1))


def test_a_gpu_sweep_still_plans_on_a_machine_without_one_and_is_refused_only_when_run_here():
    s = load_spec("wiki")  # device = "cuda"
    assert s.device == "cuda"
    check_device_here("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="no usable GPU"):
            check_device_here("cuda")
    with pytest.raises(UserError, match="GPU"):
        check_device_here(f"cuda:{torch.cuda.device_count() + 3}")
