#!/usr/bin/env python3
"""Turn the GPU tools' own outputs into tool records, beside the raw files (issue 27).

Every GPU number the tool reports (README, figures, REPORT.md) must be a record of the results
store (``tlstm_bench/results/schema.py``) with its provenance, so that ``tlstm-bench results``
and ``plot`` read it. The device scripts wrote their own formats; this converts them, without
touching the raw files:

* ``benchmarks/gpu_evidence.py``'s ``records.jsonl`` (a ``header`` line first): each ``timing``
  record is already a ``measure_cases`` record; it becomes a runtime record with its device,
  driver, cuDNN, Triton, TF32 flags and commit from its ``provenance`` block (the commit passed
  with ``--commit`` wins over the one git reported there, kept as ``git_commit_seen``; ``size``
  ``wiki`` is the budget 10M), ``status`` failed where the script marked it invalid;
  ``timing_error`` records become failed records;
* ``benchmarks/triton_tune.py``'s ``records.jsonl`` (a ``provenance`` line first): each
  ``timing`` record (``M``, ``L``, ``batch``, ``T``, ``variant``, ``samples_ms`` per pass)
  becomes a runtime record: ``fast`` and the baselines ``slstm/cudnn``, ``lstm/cudnn`` by
  their configuration and implementation, a Triton variant (``single/persistent``) as
  implementation ``triton`` with that ``variant``; the samples are per timestep (a pass / T);
  a variant that failed is a failed record with the tuner's error and no timing, and so is one the
  tuner marked wrong, unless ``--verified-by`` names a ``triton_diag.py --verify`` run
  (``diag.jsonl``) in which that persistent variant's tile set passed at the same configuration,
  L, M and batch against ``eager`` in float64 (its default path at those shapes: the grid fits the
  GPU): then it is kept, its record saying both (``tuner_check``, ``verified_by``). The second H100
  session needed this: its tuner compared float32 with float32 ``fast`` to 1e-4 and marked the
  right L = 10 variants wrong (its README). The tuner recorded its device, torch and Triton only: the driver, CUDA version,
  commit and date come from the command line (``--commit``, ``--given driver_version=...``),
  taken from the session's README, and the record lists them under ``source.given``.

Other lines (checks, probes, units) are not runtime measurements and are left out (counted).
Each record's ``causal`` is the separability audit of its configuration and depth, measured
here as every tool record's is. The records go to ``STORE/<folder name>/``, one JSON file each,
with ids that hash what was measured, so converting again writes the same files.

    python benchmarks/gpu_records.py RUN/run3-tune --store RUN/store --commit 73d735c... \\
        --verified-by RUN/run3-verify/diag.jsonl --given driver_version=580.159.04 \\
        --given cuda_version=13.0 --given date=2026-11-26
    tlstm-bench results run3-tune --results-dir RUN --by-depth --format markdown
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the checkout's package, not an installed one
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tlstm_bench.errors import UserError  # noqa: E402
from tlstm_bench.results.schema import record_problem, stable_hash  # noqa: E402
from tlstm_bench.results.store import write_record  # noqa: E402

EVIDENCE_SIZES = {"m100": None, "wiki": "10M"}  # gpu_evidence.py's sizes: budget (None: channels)
TUNER_BASELINES = {"slstm/cudnn": ("slstm", "cudnn"), "lstm/cudnn": ("lstm", "cudnn")}
GIVEN_FIELDS = ("driver_version", "cuda_version", "cudnn_version", "git_commit", "date", "host", "python_version")
RESULT_FIELDS = ("ms_per_step", "ms_q25", "ms_q75", "ms_iqr", "samples")


def read_jsonl(path: Path) -> list[tuple[int, dict]]:
    """(line number, record) of every JSON line of ``path``; a one-line error for a bad one."""
    out = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((number, json.loads(line)))
        except ValueError as exc:
            raise UserError(f"{path}:{number}: not a JSON line ({exc})") from None
    return out


def tool_of(records: list[tuple[int, dict]], path: Path) -> str:
    """``evidence`` (gpu_evidence.py) or ``tuner`` (triton_tune.py), from the file's first records."""
    kinds = {r.get("kind") for _, r in records[:3]}
    if "header" in kinds:
        return "evidence"
    if "provenance" in kinds:
        return "tuner"
    raise UserError(f"{path}: neither gpu_evidence.py's records (a header line) nor triton_tune.py's "
                    "(a provenance line)")


