"""Grid expansion: a spec becomes cells, each with a stable id; --only selects them."""

from __future__ import annotations

import pytest

from tlstm_bench.errors import UserError
from tlstm_bench.sweeps.grid import expand, parse_filters, select
from tlstm_bench.sweeps.spec import load_spec

from sweep_helpers import RUNTIME_SPEC, write_spec


def test_grid_is_the_product_and_ids_are_stable(tmp_path):
    spec = load_spec(write_spec(tmp_path, RUNTIME_SPEC.replace("depths = [1, 2]", "depths = [1, 2]\nseeds = [0, 1]")))
    cells = expand(spec, code="v1")
    assert len(cells) == 4 * 2 * 2
    assert {(c.spec["config"], c.spec["depth"], c.spec["seed"]) for c in cells} == {
        (c, d, s) for c in ("slstm", "2d", "2d-m", "3d") for d in (1, 2) for s in (0, 1)}
    assert [c.id for c in expand(spec, code="v1")] == [c.id for c in cells]       # stable
    assert len({c.id for c in cells}) == len(cells)                              # unique
    other = expand(spec, code="v2")
    assert {c.key for c in other} == {c.key for c in cells}                      # key: spec only
    assert not {c.id for c in other} & {c.id for c in cells}                     # id: + code version
    longer = expand(load_spec(write_spec(tmp_path, RUNTIME_SPEC.replace("seq_len = 5", "seq_len = 6"), "u")), code="v1")
    assert not {c.key for c in longer} & {c.key for c in cells}                  # every setting counts
    assert cells[0].spec["vocab"] == 205 and cells[0].spec["device"] == "cpu"


def test_implementations_apply_where_they_exist(tmp_path):
    spec = load_spec(write_spec(tmp_path, RUNTIME_SPEC.replace("repeats = 2", 'repeats = 2\nimplementations = ["default", "loop"]')))
    cells = expand(spec, code="v")
    loops = [c for c in cells if c.spec["implementation"] == "loop"]
    assert loops and all(c.spec["config"] == "slstm" for c in loops)
    assert len(cells) == 4 * 2 + 2


def test_task_sweeps_time_the_task_model(tmp_path):
    text = 'task = "addition"\nconfigs=["2d"]\ndepths=[1]\n[runtime]\nchannels=8\n[train]\npreset="addition-small"\n'
    cells = expand(load_spec(write_spec(tmp_path, text)), code="v")
    runtime = [c for c in cells if c.kind == "runtime"][0]
    train = [c for c in cells if c.kind == "train"][0]
    assert runtime.spec["vocab"] == 11 and runtime.spec["task"] == "addition"
    assert train.spec["preset"] == "addition-small" and train.spec["channels"] is None


def test_only_filters(tmp_path):
    cells = expand(load_spec(write_spec(tmp_path, RUNTIME_SPEC)), code="v")
    picked = select(cells, parse_filters(["config=2d,3d", "depth=2"]))
    assert {(c.spec["config"], c.spec["depth"]) for c in picked} == {("2d", 2), ("3d", 2)}
    assert select(cells, parse_filters([f"id={cells[3].id[:6]}"])) == [cells[3]]
    with pytest.raises(UserError, match="unknown key 'colour'"):
        parse_filters(["colour=red"])
    with pytest.raises(UserError, match="KEY=V1,V2"):
        parse_filters(["depth"])


def test_only_selects_a_config_with_overrides_whose_commas_are_its_own():
    """The shipped memorization-init spec crosses two configs that differ in one override; --only
    config= names either whole, beside a plain one."""
    cells = expand(load_spec("memorization-init"), code="v")
    five = "3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2"
    picked = select(cells, parse_filters([f"config=2d,{five}", "depth=7,10"]))
    assert {(c.spec["config"], c.spec["depth"]) for c in picked} == {(five, 7), (five, 10)}
    assert parse_filters([f"config={five},slstm,tlstm:dims=4,kernel=5"])["config"] == {
        five, "slstm", "tlstm:dims=4,kernel=5"}


