"""`tlstm-bench plot`: figures and tables from a small store of synthetic records.

The records are made up (the plotting code is what is under test); their layout and
keys are the sweep runner's (tlstm_bench/sweeps/__init__.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.plotting import plot_results
from tlstm_bench.results.frame import read_frame
from tlstm_bench.plotting.figures import runtime_summary
from tlstm_bench.plotting.paper import PAPER_TABLES

CONFIGS = ["slstm", "2d", "3d-cn"]
DEPTHS = [1, 2, 3]
MISSING = ("3d-cn", 3)  # no record at all
FAILED = ("2d", 2)  # only a failed record


def _write(root: Path, sweep: str, record: dict) -> None:
    record = {"sweep": sweep, "status": "ok", "error": None, "spec": {}, "device": "cpu",
              "device_name": "test-cpu", "torch_version": "2.x", "threads": 2, "git_commit": "0123456789",
              "git_dirty": False, "date": "2026-11-25T22:00:00+00:00", "causal": True, **record}
    record.setdefault("key", record["id"])
    (root / sweep).mkdir(parents=True, exist_ok=True)
    (root / sweep / f"{record['id']}.json").write_text(json.dumps(record))


def fill_store(root: Path, sweep: str = "synth") -> dict:
    """Runtime cells (sLSTM with two implementations) and memorization cells with two seeds."""
    truth = {}
    for config in CONFIGS:
        for depth in DEPTHS:
            if (config, depth) == MISSING:
                continue
            failed = (config, depth) == FAILED
            for impl in (["fused", "loop"] if config == "slstm" else ["eager"]):
                samples = [depth * (1.0 if config == "slstm" else 0.2) + 0.01 * k for k in range(5)]
                _write(root, sweep, {
                    "id": f"rt-{config}-{depth}-{impl}", "kind": "runtime", "task": "runtime", "config": config,
                    "depth": depth, "seed": 0, "implementation": impl, "seq_len": 20,
                    "ms_per_step": None if failed else float(np.median(samples)), "ms_iqr": 0.02,
                    "samples": None if failed else samples, "status": "failed" if failed else "ok",
                    "error": "RuntimeError: out of memory" if failed else None})
            for seed in (0, 1):
                acc = 0.5 + 0.1 * depth + 0.05 * seed + (0.2 if config == "3d-cn" else 0.0)
                solved = acc >= 1.0
                truth[config, depth, seed] = acc
                _write(root, sweep, {
                    "id": f"tr-{config}-{depth}-{seed}", "kind": "train", "task": "memorization",
                    "config": config, "depth": depth, "seed": seed, "channels": 8, "params": 5000,
                    "metric": "accuracy", "valid_metric": None, "test_metric": None if failed else min(acc, 1.0),
                    "samples_to_solve": 30000 + 1000 * seed if solved else None, "solved": solved,
                    "status": "failed" if failed else "ok", "error": "nan loss" if failed else None})
    return truth


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    fill_store(root)
    return root


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One plot of the synthetic store, shared by the tests that only read what it drew."""
    base = tmp_path_factory.mktemp("plot")
    fill_store(base / "store")
    return plot_results(None, out=base / "figures", root=base / "store")


def test_plot_writes_png_and_pdf_per_task(report):
    assert {(f.sweep, f.task) for f in report.figures} == {("synth", "runtime"), ("synth", "memorization"),
                                                          ("synth", "runtime (fastest implementation)")}
    for fig in report.figures:
        png, pdf = fig.paths
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert pdf.read_bytes()[:5] == b"%PDF-"


def test_one_line_per_configuration_and_implementation(report):
    runtime = next(f for f in report.figures if f.task == "runtime")
    train = next(f for f in report.figures if f.task == "memorization")
    assert runtime.lines == ["slstm (fused)", "slstm (loop)", "2d", "3d-cn"]
    assert train.lines == ["slstm", "2d", "3d-cn"]


