"""``tlstm-bench data download``: size and checksum checks, atomic placement, errors.

No network: the files are served from ``file://`` URLs that the tests write.
"""

from __future__ import annotations

import hashlib
import zipfile

import pytest
from typer.testing import CliRunner

from tlstm_bench.cli import app
from tlstm_bench.errors import UserError
from tlstm_bench.tasks import data as data_mod
from tlstm_bench.tasks import download as dl
from tlstm_bench.tasks.data import Remote


def served(tmp_path, name, payload):
    src = tmp_path / "server" / name
    src.parent.mkdir(exist_ok=True)
    src.write_bytes(payload)
    return Remote(name, (src.as_uri(),), len(payload), hashlib.md5(payload).hexdigest())


def test_mnist_download_checks_size_and_md5(tmp_path, monkeypatch):
    good = served(tmp_path, "train-images-idx3-ubyte.gz", b"images")
    monkeypatch.setattr(dl, "MNIST_FILES", (good,))
    paths = dl.download("mnist", tmp_path / "data", log=lambda *a: None)
    assert paths == [tmp_path / "data" / good.name] and paths[0].read_bytes() == b"images"
    # a copy that is there and right is kept; a wrong one is fetched again
    paths[0].write_bytes(b"imageZ")
    dl.download("mnist", tmp_path / "data", log=lambda *a: None)
    assert paths[0].read_bytes() == b"images"


def test_a_bad_checksum_leaves_no_file(tmp_path, monkeypatch):
    good = served(tmp_path, "t10k-labels-idx1-ubyte.gz", b"labels")
    bad = Remote(good.name, good.urls, good.size, "0" * 32)
    monkeypatch.setattr(dl, "MNIST_FILES", (bad,))
    with pytest.raises(UserError, match="md5"):
        dl.download("mnist", tmp_path / "data", log=lambda *a: None)
    assert not any((tmp_path / "data").iterdir())


def test_enwik8_zip_is_checked_by_its_member(tmp_path, monkeypatch):
    content = b"<mediawiki>" * 50
    zipped = tmp_path / "enwik8.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        zf.writestr("enwik8", content)
    monkeypatch.setattr(dl, "ENWIK8_ZIP", Remote("enwik8.zip", (zipped.as_uri(),), zipped.stat().st_size, ""))
    monkeypatch.setattr(dl, "ENWIK8_SIZE", len(content))
    monkeypatch.setattr(dl, "ENWIK8_MD5", hashlib.md5(content).hexdigest())
    (path,) = dl.download("enwik8", tmp_path / "data", log=lambda *a: None)
    assert path.name == "enwik8.zip" and dl.enwik8_zip_ok(path) is None
    monkeypatch.setattr(dl, "ENWIK8_MD5", "0" * 32)
    assert "md5" in dl.enwik8_zip_ok(path)


def test_published_checksums_are_the_known_ones():
    assert data_mod.ENWIK8_MD5 == "a1fa5ffddb56f4953e226637dabbb36a" and data_mod.ENWIK8_SIZE == 10**8
    assert {r.name for r in data_mod.MNIST_FILES} == {
        "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz"}


def test_cli_download_errors_are_one_line(tmp_path, monkeypatch):
    result = CliRunner().invoke(app, ["data", "download", "imagenet", "--data-dir", str(tmp_path)])
    assert result.exit_code == 2 and "unknown dataset 'imagenet'" in result.output
    missing = Remote("t10k-labels-idx1-ubyte.gz", ((tmp_path / "nowhere.gz").as_uri(),), 1, "0" * 32)
    monkeypatch.setattr(dl, "MNIST_FILES", (missing,))
    result = CliRunner().invoke(app, ["data", "download", "mnist", "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 2 and "could not fetch t10k-labels-idx1-ubyte.gz" in result.output
    assert "Traceback" not in result.output
