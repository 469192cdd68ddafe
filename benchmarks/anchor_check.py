#!/usr/bin/env python3
"""The cuDNN anchors as a user has them (issue 27): ``lstm`` against a plain ``nn.LSTM``, and
what copying the weights at every call costs.

Times, with the tool's one timing API (``measure_cases``: CUDA events, batch 1, T = 100,
float32 with TF32 off, repeats interleaved, each implementation in its own process), at M = 100
and L = 1, 4, 10, the same embedding and readout around:

* ``lstm`` ``cudnn``: the tool's anchor, its weights in one cuDNN buffer (models/cudnn_weights.py);
* ``lstm`` ``nn.LSTM``: a plain ``torch.nn.LSTM(M, M, num_layers=L)`` with its own flattened
  weights (registered here; the model's own weights are then unused). Issue 27 asks the anchor
  to be within 1.05x of it;
* ``lstm`` ``cudnn-copy``: the anchor's old path, which left torch to copy the weights into a
  fresh buffer at every call (the copy's cost: ``cudnn-copy`` - ``cudnn``);
* ``slstm`` ``cudnn`` (the tie's L copies made in one ``torch.cat``), ``slstm`` ``cudnn-copy``
  (left to torch, as before) and ``slstm`` ``fused`` (one layer's weights read in place). The
  tie's cost is ``slstm cudnn`` - ``lstm cudnn``: the same cuDNN work at the same width, plus the
  copy and the sum of the layers' gradients.

After its rounds each case runs once more under ``warnings.catch_warnings``; its record says
whether torch warned that the weights are compacted at every call (``compaction_warning``:
false for the tool's paths, true for ``cudnn-copy``, which shows the check can see it). First,
the tool's three cuDNN paths are checked on the device against the loop oracle in float64
(outputs, final state and every gradient, L = 3, M = 8: what tests/test_equivalence.py checks
on the CPU), and the worst relative error is printed.
Records go to ``<results folder>/store/anchors/`` (tool records: ``results anchors --by-depth``),
and a table of the ratios is printed.

    python benchmarks/anchor_check.py --results-dir R --budget-s 90      # on a GPU
    python benchmarks/anchor_check.py --device cpu --tiny --results-dir R  # the CPU dry run (a test)
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the checkout's package, not an installed one
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from tlstm_bench.models.cudnn_weights import COMPACTION_WARNING  # noqa: E402
from tlstm_bench.models.lstm import LSTM_IMPLEMENTATIONS  # noqa: E402
from tlstm_bench.models.slstm import SLSTM_IMPLEMENTATIONS, SLSTMState  # noqa: E402
from tlstm_bench.results import workspace, write_record  # noqa: E402
from tlstm_bench.results.schema import record_key  # noqa: E402
from tlstm_bench.timing import Case, measure_cases  # noqa: E402

CASES = [("lstm", "cudnn"), ("lstm", "nn.LSTM"), ("lstm", "cudnn-copy"),
         ("slstm", "cudnn"), ("slstm", "cudnn-copy"), ("slstm", "fused")]
DEPTHS = [1, 4, 10]
TARGET = 1.05  # lstm cudnn / nn.LSTM (issue 27)


def run_torch_lstm(model, z: torch.Tensor, state: SLSTMState):
    """A plain ``nn.LSTM`` of the model's width and depth (built at the first call, on z's device:
    its own weights, flattened by torch); the model's embedding and readout around it."""
    lstm = model._modules.get("torch_lstm")
    if lstm is None:
        torch.manual_seed(0)
        lstm = nn.LSTM(model.channels, model.channels, model.depth, batch_first=True).to(z.device, z.dtype)
        model.torch_lstm = lstm  # a submodule: its parameters get their gradients zeroed like the others
    out, (h, c) = lstm(z, (state.h.contiguous(), state.c.contiguous()))
    return out, SLSTMState(h, c)


def _vf_lstm(model, z, state, weights):
    hx = (state.h.contiguous(), state.c.contiguous())
    out, h_n, c_n = torch._VF.lstm(z, hx, weights, True, model.depth, 0.0, model.training, False, True)
    return out, SLSTMState(h_n, c_n)


def run_lstm_copy(model, z, state):
    """The ``lstm`` anchor's old path: the weights as tensors of no one buffer (a fresh zero second
    bias), so torch copies them into a new buffer at every call."""
    zeros = torch.zeros_like(model.b[0])
    weights = []
    for layer in range(model.depth):
        weights += [model.w_ih[layer], model.w_hh[layer], model.b[layer], zeros]
    return _vf_lstm(model, z, state, weights)


def run_slstm_copy(model, z, state):
    """The tied sLSTM's one call as it was: the one set of weights passed L times, torch copies."""
    return _vf_lstm(model, z, state, [model.w_ih, model.w_hh, model.b, torch.zeros_like(model.b)] * model.depth)


