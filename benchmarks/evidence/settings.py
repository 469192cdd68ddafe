"""The run's settings: the device run's sizes, and the dry run's small ones."""

from __future__ import annotations

import dataclasses

from .common import PAPER_SAMPLES, PRIORITY_CONFIGS, TINY_TIMED_CONFIGS


@dataclasses.dataclass(frozen=True)
class TrainSpec:
    key: str
    task: str
    options: dict
    config: str
    depth: int
    channels: int
    batch: int
    time_share: float  # of the budget: the cap on this run's wall time
    sample_cap: int
    eval_every: int | None  # None: the task's default (100 batches)
    paper_samples: int | None

@dataclasses.dataclass(frozen=True)
class Phase:
    key: str
    size: str  # "m100" or "wiki"
    # "core": fused, wavefront, fast, cuda-graph (when they passed part a); "extra": any other
    # implementation that passed (e.g. triton: its own groups, so that a slow compilation cannot
    # cost the core numbers); "eager": the oracle; "unverified": failed or unchecked ones.
    select: str
    warmup: int
    repeats: int

@dataclasses.dataclass(frozen=True)
class Settings:
    tiny: bool
    depths: tuple
    seq_len: int
    vocab: int
    sizes: dict  # "m100" / "wiki" -> build_model keywords (channels or budget)
    check_channels: int
    check_batch: int
    check_seq_len: int
    check_vocab: int
    check_depths: tuple
    dtypes: tuple
    tolerance: dict  # dtype -> largest relative error (norm of the difference / norm of the oracle's)
    fingerprint_tolerance: float
    audit_configs: tuple
    audit_depths: tuple
    a_share: float  # part a may use at most this share of the budget
    phases: tuple
    training: tuple
    order: tuple  # the priority order of phases and training runs
    regress_settings: dict | None
    summary_reserve_s: float
    timed_configs: tuple = PRIORITY_CONFIGS

def make_settings(tiny: bool) -> Settings:
    # d first: the regress baseline is never cut (the first H100 run lost it to the budget);
    # e last, with its time kept back: it compares b1's numbers with `tlstm-bench time`.
    order = ("d", "a", "b1", "c:memorization-3d-cn", "b1x", "b2", "b2x", "c:addition-3d-cn", "b3",
             "c:memorization-slstm", "c:addition-slstm", "b4", "b5", "e")
    if tiny:
        # the dry run leaves out b4 (eager at the Wikipedia size: b3's code at b2's size)
        order = tuple(step for step in order if step != "b4")
        w, r = 1, 2
        phases = (Phase("b1", "m100", "core", w, r), Phase("b1x", "m100", "extra", w, r),
                  Phase("b2", "wiki", "core", w, r), Phase("b2x", "wiki", "extra", w, r),
                  Phase("b3", "m100", "eager", w, r), Phase("b4", "wiki", "eager", w, r),
                  Phase("b5", "m100", "unverified", w, r))
        # Small, but with far more distinct sequences than the 100 test samples: the online
        # stream redraws any sample that is in the test set, and loops forever when all are.
        mem = dict(task="memorization", options={"symbols": 3, "alphabet": 8}, channels=8, batch=15,
                   sample_cap=300, eval_every=150, paper_samples=None)
        add = dict(task="addition", options={"digits": 2}, channels=8, batch=15, sample_cap=300,
                   eval_every=150, paper_samples=None)
        training = (TrainSpec("memorization-3d-cn", config="3d-cn", depth=2, time_share=0.05, **mem),
                    TrainSpec("addition-3d-cn", config="3d-cn", depth=2, time_share=0.05, **add),
                    TrainSpec("memorization-slstm", config="slstm", depth=2, time_share=0.05, **mem),
                    TrainSpec("addition-slstm", config="slstm", depth=2, time_share=0.05, **add))
        return Settings(tiny=True, depths=(1, 3), seq_len=10, vocab=205,
                        sizes={"m100": {"channels": 8}, "wiki": {"budget": "40K"}},
                        check_channels=6, check_batch=2, check_seq_len=5, check_vocab=7, check_depths=(1, 3),
                        dtypes=("float32", "float64"), tolerance={"float32": 5e-3, "float64": 1e-9},
                        fingerprint_tolerance=5e-3, audit_configs=("2d", "3d-cn"), audit_depths=(1, 3),
                        a_share=0.5, phases=phases, training=training, order=order,
                        regress_settings={"configs": ["slstm", "2d"], "depths": [1, 2], "channels": 6,
                                          "seq_len": 8, "repeats": 2, "warmup": 1, "threads": 1,
                                          "min_sample_s": 0.0},
                        summary_reserve_s=8.0, timed_configs=TINY_TIMED_CONFIGS)
    phases = (Phase("b1", "m100", "core", 3, 7), Phase("b1x", "m100", "extra", 3, 7),
              Phase("b2", "wiki", "core", 2, 4), Phase("b2x", "wiki", "extra", 2, 4),
              Phase("b3", "m100", "eager", 2, 5), Phase("b4", "wiki", "eager", 1, 3),
              Phase("b5", "m100", "unverified", 2, 3))
    mem = dict(task="memorization", options={"symbols": 20}, channels=100, batch=15, sample_cap=5_000_000,
               eval_every=None, paper_samples=PAPER_SAMPLES["memorization"])
    add = dict(task="addition", options={"digits": 15}, channels=400, batch=15, sample_cap=5_000_000,
               eval_every=None, paper_samples=PAPER_SAMPLES["addition"])
    training = (TrainSpec("memorization-3d-cn", config="3d-cn", depth=10, time_share=0.18, **mem),
                TrainSpec("addition-3d-cn", config="3d-cn", depth=7, time_share=0.14, **add),
                TrainSpec("memorization-slstm", config="slstm", depth=10, time_share=0.07,
                          **{**mem, "paper_samples": None}),
                TrainSpec("addition-slstm", config="slstm", depth=7, time_share=0.07,
                          **{**add, "paper_samples": None}))
    return Settings(tiny=False, depths=(1, 2, 3, 4, 7, 10), seq_len=100, vocab=205,
                    sizes={"m100": {"channels": 100}, "wiki": {"budget": "10M"}},
                    check_channels=20, check_batch=3, check_seq_len=7, check_vocab=11, check_depths=(1, 3),
                    dtypes=("float32", "float64"), tolerance={"float32": 5e-3, "float64": 1e-9},
                    fingerprint_tolerance=5e-3, audit_configs=("2d", "3d-cn"), audit_depths=(1, 3),
                    a_share=0.16, phases=phases, training=training, order=order, regress_settings=None,
                    summary_reserve_s=10.0)
