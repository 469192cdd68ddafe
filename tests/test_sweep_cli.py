"""``tlstm-bench sweep``: the dry-run plan, exit codes, one-line errors."""

from __future__ import annotations

import json
from collections import Counter

from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.sweeps.plan import plan_sweep, run_sweep

from sweep_helpers import FAKE, RUNTIME_SPEC, executions, write_spec


def _dry_run(tmp_path, name, *, title=None):
    """The plan's rows as {column header: cell text}; ``title``: a list that receives the lines
    above the table (what all cells share)."""
    data = tmp_path / "data"  # an enwik8 file where the data folder says (a sweep without it refuses)
    data.mkdir(parents=True, exist_ok=True)
    (data / "enwik8").touch()
    result = CliRunner().invoke(app, ["sweep", name, "--dry-run", "--results-dir", str(tmp_path)],
                                env={"COLUMNS": "300", "TLSTM_BENCH_DATA": str(data)})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    if title is not None:
        title += lines[:next(i for i, line in enumerate(lines) if "┏" in line)]
    header = [h.strip() for h in next(line for line in lines if "┃" in line).split("┃")[1:-1]]
    return [dict(zip(header, (c.strip() for c in line.split("│")[1:-1]))) for line in lines if "│" in line]


def test_dry_run_addition_is_m_400_and_addition_budget_the_matched_sizes(tmp_path):
    rows = _dry_run(tmp_path, "addition")
    assert len(rows) == 2 * 7 * 4 and all(row["size"] == "M=400" for row in rows)
    rows = _dry_run(tmp_path, "addition-budget")
    assert len(rows) == 2 * 7 * 4
    sizes = {(row["config"], row["size"]) for row in rows}
    assert ("slstm", "slstm:400 -> M=400") in sizes
    assert ("3d", "slstm:400 -> M=187") in sizes and ("2d", "slstm:400 -> M=326") in sizes
    assert not any(size.endswith("M=400") for config, size in sizes if config != "slstm")


def test_dry_run_wiki_shows_50_epochs_and_no_early_stopping(tmp_path):
    title = []
    rows = [row for row in _dry_run(tmp_path, "wiki", title=title) if row["kind"] == "train"]
    assert len(rows) == 7 * 4
    assert all(row["size"].startswith("10M -> M=") for row in rows)
    # Every train cell has the same settings: said once above the table, not in each row.
    assert "train cells: paper-enwik8, 50 epochs, early_stopping=False" in title
    assert "settings" not in rows[0] and "seed 0" in title


def test_dry_run_keeps_settings_in_the_rows_when_they_differ(tmp_path):
    path = write_spec(tmp_path, RUNTIME_SPEC.replace("[runtime]", "[runtime]\nimplementations = ['default', 'eager']"))
    rows = _dry_run(tmp_path / "ws", str(path))
    assert len({row["settings"] for row in rows}) > 1


def test_cli_malformed_spec_is_one_line_exit_2(tmp_path):
    path = write_spec(tmp_path, "colour = 1\n" + RUNTIME_SPEC)
    result = CliRunner().invoke(app, ["sweep", str(path), "--dry-run", "--results-dir", str(tmp_path / "s")])
    assert result.exit_code == 2
    assert "unknown key 'colour'" in result.output and "Traceback" not in result.output


def test_the_left_out_count_is_of_the_cells_only_selects(tmp_path):
    """On a CPU, the plan counts the CUDA-only cells that --only would have selected, not the whole
    grid's (`runtime` leaves out 144 in all)."""
    def dry(*only):
        args = ["sweep", "runtime", "--device", "cpu", "--dry-run", "--results-dir", str(tmp_path)]
        for item in only:
            args += ["--only", item]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
        return result.exit_code, " ".join(result.output.split())

    code, text = dry("config=slstm,2d", "depth=1,4")  # 2d's triton, triton-graph, cuda-graph at M=100 and 10M
    assert code == 0, text
    assert "12 cells, 0 done" in text and "; 12 cells of triton, triton-graph, cuda-graph left out: they need a " \
                                         "CUDA GPU" in text and "144" not in text
    code, text = dry("config=2d", "implementation=triton,fast", "depth=1")
    assert code == 0 and "2 cells, 0 done" in text and "; 2 cells of triton left out: they need a CUDA GPU" in text
    code, text = dry("config=slstm")  # the sLSTM has no CUDA-only implementation: nothing left out
    assert code == 0 and "left out" not in text, text
    code, text = dry("config=2d", "implementation=triton")  # nothing else: refused with the count of those
    assert code == 2 and text.startswith("error: no cell of sweep 'runtime' can run on cpu: 8 cells of triton "
                                         "left out: they need a CUDA GPU"), text