def test_missing_and_failed_cells_are_reported_not_fatal(report):
    runtime = next(f for f in report.figures if f.task == "runtime")
    train = next(f for f in report.figures if f.task == "memorization")
    assert runtime.missing == ["runtime 3d-cn L=3"]
    assert runtime.failed == ["runtime 2d L=2: RuntimeError: out of memory"]
    assert train.missing == ["train 3d-cn L=3"]
    assert train.failed == ["train 2d L=2: nan loss"]
    assert all(p.exists() for f in report.figures for p in f.paths)


def test_cli_prints_missing_cells(store, tmp_path):
    result = CliRunner().invoke(app, ["plot", "synth", "--out", str(tmp_path / "f"), "--results-dir", str(store.parent)])
    assert result.exit_code == 0, result.output
    assert "missing cells (no record): runtime 3d-cn L=3" in result.output
    assert "failed: train 2d L=2: nan loss" in result.output
    assert (tmp_path / "f" / "synth-runtime.png").exists()
    assert (tmp_path / "f" / "tables.md").exists()


def test_tables_have_the_papers_numbers_beside_ours(report):
    text = report.tables.read_text()
    for key in ("table1", "table2", "table3"):
        assert PAPER_TABLES[key]["title"] in text
        for row in PAPER_TABLES[key]["rows"]:
            assert "| " + " | ".join([row[0], "paper", *row[1:]]) + " |" in text
    # Ours, Table 2: the best depth of 3d-cn (the deepest present, L=2) with both seeds.
    accs = [100 * min(1.0, 0.5 + 0.1 * 2 + 0.05 * s + 0.2) for s in (0, 1)]
    line = next(l for l in text.splitlines() if l.startswith("| 3D tLSTM+CN | ours (synth)"))
    assert f"{np.mean(accs):.1f} +- {np.std(accs, ddof=1):.1f}% (L=2, 2 seeds)" in line
    assert "no records for wiki" in text and "no records for mnist / pmnist" in text


def test_non_causal_cells_are_marked_in_figures_and_tables(store, tmp_path):
    for path in (store / "synth").glob("tr-3d-cn-2-*.json"):   # as if 3d-cn at L=2 had been measured not causal
        record = json.loads(path.read_text())
        path.write_text(json.dumps({**record, "causal": False}))
    report = plot_results(["synth"], out=tmp_path / "f", root=store)
    train = next(f for f in report.figures if f.task == "memorization")
    runtime = next(f for f in report.figures if f.task == "runtime")
    assert train.noncausal == ["train 3d-cn L=2"] and runtime.noncausal == []
    assert "3d-cn†" in train.lines and "3d-cn" in runtime.lines
    text = report.tables.read_text()
    line = next(l for l in text.splitlines() if l.startswith("| 3D tLSTM+CN | ours (synth)"))
    assert "(L=2, 2 seeds)†" in line and any(l.startswith("† not causal") for l in text.splitlines())


def test_several_records_of_one_cell_keep_the_newest(store, tmp_path):
    _write(store, "synth", {"id": "rt-2d-1-eager-new", "key": "rt-2d-1-eager", "kind": "runtime", "task": "runtime",
                            "config": "2d", "depth": 1, "seed": 0, "implementation": "eager", "ms_per_step": 9.0,
                            "samples": [9.0], "date": "2026-11-25T23:00:00+00:00"})
    frame = read_frame(["synth"], root=store)
    cell = frame[(frame["key"] == "rt-2d-1-eager")]
    assert len(cell) == 1 and cell["ms_per_step"].iloc[0] == 9.0


def test_runtime_error_bars_come_from_the_raw_samples():
    import pandas as pd

    cell = pd.DataFrame({"samples": [[1.0, 2.0, 3.0, 4.0, 100.0]], "ms_per_step": [3.0], "ms_iqr": [2.0]})
    assert runtime_summary(cell) == (3.0, 2.0, 4.0)
    no_samples = pd.DataFrame({"samples": [None], "ms_per_step": [3.0], "ms_iqr": [2.0]})
    assert runtime_summary(no_samples) == (3.0, 2.0, 4.0)


