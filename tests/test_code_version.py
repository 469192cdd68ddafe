"""The code version is a hash of the package's source: commits that change no code leave finished
sweep cells finished; every record still names its git commit (or none, outside a checkout)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tlstm_bench
from tlstm_bench.results.provenance import code_version, git_info, source_hash

PACKAGE = Path(tlstm_bench.__file__).resolve().parent
TESTS = Path(__file__).resolve().parent

SPEC = """
task = "runtime"
configs = ["slstm", "2d"]
depths = [1]
channels = 8
timeout_s = 60
[runtime]
seq_len = 5
repeats = 2
"""


def copy_package(to: Path) -> Path:
    shutil.copytree(PACKAGE, to / "tlstm_bench", ignore=shutil.ignore_patterns("__pycache__"))
    return to / "tlstm_bench"


def test_the_hash_covers_source_content_only(tmp_path):
    package = copy_package(tmp_path)
    before = source_hash(package)
    (package / "sweeps" / "specs" / "quick.toml").write_text("# a spec is data, not code\n")
    (package / "NOTES.txt").write_text("not code")
    assert source_hash(package) == before
    (package / "audit.py").write_text((package / "audit.py").read_text() + "\n# a comment is an edit\n")
    edited = source_hash(package)
    assert edited != before
    (package / "audit.py").rename(package / "audit2.py")                    # a rename is one too
    assert source_hash(package) != edited


def test_pinned_version_and_format(monkeypatch):
    monkeypatch.delenv("TLSTM_BENCH_CODE_VERSION", raising=False)
    assert code_version() == f"{tlstm_bench.__version__}+src.{source_hash()}"
    monkeypatch.setenv("TLSTM_BENCH_CODE_VERSION", "pinned")
    assert code_version() == "pinned"


def test_git_provenance_of_this_checkout():
    info = git_info()
    tracked = subprocess.run(["git", "-C", str(PACKAGE), "ls-files", "--error-unmatch", "__init__.py"],
                             capture_output=True).returncode == 0
    if not tracked:
        pytest.skip("the package is not a tracked part of a git checkout here")
    assert len(info["git_commit"]) == 40 and isinstance(info["git_dirty"], bool)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


@pytest.mark.slow
def test_a_commit_that_changes_no_code_leaves_a_finished_sweep_finished(tmp_path):
    """A checkout (a copy of this package) runs a sweep, then commits docs, results and tests:
    every cell stays done. Then a commit edits the package: every cell is to run again."""
    repo = tmp_path / "repo"
    package = copy_package(repo)
    (repo / "README.md").write_text("# v1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "v1")
    spec = tmp_path / "t.toml"
    spec.write_text(textwrap.dedent(SPEC))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(TESTS)]), "FAKE_LOG": str(tmp_path / "log")}
    env.pop("TLSTM_BENCH_CODE_VERSION", None)
    env.pop("FAKE_PLAN", None)

    def tlstm_bench_cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "tlstm_bench", *args, "--results-dir", str(tmp_path / "out")],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return " ".join(done.stdout.split())

    where = subprocess.run([sys.executable, "-c", "import tlstm_bench; print(tlstm_bench.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path).stdout.strip()
    assert Path(where).parent == package                                    # the copy runs, not this checkout
    tlstm_bench_cli("sweep", str(spec), "--cell-fn", "sweep_fakes:cell")
    assert "2 cells, 2 done" in tlstm_bench_cli("sweep", str(spec), "--dry-run")

    (repo / "README.md").write_text("# v2: a typo fixed\n")
    (repo / "results").mkdir()
    (repo / "results" / "evidence.json").write_text("{}")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_new.py").write_text("def test_x():\n    pass\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "docs, results and tests only")
    assert "2 cells, 2 done, 0 failed, 0 running elsewhere, 0 to run" in tlstm_bench_cli("sweep", str(spec),
                                                                                          "--dry-run")

    (package / "audit.py").write_text((package / "audit.py").read_text() + "\n# changed\n")
    _git(repo, "commit", "-qam", "code")
    assert "2 cells, 0 done, 0 failed, 0 running elsewhere, 2 to run" in tlstm_bench_cli("sweep", str(spec),
                                                                                          "--dry-run")

    records = tlstm_bench_cli("results", "t", "--format", "json")
    assert '"git_commit": "' in records and '"git_dirty": false' in records   # provenance of the first run


def test_outside_a_checkout_the_commit_is_unknown(tmp_path):
    copy_package(tmp_path / "site")
    script = ("import json; from tlstm_bench.results.provenance import git_info, code_version; "
              "print(json.dumps([git_info(), code_version()]))")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    env.pop("TLSTM_BENCH_CODE_VERSION", None)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    info, version = __import__("json").loads(out.stdout)
    assert info == {"git_commit": None, "git_dirty": None}
    assert version == f"{tlstm_bench.__version__}+src.{source_hash()}"      # the same source, the same version


def test_outside_a_checkout_a_given_commit_is_recorded(tmp_path):
    """A device machine gets the working tree without .git: TLSTM_BENCH_GIT_COMMIT names the commit
    (benchmarks/device_run.sh sets it); its dirty state stays unknown."""
    copy_package(tmp_path / "site")
    script = "import json; from tlstm_bench.results.provenance import git_info; print(json.dumps(git_info()))"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), "GIT_CEILING_DIRECTORIES": str(tmp_path),
           "TLSTM_BENCH_GIT_COMMIT": "0123abc"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert __import__("json").loads(out.stdout) == {"git_commit": "0123abc", "git_dirty": None}
