"""A tiny training run for the tests of training settings (the warm-up, the clip): 2d, 3 symbols,
M = 6, evaluated every 60 samples, and the parameters its checkpoint holds."""

from __future__ import annotations

import torch

from tlstm_bench.training import checkpoint_path, train

BASE = dict(task="memorization", symbols=3, depth=2, channels=6, eval_every=60, progress=False, seed=1)


def run(**kwargs):
    return train("2d", **{**BASE, **kwargs})


def params(folder):
    return torch.load(checkpoint_path(folder), weights_only=True)["model"]