@pytest.mark.parametrize("setup, message", [
    ("empty", "no result records"),
    ("unknown", "no results for 'nosuch'"),
    ("corrupt", "corrupt result record"),
])
def test_bad_store_is_a_one_line_error_exit_2(tmp_path, setup, message):
    root = tmp_path / "store"
    root.mkdir()
    args = ["plot", "--out", str(tmp_path / "f"), "--results-dir", str(tmp_path)]
    if setup == "unknown":
        fill_store(root)
        args.insert(1, "nosuch")
    if setup == "corrupt":
        (root / "s").mkdir()
        (root / "s" / "x.json").write_text("{not json")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_plotting_never_imports_torch(store, tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from tlstm_bench.plotting import plot_results
        plot_results(["synth"], out={str(tmp_path / "f")!r}, root={str(store)!r})
        assert "torch" not in sys.modules, "plotting imported torch"
        assert not any(m.startswith("tlstm_bench.models") for m in sys.modules)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_missing_cells_follow_the_sweeps_spec_file(store, tmp_path, monkeypatch):
    from tlstm_bench.plotting import grid

    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "synth.toml").write_text(
        'task = "memorization"\nconfigs = ["slstm", "2d", "3d-cn"]\ndepths = [1, 2, 3]\nchannels = 8\n'
        '[train]\ndepths = [1, 2, 3, 4]\n[runtime]\nconfigs = ["slstm", "2d", "3d", "3d-cn"]\n')
    monkeypatch.setattr(grid, "shipped_spec", lambda name: tmp_path / "specs" / f"{name}.toml")
    report = plot_results(["synth"], out=tmp_path / "figures", root=store)
    runtime = next(f for f in report.figures if f.task == "runtime")
    train = next(f for f in report.figures if f.task == "memorization")
    assert runtime.missing == ["runtime 3d L=1", "runtime 3d L=2", "runtime 3d L=3", "runtime 3d-cn L=3"]
    assert train.missing == ["train slstm L=4", "train 2d L=4", "train 3d-cn L=3", "train 3d-cn L=4"]


def test_a_long_list_of_missing_cells_still_lays_out(tmp_path, monkeypatch):
    import warnings

    from tlstm_bench.plotting import grid

    root = tmp_path / "store"
    _write(root, "big", {"id": "one", "kind": "runtime", "task": "runtime", "config": "slstm", "depth": 1,
                         "implementation": "fused", "ms_per_step": 1.0, "samples": [1.0]})
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "big.toml").write_text(
        'task = "runtime"\nconfigs = ["slstm", "2d", "2d-m", "2d-f", "3d", "3d-ln", "3d-cn"]\n'
        'depths = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nchannels = 8\n[runtime]\n')
    monkeypatch.setattr(grid, "shipped_spec", lambda name: tmp_path / "specs" / f"{name}.toml")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. "constrained_layout not applied": an unreadable figure
        report = plot_results(["big"], out=tmp_path / "f", root=root)
    assert len(report.figures[0].missing) == 7 * 10 - 1


def test_runtime_within_the_spread_is_named_on_the_figure(tmp_path):
    """Where two depths' IQRs overlap, the figure's note says their difference is not resolved;
    where they are apart, it says nothing."""
    from tlstm_bench.plotting.figures import runtime_overlaps

    root = tmp_path / "store"
    spreads = {("2d", 1): [0.30, 0.31, 0.33, 0.35, 0.40], ("2d", 3): [0.10, 0.32, 0.34, 0.36, 0.50],
               ("3d", 1): [0.10, 0.11, 0.12, 0.13, 0.14], ("3d", 3): [0.30, 0.31, 0.32, 0.33, 0.34]}
    for (config, depth), samples in spreads.items():
        _write(root, "s", {"id": f"rt-{config}-{depth}", "kind": "runtime", "task": "runtime", "config": config,
                           "depth": depth, "seed": 0, "implementation": "fast", "seq_len": 20, "channels": 8,
                           "ms_per_step": float(np.median(samples)), "ms_iqr": 0.02, "samples": samples})
    assert runtime_overlaps(read_frame("s", root=root)) == ["2d L=1-3"]
    figures = plot_results(["s"], out=tmp_path / "figures", root=root).figures
    assert figures[0].within_spread == ["2d L=1-3"]