def test_dry_run_shows_plan_and_done_cells(tmp_path, fake_env):
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    root = tmp_path / "store"
    run_sweep(spec, root=root, cell_fn=FAKE, only=["config=2d", "depth=1"])
    result = CliRunner().invoke(app, ["sweep", str(spec), "--dry-run", "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "8 cells, 1 done, 0 failed, 0 running elsewhere, 7 to run" in text
    assert text.count("│ todo") == 7 and text.count("│ done") == 1
    assert not executions(fake_env) - Counter({("runtime", "2d", 1, 0): 1})   # the dry run ran nothing
    plan = plan_sweep(spec, root=root, only=["kind=runtime"])
    assert plan.count("done") == 1 and len(plan.to_run(False)) == 7


def test_cli_sweep_exit_codes(tmp_path, fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_PLAN", json.dumps({"2d-m": "raise"}))
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    args = ["sweep", str(spec), "--results-dir", str(tmp_path / "s"), "--cell-fn", FAKE, "--only", "depth=1"]
    result = CliRunner().invoke(app, args + ["--jobs", "2"])
    assert result.exit_code == 1, result.output
    assert "1 failed cell" in result.output and "1 failed cells" not in result.output and "FloatingPointError" in result.output
    assert "sweep t: 4 cells; ran 4 (3 ok, 1 failed)" in " ".join(result.output.split())
    assert CliRunner().invoke(app, args + ["--jobs", "0"]).exit_code == 2
    assert CliRunner().invoke(app, args + ["--only", "config=3d-cn"]).exit_code == 2   # matches no cell
    assert "--device must be cpu" in CliRunner().invoke(app, args + ["--device", "tpu"]).output
    bad = CliRunner().invoke(app, args + ["--executor", "mars"])
    assert bad.exit_code == 2 and "unknown --executor" in bad.output


def test_a_training_cell_line_gives_its_accuracy_as_results_does_and_one_cell_is_one(tmp_path, fake_env):
    """The line of a finished training cell gives its test accuracy in percent, as the `results`
    table beside it does (it said 0.2, and 0 for 0%), and a one-cell sweep says "1 cell"."""
    spec = write_spec(tmp_path, RUNTIME_SPEC.replace('task = "runtime"', 'task = "memorization"')
                      .split("[runtime]")[0] + "[train]\npreset = \"memorization-small\"\n")
    args = ["sweep", str(spec), "--results-dir", str(tmp_path / "s"), "--cell-fn", FAKE, "--only", "depth=1",
            "--only", "config=2d"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "test accuracy 20.0%" in result.output                      # the fake's 0.2
    assert "sweep t: 1 cell; ran 1 (1 ok, 0 failed)" in result.output


def test_a_dry_run_of_a_gpu_sweep_here_says_a_run_would_be_refused(tmp_path, monkeypatch):
    """The plan prints on a machine without the sweep's GPU (a laptop plans a GPU sweep), and
    says that running it here would be refused, instead of leaving that to the run."""
    from tlstm_bench import vocab

    monkeypatch.setattr(vocab, "gpu_count", lambda: 0)
    args = ["sweep", "memorization", "--dry-run", "--results-dir", str(tmp_path)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "note: running it here would be refused" in result.output and "no usable GPU" in result.output
    on_cpu = CliRunner().invoke(app, [*args, "--device", "cpu"], env={"COLUMNS": "80"})
    assert on_cpu.exit_code == 0 and "refused" not in on_cpu.output
