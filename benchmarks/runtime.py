"""Issue 3's runtime table and targets, measured in one run and printed.

    python benchmarks/runtime.py                # the report's table + every target (~10-15 min here)
    python benchmarks/runtime.py --part table   # only the table (L = 1, 4, 7, 10)
    python benchmarks/runtime.py --part oracle  # only fast vs the slow oracle at L=10

Batch 1, M=100, T=100, float32, SPEC section 8 protocol (warm-up excluded, median and
IQR of interleaved repeats). Every record is written to ``<results folder>/store/timing/``
(one JSON a measurement, named by device, config, implementation, depth, M, T); the
results folder is ``--results-dir``, else ``$TLSTM_BENCH_RESULTS``, else ``./results``. The
committed evidence was written with ``--results-dir results/evidence/cpu``.

Targets (issue 3), each printed with its measured figure and met / NOT met:
1. every tLSTM configuration's fast path >= 3x faster than its slow oracle at L=10
   (the oracle at L=10 is slow, so it gets fewer repeats: see ``--oracle-repeats``);
2. 2D tLSTM at L=10 within 2x of the fused layer-by-layer sLSTM at L=10;
3. runtime(L=10)/runtime(L=1) for each configuration (about L for the layer-by-layer
   sLSTM; for the tLSTMs as small as the architecture allows), with a two-point split
   of the tLSTM's time into per-step overhead and FLOP-proportional compute.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tlstm_bench.models import build_model
from tlstm_bench.results import workspace, write_record
from tlstm_bench.timing import Case, measure_cases

TLSTM = ["2d", "2d-m", "2d-f", "3d", "3d-ln", "3d-cn"]
SLSTM = ["fused", "cudnn", "wavefront", "loop"]
DEPTHS = [1, 4, 7, 10]


def record_id(r: dict) -> str:
    return (f"{r['device']}-{r['config']}-{r['implementation']}-L{r['depth']}-M{r['channels']}"
            f"-T{r['seq_len']}-t{r['threads']}")


def store(records: list[dict], root: Path) -> None:
    for r in records:
        write_record(r, "timing", root=root, record_id=record_id(r))


def step_flops(config: str, depth: int, m: int) -> float:
    """Multiply-adds x2 of one tLSTM step's recurrent product, forward + backward (x3)."""
    model = build_model(config, depth, vocab=5, channels=m)
    kd = model.arch.kernel_entries
    return 3 * 2 * model.num_locations * kd * m * model.gate_channels


def run_table(args) -> dict:
    cases = [Case("slstm", d, impl) for impl in SLSTM for d in DEPTHS]
    cases += [Case(c, d, "fast") for c in TLSTM for d in DEPTHS]
    records = measure_cases(cases, channels=args.channels, seq_len=args.seq_len, repeats=args.repeats,
                            warmup=args.warmup, threads=args.threads,
                            progress=True)  # plain lines on stderr
    store(records, workspace(args.results_dir).store)
    ms = {(r["config"], r["implementation"], r["depth"]): r for r in records}
    first = records[0]
    print(f"\n## ms per timestep, forward + loss + backward, batch 1, M={args.channels}, T={args.seq_len}")
    print(f"{first['cpu_model'] or first['device_name']}, {first['threads']} thread(s), torch {first['torch_version']}, "
          f"flush_denormal={first['flush_denormal']}, {args.repeats} interleaved repeats after {args.warmup} "
          f"warm-up; median (IQR)\n")
    print("| config | implementation | " + " | ".join(f"L={d}" for d in DEPTHS) + " | L=10 / L=1 |")
    print("|---|---|" + "---|" * (len(DEPTHS) + 1))
    rows = [("slstm", impl) for impl in SLSTM] + [(c, "fast") for c in TLSTM]
    for config, impl in rows:
        cells = [f"{ms[config, impl, d]['ms_per_step']:.3f} ({ms[config, impl, d]['ms_iqr']:.3f})" for d in DEPTHS]
        growth = ms[config, impl, 10]["ms_per_step"] / ms[config, impl, 1]["ms_per_step"]
        print(f"| `{config}` | {impl} | " + " | ".join(cells) + f" | {growth:.2f} |")
    return ms


