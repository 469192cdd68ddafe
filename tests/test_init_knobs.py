"""The initialisation knobs (models/config.py, models/init.py; docs/fidelity.md rows 13-17): each
changes the initial parameters as documented, a default model is the model built before they
existed, and every implementation (eager, fast, triton) starts from the same parameters and
computes the same outputs from them."""

from __future__ import annotations

import math
import os

import pytest
import torch

from tlstm_bench.errors import UserError
from tlstm_bench.models import build_model, parse_config
from tlstm_bench.models.init import apply_init
from tlstm_bench.models.tlstm import kernel_offsets

TRITON_DEVICE = os.environ.get("TLSTM_TRITON_TEST_DEVICE", "cpu")  # conftest.py set TRITON_INTERPRET=1 for "cpu"
EVERY_KNOB = "3d-cn:cell_kernel=shift,cell_kernel_bias=2,input_init=normal,input_std=0.5,bias_init=torch7," \
             "recurrent_scale=2"


def built(config, depth=3, seed=0, **kw):
    torch.manual_seed(seed)
    return build_model(config, depth, **{"vocab": 65, "channels": 16, **kw})


def params(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("config, label", [
    ("3d-cn", "3d-cn"),
    ("3d-cn:cell_kernel=shift,cell_kernel_bias=3", "3d-cn:cell_kernel=shift"),  # a default strength is not written
    ("3d-cn:recurrent_scale=1,input_init=uniform", "3d-cn"),
    ("3D-CN:Input_Init=normal,input_std=0.25", "3d-cn:input_init=normal,input_std=0.25"),
    ("tlstm:dims=2,window=appendix,cell_kernel=centre", "2d:window=appendix,cell_kernel=centre"),
    ("tlstm:dims=4,bias_init=torch7", "tlstm:dims=4,kernel=3,memory_conv=1,norm=none,bias_init=torch7"),
    ("slstm:input_init=normal,recurrent_scale=0.5", "slstm:input_init=normal,recurrent_scale=0.5"),
    ("lstm:bias_init=torch7", "lstm:bias_init=torch7"),
    (EVERY_KNOB, EVERY_KNOB),
])
def test_labels_name_only_the_knobs_off_their_defaults_and_parse_back(config, label):
    arch = parse_config(config)
    assert arch.label == label and parse_config(label) == arch


@pytest.mark.parametrize("config, message", [
    ("3d-cn:cell_kernel=up", "unknown cell_kernel"),
    ("3d-cn:cell_kernel_bias=5", "give one of them too"),
    ("3d-cn:input_std=2", "give input_init=normal too"),
    ("3d-cn:recurrent_scale=0", "must be above 0"),
    ("3d-cn:input_init=normal,input_std=inf", "finite"),
    ("3d-cn:cell_kernel=shift,cell_kernel_bias=x", "must be a number"),
    ("2d-m:cell_kernel=shift", "memory_conv=0 has none"),
    ("slstm:cell_kernel=centre", "slstm has none"),
    ("slstm:kernel=3", "take only the initialisation knobs"),
    ("3d:window=appendix,cell_kernel=shift", "does not have"),
    ("3d-cn:bias_init=torch7,bias_init=zeros", "twice"),
])
def test_bad_knobs_are_one_line_errors(config, message):
    with pytest.raises(UserError, match=message):
        parse_config(config)


@pytest.mark.parametrize("config", ["3d-cn", "2d-m", "slstm", "lstm"])
def test_default_knobs_change_nothing_and_draw_nothing(config):
    model = built(config)
    before, rng = params(model), torch.get_rng_state()
    apply_init(model)  # build_model applied it once already
    assert all(torch.equal(v, before[k]) for k, v in params(model).items())
    assert torch.equal(torch.get_rng_state(), rng)


@pytest.mark.parametrize("config, offset", [("3d-cn", (-1, -1)), ("2d", (-1,)), ("2d-f", (-1,)),
                                            ("tlstm:dims=4", (-1, -1, -1)), ("3d-cn:window=appendix", None)])
@pytest.mark.parametrize("strength", [3.0, 5.0])
def test_shift_puts_the_stated_softmax_mass_on_the_neighbour_toward_the_input(config, offset, strength):
    """With h = 0 and z = 0 the gates are their biases: the memory-cell kernel is softmax(b^Q), so
    the entry reading the neighbour one location toward the input (offset -1 per coordinate) has
    e^S / (e^S + K^(D-1) - 1), and a memory moves one location toward the output corner."""
    knobs = f"{config}{',' if ':' in config else ':'}cell_kernel=shift,cell_kernel_bias={strength}"
    if offset is None:  # the appendix window reads offsets 0 .. 2 for K = 3: no neighbour toward the input
        with pytest.raises(UserError, match="does not have"):
            parse_config(knobs)
        return
    model = built(knobs, depth=4, channels=3)
    arch, m = model.arch, model.channels
    entry = arch.cell_kernel_entry()
    assert kernel_offsets(arch)[entry] == offset
    q = torch.softmax(model.b_h[4 * m:], 0)
    want = math.exp(strength) / (math.exp(strength) + arch.kernel_entries - 1)
    assert q[entry].item() == pytest.approx(want, rel=1e-6)
    # One step from h = 0, z = 0 and a memory at the input corner (location 0): it moves one
    # location along the diagonal, scaled by the forget gate (sigmoid(1)) and that weight.
    p, n = model.tensor_size, model.num_locations
    c = torch.zeros(1, n, m)
    c[0, 0] = 1.0
    with torch.no_grad():
        new = model.step(torch.zeros(1, m), torch.zeros(1, n, m), c).c
    diagonal = sum(p ** j for j in range(arch.dims - 1))  # flat index of (1, 1, ...)
    torch.testing.assert_close(new[0, diagonal], torch.full((m,), torch.sigmoid(torch.tensor(1.0)).item() * want))


def test_centre_keeps_the_memory_in_place_and_only_q_biases_change():
    plain, centre = built("3d-cn"), built("3d-cn:cell_kernel=centre,cell_kernel_bias=4")
    m, arch = centre.channels, centre.arch
    assert kernel_offsets(arch)[arch.cell_kernel_entry()] == (0, 0)
    diff = centre.b_h - plain.b_h
    assert diff[4 * m + arch.cell_kernel_entry()] == 4.0 and diff.abs().sum() == 4.0
    assert all(torch.equal(v, params(plain)[k]) for k, v in params(centre).items() if k != "b_h")


def test_normal_input_init_has_the_stated_std_and_is_the_earlier_input_init():
    """W^x ~ N(0, s^2) within sampling error (65 x 100 draws: the sample std is within 5% at
    over 5 sigma); nothing else changes; and s = 1 is exactly what TrainSettings.input_init="normal"
    built before it became a knob (W^x drawn right after the model), so those records are this."""
    plain = built("3d-cn", channels=100)
    for std in (0.5, 1.0, 3.0):
        model = built(f"3d-cn:input_init=normal,input_std={std}", channels=100)
        w = model.w_x.detach()
        assert abs(w.std().item() / std - 1) < 0.05 and abs(w.mean().item()) < 5 * std / math.sqrt(w.numel())
        assert all(torch.equal(v, params(plain)[k]) for k, v in params(model).items() if k != "w_x")
    earlier = built("3d-cn", channels=100)
    with torch.no_grad():
        earlier.w_x.normal_(0.0, 1.0)
    assert torch.equal(built("3d-cn:input_init=normal", channels=100).w_x, earlier.w_x)


@pytest.mark.parametrize("config, core, fan_in", [("3d-cn", "b_h", 9 * 16), ("2d", "b_h", 3 * 16),
                                                  ("slstm", "b", 16), ("lstm", "b", 16)])
def test_torch7_biases_are_uniform_within_one_over_root_fan_in_and_keep_the_forget_bias(config, core, fan_in):
    plain, model = built(config), built(f"{config}:bias_init=torch7")
    m = model.channels
    for name, fan in (("b_x", 65), (core, fan_in), ("b_y", m)):
        bias = getattr(model, name).detach()
        rest = bias
        if name == core:
            forget = (..., slice(2 * m, 3 * m)) if core == "b_h" else (..., slice(m, 2 * m))
            assert torch.all(bias[forget] == 1.0)  # the paper's forget-gate bias
            rest = torch.cat([bias[..., :forget[1].start], bias[..., forget[1].stop:]], -1)
        bound = 1 / math.sqrt(fan)
        assert rest.abs().max() <= bound and rest.abs().max() > 0.6 * bound and rest.std() > 0.3 * bound
    weights = [k for k in params(plain) if k.startswith("w_")]
    assert all(torch.equal(params(model)[k], params(plain)[k]) for k in weights)
    if model.arch.norm != "none":
        assert torch.all(model.norm_bias == 0) and torch.all(model.norm_gain == 1)


@pytest.mark.parametrize("config, names", [("3d-cn", ("w_h",)), ("slstm", ("w_ih", "w_hh")),
                                           ("lstm", ("w_ih", "w_hh"))])
def test_recurrent_scale_multiplies_the_recurrent_weights_only(config, names):
    plain, model = params(built(config)), params(built(f"{config}:recurrent_scale=0.25"))
    for k, v in model.items():
        assert torch.equal(v, plain[k] * 0.25 if k in names else plain[k]), k


def test_records_of_the_models_name_their_knobs():
    arch = parse_config(EVERY_KNOB)
    assert arch.init == {"cell_kernel": "shift", "cell_kernel_bias": 2.0, "input_init": "normal", "input_std": 0.5,
                         "bias_init": "torch7", "recurrent_scale": 2.0}
    assert parse_config("slstm").init["cell_kernel"] is None and parse_config("3d-cn").init["input_std"] is None


def _outputs(model, dtype=torch.float64, device="cpu"):
    model = model.to(device, dtype)
    x = torch.randint(0, 65, (2, 3), generator=torch.Generator().manual_seed(1)).to(device)
    y, state = model(x)
    return [t.detach().to("cpu", torch.float64) for t in (y, state.h, state.c)]


@pytest.mark.parametrize("config", [EVERY_KNOB, "2d-f:cell_kernel=shift,bias_init=torch7"])
def test_every_implementation_starts_from_the_same_parameters_and_outputs(config):
    """``build_model`` applies the knobs, so eager, fast and reference get one set of parameters
    (the same seed) and, from it, one output (float64)."""
    models = {impl: built(config, depth=2, channels=4, implementation=impl) for impl in ("eager", "fast", "reference")}
    want = params(models["eager"])
    for impl, model in models.items():
        assert all(torch.equal(v, want[k]) for k, v in params(model).items()), impl
    outputs = {impl: _outputs(model) for impl, model in models.items()}
    for impl in ("fast", "reference"):
        for got, expected in zip(outputs[impl], outputs["eager"]):
            torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-11)


