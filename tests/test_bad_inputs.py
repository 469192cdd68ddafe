"""The bad-input battery (issue 11): every command refuses bad input the same way.

Each case is one bad input to one command. It must end with the expected exit code (2: bad
input), exactly one non-empty line on stderr that starts with ``error:`` and says what is
wrong, no traceback, and nothing written or changed in the folders the command could write
to (the whole working folder, holding the results and checkpoint folders, is hashed before
and after). Most run in-process through Typer's runner; a case that hung before it was
fixed, or that needs a fresh process (``python -m tlstm_bench``) or a folder this user cannot
write, runs as a subprocess with a timeout. ``tests/test_bad_inputs_store.py`` holds the
store's own cases (corrupt records and locks, bad names, unwritable sweep folders).

Placeholders in a case: ``{file}`` a plain file, ``{ro}`` a folder this user cannot write,
``{spec}`` the case's spec file (``SPECS``), ``{res}`` and ``{ck}`` the results and checkpoint
folders. Root writes into any folder, so as root the unwritable cases run without the
capability that lets it (``setpriv``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tlstm_bench.cli import app

TRAIN = ["train", "2d", "--task", "memorization", "--symbols", "3", "--channels", "4", "--max-samples", "30"]
TIME = ["time", "2d", "--channels", "4", "--depths", "1", "--repeats", "1", "--warmup", "0"]
INFO = ["info", "2d", "--vocab", "5", "--channels", "4"]
SUB, UNWRITABLE = "subprocess", "unwritable"  # how a case runs (default: in-process)

# (id, arguments, what the error line must contain, how it runs)
CASES = [
    # ---- info ---------------------------------------------------------------------------------
    ("info-dims-10000", ["info", "tlstm:dims=10000", "--vocab", "5", "--channels", "4"], "kernel entries", None),
    ("info-dims-1e8-hang", ["info", "tlstm:dims=100000000", "--vocab", "5", "--channels", "4"], "kernel entries", SUB),
    ("info-kernel-huge", ["info", "tlstm:kernel=99999999999", "--vocab", "5", "--channels", "3"], "kernel entries", None),
    ("info-locations", ["info", "3d", "--depth", "100000", "--vocab", "5", "--channels", "4"], "locations", None),
    ("info-seq-len-neg", [*INFO, "--seq-len", "-5"], "--seq-len", None),
    ("info-seq-len-0", [*INFO, "--seq-len", "0"], "--seq-len", None),
    ("info-depth-0", [*INFO, "--depth", "0"], "depth", None),
    ("info-depth-text", [*INFO, "--depth", "abc"], "--depth", None),
    ("info-depth-huge", [*INFO, "--depth", "99999999999999"], "depth", None),
    ("info-channels-0", ["info", "2d", "--vocab", "5", "--channels", "0"], "channels", None),
    ("info-channels-huge", ["info", "2d", "--vocab", "5", "--channels", "99999999999"], "channels", None),
    ("info-vocab-0", ["info", "2d", "--vocab", "0", "--channels", "4"], "vocab", None),
    ("info-input-neg", ["info", "2d", "--input-size", "-1", "--output-size", "3", "--channels", "4"], "input size", None),
    ("info-budget-400-digits", ["info", "2d", "--vocab", "5", "--budget", "1" + "0" * 400], "budget", None),
    ("info-budget-slstm-huge", ["info", "2d", "--vocab", "5", "--budget", "slstm:99999999999"], "budget", None),
    ("info-unknown-config", ["info", "4d-xl", "--vocab", "5", "--channels", "4"], "unknown config", None),
    ("info-missing-config", ["info"], "Missing argument", None),
    ("info-unknown-option", [*INFO, "--nope"], "No such option", None),
    ("info-markup-in-message", ["info", "tlstm:norm=[/x]", "--vocab", "5", "--channels", "4"], "[/x]", None),
    # ---- budget -------------------------------------------------------------------------------
    ("budget-depth-0", ["budget", "--depths", "0"], "depth", None),
    ("budget-depths-text", ["budget", "--depths", "1,x"], "--depths", None),
    ("budget-negative", ["budget", "--budget", "-5"], "budget", None),
    ("budget-locations", ["budget", "3d", "--depths", "100000"], "locations", None),
    ("budget-vocab-0", ["budget", "--vocab", "0"], "vocab", None),
    # ---- audit --------------------------------------------------------------------------------
    ("audit-depth-huge", ["audit", "2d", "--depths", "1000000"], "audit", None),
    ("audit-depth-slow", ["audit", "3d", "--depths", "200"], "audit", None),
    ("audit-channels-0", ["audit", "2d", "--channels", "0"], "channels", None),
    ("audit-channels-huge", ["audit", "2d", "--channels", "100000"], "audit", None),
    ("audit-seed-neg", ["audit", "2d", "--seed", "-1"], "--seed", None),
    ("audit-unknown-config", ["audit", "nope"], "unknown config", None),
    ("audit-window-huge", ["audit", "tlstm:dims=3,kernel=301", "--depths", "1"], "audit", None),
    ("audit-window-huge-2d-hang", ["audit", "tlstm:dims=2,kernel=10001", "--depths", "1"], "audit", SUB),
    ("audit-dims-12", ["audit", "tlstm:dims=12,kernel=3", "--depths", "1"], "parameters", None),
    ("audit-channels-large", ["audit", "2d", "--channels", "5000", "--depths", "1"], "audit", None),
    # ---- time ---------------------------------------------------------------------------------
    ("time-depth-1e6-16TB", ["time", "2d", "--depths", "1000000", "--channels", "4"], "needs at least", None),
    ("time-seq-len-1e9-hang", [*TIME, "--seq-len", "1000000000"], "needs at least", SUB),
    ("time-channels-1e7-hang", ["time", "slstm", "--channels", "10000000", "--depths", "1"], "needs at least", SUB),
    ("time-seq-len-0", [*TIME, "--seq-len", "0"], "seq_len", None),
    ("time-repeats-0", [*TIME, "--repeats", "0"], "repeats", None),
    ("time-warmup-neg", [*TIME[:-1], "-1"], "warmup", None),
    ("time-threads-0", [*TIME, "--threads", "0"], "threads", None),
    ("time-dtype", [*TIME, "--dtype", "float16"], "dtype", None),
    ("time-device", [*TIME, "--device", "tpu"], "device", None),
    ("time-seed-neg", [*TIME, "--seed", "-1"], "--seed", None),
    ("time-json-and-csv", [*TIME, "--json", "--csv"], "--json", None),
    ("time-results-file", [*TIME, "--results-dir", "{file}"], "is a file", None),
    ("time-results-unwritable", [*TIME, "--results-dir", "{ro}"], "not writable", UNWRITABLE),
    # ---- train --------------------------------------------------------------------------------
    ("train-lr-neg", [*TRAIN, "--lr", "-1"], "--lr", None),
    ("train-lr-nan", [*TRAIN, "--lr", "nan"], "--lr", None),
    ("train-lr-0", [*TRAIN, "--lr", "0"], "--lr", None),
    ("train-lr-inf", [*TRAIN, "--lr", "inf"], "--lr", None),
    ("train-results-file", [*TRAIN, "--results-dir", "{file}"], "is a file", None),
    ("train-results-under-file", [*TRAIN, "--results-dir", "{file}/sub"], "is a file", None),
    ("train-results-unwritable", [*TRAIN, "--results-dir", "{ro}"], "not writable", UNWRITABLE),
    ("train-checkpoint-file", [*TRAIN, "--checkpoint-dir", "{file}"], "is a file", None),
    ("train-checkpoint-unwritable", [*TRAIN, "--checkpoint-dir", "{ro}/ck"], "not writable", UNWRITABLE),
    ("train-seed-neg", [*TRAIN, "--seed", "-1"], "--seed", None),
    ("train-seed-huge", [*TRAIN, "--seed", str(2**64)], "--seed", None),
    ("train-batch-0", [*TRAIN, "--batch-size", "0"], "--batch-size", None),
    ("train-max-samples-0", [*TRAIN[:-1], "0"], "--max-samples", None),
    ("train-threads-0", [*TRAIN, "--threads", "0"], "--threads", None),
    ("train-eval-every-neg", [*TRAIN, "--eval-every", "-3"], "--eval-every", None),
    ("train-symbols-cover-hang", ["train", "2d", "--preset", "memorization-small", "--symbols", "1"],
     "distinct sequences", SUB),
    ("train-symbols-huge", [*TRAIN[:4], "--symbols", "100000", "--channels", "4"], "--symbols", None),
    ("train-digits-0", ["train", "2d", "--task", "addition", "--digits", "0", "--channels", "4"], "--digits", None),
    ("train-perm-seed-neg", ["train", "2d", "--task", "pmnist", "--source", "digits", "--perm-seed", "-1",
                             "--channels", "4"], "--perm-seed", None),
    ("train-task-unknown", ["train", "2d", "--task", "wiki", "--channels", "4"], "unknown task", None),
    ("train-too-large", [*TRAIN[:6], "--channels", "100000", "--depth", "3"], "needs at least", None),
    ("train-samples-and-epochs", [*TRAIN, "--epochs", "2"], "not both", None),
    ("train-batch-too-large", ["train", "2d", "--task", "mnist", "--source", "digits", "--channels", "4", "--epochs",
                               "1", "--batch-size", "100000000"], "needs at least", None),
    ("train-device", [*TRAIN, "--device", "tpu"], "device", None),
    ("train-lr-text", [*TRAIN, "--lr", "fast"], "--lr", None),
    # ---- visualize ----------------------------------------------------------------------------
    ("visualize-example-999999", ["visualize", "2d", "--example", "999999"], "--example", None),
    ("visualize-example-neg", ["visualize", "2d", "--example", "-1"], "--example", None),
    ("visualize-out-under-file", ["visualize", "2d", "--out", "{file}/fig"], "is a file", None),
    ("visualize-out-folder", ["visualize", "2d", "--out", "{res}"], "is a folder", None),
    ("visualize-out-unwritable", ["visualize", "2d", "--out", "{ro}/fig"], "not writable", UNWRITABLE),
    ("visualize-too-large", ["visualize", "2d", "--depth", "100000"], "needs at least", None),
    ("visualize-task-option", ["visualize", "2d", "--task-option", "symbols=abc"], "--symbols", None),
    ("visualize-slstm", ["visualize", "slstm"], "memory-cell tensor", None),
    # ---- regress ------------------------------------------------------------------------------
    ("regress-format", ["regress", "--format", "xml"], "--format", None),
    ("regress-tolerance-nan", ["regress", "--tolerance", "nan"], "--tolerance", None),
    ("regress-tolerance-below-1", ["regress", "--tolerance", "0.5"], "--tolerance", None),
    ("regress-baseline-folder", ["regress", "--quick", "--update", "--baseline", "{res}"], "is a folder", None),
    ("regress-baseline-unwritable", ["regress", "--quick", "--update", "--baseline", "{ro}/b.json"],
     "not writable", UNWRITABLE),
    # ---- data ---------------------------------------------------------------------------------
    ("data-unknown", ["data", "download", "bogus", "--data-dir", "{res}"], "unknown dataset", None),
    ("data-dir-file", ["data", "download", "mnist", "--data-dir", "{file}"], "is a file", None),
    ("data-dir-unwritable", ["data", "download", "mnist", "--data-dir", "{ro}/data"], "not writable", UNWRITABLE),
    # ---- sweep: spec values checked at plan time, never stored as failed records ----------------
    ("spec-symbols-negative", ["sweep", "{spec}"], "--symbols", None),
    ("spec-symbols-text", ["sweep", "{spec}"], "--symbols", None),
    ("spec-symbols-cover-all", ["sweep", "{spec}"], "distinct sequences", None),
    ("spec-alphabet", ["sweep", "{spec}"], "alphabet", None),
    ("spec-dtype-float16", ["sweep", "{spec}"], "runtime.dtype", None),
    ("spec-configs-spellings", ["sweep", "{spec}"], "names one configuration twice", None),
    ("spec-configs-knob-string", ["sweep", "{spec}"], "names one configuration twice", None),
    ("spec-depth-locations", ["sweep", "{spec}"], "locations", None),
    ("spec-seed-negative", ["sweep", "{spec}"], "seeds", None),
    ("spec-device-cuda", ["sweep", "{spec}"], "no usable GPU", None),
    # issue 21: bounds before expansion, values that passed the checks and broke later
    ("spec-million-cells-hang", ["sweep", "{spec}", "--dry-run"], "1,000,000 cells, above the limit of 10,000", SUB),
    ("spec-nested-too-deep", ["sweep", "{spec}", "--dry-run"], "nested too deeply", None),
    ("spec-timeout-1e308", ["sweep", "{spec}"], "timeout_s", None),
    ("spec-knob-twice", ["sweep", "{spec}", "--dry-run"], "gives the knob 'dims' twice", None),
    ("train-knob-twice", ["train", "tlstm:dims=2,dims=3", *TRAIN[2:]], "gives the knob 'dims' twice", None),
    ("info-knob-twice", ["info", "2d:norm=cn,norm=ln", "--channels", "4"], "gives the knob 'norm' twice", None),
    ("time-knob-twice", ["time", "tlstm:dims=2,dims=3", "--channels", "4"], "gives the knob 'dims' twice", None),
    ("audit-knob-twice", ["audit", "tlstm:kernel=3,kernel=5"], "gives the knob 'kernel' twice", None),
    ("budget-knob-twice", ["budget", "3d:window=appendix,window=aligned"], "gives the knob 'window' twice", None),
    # ---- python -m tlstm_bench: the same command line in a fresh process ------------------------
    ("module-info-dims", ["info", "tlstm:dims=10000", "--vocab", "5", "--channels", "4"], "kernel entries", SUB),
    ("module-unknown-command", ["bogus"], "No such command", SUB),
    ("module-train-lr-nan", [*TRAIN, "--lr", "nan"], "--lr", SUB),
]

_BASE = 'task = "memorization"\nconfigs = ["2d"]\ndepths = [1]\nchannels = 4\n'
SPECS = {
    "spec-symbols-negative": _BASE + "[train]\nmax_samples = 30\noptions = { symbols = -3 }\n",
    "spec-symbols-text": _BASE + '[train]\nmax_samples = 30\noptions = { symbols = "abc" }\n',
    "spec-symbols-cover-all": _BASE + '[train]\npreset = "memorization-small"\noptions = { symbols = 1 }\n',
    "spec-alphabet": _BASE + "[train]\nmax_samples = 30\noptions = { alphabet = 100 }\n",
    "spec-dtype-float16": 'task = "runtime"\nconfigs = ["2d"]\ndepths = [1]\nchannels = 4\n'
                          '[runtime]\ndtype = "float16"\n',
    "spec-configs-spellings": _BASE.replace('["2d"]', '["2d", "2D", " 2d"]') + "[train]\nmax_samples = 30\n",
    "spec-configs-knob-string": _BASE.replace('["2d"]', '["2d", "tlstm:dims=2,kernel=3,memory_conv=1,norm=none"]')
                                + "[train]\nmax_samples = 30\n",
    "spec-depth-locations": _BASE.replace('["2d"]', '["3d"]').replace("[1]", "[1000000]")
                            + "[train]\nmax_samples = 30\n",
    "spec-seed-negative": _BASE + "seeds = [-1]\n[train]\nmax_samples = 30\n",
    "spec-device-cuda": _BASE + 'device = "cuda"\n[train]\nmax_samples = 30\n',
    "spec-million-cells-hang": 'task = "runtime"\nconfigs = ["slstm", "2d", "2d-m", "3d"]\nchannels = 4\n'
                               f"depths = {list(range(1, 501))}\nseeds = {list(range(500))}\n[runtime]\n",
    "spec-nested-too-deep": _BASE + "[train]\nmax_samples = 30\noptions = { symbols = " + "[" * 5000 + "]" * 5000 + " }\n",
    "spec-timeout-1e308": _BASE + "timeout_s = 1e308\n[train]\nmax_samples = 30\n",
    "spec-knob-twice": _BASE.replace('["2d"]', '["tlstm:dims=2,dims=3"]') + "[train]\nmax_samples = 30\n",
}
SUBPROCESS_TIMEOUT = 120  # the cases that hung before this battery existed would hit it

runner = CliRunner()


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture
def place(tmp_path, monkeypatch):
    """The case's working folder: results (with one record in it), checkpoints, a plain file, a folder
    this user cannot write (mode 555), a home for caches; the current folder while the case runs."""
    root = tmp_path / "place"
    (root / "res" / "store" / "training").mkdir(parents=True)
    (root / "res" / "store" / "training" / "kept.json").write_text('{"id": "kept", "status": "ok"}')
    (root / "ck").mkdir()
    (root / "file").write_text("a file, not a folder\n")
    (root / "ro").mkdir()
    (root / "ro" / "inside").write_text("x")
    (root / "home").mkdir()
    (root / "ro").chmod(0o555)
    monkeypatch.chdir(root)
    monkeypatch.setenv("TLSTM_BENCH_RESULTS", str(root / "res"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(root / "home" / "cache"))  # where unsaved records would go
    monkeypatch.setenv("MPLCONFIGDIR", str(root / "home" / "mpl"))
    monkeypatch.delenv("TLSTM_BENCH_DATA", raising=False)
    yield root
    (root / "ro").chmod(0o755)


def snapshot(root: Path) -> dict[str, str]:
    """Every file and folder under ``root`` with a hash of its content ("dir" for a folder), but
    matplotlib's and python's own caches."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[:2] == ("home", "mpl") or "__pycache__" in rel.parts:
            continue
        out[str(rel)] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _args(case_id: str, args: list[str], root: Path) -> list[str]:
    if case_id in SPECS:
        (root / "spec.toml").write_text(textwrap.dedent(SPECS[case_id]))
    names = {"file": root / "file", "ro": root / "ro", "spec": root / "spec.toml", "res": root / "res",
             "ck": root / "ck"}
    return [a.format(**{k: str(v) for k, v in names.items()}) for a in args]


