"""The tasks: encodings match the paper's examples exactly; splits; readers; errors."""

from __future__ import annotations

import gzip
import struct
import zipfile

import numpy as np
import pytest
import torch

from tlstm_bench.errors import UserError
from tlstm_bench.tasks import TASKS, make_task
from tlstm_bench.tasks.mnist import read_idx


# ---- addition and memorization: the paper's examples (SPEC section 9) -------------------
def test_addition_encodes_the_papers_3_digit_example():
    task = make_task("addition", digits=3)
    x, y = task.encode_numbers("123", "900")
    assert task.decode(x) == "- 1 2 3 - 9 0 0 - - - - -"
    assert task.decode(y) == "- - - - - - - - 1 0 2 3 -"


def test_memorization_encodes_the_papers_5_symbol_example():
    task = make_task("memorization", symbols=5)
    x, y = task.encode_symbols("abccb")
    assert task.decode(x) == "- a b c c b - - - - - -"
    assert task.decode(y) == "- - - - - - a b c c b -"


def test_paper_defaults_and_alphabets():
    add, mem = make_task("addition"), make_task("memorization")
    assert add.digits == 15 and add.seq_len == 49 and add.model_io() == {"vocab": 11}
    assert mem.symbols == 20 and mem.seq_len == 42 and mem.model_io() == {"vocab": 65}
    assert add.batch_size == mem.batch_size == 15 and add.forget_bias == 1.0


@pytest.mark.parametrize("digits", [1, 3, 15])
def test_random_additions_are_correct_sums(digits):
    task = make_task("addition", digits=digits, test_size=5)
    x, y = task.sample(50, torch.Generator().manual_seed(1))
    for xi, yi in zip(x.tolist(), y.tolist()):
        text_x, text_y = task.decode(xi).split(), task.decode(yi).split()
        a, b = "".join(text_x[1:digits + 1]), "".join(text_x[digits + 2:2 * digits + 2])
        assert set(text_x[2 * digits + 2:]) == {"-"} and text_x[0] == text_x[digits + 1] == "-"
        assert "".join(text_y[task.answer]) == str(int(a) + int(b)).zfill(digits + 1)
        assert set(text_y[:task.answer.start] + text_y[task.answer.stop:]) == {"-"}


@pytest.mark.parametrize("digits", [1, 2, 15])
def test_addition_operands_have_no_leading_zero(digits):
    """"Two 15-digit integers": an n-digit integer's first digit is never 0 (over many samples),
    while every later digit still takes every value 0-9 and the sum stays right."""
    task = make_task("addition", digits=digits, test_size=5)
    x, y = task.sample(4000, torch.Generator().manual_seed(2))
    a, b = x[:, 1:digits + 1] - 1, x[:, digits + 2:2 * digits + 2] - 1  # tokens -> digits
    for operand in (a, b):
        assert (operand[:, 0] >= 1).all() and (operand[:, 0] <= 9).all()
        assert set(operand[:, 0].tolist()) == set(range(1, 10))
        if digits > 1:
            assert set(operand[:, 1:].flatten().tolist()) == set(range(10))
    weights = 10 ** torch.arange(digits - 1, -1, -1)
    total = (a * weights).sum(1) + (b * weights).sum(1)
    answer = y[:, task.answer] - 1
    assert torch.equal((answer * 10 ** torch.arange(digits, -1, -1)).sum(1), total)
    assert (task.test_x[:, 1] != 1).all() and (task.test_x[:, digits + 2] != 1).all()  # token 1 is digit 0


def test_addition_refuses_a_leading_zero():
    with pytest.raises(UserError, match="no leading zero"):
        make_task("addition", digits=3).encode_numbers("023", "900")


def test_random_memorizations_repeat_the_input():
    task = make_task("memorization", symbols=7, test_size=5)
    x, y = task.sample(50, torch.Generator().manual_seed(1))
    assert torch.equal(y[:, task.answer], x[:, 1:8])
    assert (x[:, 1:8] >= 1).all() and (x[:, 1:8] <= 64).all()