def test_figures_and_tables_planted_as_links_are_replaced_not_written_through(store, tmp_path):
    """Issue 21: a figure or table file that is a link to a file outside the results folder was
    overwritten through the link. Now each is written fresh and renamed into place."""
    out = tmp_path / "f"
    out.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    names = ["synth-runtime.png", "synth-runtime.pdf", "tables.md"]
    for name in names:
        (out / name).symlink_to(outside)
    report = plot_results(None, out=out, root=store)
    assert outside.read_text() == "precious"
    for name in names:
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 0
    assert report.tables == out / "tables.md"


# ---- the first figure a newcomer makes (issue 30): the quick sweep's shape -----------------
def quick_like_store(root: Path, *, solved: bool = True, repeats: int = 3) -> None:
    """Memorization at L = 1, 2 (two cells solved when ``solved``, the rest capped at 7,500
    samples; 3d-ln and 3d-cn both at 100% at L = 2) and runtime at L = 1, 3, each configuration's
    depths timed together (one timing_group), ``repeats`` samples each."""
    for config in ("slstm", "2d", "3d-ln", "3d-cn"):
        for depth in (1, 2):
            top = solved and depth == 2 and config.startswith("3d")
            _write(root, "q", {"id": f"tr-{config}-{depth}", "kind": "train", "task": "memorization",
                               "config": config, "depth": depth, "seed": 0, "metric": "accuracy",
                               "test_metric": 1.0 if top else 0.3, "solved": top, "max_samples": 7500,
                               "samples_to_solve": 5250 if top else None, "samples_seen": 5250 if top else 7500})
        for depth in (1, 3):
            samples = [0.1 * depth + 0.01 * k * (k % 2 + 1) for k in range(repeats)]
            _write(root, "q", {"id": f"rt-{config}-{depth}", "kind": "runtime", "task": "memorization",
                               "config": config, "depth": depth, "seed": 0, "implementation": "fast", "seq_len": 20,
                               "channels": 8, "ms_per_step": float(np.median(samples)), "ms_iqr": 0.01,
                               "samples": samples, "timing_group": f"g-{config}", "threads": 1})


def quick_figure(tmp_path, **kw):
    from tlstm_bench.plotting.figures import task_figure

    quick_like_store(tmp_path / "store", **kw)
    fig, result = task_figure(read_frame("q", root=tmp_path / "store"), "q", "memorization")
    return {panel: ax for panel, ax in zip(result.panels, fig.axes)}, result


def test_each_panel_shows_and_names_exactly_its_own_depths(tmp_path):
    axes, result = quick_figure(tmp_path)
    assert result.panels == ["metric", "samples", "runtime"]
    for panel, depths, word in (("metric", [1, 2], "trained"), ("samples", [1, 2], "trained"),
                                ("runtime", [1, 3], "timed")):
        assert list(axes[panel].get_xticks()) == depths
        assert axes[panel].get_xlabel() == f"depth L ({word} at L = {', '.join(map(str, depths))})"


def test_equal_values_of_two_configurations_do_not_hide_each_other(tmp_path):
    """3d-ln and 3d-cn both at 100% at L = 2: their markers are apart by more than a marker."""
    axes, result = quick_figure(tmp_path)
    ax = axes["metric"]
    ends = {}
    for container in ax.containers:  # one errorbar container per line drawn
        line = container.lines[0]
        if container.get_label() in ("3d-ln", "3d-cn"):
            x, y = line.get_xdata()[-1], line.get_ydata()[-1]
            ends[container.get_label()] = ax.transData.transform((x, y))
            size = line.get_markersize() * ax.figure.dpi / 72  # pixels
    assert set(ends) == {"3d-ln", "3d-cn"}
    assert abs(ends["3d-ln"][0] - ends["3d-cn"][0]) > size
    assert result.lines == ["slstm", "2d", "3d-ln", "3d-cn"]  # the legend: one entry per configuration