@pytest.mark.triton
def test_triton_starts_from_the_same_parameters_and_outputs():
    """The same for ``triton`` (Triton's interpreter on a CPU, float32, tiny sizes)."""
    pytest.importorskip("triton")
    from tlstm_bench.models import triton_tlstm

    if TRITON_DEVICE == "cpu" and not triton_tlstm.INTERPRETED:
        pytest.fail("triton_tlstm was imported before TRITON_INTERPRET=1 was set (tests/conftest.py sets it)")
    if TRITON_DEVICE == "cuda" and not torch.cuda.is_available():
        pytest.skip("TLSTM_TRITON_TEST_DEVICE=cuda but CUDA is not available")
    eager, triton = (built(EVERY_KNOB, depth=2, channels=4, implementation=impl) for impl in ("eager", "triton"))
    assert all(torch.equal(v, params(eager)[k]) for k, v in params(triton).items())
    want = _outputs(eager)
    for got, expected in zip(_outputs(triton, torch.float32, TRITON_DEVICE), want):
        scale = expected.abs().max().clamp_min(1e-3)
        assert (got - expected).abs().max() <= 2e-5 * scale


def test_time_takes_the_knobs_in_the_configuration_and_records_them():
    from typer.testing import CliRunner

    from tlstm_bench.cli import app

    result = CliRunner().invoke(app, ["time", "3d-cn:cell_kernel=shift,recurrent_scale=2", "--depths", "1",
                                      "--channels", "4", "--seq-len", "5", "--repeats", "1", "--warmup", "0",
                                      "--json", "--no-store"])
    assert result.exit_code == 0, result.output
    (record,) = __import__("json").loads(result.stdout)  # progress goes to stderr
    assert record["config"] == "3d-cn:cell_kernel=shift,recurrent_scale=2"
    assert record["init"]["cell_kernel"] == "shift" and record["init"]["recurrent_scale"] == 2.0
