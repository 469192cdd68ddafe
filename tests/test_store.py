"""The results store: atomic one-file records, clean JSON, clear errors, provenance."""

import json
import math

import pytest

from tlstm_bench import UserError
from tlstm_bench.results import load_records, provenance, write_record
from tlstm_bench.results.frame import read_frame


def test_round_trip_to_dataframe(tmp_path):
    write_record({"config": "2d", "depth": 1, "ms_per_step": 0.5, "samples": [0.4, 0.5, 0.6]}, "timing",
                 root=tmp_path, record_id="a")
    write_record({"config": "3d", "depth": 4, "ms_per_step": 2.0, "samples": [2.0]}, "timing",
                 root=tmp_path, record_id="b")
    frame = read_frame("timing", root=tmp_path)
    assert sorted(frame["config"]) == ["2d", "3d"]
    assert frame.set_index("id").loc["a", "samples"] == [0.4, 0.5, 0.6]


def test_non_finite_floats_become_null(tmp_path):
    path = write_record({"loss": math.nan, "nested": {"x": math.inf}}, "train", root=tmp_path)
    record = json.loads(path.read_text())
    assert record["loss"] is None and record["nested"]["x"] is None


def test_rewrite_leaves_one_whole_record_and_no_temporary_files(tmp_path):
    for value in range(5):
        write_record({"value": value}, "c", root=tmp_path, record_id="same")
    files = list((tmp_path / "c").iterdir())
    assert [f.name for f in files] == ["same.json"]
    assert json.loads(files[0].read_text())["value"] == 4


def test_failed_write_keeps_the_old_record(tmp_path):
    write_record({"value": 1}, "c", root=tmp_path, record_id="r")
    with pytest.raises(TypeError):
        write_record({"value": object.__new__(type("Unserialisable", (), {"__str__": None}))}, "c",
                     root=tmp_path, record_id="r")
    assert json.loads((tmp_path / "c" / "r.json").read_text())["value"] == 1
    assert [f.name for f in (tmp_path / "c").iterdir()] == ["r.json"]


def test_corrupt_record_names_the_file(tmp_path):
    write_record({"value": 1}, "c", root=tmp_path, record_id="good")
    (tmp_path / "c" / "bad.json").write_text("{not json")
    with pytest.raises(UserError, match="bad.json"):
        load_records("c", root=tmp_path)


def test_provenance_fields():
    record = provenance("cpu")
    for key in ("git_commit", "git_dirty", "torch_version", "device", "device_name", "threads", "host", "date"):
        assert key in record
    assert record["device"] == "cpu" and record["threads"] >= 1


def test_record_that_is_not_an_object_names_the_file(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "list.json").write_text("[1, 2]")
    with pytest.raises(UserError, match="list.json"):
        load_records("c", root=tmp_path)


def test_the_results_folder_is_given_else_the_environment_else_results_here(tmp_path, monkeypatch):
    from pathlib import Path

    from tlstm_bench.results import workspace

    monkeypatch.delenv("TLSTM_BENCH_RESULTS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert workspace().store.resolve() == tmp_path / "results" / "store"
    assert workspace().figures.resolve() == tmp_path / "results" / "figures"
    monkeypatch.setenv("TLSTM_BENCH_RESULTS", str(tmp_path / "env"))
    assert workspace().root == tmp_path / "env"
    assert workspace(tmp_path / "given").root == tmp_path / "given"
    path = write_record({"value": 1}, "c")                       # the default store: the environment's
    assert path == tmp_path / "env" / "store" / "c" / f"{path.stem}.json" and Path(path).is_file()


def test_migrate_adds_measured_causality_to_old_records(tmp_path):
    from tlstm_bench.results.migrate import add_causal

    write_record({"config": "3d-ln", "depth": 2, "ms_per_step": 1.0}, "timing", root=tmp_path, record_id="a")
    write_record({"config": "3d-cn", "depth": 2, "metric": "accuracy"}, "training", root=tmp_path, record_id="b")
    write_record({"config": "2d", "depth": 1, "ms_per_step": 1.0, "causal": True}, "timing", root=tmp_path,
                 record_id="c")
    write_record({"note": "not a model"}, "misc", root=tmp_path, record_id="d")
    counts = {"added": 2, "had it": 1, "not a model record": 1}
    assert add_causal(tmp_path, dry_run=True) == counts
    assert "causal" not in json.loads((tmp_path / "timing" / "a.json").read_text())     # a dry run writes nothing
    assert add_causal(tmp_path) == counts
    a = json.loads((tmp_path / "timing" / "a.json").read_text())
    assert a["causal"] is False and "measured" in a["migrated"]["causal"] and a["ms_per_step"] == 1.0
    assert json.loads((tmp_path / "training" / "b.json").read_text())["causal"] is True
    assert "migrated" not in json.loads((tmp_path / "timing" / "c.json").read_text())


def test_a_record_gets_the_mode_open_would_give_not_mkstemps_0600(tmp_path):
    """Records were 0600 (mkstemp's mode), unreadable to the others who share a store."""
    import stat

    from tlstm_bench import atomic

    path = atomic.atomic_write(tmp_path / "r.json", lambda fh: fh.write("{}"))
    plain = tmp_path / "plain"
    plain.write_text("{}")
    assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode) == 0o666 & ~atomic._UMASK
