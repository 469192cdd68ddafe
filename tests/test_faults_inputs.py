"""Inputs that passed the checks and broke later, and messages that said the wrong thing
(issue 21, cases 3, 7 and 10): each is now a one-line error or the right behaviour.

The spec cases (a million cells, a value nested thousands deep, ``timeout_s = 1e308``, a knob
given twice) are in the bad-input battery, ``tests/test_bad_inputs.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from typer.testing import CliRunner

from sweep_helpers import FAKE, RUNTIME_SPEC, records, write_spec
from tlstm_bench.cli import app
from tlstm_bench.errors import UserError
from tlstm_bench.results import store
from tlstm_bench.sweeps.cell import make_record
from tlstm_bench.sweeps.grid import expand
from tlstm_bench.sweeps.spec import load_spec
from tlstm_bench.training import train
from tlstm_bench.training.checkpoint import checkpoint_path

RUN = dict(task="memorization", symbols=3, depth=1, channels=4, max_samples=60, eval_every=15, progress=False)


def one_line(result, code: int = 2) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


KILL_MID_WRITE = textwrap.dedent("""
    import os, sys
    import torch
    from tlstm_bench.training import train

    real = torch.save
    calls = []

    def save_then_die(payload, fh, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:           # the second checkpoint: half written, then the process is gone
            fh.write(b"x" * 4096)
            fh.flush()
            os._exit(9)
        return real(payload, fh, *args, **kwargs)

    torch.save = save_then_die
    train("2d", checkpoint_dir=sys.argv[1], task="memorization", symbols=3, depth=1, channels=4,
          max_samples=60, eval_every=15, progress=False)
""")


def test_a_checkpoint_write_cut_by_a_kill_leaves_a_temp_file_the_resume_removes(tmp_path):
    folder = tmp_path / "ck"
    done = subprocess.run([sys.executable, "-c", KILL_MID_WRITE, str(folder)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 9, done.stderr
    left = list(folder.glob(".checkpoint.pt.*.tmp"))
    assert len(left) == 1 and left[0].stat().st_size >= 4096        # what a kill leaves
    record = train("2d", checkpoint_dir=folder, **RUN)
    assert record["status"] == "ok" and record["resumed_at"] == [15]
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint.pt"]


def test_a_live_writers_temp_file_is_left_alone(tmp_path):
    from tlstm_bench.atomic import clean_stale_temps, temp_beside

    target = tmp_path / "checkpoint.pt"
    fd, name = temp_beside(target)                                   # this process's: alive
    os.close(fd)
    assert clean_stale_temps(target) == [] and os.path.exists(name)


def test_a_checkpoint_holding_another_models_weights_is_one_line(tmp_path):
    folder = tmp_path / "ck"
    train("2d", checkpoint_dir=folder, **RUN)
    path = checkpoint_path(folder)
    saved = torch.load(path, weights_only=True)
    saved["model"] = {f"{k}.other": v for k, v in saved["model"].items()}   # the right format, another model's keys
    torch.save(saved, path)
    with pytest.raises(UserError, match="does not fit this model"):
        train("2d", checkpoint_dir=folder, **{**RUN, "max_samples": 90})
    args = ["train", "2d", "--task", "memorization", "--symbols", "3", "--channels", "4", "--max-samples", "90",
            "--eval-every", "15", "--checkpoint-dir", str(folder), "--results-dir", str(tmp_path / "res")]
    assert str(path) in one_line(CliRunner().invoke(app, args))


def test_a_store_folder_whose_name_is_not_utf8_is_one_line(tmp_path):
    cell = expand(load_spec(write_spec(tmp_path, RUNTIME_SPEC)), code="v")[0]
    root = tmp_path / "res" / "store"
    path = store.write_record(make_record(cell, {"ms_per_step": 1.0}), "t", root=root, record_id=cell.id)
    odd = os.fsencode(root) + b"/caf\xe9"
    os.mkdir(odd)
    with open(odd + b"/x.json", "wb") as fh:
        fh.write(path.read_bytes())
    done = subprocess.run([sys.executable, "-m", "tlstm_bench", "results", "--results-dir", str(root.parent)],
                          capture_output=True, text=True, errors="replace", timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and "b'caf\\xe9'" in done.stderr


def test_a_sweep_prints_under_an_ascii_only_locale(tmp_path, fake_env):
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    done = subprocess.run([sys.executable, "-m", "tlstm_bench", "sweep", str(spec), "--results-dir",
                           str(tmp_path / "res"), "--cell-fn", FAKE, "--only", "depth=1"],
                          capture_output=True, env={**os.environ, "PYTHONIOENCODING": "ascii"}, timeout=120)
    output = (done.stdout + done.stderr).decode("ascii")               # nothing but ASCII came out
    assert done.returncode == 0 and "Traceback" not in output, output
    assert len(records(tmp_path / "res" / "store")) == 4


def test_a_dry_run_over_a_linked_record_does_not_say_it_writes(tmp_path):
    spec = write_spec(tmp_path, RUNTIME_SPEC)
    cell = expand(load_spec(spec), code="test-version")[0]
    folder = tmp_path / "res" / "store" / "t"
    folder.mkdir(parents=True)
    (tmp_path / "elsewhere.json").write_text("{}")
    (folder / f"{cell.id}.json").symlink_to(tmp_path / "elsewhere.json")
    result = CliRunner().invoke(app, ["sweep", str(spec), "--dry-run", "--results-dir", str(tmp_path / "res")],
                                env={"TLSTM_BENCH_CODE_VERSION": "test-version"})
    line = one_line(result)
    assert "outside the results store" in line and "refusing to write" not in line


def test_a_corrupt_training_record_is_not_explained_with_sweeps(tmp_path):
    folder = tmp_path / "store" / "training"
    folder.mkdir(parents=True)
    (folder / "abc.json").write_text("{")
    with pytest.raises(UserError) as caught:
        store.read_record(folder / "abc.json")
    assert "sweep" not in str(caught.value) and "train" in str(caught.value)