def test_runtime_cells_key_on_the_machine_and_training_cells_do_not(tmp_path):
    text = RUNTIME_SPEC.replace('task = "runtime"', 'task = "memorization"') + \
        '[train]\npreset = "memorization-small"\nmax_samples = 30\n'
    spec = load_spec(write_spec(tmp_path, text))
    here = expand(spec, code="v")
    other = expand(spec, code="v", machine={"gpu": None, "cpu_model": "another CPU", "cpus": 64})
    kinds = {c.key: c.kind for c in here}
    assert here[0].spec["machine"]["cpus"] >= 1 and "cpu_model" in here[0].spec["machine"]
    shared = {c.key for c in here} & {c.key for c in other}
    assert shared and all(kinds[k] == "train" for k in shared)             # training: the same cells
    assert len(shared) == sum(c.kind == "train" for c in here)             # runtime: all different


TRAIN_SPEC = """
task = "memorization"
configs = ["slstm", "2d"]
depths = [1]
timeout_s = 60
[train]
preset = "memorization-small"
max_samples = 30
"""


def test_a_train_lr_is_in_its_cells_and_their_keys_and_only_when_given(tmp_path):
    plain = expand(load_spec(write_spec(tmp_path, TRAIN_SPEC, "plain")), code="v1")
    assert all("lr" not in c.spec for c in plain)   # a spec without it keeps the cells it had
    slow = expand(load_spec(write_spec(tmp_path, TRAIN_SPEC + "lr = 1e-4\n", "slow")), code="v1")
    assert [c.spec["lr"] for c in slow] == [1e-4, 1e-4]
    assert not {c.key for c in slow} & {c.key for c in plain}
    assert slow[0].label().endswith(" lr=0.0001")
    assert not plain[0].label().endswith("lr=0.001")


def test_a_list_of_lrs_is_an_axis_of_the_grid_and_only_lr_compares_numbers(tmp_path):
    cells = expand(load_spec(write_spec(tmp_path, TRAIN_SPEC + "lr = [1e-3, 1e-4]\n")), code="v1")
    assert [(c.spec["config"], c.spec["lr"]) for c in cells] == [
        ("slstm", 1e-3), ("slstm", 1e-4), ("2d", 1e-3), ("2d", 1e-4)]
    assert len({c.key for c in cells}) == 4
    assert [c.spec["lr"] for c in select(cells, parse_filters(["lr=0.0001"]))] == [1e-4, 1e-4]
    assert len(select(cells, parse_filters(["lr=1e-4,1e-3", "config=2d"]))) == 2
    plain = expand(load_spec(write_spec(tmp_path, TRAIN_SPEC, "plain")), code="v1")
    assert len(select(plain, parse_filters(["lr=1e-3"]))) == 2    # no lr given: the default, the paper's
    assert select(plain, parse_filters(["lr=1e-4"])) == []
    with pytest.raises(UserError, match=r"--only lr takes learning rates like lr=1e-3,1e-4, got 'fast'"):
        parse_filters(["lr=fast"])


def test_a_train_cell_trains_at_its_lr(tmp_path):
    from tlstm_bench.sweeps.cell import execute

    (cell,) = [c for c in expand(load_spec(write_spec(tmp_path, TRAIN_SPEC + "lr = 3e-4\n")), code="v")
               if c.spec["config"] == "slstm"]
    record = execute(cell.spec, checkpoint_dir=tmp_path / "checkpoints")
    assert record["lr"] == 3e-4 and record["samples_seen"] >= 30


def test_a_cell_label_says_each_thing_once(tmp_path):
    """A sweep's log line names the cell: 'runtime 2d L=1 ...', not 'runtime runtime', and a
    preset's cell 'preset memorization-small', not 'memorization-small size'."""
    train = expand(load_spec(write_spec(tmp_path, TRAIN_SPEC, "t")), code="v1")[0]
    assert train.label().startswith("train memorization ") and "preset memorization-small" in train.label()
    runtime = expand(load_spec(write_spec(tmp_path, RUNTIME_SPEC, "r")), code="v1")[0]
    assert runtime.label().startswith(f"runtime {runtime.spec['config']} L=")