def test_samples_panel_shows_the_unsolved_cells_at_their_cap(tmp_path):
    axes, _ = quick_figure(tmp_path)
    ax = axes["samples"]
    hollow = [c for c in ax.collections if len(c.get_offsets()) and (c.get_facecolor()[:, :3] == 1).all()]
    ys = sorted(float(y) for c in hollow for _, y in c.get_offsets())
    assert ys == [7500.0] * 6  # slstm and 2d at L = 1, 2; 3d-ln and 3d-cn at L = 1
    assert "2 of 8 cells solved" in ax.get_title()
    assert ax.get_legend().get_texts()[0].get_text() == "not solved by 7,500 samples (the cap)"
    assert ax.get_ylim()[0] == 0


def test_samples_panel_is_left_out_when_no_cell_solved(tmp_path):
    _, result = quick_figure(tmp_path, solved=False)
    assert result.panels == ["metric", "runtime"]
    assert any("No cell solved the task within 7,500 samples" in n for n in result.notes)


@pytest.mark.parametrize("repeats, dots, caption", [
    (3, True, "median of 3 repeats; dots: each repeat"),
    (9, False, "median of 9 repeats; bars: interquartile range"),
])
def test_runtime_spread_is_drawn_honestly_for_few_repeats(tmp_path, repeats, dots, caption):
    """Quartiles of 3 repeats are interpolations that look one-sided: show the repeats instead."""
    axes, _ = quick_figure(tmp_path, repeats=repeats)
    ax = axes["runtime"]
    assert ax.get_title().endswith(caption)
    points = sum(len(c.get_offsets()) for c in ax.collections if len(c.get_offsets()) == repeats)
    assert points == (4 * 2 * repeats if dots else 0)
    assert ax.get_ylabel() == "ms per timestep (forward + loss + backward)"


def test_the_figure_says_how_far_a_cpu_comparison_between_configurations_goes(tmp_path):
    from tlstm_bench.plotting.figures import runtime_trust

    _, result = quick_figure(tmp_path)
    (note,) = [n for n in result.notes if n.startswith("CPU runtime")]
    assert "each line's depths were timed together" in note and "do not compare heights across lines" in note
    frame = read_frame("q", root=tmp_path / "store")
    runtime = frame[frame["kind"] == "runtime"]
    assert "every point was timed in one process" in runtime_trust(runtime.assign(timing_group="one"))
    assert "do not say which points" in runtime_trust(runtime.assign(timing_group=None))
    assert runtime_trust(runtime.assign(device="cuda")) is None


# ---- many variants of one configuration, learning curves (an initialisation search) --------
KNOBS = ["3d-cn", "3d-cn:cell_kernel=shift", "3d-cn:input_init=normal", "3d-cn:bias_init=torch7",
         "3d-cn:recurrent_scale=2", "3d-cn:cell_kernel=shift,input_init=normal",
         "3d-cn:cell_kernel=shift,input_init=normal,bias_init=torch7",
         "3d-cn:cell_kernel=shift,input_init=normal,bias_init=torch7,recurrent_scale=2", "lstm", "tlstm:dims=4"]


def test_every_line_of_a_figure_has_its_own_colour_and_marker_and_x_offset():
    from tlstm_bench.plotting.styles import PRESET_STYLES, SPREAD, Palette

    palette = Palette(KNOBS + ["slstm", "2d"])
    styles = [palette.style(c) for c in KNOBS + ["slstm", "2d"]]
    assert len(set(styles)) == len(styles)  # a hash of the name gave two variants one colour and marker
    assert palette.style("3d-cn") == PRESET_STYLES["3d-cn"] and palette.style("slstm") == PRESET_STYLES["slstm"]
    assert Palette(["3d-cn:recurrent_scale=2"]).style("3d-cn:recurrent_scale=2") not in PRESET_STYLES.values()
    offsets = sorted(palette.offset(c) for c in KNOBS + ["slstm", "2d"])
    assert len(set(offsets)) == len(offsets) and -SPREAD / 2 <= offsets[0] and offsets[-1] <= SPREAD / 2
    assert offsets[0] == -offsets[-1]  # centred


