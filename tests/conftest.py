import os

# Triton kernels are defined (interpreted or compiled) when their module is first imported,
# by whichever test gets there first (tests/test_gpu_evidence.py imports it too). On a
# machine without a GPU they can only run under Triton's CPU interpreter, so switch it on
# for the whole session, before anything imports triton; TLSTM_TRITON_TEST_DEVICE=cuda runs
# them compiled on a GPU instead (tests/test_triton.py).
if os.environ.get("TLSTM_TRITON_TEST_DEVICE", "cpu") == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
from tlstm_bench.vocab import default_omp_wait_policy  # noqa: E402  (imports no torch)

# Before torch loads, as the CLI does: the test workers share the cores, and OpenMP threads that
# spin while they wait for a core another worker holds slow both workers' tests.
default_omp_wait_policy()

import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _results_folder(tmp_path, monkeypatch):
    """Every test writes its results into its own temporary folder, never ./results of the checkout
    (the README promises that running the tests leaves `git status` clean)."""
    monkeypatch.setenv("TLSTM_BENCH_RESULTS", str(tmp_path / "results"))


@pytest.fixture
def fake_env(tmp_path, monkeypatch):
    """Sweep cells run the stdlib fake (tests/sweep_fakes.py, fast to start); returns the path of
    its execution log.

    SLURM jobs inherit this environment (sbatch exports it all by default), so the fake is
    importable in the job and logs to the same file."""
    from sweep_helpers import TESTS

    log = tmp_path / "fake.log"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.setenv("TLSTM_BENCH_CODE_VERSION", "test-version")
    monkeypatch.delenv("FAKE_PLAN", raising=False)
    return log
