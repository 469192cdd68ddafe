"""The issue-28 device session's compile, rehearsed without a GPU: every triton and triton-graph
variant of ``triton_session.plan("cuda")`` precompiled for sm_90 (``triton_precompile.py
--fake-target 90``: a stand-in driver, CPU tensors, persistent where the grid fits 132 SMs),
then each compiled kernel's registers and stack (cuobjdump, from the Triton wheel).

    TRITON_CACHE_DIR=/tmp/rehearse PYTHONPATH=<triton 3.6 unpacked>:$PWD \\
        python results/evidence/cpu/precompile_rehearsal/rehearse.py --jobs 2
"""

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path[:0] = [str(ROOT / "benchmarks")]
import triton  # noqa: E402
import triton_precompile as tp  # noqa: E402
import triton_session as ts  # noqa: E402


def usage(cubin: Path) -> str:
    """Warps, maxnreg, cooperative, registers and stack of one compiled kernel."""
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    meta = json.loads(cubin.with_suffix(".json").read_text())
    out = subprocess.run([str(tool), "-res-usage", str(cubin)], capture_output=True, text=True).stdout
    res = " ".join(re.findall(r"(?:REG|STACK):\d+", out))
    return f"warps={meta['num_warps']} maxnreg={meta.get('maxnreg')} coop={int(meta['launch_cooperative_grid'])} {res}"


def per_variant(cache: Path, kernels: dict) -> list[str]:
    """A line per variant and kernel it compiled (``precompile``'s report names them by hash)."""
    from triton.runtime.cache import _base32

    rows = []
    for key, named in kernels.items():
        for name, hashes in sorted(named.items()):
            for h in hashes:
                cubin = cache / _base32(h) / f"{name}.cubin"
                rows.append(f"{key:58} {name:20} {usage(cubin) if cubin.exists() else 'not in the cache'}")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    cache = Path(os.environ["TRITON_CACHE_DIR"])
    report = tp.precompile(ts.kernel_specs(ts.plan("cuda")), "cpu", jobs=args.jobs, timeout_s=3000,
                           extra_args=("--fake-target", "90"))
    print(f"triton {triton.__version__}, sm_90; {tp.summary(report)}")
    for key, error in report["failed"].items():
        print("FAILED", key, error)
    print(f"{len(list(cache.glob('*/*.cubin')))} kernels in the cache; by variant (config, L, M, budget, batch, "
          f"tiles, persistent, precision):")
    print("\n".join(per_variant(cache, report["kernels"])))
    return 1 if report["failed"] or report["missed"] else 0


if __name__ == "__main__":
    sys.exit(main())