def test_a_long_knob_string_wraps_after_its_commas_in_the_legend():
    from tlstm_bench.plotting.styles import LEGEND_CHARS, legend_text, legend_width

    label = KNOBS[7]
    shown = legend_text(label)
    assert shown.count("\n") >= 1 and all(len(line) <= LEGEND_CHARS for line in shown.split("\n"))
    assert all(line.endswith(",") for line in shown.split("\n")[:-1])  # broken after a comma, never inside a knob
    assert shown.replace("\n  ", "") == label
    assert legend_text("3d-cn") == "3d-cn" and legend_text("slstm (fused)") == "slstm (fused)"
    assert legend_width([label]) < 0.75 + 0.07 * len(label)  # the legend is as wide as its longest line


def curves_store(root: Path) -> None:
    """Memorization runs with their evaluations: two configurations, L = 1, 4, seeds 0 and 1; the
    variant solves at L = 4 (seed 0 after 4,500 samples), the rest stop at 6,000 without."""
    for c, config in enumerate(("3d-cn", KNOBS[7])):
        for depth in (1, 4):
            for seed in (0, 1):
                solves = config != "3d-cn" and depth == 4 and seed == 0
                points = [1500, 3000, 4500] if solves else [1500, 3000, 4500, 6000]
                history = [{"samples": s, "step": s // 15, "metric": 1.0 if solves and s == 4500 else s / 20000,
                            "loss": 1.0, "train_loss": 1.0} for s in points]
                _write(root, "search", {
                    "id": f"tr-{c}-{depth}-{seed}", "kind": "train", "task": "memorization",
                    "config": config, "depth": depth, "seed": seed, "metric": "accuracy",
                    "test_metric": history[-1]["metric"], "valid_metric": None, "solved": solves,
                    "samples_to_solve": 4500 if solves else None, "samples_seen": points[-1],
                    "sample_unit": "sequence", "history": history})


def test_learning_curves_are_drawn_one_panel_a_depth_one_line_a_run(tmp_path):
    from tlstm_bench.plotting.curves import curves_figure

    curves_store(tmp_path / "store")
    report = plot_results(["search"], out=tmp_path / "figures", root=tmp_path / "store")
    curves = next(f for f in report.figures if f.task == "memorization (learning curves)")
    assert [p.name for p in curves.paths] == ["search-memorization-curves.png", "search-memorization-curves.pdf"]
    assert curves.lines == ["3d-cn", KNOBS[7]]

    frame = read_frame("search", root=tmp_path / "store")
    fig = curves_figure(frame, "Memorization", "test-cpu")
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in axes] == ["L = 1", "L = 4"]
    assert axes[0].get_ylabel() == "test accuracy (%)"
    for ax in axes:
        assert len(ax.lines) == 4 + 1  # four runs and the dotted line at 100%
        assert ax.get_ylim() == (-4.0, 104.0)
    ends = [(tuple(c.get_offsets()[0]), bool((c.get_facecolor()[:, :3] != 1).any())) for c in axes[1].collections]
    assert sorted(ends) == [((4500.0, 100.0), True), ((6000.0, 30.0), False), ((6000.0, 30.0), False),
                            ((6000.0, 30.0), False)]  # only the solved run's marker is filled
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[0] == "3d-cn" and legend[1].replace("\n  ", "") == KNOBS[7]


