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
    ('task = "memorization"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[train]\nlr=0\n',
     r"key 'train.lr' must be a positive number, Adam's learning rate \(like 1e-4\), or a list of them, got 0"),
    ('task = "memorization"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[train]\nlr=[1e-3, 0.001]\n',
     r"key 'train.lr' must not repeat a value"),
    ('task = "memorization"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[train]\nlr=[1e-3, -1]\n',
     r"key 'train.lr' must be a positive number"),
    ('task = "memorization"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[train]\nlr="1e-4"\n',
     r"key 'train.lr' must be a positive number"),
    ('task = "memorization"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[train]\nlr=nan\n',
     r"key 'train.lr' must be a positive number"),
    ('task = "memorization"\nconfigs=["2d-m:window=appendix"]\ndepths=[1]\nchannels=8\n[runtime]\n',
     r"not a configuration.*memory_conv=0"),
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\n[[runtime]]\nchannels=8\n[[runtime]]\nchannels=8\n',
     r"two \[\[runtime\]\] tables give the same cell \(runtime 2d L=1"),
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[[runtime]]\n[[runtime]]\ndepths=[2,1]\n',
     r"two \[\[runtime\]\] tables give the same cell"),
    ('task = "memorization"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[[train]]\n[[train]]\n',
     r"key 'train' must be a table \[train\] \(one per spec\)"),
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\nruntime = []\n',
     r"key 'runtime' must be a table \[runtime\] or a list of tables"),
    ('task = "runtime"\nconfigs=["2d"]\ndepths=[1]\nchannels=8\n[[runtime]]\n[[runtime]]\nseq_len=0\n',
     r"key 'runtime.seq_len' must be an integer >= 1"),
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


RUNTIME_TABLES = """
task = "runtime"
configs = ["slstm", "2d", "3d-cn", "lstm"]
depths = [1, 4]
device = "cuda"
[[runtime]]
channels = 100
implementations = ["triton", "cuda-graph", "fast", "cudnn", "fused"]
[[runtime]]
configs = ["2d", "lstm"]
depths = [10]
budget = "10M"
implementations = ["triton", "cudnn"]
"""


def test_runtime_tables_each_give_their_own_grid_and_each_implementation_goes_where_it_exists(tmp_path):
    """[[runtime]]: several grids in one sweep; an implementation applies to the configurations that
    have it (triton and cuda-graph to the tLSTMs, cudnn to slstm and lstm, fused to slstm)."""
    cells = expand(load_spec(write_spec(tmp_path, RUNTIME_TABLES)), code="v", machine={})
    got = {(c.spec["config"], c.spec["implementation"], c.spec["depth"], c.spec["channels"], c.spec["budget"])
           for c in cells}
    m100 = {(c, i, d, 100, None) for d in (1, 4) for c, impls in (("slstm", ("cudnn", "fused")),
                                                                  ("2d", ("triton", "cuda-graph", "fast")),
                                                                  ("3d-cn", ("triton", "cuda-graph", "fast")),
                                                                  ("lstm", ("cudnn",))) for i in impls}
    assert got == m100 | {("2d", "triton", 10, None, "10M"), ("lstm", "cudnn", 10, None, "10M")}
    assert len(cells) == len(got)
    assert {tuple(c.spec["timed_with"]) for c in cells if c.spec["budget"] == "10M"} == {(10,)}


def test_on_a_device_without_cuda_the_cuda_only_cells_are_left_out_and_the_plan_says_so(tmp_path):
    from tlstm_bench.sweeps.grid import left_out
    from tlstm_bench.sweeps.plan import plan_sweep, plan_title

    spec = load_spec(write_spec(tmp_path, RUNTIME_TABLES))
    cells = expand(spec, code="v", device="cpu", machine={})
    assert {c.spec["implementation"] for c in cells} == {"fast", "cudnn", "fused"}
    assert left_out(spec, "cpu") == {"triton": 2 * 2 + 1, "cuda-graph": 2 * 2}
    assert left_out(spec) == {} and left_out(spec, "cuda:1") == {}
    plan = plan_sweep(spec, root=tmp_path / "store", device="cpu")
    assert len(plan.cells) == 5 * 2 + 1 and plan.left_out == {"triton": 5, "cuda-graph": 4}
    assert plan_title(plan).endswith("9 cells of triton, cuda-graph left out: they need a CUDA GPU")