def _run_subprocess(args: list[str], root: Path, unwritable: bool) -> tuple[int, str, str]:
    env = dict(os.environ, COLUMNS="80", HOME=str(root / "home"))
    prefix = []
    if unwritable and _is_root():
        # Root writes into read-only folders; without CAP_DAC_OVERRIDE it obeys their mode like anyone.
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: no folder is unwritable")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    proc = subprocess.run([*prefix, sys.executable, "-m", "tlstm_bench", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("case_id,args,expected,how", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(case_id, args, expected, how, place):
    if case_id == "spec-device-cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    args = _args(case_id, args, place)
    before = snapshot(place)
    if how is None:
        result = runner.invoke(app, args)
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        code, stdout, stderr = result.exit_code, result.stdout, result.stderr
    else:
        code, stdout, stderr = _run_subprocess(args, place, unwritable=how == UNWRITABLE)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2, f"exit {code}\nstdout: {stdout}\nstderr: {stderr}"
    assert "Traceback" not in stdout + stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert expected in lines[0], lines[0]
    assert snapshot(place) == before, "the command wrote or changed something"


def test_the_battery_is_large_and_every_case_distinct():
    assert len(CASES) >= 80  # issue 11 asked for at least 80
    assert len({c[0] for c in CASES}) == len(CASES)
    assert len({(tuple(c[1]), SPECS.get(c[0])) for c in CASES if not c[0].startswith("module-")}) \
        == len([c for c in CASES if not c[0].startswith("module-")])
    assert set(SPECS) <= {c[0] for c in CASES}