@pytest.mark.parametrize("caps", [(12000, 3000), (3000, 12000)], ids=["shallow-longer", "deep-longer"])
def test_learning_curve_panels_share_one_x_scale(tmp_path, caps):
    """A paper-size search ran L = 1 to 400K and L = 4 to 81K: each panel took its own x range,
    so the slower depth's curve looked as steep as the faster one's. The panels share it now, the
    longest run's whichever panel it is in (the first panel's extent once cut a later, longer one)."""
    from tlstm_bench.plotting.curves import curves_figure

    for depth, cap in zip((1, 4), caps):
        history = [{"samples": s, "metric": s / 20000} for s in range(1500, cap + 1, 1500)]
        _write(tmp_path / "store", "search", {
            "id": f"tr-{depth}", "kind": "train", "task": "memorization", "config": "3d-cn", "depth": depth,
            "seed": 0, "metric": "accuracy", "test_metric": history[-1]["metric"], "solved": False,
            "samples_seen": cap, "sample_unit": "sequence", "history": history})
    fig = curves_figure(read_frame("search", root=tmp_path / "store"), "Memorization", "test-cpu")
    one, four = [ax for ax in fig.axes if ax.get_title()]
    assert one.get_xlim() == four.get_xlim() and one.get_xlim()[0] == 0 and 12000 <= four.get_xlim()[1] < 13000


def test_no_curves_figure_without_evaluations(report):
    assert not any("learning curves" in f.task for f in report.figures)  # the synthetic records keep none


def test_curves_of_a_task_with_a_validation_set_say_so_and_claim_no_solve(tmp_path):
    """MNIST's curve is its validation accuracy, and no run 'solves' it: the title says neither."""
    from tlstm_bench.plotting.curves import axis_count, curves_figure

    curves_store(tmp_path / "store")
    frame = read_frame("search", root=tmp_path / "store").assign(valid_metric=0.5, solved=False, task="mnist")
    fig = curves_figure(frame, "Sequential MNIST", "test-cpu")
    assert fig.axes[0].get_ylabel() == "validation accuracy (%)"
    assert "solved" not in fig._suptitle.get_text()
    assert [axis_count(v) for v in (750, 1500, 60000, 2.4e6)] == ["750", "1.5K", "60K", "2.4M"]


def positions_store(root: Path) -> None:
    """Memorization runs of 4 symbols that kept the accuracy by answer position: L = 1 learns the
    last answer only; L = 4 learns every answer; an old record (no by_position) is left out."""
    for depth in (1, 4):
        history = [{"samples": s, "metric": 0.0,
                    "by_position": [0.0, 0.0, 0.0, s / 6000] if depth == 1 else [s / 6000] * 4}
                   for s in (1500, 3000, 4500, 6000)]
        for entry in history:
            entry["metric"] = sum(entry["by_position"]) / 4
        _write(root, "search", {
            "id": f"tr-{depth}", "kind": "train", "task": "memorization", "config": "3d-cn", "depth": depth,
            "seed": 0, "metric": "accuracy", "test_metric": history[-1]["metric"], "solved": depth == 4,
            "samples_seen": 6000, "sample_unit": "sequence", "status": "ok", "history": history,
            "test_by_position": history[-1]["by_position"]})
    _write(root, "search", {
        "id": "tr-old", "kind": "train", "task": "memorization", "config": "2d", "depth": 2, "seed": 0,
        "metric": "accuracy", "test_metric": 0.1, "solved": False, "samples_seen": 3000, "status": "ok",
        "history": [{"samples": 1500, "metric": 0.05}, {"samples": 3000, "metric": 0.1}]})