def report_table_targets(ms: dict, m: int) -> None:
    print("\n## Targets from the table (same run)")
    two_d, fused = ms["2d", "fast", 10]["ms_per_step"], ms["slstm", "fused", 10]["ms_per_step"]
    ratio = two_d / fused
    print(f"- 2D tLSTM (fast) at L=10 vs fused sLSTM at L=10: {two_d:.3f} / {fused:.3f} ms = {ratio:.2f}x "
          f"-> target <= 2x: {'met' if ratio <= 2 else 'NOT met'}")
    wave = ms["slstm", "wavefront", 10]["ms_per_step"]
    print(f"  (2D tLSTM vs the wavefront sLSTM at L=10: {two_d / wave:.2f}x)")
    print("- runtime(L=10) / runtime(L=1):")
    for impl in SLSTM:
        g = ms["slstm", impl, 10]["ms_per_step"] / ms["slstm", impl, 1]["ms_per_step"]
        note = "T+L-1 steps" if impl == "wavefront" else "layer by layer: about L expected"
        print(f"  - sLSTM {impl}: {g:.2f} ({note})")
    for c in TLSTM:
        t1, t10 = ms[c, "fast", 1]["ms_per_step"], ms[c, "fast", 10]["ms_per_step"]
        f1, f10 = step_flops(c, 1, m), step_flops(c, 10, m)
        line = f"  - {c}: {t10 / t1:.2f}; recurrent FLOPs per step grow {f10 / f1:.0f}x"
        if t10 > t1 and f10 > f1:
            # Two-point model t(L) = overhead + flops(L) / rate, fitted to L=1 and L=10.
            rate = (f10 - f1) / ((t10 - t1) * 1e-3)
            overhead = t1 - f1 / rate * 1e3
            compute = f10 / rate * 1e3
            line += (f"; two-point split at L=10: {compute:.3f} ms compute ({100 * compute / t10:.0f}%), "
                     f"{overhead:.3f} ms per-step overhead ({100 * overhead / t10:.0f}%), "
                     f"effective {rate / 1e9:.1f} GFLOP/s")
        print(line)


def run_oracle(args) -> None:
    cases = [Case(c, 10, impl) for c in TLSTM for impl in ("fast", "eager", "reference")]
    records = measure_cases(cases, channels=args.channels, seq_len=args.seq_len, repeats=args.repeats,
                            warmup=args.warmup, threads=args.threads,
                            repeats_for=lambda c: args.oracle_repeats if c.implementation == "reference"
                            else args.repeats,
                            warmup_for=lambda c: 0 if c.implementation == "reference" else args.warmup,
                            progress=True)  # plain lines on stderr
    store(records, workspace(args.results_dir).store)
    ms = {(r["config"], r["implementation"]): r for r in records}
    print(f"\n## fast vs the slow oracle (`reference`) at L=10, M={args.channels}, T={args.seq_len} (one run, "
          f"interleaved; oracle: {args.oracle_repeats} repeats, no warm-up (pure Python, nothing to warm); "
          f"fast and eager: {args.repeats} repeats after {args.warmup} warm-up)\n")
    print("| config | fast ms | eager ms | oracle ms | oracle / fast | eager / fast | target >= 3x |")
    print("|---|---|---|---|---|---|---|")
    for c in TLSTM:
        f, e, o = (ms[c, i]["ms_per_step"] for i in ("fast", "eager", "reference"))
        print(f"| `{c}` | {f:.3f} | {e:.3f} | {o:.3f} | {o / f:.1f}x | {e / f:.2f}x | "
              f"{'met' if o / f >= 3 else 'NOT met'} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["all", "table", "oracle"], default="all")
    ap.add_argument("--channels", type=int, default=100)
    ap.add_argument("--seq-len", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--oracle-repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--results-dir", type=Path, default=None,
                    help="results folder; records go to its store/timing/ (default: $TLSTM_BENCH_RESULTS or ./results)")
    args = ap.parse_args(argv)
    if args.part in ("all", "table"):
        ms = run_table(args)
        report_table_targets(ms, args.channels)
    if args.part in ("all", "oracle"):
        run_oracle(args)


if __name__ == "__main__":
    main()