def test_test_set_is_fixed_and_never_in_training():
    a, b = make_task("addition", digits=1), make_task("addition", digits=1)
    assert torch.equal(a.test_x, b.test_x) and a.test_x.shape == (100, 7)
    # 1-digit addition has only 100 distinct inputs, so fresh samples collide often
    test_rows = {tuple(r) for r in a.test_x.tolist()}
    x, _ = a.fresh(200, torch.Generator().manual_seed(0))
    assert not test_rows & {tuple(r) for r in x.tolist()}


def test_online_stream_resumes_exactly():
    task = make_task("memorization", symbols=5)
    s1 = task.train_stream(15, seed=3)
    s1.next()
    saved = s1.state_dict()
    expected = s1.next().x
    s2 = task.train_stream(15, seed=3)
    s2.load_state_dict(saved)
    assert torch.equal(s2.next().x, expected)


def test_metric_counts_answer_positions_only():
    task = make_task("memorization", symbols=5, test_size=4)

    class Oracle(torch.nn.Module):  # predicts the target, except one answer symbol of row 0
        def forward(self, x, state=None):
            logits = torch.nn.functional.one_hot(task.test_y.clone(), 65).float()
            logits[0, task.answer.start] = torch.nn.functional.one_hot(torch.tensor(0), 65).float()
            logits[1, 0] = torch.nn.functional.one_hot(torch.tensor(5), 65).float()  # not an answer position
            return logits, None

    result = task.evaluate(Oracle(), "test")
    assert result["metric"] == pytest.approx(19 / 20)
    assert result["sequence_accuracy"] == pytest.approx(3 / 4)
    assert result["by_position"] == [0.75, 1.0, 1.0, 1.0, 1.0]  # the first answer, wrong in one row of four


# ---- enwik8 -----------------------------------------------------------------------------
def _text(n, seed=0):
    rng = np.random.default_rng(seed)
    return bytes(rng.choice(list(b"abcdefgh <>\n"), size=n).tolist())


def test_enwik8_split_proportions_and_symbols(tmp_path):
    data = _text(20_000)
    (tmp_path / "enwik8").write_bytes(data)
    task = make_task("enwik8", data_dir=tmp_path)
    sizes = {k: v.shape[0] for k, v in task.splits.items()}
    assert sizes == {"train": 18_000, "valid": 1_000, "test": 1_000}
    assert task.vocab == len(set(data)) == 12 and task.model_io() == {"vocab": 12}
    decoded = bytes(task.symbols[i] for i in task.splits["valid"].tolist())
    assert decoded == data[18_000:19_000]


def test_enwik8_reads_a_zip_and_batches_carry_on(tmp_path):
    data = _text(30_000, seed=1)
    with zipfile.ZipFile(tmp_path / "enwik8.zip", "w") as zf:
        zf.writestr("enwik8", data)
    task = make_task("enwik8", data_dir=tmp_path, seq_len=50)
    stream = task.train_stream(batch_size=10, seed=0)
    first, second = stream.next(), stream.next()
    assert first.x.shape == (10, 50) and first.reset and not second.reset
    assert torch.equal(first.y[:, :-1], first.x[:, 1:])  # next-character targets
    assert torch.equal(second.x[:, 0], first.y[:, -1])  # the streams continue across minibatches
    assert task.metric == "bpc" and task.batch_size == 100


def test_enwik8_errors_name_the_file(tmp_path):
    with pytest.raises(UserError, match="no enwik8 or enwik8.zip"):
        make_task("enwik8", data_dir=tmp_path)
    bad = tmp_path / "enwik8.zip"
    bad.write_bytes(b"PK\x03\x04 this is not a zip")
    with pytest.raises(UserError, match=str(bad)):
        make_task("enwik8", data_dir=tmp_path)
    with pytest.raises(UserError, match="does not exist"):
        make_task("enwik8", data_dir=tmp_path / "nope")


# ---- MNIST ------------------------------------------------------------------------------
def write_idx(path, array, compress):
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    raw = header + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(raw) if compress else raw)