def test_answer_positions_are_drawn_one_panel_a_run_first_answer_on_top(tmp_path):
    from tlstm_bench.plotting.positions import position_runs, positions_figure

    positions_store(tmp_path / "store")
    report = plot_results(["search"], out=tmp_path / "figures", root=tmp_path / "store")
    drawn = next(f for f in report.figures if f.task == "memorization (answer positions)")
    assert [p.name for p in drawn.paths] == ["search-memorization-positions.png", "search-memorization-positions.pdf"]
    assert all(p.stat().st_size > 0 for p in drawn.paths)

    runs = position_runs(read_frame("search", root=tmp_path / "store").query("kind == 'train'"))
    assert list(runs["depth"]) == [1, 4]  # the old record without positions is not a panel
    fig = positions_figure(runs, "Memorization", "test-cpu")
    one, four = [ax for ax in fig.axes if ax.get_title()][:2]
    assert one.get_title() == "3d-cn L=1 seed 0" and one.get_ylabel() == "answer position"
    assert one.get_ylim() == (4.5, 0.5)  # answer 1 at the top
    grid = one.collections[0].get_array().reshape(4, 4)  # positions down, evaluations across
    assert list(grid[:, -1]) == [0.0, 0.0, 0.0, 100.0]  # L = 1 at the end: the last answer only
    assert list(four.collections[0].get_array().reshape(4, 4)[:, -1]) == [100.0] * 4
    assert one.get_xlim() == four.get_xlim() and one.get_xlim()[0] == 0
    assert "not causal" not in fig._suptitle.get_text()
    runs.loc[runs.index[1], "causal"] = False  # a run measured not causal is marked, as in every figure
    fig = positions_figure(runs, "Memorization", "test-cpu")
    assert [ax.get_title() for ax in fig.axes if ax.get_title()][1] == "3d-cn† L=4 seed 0"
    assert "† measured not causal" in fig._suptitle.get_text()


def test_no_positions_figure_from_records_without_them(report):
    assert not any("answer positions" in f.task for f in report.figures)


def test_position_matrix_refuses_evaluations_of_different_lengths():
    from tlstm_bench.plotting.positions import position_matrix

    samples, accuracy = position_matrix([{"samples": 1500, "by_position": [0.5, 0.5]},
                                         {"samples": 3000, "by_position": [0.5]}])
    assert samples.size == 0 and accuracy.size == 0
    samples, accuracy = position_matrix([{"samples": 1500, "metric": 0.2}, {"samples": 3000, "by_position": [1, 0]}])
    assert list(samples) == [3000.0] and accuracy.tolist() == [[1.0, 0.0]]


def test_runs_at_two_learning_rates_are_two_lines_not_two_seeds(tmp_path):
    """``train --lr`` twice for one configuration and depth: the figure names each run's lr;
    drawn as one line, the two would be averaged as seeds."""
    root = tmp_path / "store"
    for lr, acc in ((0.001, 0.02), (0.0001, 0.9)):
        for depth in (1, 4):
            _write(root, "training", {"id": f"tr-{lr}-{depth}", "kind": "train", "task": "memorization",
                                      "config": "3d-cn", "depth": depth, "seed": 0, "channels": 100, "lr": lr,
                                      "metric": "accuracy", "test_metric": acc, "solved": False,
                                      "samples_seen": 1000})
    _write(root, "one", {"id": "tr", "kind": "train", "task": "memorization", "config": "3d-cn", "depth": 1,
                         "seed": 0, "channels": 100, "lr": 0.0001, "metric": "accuracy", "test_metric": 0.5})
    report = plot_results(None, out=tmp_path / "figures", root=root)
    lines = {f.sweep: f.lines for f in report.figures if f.task == "memorization"}
    assert lines == {"training": ["3d-cn lr=0.0001", "3d-cn lr=0.001"], "one": ["3d-cn"]}


def test_a_shipped_spec_of_several_lrs_names_its_lines_and_missing_cells_by_lr(tmp_path):
    """memorization-lr lists lr 1e-3 and 1e-4: a store with only the 1e-3 cell at L = 10 draws it as
    the 1e-3 line and lists the other three cells as missing, by their lines."""
    root = tmp_path / "store"
    config = "3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2"
    _write(root, "memorization-lr", {"id": "tr", "kind": "train", "task": "memorization", "config": config,
                                     "depth": 10, "seed": 0, "channels": 100, "lr": 0.001, "metric": "accuracy",
                                     "test_metric": 0.016, "solved": False, "samples_seen": 60_000})
    report = plot_results(None, out=tmp_path / "figures", root=root)
    (figure,) = [f for f in report.figures if f.task == "memorization"]
    assert figure.lines == [f"{config} lr=0.001"]
    assert sorted(figure.missing) == sorted(f"train {config} lr={lr} L={d}"
                                            for lr, d in (("0.001", 7), ("0.0001", 7), ("0.0001", 10)))
