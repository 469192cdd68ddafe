"""``info`` and ``audit`` through Typer's test runner, and every bad input they must refuse."""

import json

import pytest
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.models import count_params

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def test_info_json_3d_cn_at_10m():
    result = run("info", "3d-cn", "--depth", "4", "--budget", "10M", "--vocab", "205", "--json")
    assert result.exit_code == 0, result.output
    card = json.loads(result.stdout)
    for key in ("config", "depth", "channels", "tensor_size", "kernel", "dims", "params"):
        assert key in card
    assert card["config"] == "3d-cn" and card["dims"] == 3 and card["kernel"] == 3 and card["tensor_size"] == 4
    assert abs(card["channels"] - 522) / 522 <= 0.03
    assert card["params"] <= 10_000_000
    assert card["params"] == sum(card["params_by_component"].values())
    assert card["sequential_steps"] == 100 + 4 - 1


def test_info_json_says_whether_the_model_is_causal():
    """Measured by the audit of that model: LN over all locations lets y_t see later inputs at L >= 2."""
    cards = {}
    for config, depth in (("3d-ln", 2), ("3d-cn", 2), ("3d-ln", 1)):
        result = run("info", config, "--depth", str(depth), "--budget", "10M", "--vocab", "205", "--json")
        assert result.exit_code == 0, result.output
        cards[config, depth] = json.loads(result.stdout)["causal"]
    assert cards == {("3d-ln", 2): False, ("3d-cn", 2): True, ("3d-ln", 1): True}
    table = run("info", "3d-ln", "--depth", "2", "--channels", "4", "--vocab", "5")
    assert "causal (measured)" in table.output and "no: y_t sees later inputs" in table.output


def test_info_slstm_sequential_steps():
    card = json.loads(run("info", "slstm", "--depth", "4", "--channels", "50", "--vocab", "20",
                          "--seq-len", "30", "--json").stdout)
    assert card["sequential_steps"] == 30 * 4 and card["tensor_size"] is None


def test_info_table():
    result = run("info", "2d", "--depth", "3", "--channels", "16", "--input-size", "1", "--output-size", "10")
    assert result.exit_code == 0, result.output
    assert "P (tensor size)" in result.stdout and "params: total" in result.stdout


def test_audit_exit_codes():
    ok = run("audit", "2d", "slstm", "--depths", "1,2")
    assert ok.exit_code == 0 and "ok" in ok.stdout
    bad = run("audit", "3d-ln", "--depths", "1,2")
    assert bad.exit_code == 1
    assert "leak" in bad.stdout and "not separable" in bad.stdout


def test_audit_json():
    result = run("audit", "3d", "--depths", "2", "--json")
    assert result.exit_code == 0
    [rec] = json.loads(result.stdout)
    assert rec["config"] == "3d" and rec["separable"] is True


BAD = [
    (["info", "4d-xl", "--depth", "2", "--channels", "8", "--vocab", "5"], "slstm, 2d, 2d-m"),
    (["info", "2d", "--depth", "0", "--channels", "8", "--vocab", "5"], "depth"),
    (["info", "tlstm:kernel=1", "--depth", "2", "--channels", "8", "--vocab", "5"], "kernel"),
    (["info", "3d-cn", "--depth", "4", "--budget", "500", "--vocab", "205"], "too small"),
    (["info", "2d", "--depth", "2", "--channels", "8", "--budget", "10M", "--vocab", "5"], "exactly one"),
    # No size at all is not an error: info takes budget 10M (test_info_without_a_size_...).
    (["info", "2d", "--depth", "2", "--budget", "10 apples", "--vocab", "5"], "malformed budget"),
    (["info", "2d", "--depth", "2", "--budget", "slstm:x", "--vocab", "5"], "malformed budget"),
    (["info", "2d", "--depth", "2", "--channels", "8", "--output-size", "3"], "--vocab"),  # half a real input
    (["info", "2d", "--depth", "2", "--channels", "8", "--vocab", "5", "--input-size", "3"], "not both"),
    (["info", "2d:colour=red", "--depth", "2", "--channels", "8", "--vocab", "5"], "knob"),
    (["info", "2d-m:window=appendix", "--depth", "2", "--channels", "8", "--vocab", "5"], "memory_conv=0"),
    (["info", "2d:window=centre", "--depth", "2", "--channels", "8", "--vocab", "5"], "aligned, appendix"),
    (["audit", "nope"], "unknown config"),
    (["audit", "2d", "--depths", "1,x"], "--depths"),
    (["audit", "2d", "--depths", "0"], "depth"),
]


@pytest.mark.parametrize("args, needle", BAD)
def test_bad_input_one_line_exit_2(args, needle):
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert needle in lines[0]


def test_budget_table_json():
    result = run("budget", "slstm", "2d", "3d-cn", "--depths", "1,4", "--json")
    assert result.exit_code == 0, result.output
    cards = {(c["config"], c["depth"]): c for c in json.loads(result.stdout)}
    assert set(cards) == {(c, d) for c in ("slstm", "2d", "3d-cn") for d in (1, 4)}
    assert all(c["params"] <= 10_000_000 for c in cards.values())
    assert cards["slstm", 1]["channels"] == cards["slstm", 4]["channels"]  # shared weights