def write_mnist(folder, n_train=60, n_test=12, compress=True, seed=0):
    rng = np.random.default_rng(seed)
    suffix = ".gz" if compress else ""
    images = {"train": rng.integers(0, 256, (n_train, 28, 28)), "t10k": rng.integers(0, 256, (n_test, 28, 28))}
    labels = {"train": rng.integers(0, 10, n_train), "t10k": rng.integers(0, 10, n_test)}
    for part in ("train", "t10k"):
        write_idx(folder / f"{part}-images-idx3-ubyte{suffix}", images[part], compress)
        write_idx(folder / f"{part}-labels-idx1-ubyte{suffix}", labels[part], compress)
    return images, labels


@pytest.mark.parametrize("compress", [True, False])
def test_mnist_reads_idx_files_and_splits(tmp_path, compress):
    images, labels = write_mnist(tmp_path, compress=compress)
    task = make_task("mnist", data_dir=tmp_path)
    x, y = task.splits["train"]
    assert {k: len(v[1]) for k, v in task.splits.items()} == {"train": 50, "valid": 10, "test": 12}
    assert x.shape == (50, 784) and torch.equal(y, torch.from_numpy(labels["train"][:50]))
    assert torch.allclose(x[3], torch.from_numpy(images["train"][3].reshape(-1) / 255).float())
    assert task.forget_bias == 4.0 and task.batch_size == 50 and task.model_io() == {"input_size": 1, "output_size": 10}
    batch = task.train_stream(7, seed=0).next()
    assert batch.x.shape == (7, 784, 1) and batch.y.shape == (7,)


def test_pmnist_uses_one_fixed_permutation(tmp_path):
    write_mnist(tmp_path)
    plain, perm = make_task("mnist", data_dir=tmp_path), make_task("pmnist", data_dir=tmp_path)
    again = make_task("pmnist", data_dir=tmp_path)
    assert torch.equal(perm.permutation, again.permutation)
    assert sorted(perm.permutation.tolist()) == list(range(784))
    assert torch.equal(perm.splits["test"][0], plain.splits["test"][0][:, perm.permutation])


def test_mnist_truncated_and_corrupt_files_are_named(tmp_path):
    write_mnist(tmp_path, compress=False)
    target = tmp_path / "train-images-idx3-ubyte"
    target.write_bytes(target.read_bytes()[:5000])
    with pytest.raises(UserError, match="train-images-idx3-ubyte is truncated"):
        make_task("mnist", data_dir=tmp_path)
    gz = tmp_path / "x.gz"
    gz.write_bytes(gzip.compress(b"\x00\x00\x08\x01" + b"\x00" * 100)[:30])
    with pytest.raises(UserError, match="x.gz"):
        read_idx(gz)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(UserError, match="missing.*t10k-labels-idx1-ubyte"):
        make_task("mnist", data_dir=tmp_path)


def test_mnist_without_a_data_dir_says_what_to_do(monkeypatch):
    monkeypatch.delenv("TLSTM_BENCH_DATA", raising=False)
    with pytest.raises(UserError, match="--data-dir"):
        make_task("mnist")


def test_offline_digits_are_real_64_step_sequences():
    task = make_task("mnist", source="digits")
    sizes = {k: len(v[1]) for k, v in task.splits.items()}
    assert sizes == {"train": 1257, "valid": 270, "test": 270} and task.seq_len == 64
    x, y = task.splits["train"]
    assert 0.0 <= x.min() and x.max() <= 1.0 and set(y.tolist()) == set(range(10))


def test_unknown_task_and_option():
    with pytest.raises(UserError, match="unknown task 'wiki'.*addition"):
        make_task("wiki")
    with pytest.raises(UserError, match="no option symbols"):
        make_task("addition", symbols=3)
    assert set(TASKS) == {"addition", "memorization", "enwik8", "mnist", "pmnist"}


def test_enwik8_from_the_environment_or_a_path(tmp_path, monkeypatch):
    (tmp_path / "enwik8").write_bytes(_text(20_000, seed=2))
    monkeypatch.setenv("TLSTM_BENCH_DATA", str(tmp_path))
    from_env = make_task("enwik8")
    from_path = make_task("enwik8", path=tmp_path / "enwik8")
    assert from_env.path == from_path.path and torch.equal(from_env.splits["test"], from_path.splits["test"])