def register() -> None:
    """The extra implementations, in this process (``measure_cases`` calls it in each worker)."""
    LSTM_IMPLEMENTATIONS.update({"nn.LSTM": run_torch_lstm, "cudnn-copy": run_lstm_copy})
    SLSTM_IMPLEMENTATIONS.update({"cudnn-copy": run_slstm_copy})


def warns(run, record: dict) -> dict:
    """One more step, recording whether torch warned that it compacts the weights at every call."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    return {"compaction_warning": any(COMPACTION_WARNING in str(w.message) for w in caught)}


def check_against_loop(device: str) -> list[str]:
    """The tool's cuDNN paths against the loop oracle in float64 on ``device``: one line each."""
    from tlstm_bench.models import build_model

    lines = []
    for config, impl in (("lstm", "cudnn"), ("slstm", "cudnn"), ("slstm", "fused")):
        got = {}
        for which in (impl, "loop"):
            torch.manual_seed(0)
            model = build_model(config, 3, vocab=11, channels=8, implementation=which).double().to(device)
            x = torch.randint(0, 11, (2, 6), generator=torch.Generator().manual_seed(1)).to(device)
            y, state = model(x)
            (y.sin().sum() + state.h.sum() + state.c.square().sum()).backward()
            got[which] = [t.detach() for t in (y, state.h, state.c)] + [p.grad for p in model.parameters()]
        worst = max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-12)) for a, b in zip(got[impl], got["loop"]))
        lines.append(f"{config} {impl} against the loop oracle, float64 on {device}: worst relative error "
                     f"{worst:.1e} ({'ok' if worst < 1e-9 else 'WRONG'})")
    return lines


def measure(args) -> list[dict]:
    register()
    deadline = time.monotonic() + args.budget_s
    sizes = dict(channels=8, seq_len=5, repeats=2, warmup=1) if args.tiny else \
        dict(channels=100, seq_len=100, repeats=args.repeats, warmup=5)
    cases = [Case(config, depth, impl) for config, impl in CASES for depth in DEPTHS]
    failed = {}
    records = measure_cases(cases, device=args.device, isolate=True, prepare=register, inspect=warns,
                            keep_going=lambda seconds: time.monotonic() + seconds < deadline,
                            on_failure=lambda case, why: failed.__setitem__(case, why.splitlines()[0]),
                            progress=True, **sizes)
    for case, why in failed.items():
        print(f"failed: {case.config} {case.implementation} L={case.depth}: {why}", flush=True)
    return records


def store(records: list[dict], root: Path) -> None:
    for record in records:
        record.update(kind="runtime", task="runtime", seed=0, status="ok", error=None)
        record["key"] = record_key(record)
        name = f"{record['config']}-{record['implementation'].replace('.', '')}-L{record['depth']}"
        write_record(record, "anchors", root=root, record_id=f"{record['device']}-{name}-{record['key'][:8]}")


def report(records: list[dict]) -> list[str]:
    """The ratios issue 27 asks about, per depth, as lines of text."""
    us = {(r["config"], r["implementation"], r["depth"]): 1000 * r["ms_per_step"] for r in records}
    lines = ["  L  lstm/nn.LSTM (<= 1.05)  lstm copy cost  sLSTM tie cost  sLSTM torch copy - cat"]
    for depth in DEPTHS:
        def get(config, impl):
            return us.get((config, impl, depth))

        def diff(a, b):
            return f"{a - b:+.1f} us" if a is not None and b is not None else "-"

        anchor, plain = get("lstm", "cudnn"), get("lstm", "nn.LSTM")
        ratio = f"{anchor / plain:.3f} {'met' if anchor / plain <= TARGET else 'NOT met'}" if anchor and plain else "-"
        lines.append(f"{depth:>3}  {ratio:>22}  {diff(get('lstm', 'cudnn-copy'), anchor):>14}  "
                     f"{diff(get('slstm', 'cudnn'), anchor):>14}  "
                     f"{diff(get('slstm', 'cudnn-copy'), get('slstm', 'cudnn')):>22}")
    warned = sorted({f"{r['config']} {r['implementation']}" for r in records if r.get("compaction_warning")})
    lines.append(f"compaction warning seen for: {', '.join(warned) or 'none'} (expected: the two cudnn-copy paths "
                 "on a GPU)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results-dir", type=Path, help="the results folder (its store/anchors/ gets the records)")
    parser.add_argument("--device", default="cuda", help="cuda (the measurement) or cpu (a dry run)")
    parser.add_argument("--budget-s", type=float, default=120.0, help="stop the rounds by then (seconds)")
    parser.add_argument("--repeats", type=int, default=30, help="timed rounds")
    parser.add_argument("--tiny", action="store_true", help="M = 8, T = 5, 2 repeats (the CPU dry run)")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("error: benchmarks/anchor_check.py times cuDNN on a CUDA GPU; none is available "
              "(--device cpu --tiny is the dry run)", file=sys.stderr)
        return 2
    print("\n".join(check_against_loop(args.device)), flush=True)
    records = measure(args)
    store(records, workspace(args.results_dir).store)
    print("\n".join(report(records)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
