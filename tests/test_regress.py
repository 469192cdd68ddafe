"""The runtime-vs-depth gate: passes against its own baseline, catches a slowdown, exit codes."""

from __future__ import annotations

import importlib
import json

import pytest
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.errors import UserError
from tlstm_bench.timing import regress
from tlstm_bench.timing.regress import RegressResult, Row, parse_delay, quantities


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """A quick-mode baseline measured now, on this machine (what CI compares against)."""
    path = tmp_path_factory.mktemp("baselines") / "cpu.json"
    result = regress(quick=True, update=True, baseline=path)
    assert result.updated and path.exists()
    return path


def test_passes_against_a_baseline_it_just_wrote(baseline):
    result = regress(quick=True, baseline=baseline)
    assert result.status == 0, [r for r in result.rows if r.verdict == "regression"]
    names = {r.quantity for r in result.rows}
    assert {"slstm t(4)/t(1)", "2d t(4)/t(1)", "3d-cn t(4)/t(1)", "2d/slstm @L=4"} <= names


def test_fails_when_one_curve_is_slowed(baseline):
    # Test-only hook: 0.2 s more per run of 2d at L=4 (a run takes ~20-60 ms), so its
    # curve t(4)/t(1) and its ratio to the sLSTM at L=4 both grow far past the 2x threshold.
    slow = parse_delay("2d@4=0.2")
    result = regress(quick=True, baseline=baseline, delay=slow)
    assert result.status == 1
    failed = {r.quantity for r in result.regressions}
    assert "2d t(4)/t(1)" in failed and "2d/slstm @L=4" in failed
    assert not any(q.startswith("3d-cn") for q in failed)  # the other curves are untouched


def test_unreadable_baseline_exits_2(tmp_path):
    bad = tmp_path / "cpu.json"
    bad.write_text("{not json")
    result = CliRunner().invoke(app, ["regress", "--quick", "--baseline", str(bad)])
    assert result.exit_code == 2
    assert "cannot read the baseline" in result.output and "Traceback" not in result.output
    assert bad.read_text() == "{not json"  # never overwritten by a check


def test_missing_baseline_or_mode_exits_2(tmp_path, baseline):
    result = CliRunner().invoke(app, ["regress", "--quick", "--baseline", str(tmp_path / "none.json")])
    assert result.exit_code == 2 and "regress --update" in result.output
    with pytest.raises(UserError, match="no 'full' entry"):
        regress(quick=False, baseline=baseline)


def test_cli_exit_1_names_the_curve(monkeypatch):
    rows = [Row("2d t(4)/t(1)", 1.2, 3.0, 2.5, "regression"), Row("slstm t(4)/t(1)", 3.0, 3.1, 1.03, "ok")]
    # The command imports its core when it runs: patch the core module's function.
    core = importlib.import_module("tlstm_bench.timing.regress")
    monkeypatch.setattr(core, "regress", lambda **kw: RegressResult(1, "quick", "b.json", rows))
    result = CliRunner().invoke(app, ["regress", "--quick"])
    assert result.exit_code == 1
    assert "regression: 2d t(4)/t(1) is 2.50x its baseline" in result.output


def test_bad_delay_hook_is_a_user_error():
    with pytest.raises(UserError):
        parse_delay("2d=0.1")


def test_quantities_are_ratios():
    recs = [{"config": c, "depth": d, "ms_per_step": v}
            for c, d, v in [("slstm", 1, 1.0), ("slstm", 4, 4.0), ("2d", 1, 2.0), ("2d", 4, 3.0)]]
    assert quantities(recs) == {"slstm t(4)/t(1)": 4.0, "2d t(4)/t(1)": 1.5, "2d/slstm @L=1": 2.0,
                                "2d/slstm @L=4": 0.75}


def test_update_keeps_other_modes(tmp_path, baseline):
    data = json.loads(baseline.read_text())
    data["modes"]["full"] = {"settings": {}, "quantities": {}}
    other = tmp_path / "cpu.json"
    other.write_text(json.dumps(data))
    regress(quick=True, update=True, baseline=other, settings={"repeats": 2, "seq_len": 10})
    assert set(json.loads(other.read_text())["modes"]) == {"quick", "full"}
