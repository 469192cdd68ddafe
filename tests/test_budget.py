"""Parameter counting and the channel solver (SPEC section 7)."""

import pytest

from tlstm_bench import UserError, build_model
from tlstm_bench.models import CONFIG_NAMES, count_params, parse_budget, solve_channels

from model_helpers import KNOB_CONFIGS

# Which parameter holds which budget component; the Q rows of w_h/b_h are the memory kernel.
COMPONENT_OF = {"w_x": "input_projection", "b_x": "input_projection", "w_y": "output_layer",
                "b_y": "output_layer", "norm_gain": "norm", "norm_bias": "norm",
                "w_ih": "recurrent_kernel", "w_hh": "recurrent_kernel", "b": "recurrent_kernel"}


def counted_by_component(model):
    counts = dict.fromkeys(["input_projection", "recurrent_kernel", "memory_kernel", "norm", "output_layer"], 0)
    m = model.channels
    for name, p in model.named_parameters():
        if name in ("w_h", "b_h"):
            gates = p[..., :4 * m]  # G, I, F, O; the rest are Q channels
            counts["recurrent_kernel"] += gates.numel()
            counts["memory_kernel"] += p.numel() - gates.numel()
        else:
            counts[COMPONENT_OF[name]] += p.numel()
    return counts


@pytest.mark.parametrize("config", list(CONFIG_NAMES) + KNOB_CONFIGS)
@pytest.mark.parametrize("depth", [1, 3, 5])
@pytest.mark.parametrize("channels", [1, 7, 20])
@pytest.mark.parametrize("io", [dict(vocab=13), dict(input_size=3, output_size=10)])
def test_formula_equals_counted(config, depth, channels, io):
    model = build_model(config, depth, channels=channels, **io)
    r = io.get("vocab", io.get("input_size"))
    s = io.get("vocab", io.get("output_size"))
    formula = count_params(config, depth, channels, r, s)
    assert formula.total == sum(p.numel() for p in model.parameters())
    assert formula.as_dict() == counted_by_component(model)


@pytest.mark.parametrize("config, paper_m", [("slstm", 1120), ("2d-f", 1120), ("2d", 901), ("2d-m", 901),
                                              ("3d", 522), ("3d-ln", 522), ("3d-cn", 522)])
@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_paper_channels_at_10m(config, paper_m, depth):
    """Budget 10M with 205 symbols: the paper's M = 1120 / 901 / 522, within 3%."""
    m = solve_channels(config, depth, 10_000_000, 205, 205)
    assert abs(m - paper_m) / paper_m <= 0.03


@pytest.mark.parametrize("config", CONFIG_NAMES)
@pytest.mark.parametrize("budget", [5_000, 123_456, 10_000_000])
def test_solver_picks_largest_m_within_budget(config, budget):
    m = solve_channels(config, 4, budget, 205, 205)
    assert count_params(config, 4, m, 205, 205).total <= budget
    assert count_params(config, 4, m + 1, 205, 205).total > budget


def test_budget_build_reports_actual_count():
    model = build_model("3d-cn", 4, vocab=205, budget="10M")
    assert sum(p.numel() for p in model.parameters()) <= 10_000_000


@pytest.mark.parametrize("text, value", [("10M", 10_000_000), ("2.5m", 2_500_000), ("500K", 500_000),
                                         ("12345", 12_345), (777, 777), ("1G", 10**9)])
def test_parse_budget(text, value):
    assert parse_budget(text, input_size=5, output_size=5) == value


def test_budget_as_slstm_count():
    expected = sum(p.numel() for p in build_model("slstm", 1, vocab=11, channels=400).parameters())
    assert parse_budget("slstm:400", input_size=11, output_size=11) == expected
    assert parse_budget("SLSTM:400", input_size=11, output_size=11) == expected
    # The sLSTM at that budget gets exactly M = 400 back, at any depth (weights are shared).
    assert build_model("slstm", 7, vocab=11, budget="slstm:400").channels == 400


@pytest.mark.parametrize("text", ["ten", "10X", "", "-5", "0", "slstm:", "slstm:abc", "slstm:0", "1.5.2M", True])
def test_malformed_budget(text):
    with pytest.raises(UserError):
        parse_budget(text, input_size=5, output_size=5)


def test_budget_too_small():
    with pytest.raises(UserError, match="too small"):
        solve_channels("3d-cn", 4, 100, 205, 205)