def quartiles(samples: list[float]) -> dict:
    """Median, quartiles and IQR as the timing protocol computes them (linear interpolation)."""
    ordered = sorted(samples)

    def at(q: float) -> float:
        pos = (len(ordered) - 1) * q
        lo = int(pos)
        hi = min(lo + 1, len(ordered) - 1)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    return {"ms_per_step": statistics.median(ordered), "ms_q25": at(0.25), "ms_q75": at(0.75),
            "ms_iqr": at(0.75) - at(0.25)}


def _failed(record: dict, error: str) -> dict:
    return {**record, **{k: None for k in RESULT_FIELDS}, "status": "failed", "error": error}


def from_evidence(rec: dict) -> dict | None:
    """A tool record from one of gpu_evidence.py's lines (timings and timing errors), else None."""
    if rec.get("kind") not in ("timing", "timing_error"):
        return None
    prov = rec.get("provenance") or {}
    commit = (prov.get("args") or {}).get("commit") or prov.get("git_commit") or rec.get("git_commit")
    out = {k: v for k, v in rec.items() if k not in ("kind", "provenance")}
    out.update(kind="runtime", task="runtime", seed=0, budget=EVIDENCE_SIZES.get(rec.get("size")),
               driver_version=prov.get("driver_version"), cudnn_version=prov.get("cudnn_version"),
               triton_version=prov.get("triton_version"), git_commit=commit,
               tf32=bool(prov.get("allow_tf32_matmul") or prov.get("allow_tf32_cudnn"))
               if "allow_tf32_matmul" in prov else None)
    seen = prov.get("git_commit")
    if seen and seen != commit:
        out["git_commit_seen"] = seen
    if rec["kind"] == "timing_error":
        return _failed(out, f"timing failed: {rec.get('error') or rec.get('why') or 'no reason recorded'}")
    if rec.get("valid") is False:
        return _failed(out, f"marked invalid by the evidence script: {rec.get('invalid_reason')}")
    return {**out, "status": "ok", "error": None}


def verified_cases(path: Path | None) -> dict:
    """{(config, L, M, batch, tile set): (line, max_rel)} of the passed end-to-end cases of a
    ``triton_diag.py --verify`` run's ``diag.jsonl``."""
    if path is None:
        return {}
    cases = {}
    for number, rec in read_jsonl(path):
        if rec.get("part") == "end_to_end" and rec.get("ok") and rec.get("knob") == "default":
            config, depth, channels, batch, _ = rec["case"]
            cases[(config, depth, channels, batch, rec["menu"])] = (number, rec.get("max_rel"))
    return cases


def from_tuner(rec: dict, prov: dict, verified: dict | None = None) -> dict | None:
    """A tool record from one of triton_tune.py's ``timing`` lines, else None. ``verified``:
    :func:`verified_cases`, which keeps a variant the tuner's own check marked wrong."""
    if rec.get("kind") != "timing":
        return None
    variant = rec["variant"]
    config, implementation = TUNER_BASELINES.get(variant, (rec["config"], "fast" if variant == "fast" else "triton"))
    seq_len = rec["T"]
    out = {
        "kind": "runtime", "task": "runtime", "config": config, "depth": rec["L"], "seed": 0,
        "implementation": implementation, "variant": variant if implementation == "triton" else None,
        "triton_menu": rec.get("menu"), "triton_persistent": rec.get("persistent"),
        "channels": rec["M"], "budget": None, "batch": rec["batch"], "seq_len": seq_len,
        "input_size": None, "output_size": None, "dtype": "float32", "tf32": False,
        "clock": "cuda_events", "interleaved": True, "repeats": rec.get("rounds"), "warmup": None,
        "runs_per_sample": 1, "device": "cuda", "device_name": prov.get("device"),
        "torch_version": prov.get("torch"), "triton_version": prov.get("triton"),
        "cuda_ops_per_pass": rec.get("cuda_ops"), "triton_kernels_per_pass": rec.get("triton_kernels"),
        "error_vs_fast": rec.get("error_vs_fast"), "warmup_s": rec.get("warmup_s"),
        "protocol": "triton_tune.py: one pass = forward + cross-entropy + backward (+ a copy of each gradient), "
                    "CUDA events, variants interleaved round by round, tf32 off",
    }
    check = (verified or {}).get((config, rec["L"], rec["M"], rec["batch"], rec.get("menu")))
    if rec.get("wrong") and rec.get("persistent") and check and rec.get("samples_ms"):
        out.update(tuner_check=rec.get("error"), verified_by={"file": "diag.jsonl", "line": check[0],
                                                              "max_rel_vs_eager_float64": check[1]})
    elif not rec.get("ok") or not rec.get("samples_ms"):
        why = rec.get("error") or "no samples"
        return _failed(out, ("timed but wrong by the tuner's check: " if rec.get("wrong") else "") + why)
    samples = [ms / seq_len for ms in rec["samples_ms"]]
    return {**out, **quartiles(samples), "samples": samples, "status": "ok", "error": None}


