"""The three figures, from the records (matplotlib only)."""

from __future__ import annotations

from pathlib import Path

from .common import FIGURES, PAPER_SAMPLES, PRIORITY_CONFIGS
from .summary import final_invalidations


def draw_figures(out: Path, records: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    header = next((r for r in records if r["kind"] == "header"), None) or {}
    tol = header.get("settings", {}).get("fingerprint_tolerance", 5e-3)
    timings = [r for r in records if r["kind"] == "timing"]
    invalid = final_invalidations(timings, tol)
    prov = header.get("provenance", {})
    device = prov.get("gpu_name") or prov.get("device_name", "?")
    for size, title in (("m100", "M = 100"), ("wiki", "10M parameters")):
        rows = [r for r in timings if r["size"] == size]
        if rows:
            runtime_figure(plt, out / FIGURES[size], rows, size, invalid, f"runtime vs depth at {title}, {device}")
    trains = [r for r in records if r["kind"] == "training" and r.get("history")]
    if trains:
        training_figure(plt, out / FIGURES["training"], trains, f"training on {device}")


def runtime_figure(plt, path: Path, rows: list[dict], size: str, invalid: dict, title: str) -> None:
    """The fastest valid implementation per configuration, then a panel per configuration."""
    configs = [c for c in PRIORITY_CONFIGS if any(r["config"] == c for r in rows)]
    fig, axes = plt.subplots(2, 4, figsize=(16, 7.5), sharex=True)
    axes = axes.ravel()
    for ax, config in zip(axes[1:], configs):
        for impl in sorted({r["implementation"] for r in rows if r["config"] == config}):
            rs = sorted((r for r in rows if r["config"] == config and r["implementation"] == impl),
                        key=lambda r: r["depth"])
            good = all(r.get("valid") and (size, config, r["depth"], impl) not in invalid for r in rs)
            ax.plot([r["depth"] for r in rs], [r["ms_per_step"] for r in rs], marker="o",
                    linestyle="-" if good else ":", color=None if good else "grey",
                    label=impl + ("" if good else " (INVALID)"))
        ax.set_title(config)
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    fastest_panel(axes[0], rows, configs, size, invalid)
    depths = sorted({r["depth"] for r in rows})
    for ax in axes:
        ax.set_xlabel("depth L")
        ax.set_xticks(depths)
    for ax in (axes[0], axes[4]):
        ax.set_ylabel("ms per timestep (fwd+bwd, batch 1)")
    for ax in axes[len(configs) + 1:]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def fastest_panel(ax, rows: list[dict], configs: list[str], size: str, invalid: dict) -> None:
    """Every sLSTM implementation, and each tLSTM configuration's fastest valid one."""
    for config in configs:
        rs = [r for r in rows if r["config"] == config and r.get("valid")
              and (size, config, r["depth"], r["implementation"]) not in invalid]
        impls = {r["implementation"] for r in rs}
        if config != "slstm" and impls:
            impls = [min(impls, key=lambda i: sum(r["ms_per_step"] for r in rs if r["implementation"] == i))]
        for impl in impls:
            curve = sorted((r for r in rs if r["implementation"] == impl), key=lambda r: r["depth"])
            ax.plot([r["depth"] for r in curve], [r["ms_per_step"] for r in curve], marker="o",
                    label=f"{config} ({impl})")
    ax.set_title("fastest valid implementation")
    ax.set_yscale("log")
    ax.legend(fontsize=7)


def training_figure(plt, path: Path, trains: list[dict], title: str) -> None:
    fig, ax = plt.subplots(figsize=(8, 5))
    for r in trains:
        hist = r["history"]
        ax.plot([h["samples"] for h in hist], [h["metric"] for h in hist], marker=".",
                label=f"{r['key']} L={r['depth']} ({r['implementation']})")
    for key, paper in PAPER_SAMPLES.items():
        if any(r["task"] == key and r.get("paper_samples") for r in trains):
            ax.axvline(paper, linestyle=":", color="grey")
            ax.text(paper, 0.02, f" paper {key}", rotation=90, fontsize=7, color="grey")
    ax.set_xlabel("training samples")
    ax.set_ylabel("test symbol accuracy")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