def test_a_sweep_of_cuda_only_cells_on_a_cpu_is_one_line_saying_why(tmp_path):
    from tlstm_bench.sweeps.plan import plan_sweep

    path = write_spec(tmp_path, RUNTIME_TABLES.replace(', "fast", "cudnn", "fused"', '')
                      .replace('["triton", "cudnn"]', '["triton"]'))
    with pytest.raises(UserError, match=r"no cell of sweep 't' can run on cpu: 9 cells of triton, cuda-graph left "
                                        r"out: they need a CUDA GPU; run it with --device cuda on a GPU machine"):
        plan_sweep(path, root=tmp_path / "store", device="cpu")


def test_the_shipped_runtime_sweep_is_the_gpu_figure_and_its_headline_part():
    """The seven configurations and lstm at L = 1, 4, 7, 10, at M = 100 and 10M, float32; the
    headline part (the device session's two filtered runs) is 80 of its 216 cells; every tLSTM is
    timed with triton-graph too."""
    from tlstm_bench.sweeps.grid import parse_filters, select
    from tlstm_bench.vocab import CONFIG_NAMES

    spec = load_spec("runtime")
    cells = expand(spec, code="v", machine={})
    assert spec.device == "cuda" and len(cells) == 216
    graphed = {(c.spec["config"], c.spec["depth"]) for c in cells if c.spec.get("implementation") == "triton-graph"}
    assert graphed == {(config, depth) for config in CONFIG_NAMES if config != "slstm" for depth in (1, 4, 7, 10)}
    assert {c.spec["config"] for c in cells} == {*CONFIG_NAMES, "lstm"}
    assert {c.spec["depth"] for c in cells} == {1, 4, 7, 10} and {c.spec["dtype"] for c in cells} == {"float32"}
    assert {(c.spec["channels"], c.spec["budget"]) for c in cells} == {(100, None), (None, "10M")}
    fastest = ["implementation=triton,cuda-graph,cudnn"]
    m100 = select(cells, parse_filters(["channels=100", *fastest]))
    big = select(cells, parse_filters(["budget=10M", "config=2d,3d-cn,slstm,lstm", *fastest]))
    assert {c.spec["config"] for c in m100} == {*CONFIG_NAMES, "lstm"} and len(m100) == 56
    assert {c.spec["config"] for c in big} == {"2d", "3d-cn", "slstm", "lstm"} and len(big) == 24


def test_the_runtime_sweep_dry_run_on_a_cpu_says_what_it_leaves_out(tmp_path):
    """`sweep runtime --dry-run --device cpu`: the plan of the CPU implementations, and one line
    (at 80 columns) saying how many cells need a CUDA GPU; on cuda every cell is planned."""
    from typer.testing import CliRunner

    from tlstm_bench.cli import app

    def dry(*extra):
        result = CliRunner().invoke(app, ["sweep", "runtime", "--dry-run", "--results-dir", str(tmp_path), *extra],
                                    env={"COLUMNS": "80"})
        assert result.exit_code == 0, result.output
        assert max(len(line) for line in result.output.splitlines()) <= 80
        return " ".join(result.output.split())

    on_cpu = dry("--device", "cpu")
    assert "72 cells" in on_cpu
    assert "144 cells of triton, triton-graph, cuda-graph left out: they need a CUDA GPU" in on_cpu
    assert "x20 fast" in on_cpu and "x20 triton" not in on_cpu and "x20 cuda-graph" not in on_cpu
    assert "216 cells" in dry() and "left out" not in dry()
