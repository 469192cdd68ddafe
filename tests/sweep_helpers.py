"""What the sweep tests share: a small runtime spec, the fake cell function, and readers of what a
sweep left (its records, the fake's execution log). The ``fake_env`` fixture is in conftest.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent
FAKE = "sweep_fakes:cell"  # the stdlib fake of sweep_fakes.py: cell processes start fast

RUNTIME_SPEC = """
task = "runtime"
configs = ["slstm", "2d", "2d-m", "3d"]
depths = [1, 2]
channels = 8
timeout_s = 60
[runtime]
seq_len = 5
repeats = 2
"""


def write_spec(tmp_path: Path, text: str, name: str = "t") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(textwrap.dedent(text))
    return path


def records(root: Path, sweep: str = "t") -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((root / sweep).glob("*.json"))]


def executions(log: Path) -> Counter:
    """(kind, config, depth, seed) -> how often the fake ran that cell."""
    if not log.exists():
        return Counter()
    return Counter(tuple(json.loads(line)) for line in log.read_text().splitlines())


def sweep_process(spec: Path, root: Path, *extra: str) -> subprocess.Popen:
    """``tlstm-bench sweep`` in its own process, writing into the store ``root`` (``<folder>/store``)."""
    assert root.name == "store"
    return subprocess.Popen([sys.executable, "-m", "tlstm_bench", "sweep", str(spec), "--results-dir", str(root.parent),
                             "--cell-fn", FAKE, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env=os.environ.copy())


def cell_processes(root: Path, parent: int | None = None) -> list[int]:
    """Live (not zombie) cell processes whose command line names the store ``root`` (and whose
    parent is ``parent``, if given)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            state, ppid = (proc / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, IndexError, ValueError):
            continue
        if (b"tlstm_bench.sweeps.cell" in args and str(root).encode() in args and state != "Z"
                and (parent is None or int(ppid) == parent)):
            found.append(int(proc.name))
    return found