def _identity(record: dict, collection: str) -> str:
    """What was measured: the same line of the same run gives the same id."""
    fields = ("config", "depth", "implementation", "variant", "channels", "budget", "batch", "seq_len", "dtype",
              "phase", "size", "device_name")
    return stable_hash({"collection": collection, **{k: record.get(k) for k in fields}})


def convert(folder: Path, store: Path, given: dict, commit: str | None = None, verified_by: Path | None = None) -> dict:
    """Convert ``folder/records.jsonl`` into ``store/<folder name>/``; counts by what happened.
    ``verified_by``: a ``triton_diag.py --verify`` run's ``diag.jsonl`` (:func:`from_tuner`)."""
    from tlstm_bench.audit import causal

    path = folder / "records.jsonl"
    if not path.is_file():
        raise UserError(f"{folder} has no records.jsonl; give a folder the evidence script or the tuner wrote")
    records = read_jsonl(path)
    tool = tool_of(records, path)
    prov = next((r for _, r in records if r.get("kind") == "provenance"), {})
    collection = folder.name
    verified = verified_cases(verified_by)
    counts = {"ok": 0, "failed": 0, "left out": 0}
    for number, rec in records:
        out = from_evidence(rec) if tool == "evidence" else from_tuner(rec, prov, verified)
        if out is None:
            counts["left out"] += 1
            continue
        applied = {k: v for k, v in {**given, "git_commit": commit}.items() if v and out.get(k) is None}
        out.update(applied)
        out["causal"] = causal(out["config"], out["depth"])
        out["source"] = {"tool": "benchmarks/gpu_evidence.py" if tool == "evidence" else "benchmarks/triton_tune.py",
                         "file": f"{folder.name}/records.jsonl", "line": number, "given": sorted(applied)}
        if "verified_by" in out:
            out["verified_by"]["file"] = f"{verified_by.parent.name}/{verified_by.name}"
        out["key"] = out["id"] = _identity(out, collection)
        problem = record_problem(out)
        if problem:
            raise UserError(f"{path}:{number}: the converted record is not a store record: {problem}")
        write_record(out, collection, root=store, record_id=out["id"])
        counts[out["status"]] += 1
    return {"collection": collection, "tool": tool, **counts}


def parse_given(items: list[str]) -> dict:
    given = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or name not in GIVEN_FIELDS:
            raise UserError(f"--given takes NAME=VALUE with NAME one of {', '.join(GIVEN_FIELDS)}, got {item!r}")
        given[name] = value
    return given


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="folders holding a records.jsonl of either tool")
    parser.add_argument("--store", type=Path, required=True, help="the store to write (RUN/store: then "
                        "`--results-dir RUN` reads it)")
    parser.add_argument("--commit", help="the commit that ran, where the tool did not record one (the tuner)")
    parser.add_argument("--verified-by", type=Path, help="a triton_diag.py --verify run's diag.jsonl: keeps the "
                        "persistent variants the tuner marked wrong that passed there")
    parser.add_argument("--given", action="append", default=[], metavar="NAME=VALUE",
                        help=f"a provenance field the tool did not record ({', '.join(GIVEN_FIELDS)})")
    args = parser.parse_args(argv)
    try:
        given = parse_given(args.given)
        for folder in args.folders:
            counts = convert(folder, args.store, given, args.commit, args.verified_by)
            print(f"{folder} ({counts['tool']}) -> {args.store / counts['collection']}: {counts['ok']} ok, "
                  f"{counts['failed']} failed, {counts['left out']} other lines left out")
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
