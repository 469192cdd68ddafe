"""The initialisation search (issue 29): its shipped specs, the keys of default cells (unchanged by
the knobs), and the device script that runs a time-limited sweep and packs its records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from tlstm_bench.results.schema import record_key
from tlstm_bench.sweeps.grid import expand
from tlstm_bench.sweeps.spec import load_spec
from tlstm_bench.training import train

REPO = Path(__file__).resolve().parents[1]
HARD_STOP_S = 560  # benchmarks/device_run.sh's stop in the documented command (a call's timeout_s: 590)


def test_the_search_specs_vary_only_the_initialisation_of_the_3d_tlstm_cn():
    for name in ("memorization-init", "addition-init", "memorization-init-small"):
        (train_section,) = load_spec(name).sections
        assert all(c.split(":")[0] == "3d-cn" for c in train_section.configs), name
        assert all("window" not in c for c in train_section.configs), name


def test_the_memorization_search_fits_one_device_call():
    spec = load_spec("memorization-init")
    (section,) = spec.sections
    cells = expand(spec, code="x", machine={})
    assert spec.device == "cuda" and len(cells) == 8 and section.depths == (1, 4, 7, 10)
    assert section.settings["options"] == {} and section.settings["preset"] == "paper-memorization"
    assert section.settings["max_samples"] >= 54_000  # at least the paper's samples at L = 10
    # every cell stops training by itself (time_limit_s), with time to start, evaluate and write,
    # before its timeout, which is before the device script's hard stop
    assert section.settings["time_limit_s"] + 60 <= section.timeout_s <= HARD_STOP_S - 15


def test_the_learning_rate_spec_is_the_paper_lr_beside_1e_4_on_the_five_knobs_and_fits_one_call():
    spec = load_spec("memorization-lr")
    (section,) = spec.sections
    cells = expand(spec, code="x", machine={})
    (init,) = [c for c in load_spec("memorization-init").sections[0].configs if "input_std=3" in c]
    assert spec.device == "cuda" and section.configs == (init,) and section.depths == (7, 10)
    assert sorted(c.spec["lr"] for c in cells) == [1e-4, 1e-4, 1e-3, 1e-3]
    assert section.settings["preset"] == "paper-memorization" and section.settings["max_samples"] >= 115_000
    assert section.settings["time_limit_s"] + 60 <= section.timeout_s <= HARD_STOP_S - 15


def test_the_issue_29_call_resumes_a_cpu_run_with_the_spec_s_caps():
    """benchmarks/issue29_call.sh resumes a CPU run beside the sweep (results/carry/lD-lrR: depth D,
    lr R): the same five knobs, preset, samples cap and time limit as memorization-lr's cells, so
    that its record reads beside theirs (a checkpoint of other settings would be refused by its
    key); L = 10 first, then L = 7; a carry folder it cannot read is an error, not a silent skip."""
    text = (REPO / "benchmarks" / "issue29_call.sh").read_text()
    (section,) = load_spec("memorization-lr").sections
    (config,) = section.configs
    assert f"K5={config}\n" in text
    assert f"--preset {section.settings['preset']}" in text
    assert '-L "${BASH_REMATCH[1]}" --lr "${BASH_REMATCH[2]}"' in text and "^l([0-9]+)-lr([0-9.e-]+)$" in text
    assert "for run in results/carry/l10-lr1e-4 results/carry/l7-lr1e-4; do" in text
    assert f"--max-samples {section.settings['max_samples']} --time-limit {section.settings['time_limit_s']:g}" in text
    assert subprocess.run(["bash", "-n", str(REPO / "benchmarks" / "issue29_call.sh")]).returncode == 0


def _issue29_call(tmp_path: Path, *carries: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, list]:
    """Run issue29_call.sh in a copy of benchmarks/ whose device_run.sh only writes down its
    arguments, with a checkpoint in each of ``carries`` (results/carry/...): (the run, the calls)."""
    (tmp_path / "benchmarks").mkdir(parents=True)
    (tmp_path / "benchmarks" / "issue29_call.sh").write_text((REPO / "benchmarks" / "issue29_call.sh").read_text())
    calls = tmp_path / "calls"
    (tmp_path / "benchmarks" / "device_run.sh").write_text(f'echo "$*" >> {calls}\n')
    for carry in carries:
        (tmp_path / carry).mkdir(parents=True)
        (tmp_path / carry / "checkpoint.pt").write_bytes(b"x")
    done = subprocess.run(["bash", str(tmp_path / "benchmarks" / "issue29_call.sh"), "500", "abc"],
                          capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=60)
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_the_issue_29_call_resumes_the_deepest_carried_run_and_says_when_there_is_none(tmp_path):
    done, calls = _issue29_call(tmp_path / "both", "results/carry/l7-lr1e-4", "results/carry/l10-lr1e-4")
    assert done.returncode == 0, done.stderr
    (resumed,) = [c for c in calls if c.startswith("l10-lr1e-4-on ")]
    assert " -L 10 --lr 1e-4 " in resumed and "--checkpoint-dir results/carry/l10-lr1e-4" in resumed
    assert sorted(c.split()[0] for c in calls) == ["l10-lr1e-4-on", "memorization-clip", "memorization-lr",
                                                   "memorization-warmup"]
    done, calls = _issue29_call(tmp_path / "l7", "results/carry/l7-lr1e-4")
    assert any(c.startswith("l7-lr1e-4-on ") and " -L 7 --lr 1e-4 " in c for c in calls)
    done, calls = _issue29_call(tmp_path / "none")
    assert done.returncode == 0 and "the sweeps run alone" in done.stdout and len(calls) == 3
    done, calls = _issue29_call(tmp_path / "bad", env={"ISSUE29_CARRY": "results/carry/somewhere"})
    assert done.returncode == 2 and "nothing resumed" in done.stderr and len(calls) == 3
    done, calls = _issue29_call(tmp_path / "noclip", env={"ISSUE29_CLIP": "0"})
    assert "memorization-clip" not in " ".join(calls) and len(calls) == 2


def test_default_cells_and_runs_keep_the_keys_they_had_before_the_knobs():
    """Computed at d081c5f, before the initialisation knobs: a knob at its default is not written
    into the configuration string, so the cells and records of default runs keep their keys."""
    keys = {}
    for name in ("quick", "memorization"):
        last = [c for c in expand(load_spec(name), code="x", machine={}) if c.kind == "train"][-1]
        keys[name] = (last.spec["config"], last.spec["depth"], last.key)
    assert keys == {"quick": ("3d-cn", 2, "ca16edce8d6f7e97"), "memorization": ("3d-cn", 10, "65aa9a7f506fa9b0")}
    record = train("3d-cn", depth=2, preset="memorization-small", max_samples=15, eval_every=15)
    assert record["key"] == record_key(record) == "c55695166ee23da6"


def test_device_run_packs_a_time_limited_sweep_into_one_archive(tmp_path):
    spec = tmp_path / "tiny-search.toml"
    spec.write_text('task = "memorization"\nconfigs = ["3d-cn:recurrent_scale=2", "2d"]\ndepths = [1]\n'
                    'channels = 4\ntimeout_s = 300\n[train]\nmax_samples = 100000000\ntime_limit_s = 2\n'
                    'options = { symbols = 3, alphabet = 8 }\n')
    # as on the device: run from the repository's top folder, no PYTHONPATH given
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "OUT": str(tmp_path / "out"),
           "TMPDIR": str(tmp_path), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "benchmarks/device_run.sh", "tiny", "240", "0123abc", "--",
                           "sweep", str(spec), "--jobs", "2"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    with tarfile.open(tmp_path / "out" / "tiny.tar.gz") as archive:
        names = archive.getnames()
        archive.extractall(tmp_path / "unpacked", filter="data")
    assert not any(".checkpoints" in n or ".locks" in n for n in names)
    assert {"./tiny.log", "./tiny-meta.txt", "./tiny-nvidia-smi.txt"} <= set(names)
    records = [json.loads(p.read_text()) for p in (tmp_path / "unpacked" / "store" / "tiny-search").glob("*.json")]
    assert len(records) == 2 and all(r["status"] == "ok" and r["stop_reason"] == "time_limit" for r in records)
    assert {r["init"]["recurrent_scale"] for r in records} == {2.0, 1.0} and {r["time_limit_s"] for r in records} == {2}
    assert "exit status 0" in (tmp_path / "unpacked" / "tiny-meta.txt").read_text()


def test_device_run_brings_back_the_checkpoint_of_a_run_it_is_told_to_keep(tmp_path):
    """DEVICE_RUN_KEEP (issue29_call.sh sets it for the CPU run it resumes): the run's checkpoint
    comes back in the archive as carry/<folder>/checkpoint.pt, where a later session goes on."""
    keep = tmp_path / "carry" / "l1-lr1e-4"
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "OUT": str(tmp_path / "out"),
           "TMPDIR": str(tmp_path), "DEVICE_RUN_KEEP": str(keep),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "benchmarks/device_run.sh", "kept", "240", "0123abc", "--", "train", "2d",
                           "--preset", "memorization-small", "--channels", "4", "--max-samples", "30",
                           "--checkpoint-dir", str(keep)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with tarfile.open(tmp_path / "out" / "kept.tar.gz") as archive:
        member = archive.extractfile("./carry/l1-lr1e-4/checkpoint.pt")
        assert member.read() == (keep / "checkpoint.pt").read_bytes()
