"""Which code ran where: the commit (without git if need be), the code hash, the device."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from .common import ROOT, SCRIPT


def code_hash() -> str:
    """sha256 over tlstm_bench, this package and the script: which code ran when git is absent."""
    h = hashlib.sha256()
    files = sorted((ROOT / "tlstm_bench").rglob("*.py")) + sorted(Path(__file__).parent.glob("*.py")) + [SCRIPT]
    for f in files:
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]

def _git_files_commit() -> str | None:
    """HEAD's commit from the .git files themselves (no git executable needed)."""
    git = ROOT / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: <path>"
            git = Path(git.read_text().split(":", 1)[1].strip())
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head
        ref = head.split(None, 1)[1]
        for base in (git, Path((git / "commondir").read_text().strip()) if (git / "commondir").exists() else None):
            if base is None:
                continue
            base = base if base.is_absolute() else git / base
            if (base / ref).exists():
                return (base / ref).read_text().strip()
            packed = base / "packed-refs"
            if packed.exists():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split()[0]
    except (OSError, IndexError):
        return None
    return None

def code_provenance(commit_arg: str | None) -> dict:
    """Commit (--commit if given, else git, else the .git files), dirty flag, code hash. No torch.

    ``--commit`` wins: the device copy of a checkout can carry a stale ``.git`` (the second
    H100 session's did: git said the session's first commit while the files were a later
    one), and the caller knows what it sent. What git said then is kept as ``git_commit_seen``;
    the code hash is what ties a record to the code either way."""
    from tlstm_bench.results.provenance import code_version, git_info

    info = {**git_info(), "code_version": code_version()}
    source = "git" if info.get("git_commit") else None
    if not info.get("git_commit"):
        info["git_commit"] = _git_files_commit()
        source = ".git files" if info["git_commit"] else None
    if commit_arg:
        if info.get("git_commit") and info["git_commit"] != commit_arg:
            info["git_commit_seen"] = info["git_commit"]
            info["git_dirty"] = None  # git's dirty flag was about another commit
        info["git_commit"], source = commit_arg, "--commit"
    info["commit_source"] = source or "unknown"
    info["git_commit"] = info.get("git_commit") or "unknown"
    info["code_hash"] = code_hash()
    return info

def supervisor_argv(argv: list[str]) -> list[str]:
    """The command line as given (a worker's argv less the supervisor's additions)."""
    out, skip = [], 0
    for a in argv:
        if skip:
            skip -= 1
        elif a == "--worker":
            continue
        elif a in ("--deadline", "--state-file"):
            skip = 1
        else:
            out.append(a)
    return out

def nvidia_smi(query: str) -> str | None:
    """One ``nvidia-smi --query-gpu`` answer (first GPU), or None where there is no nvidia-smi."""
    try:
        smi = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = smi.stdout.strip().splitlines()
    return lines[0].strip() if smi.returncode == 0 and lines else None

def script_args(args) -> dict:
    return {k: v for k, v in vars(args).items() if k not in ("worker", "deadline", "state_file")}
