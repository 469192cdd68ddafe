"""The project's names and defaults are defined once, in tlstm_bench/vocab.py, and agree with what uses them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tlstm_bench
from tlstm_bench import vocab
from tlstm_bench.errors import UserError

PACKAGE = Path(tlstm_bench.__file__).parent
SHARED = [name for name in vars(vocab) if name.isupper()]


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text())


def test_every_shared_name_is_assigned_only_in_vocab():
    assigned = {}
    for path, tree in _modules():
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign) else []
            for target in targets:
                if isinstance(target, ast.Name) and target.id in SHARED:
                    assigned.setdefault(target.id, []).append(path.relative_to(PACKAGE).as_posix())
    assert {name: places for name, places in assigned.items() if places != ["vocab.py"]} == {}


def test_the_enwik8_vocabulary_is_written_once():
    """205 (enwik8's symbols) as a number in code only in vocab.py (docstrings may say it)."""
    places = [path.relative_to(PACKAGE).as_posix() for path, tree in _modules()
              for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value == 205
              and not isinstance(node.value, bool)]
    assert places == ["vocab.py"]


def test_the_layers_agree_with_the_vocabulary():
    from tlstm_bench.models import PRESETS, SLSTM_IMPLEMENTATIONS, TLSTM_IMPLEMENTATIONS
    from tlstm_bench.tasks import TASKS

    assert tuple(PRESETS) == vocab.CONFIG_NAMES == tuple(vocab.PAPER_NAMES)
    assert tuple(TASKS) == vocab.TASK_NAMES
    assert vocab.DEFAULT_IMPLEMENTATION["tlstm"] in TLSTM_IMPLEMENTATIONS
    assert vocab.DEFAULT_IMPLEMENTATION["slstm"] in SLSTM_IMPLEMENTATIONS
    assert vocab.ORACLE_IMPLEMENTATION["tlstm"] in TLSTM_IMPLEMENTATIONS
    assert vocab.ORACLE_IMPLEMENTATION["slstm"] in SLSTM_IMPLEMENTATIONS
    assert vocab.CUDA_IMPLEMENTATIONS <= set(TLSTM_IMPLEMENTATIONS) | set(vocab.GRAPHED_IMPLEMENTATIONS)
    assert set(vocab.GRAPHED_IMPLEMENTATIONS.values()) <= set(TLSTM_IMPLEMENTATIONS)
    assert set(vocab.TASK_IO_WITHOUT_DATA) <= set(vocab.TASK_NAMES)


def test_build_model_and_timing_run_the_same_default():
    from tlstm_bench import build_model
    from tlstm_bench.timing import default_implementation

    for config in vocab.CONFIG_NAMES:
        assert build_model(config, 1, vocab=5, channels=2).implementation == default_implementation(config)


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:0", "cuda:12"])
def test_devices_parse(device):
    assert vocab.parse_device(device) == device


@pytest.mark.parametrize("device", ["tpu", "CUDA", "cuda:", "cuda:x", "cpu:0", "", None, 0])
def test_other_devices_are_one_line_errors(device):
    with pytest.raises(UserError, match=r"--device must be cpu, cuda or cuda:N"):
        vocab.parse_device(device)


def test_a_gpu_this_machine_lacks_is_refused():
    import torch

    assert vocab.torch_device("cpu") == torch.device("cpu")
    missing = f"cuda:{vocab.gpu_count()}"
    with pytest.raises(UserError, match=f"--device {missing} was asked for, but this machine has"):
        vocab.torch_device(missing)