def test_budget_bad_budget():
    result = run("budget", "2d", "--budget", "lots")
    assert result.exit_code == 2 and "malformed budget" in result.stderr


def info_json(*args):
    result = run("info", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_info_shows_the_window_and_it_costs_no_parameter():
    appendix = info_json("3d:window=appendix", "--depth", "3", "--channels", "20", "--vocab", "11")
    aligned = info_json("3d", "--depth", "3", "--channels", "20", "--vocab", "11")
    assert appendix["config"] == "3d:window=appendix" and appendix["paper_name"] is None
    assert appendix["window"] == "appendix" and aligned["window"] == "aligned"
    assert appendix["params"] == aligned["params"]
    assert appendix["params_by_component"] == aligned["params_by_component"]
    assert info_json("2d-m", "--depth", "2", "--channels", "4", "--vocab", "5")["window"] is None


def test_info_counts_in_units_of_2_20_as_table_1():
    """Table 1's 50.1M for 3D tLSTM+CN (L=6, M=1200) is its full count divided by 2^20."""
    card = info_json("3d-cn", "--depth", "6", "--channels", "1200", "--vocab", "205")
    assert card["params"] == 52_521_814
    assert card["params_mebi"] == card["params"] / 2**20 and round(card["params_mebi"], 1) == 50.1


@pytest.mark.parametrize("size", [["--budget", "slstm:400"], ["--channels", "400"]])
def test_info_literal_and_matched_m(size):
    """Both readings of "M is 400" in one card: the count at M=400 and the M matched to slstm:400."""
    card = info_json("3d", "--depth", "7", *size, "--vocab", "11")
    assert card["literal_channels"] == 400
    assert card["literal_params"] == count_params("3d", 7, 400, 11, 11).total
    assert card["matched_budget"] == "slstm:400" and card["matched_channels"] == 187
    assert card["matched_params"] == count_params("3d", 7, 187, 11, 11).total
    assert card["channels"] == (187 if size[0] == "--budget" else 400)
    table = run("info", "3d", "--depth", "7", *size, "--vocab", "11").stdout
    table = " ".join(table.split())
    assert "literal M=400" in table and "matched to slstm:400" in table and "2^20" in table


def test_info_plain_budget_has_no_literal_m():
    card = info_json("3d-cn", "--depth", "4", "--budget", "10M", "--vocab", "205")
    assert card["literal_channels"] is None and card["literal_params"] is None
    assert card["matched_channels"] == card["channels"] and card["matched_params"] == card["params"]


def test_budget_shows_the_literal_counts():
    result = run("budget", "slstm", "3d", "--budget", "slstm:400", "--vocab", "11", "--depths", "1,7")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # rich wraps titles to the table's width
    assert "literal M=400" in text and "5.803M" in text  # 3D tLSTM at M=400
    cards = json.loads(run("budget", "slstm", "3d", "--budget", "slstm:400", "--vocab", "11", "--depths", "7",
                           "--json").stdout)
    by_config = {c["config"]: c for c in cards}
    assert by_config["3d"]["channels"] == 187 and by_config["3d"]["literal_params"] == 5_803_220
    assert by_config["slstm"]["literal_params"] == by_config["slstm"]["params"]
    assert "literal" not in run("budget", "3d", "--depths", "1").stdout  # 10M: no literal M


def test_info_shows_budget_names_literally_not_as_emoji():
    """rich reads ':100:' as an emoji code: "matched to slstm:100: M" came out as "slstm💯 M"."""
    result = CliRunner().invoke(app, ["info", "2d", "--depth", "3", "--channels", "100", "--vocab", "205"])
    assert result.exit_code == 0, result.output
    assert "slstm:100: M" in result.output and "\U0001f4af" not in result.output


def test_info_without_a_size_takes_the_defaults_of_budget_and_time():
    """`info CONFIG --depth L --json` (a docs/results.md command) works as it is: budget 10M,
    enwik8's 205 symbols, as `budget` and `time` default to."""
    result = CliRunner().invoke(app, ["info", "3d-ln", "--depth", "2", "--json"])
    assert result.exit_code == 0, result.output
    card = json.loads(result.output)
    assert (card["budget"], card["output_size"], card["input"]) == (10_000_000, 205, "205 tokens")
    assert card["params"] <= 10_000_000 and card["causal"] is False


def test_info_shows_the_2_pow_20_reading_only_where_it_is_not_noise():
    small = CliRunner().invoke(app, ["info", "2d", "--channels", "8", "--vocab", "10"], env={"COLUMNS": "80"})
    assert small.exit_code == 0 and "2^20" not in small.output and "1,053" in small.output
    table1 = CliRunner().invoke(app, ["info", "3d-cn", "--depth", "6", "--channels", "1200", "--vocab", "205"],
                                env={"COLUMNS": "80"})
    assert "50.09M" in table1.output
