import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _results_folder(tmp_path, monkeypatch):
    """Every test writes its results into its own temporary folder, never ./results of the checkout
    (the README promises that running the tests leaves `git status` clean)."""
    monkeypatch.setenv("TLSTM_BENCH_RESULTS", str(tmp_path / "results"))
