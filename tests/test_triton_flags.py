"""The per-program step flags of the persistent kernels (issue 28, direction 2: the menu entries
``mid-u3-flags`` and ``single-u3-flags``; ``common.step_flags``, ``triton_tlstm/deps.py``).

The interpreter runs programs one after another, so a persistent grid with more than one program
would spin forever: the flags kernels are checked with one program (the loop, the publish and
the poll, the flags' final counts), and the dependency table, which is what makes more programs
right, is checked empirically with the per-step kernels: for a step and each consumer tile, the
previous step's rows (backward: the next step's) at every tile NOT in the consumer's table are
poisoned with NaN, the step runs, and the consumer's outputs must equal the unpoisoned run's.
"""

from __future__ import annotations

import pytest

import torch

from tlstm_bench.models import build_model

from model_helpers import outputs_and_grads
from test_triton import DEVICE, _assert_close_to, tt  # noqa: F401  (tt: the fixture)

pytestmark = pytest.mark.triton

FLAGS_CASES = [("3d-cn", 2, "mid-u3-flags"), ("3d-ln", 2, "mid-u3-flags"), ("2d", 1, "single-u3-flags")]


@pytest.mark.parametrize("config,depth,menu", FLAGS_CASES)
def test_flags_kernels_equal_eager_float64(tt, monkeypatch, config, depth, menu):
    """One program (batch 1, BN >= N, BM >= M), float64 against eager, outputs and every
    gradient; the flags really replaced the barrier: each launch got a zeroed flag and a
    producer table, and its program flagged every step done (S forward, S - 1 backward)."""
    if DEVICE != "cpu":
        pytest.skip("the one-program interpreter check; the device session times and checks the grid")
    from tlstm_bench.models.triton_tlstm import launch

    seen = []
    sync_args = launch._sync_args

    def spy(geo, table):
        args = sync_args(geo, table)
        seen.append((geo.seq_len + geo.depth - 1, args))
        return args

    monkeypatch.setattr(launch, "_sync_args", spy)
    kw = dict(batch=1, seq_len=3, channels=4)
    ref = outputs_and_grads(config, depth, "eager", dtype=torch.float64, device=DEVICE, **kw)
    with tt.forced(menu=menu, persistent=True):
        got = outputs_and_grads(config, depth, "triton", dtype=torch.float64, device=DEVICE, **kw)
    _assert_close_to(ref, got, torch.float64)
    assert len(seen) == 2
    (steps, fwd), (_, bwd) = seen
    assert fwd["SYNC"] == bwd["SYNC"] == 1 and fwd["deps_ptr"].tolist() == [[0]] and fwd["DEPW"] == 1
    assert fwd["flags_ptr"].tolist() == [steps] and bwd["flags_ptr"].tolist() == [steps - 1]


def test_grid_entries_pass_no_flags(tt):
    """The grid-barrier entries launch with none of the flags' arguments (their defaults: the
    compiled code of every existing variant is unchanged), per-step launches neither."""
    from tlstm_bench.models.triton_tlstm import launch

    model = build_model("3d-cn", 2, input_size=3, output_size=2, channels=4)
    for menu, persistent in (("mid-u3", True), ("mid-u3-flags", False), ("wide", True)):
        with tt.forced(menu=menu, persistent=persistent):
            geo = tt.Geometry(model, 3, 1)
        assert geo.producers is None and launch._sync_args(geo, None) == {}
        assert "SYNC" not in launch._launch_options(geo)


def test_after_its_first_call_the_flags_step_does_nothing_a_capture_cannot_hold(tt, monkeypatch):
    """As the grid-barrier path (tests/test_triton_graph.py): the second step with the step
    flags reads nothing back to the host, copies nothing from it, and does not rebuild the
    producer tables (cached per geometry); the flags are zeroed by a device op each launch."""
    if DEVICE != "cpu":
        pytest.skip("the aten-level check on the CPU")
    from test_triton_graph import _HostSyncs

    from tlstm_bench.models.triton_tlstm import deps
    from tlstm_bench.timing import Case, StepRun

    run = StepRun(Case("2d", 1, "triton"), channels=4, budget=None, vocab=5, input_size=None, output_size=None,
                  seq_len=3, device=torch.device("cpu"), dtype=torch.float32, seed=0)
    with tt.forced(menu="single-u3-flags", persistent=True):
        run()

        def rebuilt(*args):
            raise AssertionError("the producer tables were rebuilt after the first call")

        monkeypatch.setattr(deps, "tables", rebuilt)
        with _HostSyncs() as mode:
            run()
    assert mode.seen == []
    assert run.model.triton_last["menu"] == "single-u3-flags" and run.model.triton_last["persistent"]


# ---- the dependency table: host-side shapes ---------------------------------------------

def _tables(tt, config, depth, menu, batch=1, channels=4):
    model = build_model(config, depth, input_size=3, output_size=2, channels=channels)
    with tt.forced(menu=menu, persistent=False):
        geo = tt.Geometry(model, 3, batch)
    from tlstm_bench.models.triton_tlstm import deps

    return geo, deps.tables(geo)


def _rows(table) -> list[set[int]]:
    return [{p for p in row if p >= 0} for row in table.tolist()]


def test_producer_tables_single_2d_l10(tt):
    """2d at L = 10, M = 100, single-u3 (10 x 13 programs): a program reads its own location
    and its neighbours (forward: the window; backward: its readers), every channel tile, as
    ``common.program_id_flat`` numbers them (grid (1, 10, 13): id = loc + 10 * j)."""
    geo, (fwd, bwd) = _tables(tt, "2d", 10, "single-u3-flags", channels=100)
    assert geo.grid == (1, 10, 13) and fwd.shape == bwd.shape == (130, 64)
    rows = _rows(fwd)
    assert rows[0] == {loc + 10 * j for loc in (0, 1) for j in range(13)}
    assert rows[5 + 10 * 7] == {loc + 10 * j for loc in (4, 5, 6) for j in range(13)}
    assert _rows(bwd)[9] == {loc + 10 * j for loc in (8, 9) for j in range(13)}


def test_producer_tables_mid_3dcn_l10_fit_the_sms(tt):
    """3d-cn at L = 10, M = 100, mid-u3-flags: 13 x 7 = 91 programs, each reading a few location
    tiles (never all 13) of every channel tile; the table's width is a power of two."""
    geo, (fwd, bwd) = _tables(tt, "3d-cn", 10, "mid-u3-flags", channels=100)
    assert geo.grid == (1, 13, 7)
    for table in (fwd, bwd):
        rows = _rows(table)
        assert table.shape[0] == 91 and table.shape[1] & (table.shape[1] - 1) == 0
        assert all(len(r) % 7 == 0 and 7 <= len(r) < 91 for r in rows)
        assert all(r == rows[p % 13] for p, r in enumerate(rows))  # the same for every channel tile


def test_producer_tables_ln_is_every_program_of_the_example(tt):
    """LN: every program of its own example, none of another's (unfolded, batch 2: the grid's
    first axis is the example, id = b + 2 * (i + NT * j))."""
    geo, (fwd, bwd) = _tables(tt, "3d-ln", 3, "mid-u3-flags", batch=2, channels=20)
    g0, g1, g2 = geo.grid
    assert (g0, g2) == (2, 2)
    for table in (fwd, bwd):
        for pid, row in enumerate(_rows(table)):
            b = pid % g0
            assert row == {b + g0 * (i + g1 * j) for i in range(g1) for j in range(g2)}


def test_producer_tables_fold_and_depth_1(tt, monkeypatch):
    """The batch folded into the rows (tiles across examples: a tile reads the tiles of every
    example it holds rows of), and L = 1 (one location, reads only itself)."""
    from tlstm_bench.models.triton_tlstm import tiles

    monkeypatch.setitem(tiles.MENU, "fold-flags", tiles.Menu(4, 8, 8, 8, fold=True, sync="flags"))
    geo, (fwd, _) = _tables(tt, "2d", 3, "fold-flags", batch=3)  # 9 rows, tiles of 4: 0-3, 4-7, 8
    assert geo.grid == (1, 3, 1)
    # tile 0 holds example 0 (rows 0-2) and row 3 (example 1, location 0, reading locations 0, 1)
    assert _rows(fwd) == [{0, 1}, {0, 1, 2}, {1, 2}]
    geo, (fwd, bwd) = _tables(tt, "2d", 1, "single-u3-flags", batch=1, channels=20)
    assert geo.grid == (1, 1, 3) and _rows(fwd) == _rows(bwd) == [{0, 1, 2}] * 3


# ---- the dependency table is sufficient: poison what a consumer does not list -----------

# What a step writes, by buffer: the step index it writes at is the step plus this offset
# (forward: hs[s] = h_{s-1} and cs[s+1] = c_s; the norm's mean, rstd of step s - 1).
FWD_WRITES = {"hs": 0, "cs": 1, "acts": 0, "pmean": 0, "pm2": 0, "mean": -1, "rstd": -1}
BWD_WRITES = {k: 0 for k in ("das", "e1", "e2", "dcs", "dns", "pa", "pb", "dql", "dq1", "dq2")}


class Poisoner:
    """Stands in for ``forward_step`` / ``backward_step`` in launch.py: launches as usual, and
    at step ``target`` runs the experiment of the module docstring for every consumer tile.
    ``state`` (filled when the sequence starts): the geometry, its row tiles {tile: rows} and
    its (forward, backward) producer tables. ``drop``: a consumer tile whose list loses its
    first listed tile other than its own (to show that the check can fail)."""

    def __init__(self, kernel, target: int, backward: bool, state: dict, drop=None):
        self.kernel, self.target, self.backward, self.state, self.drop = kernel, target, backward, state, drop
        self.writes = BWD_WRITES if backward else FWD_WRITES
        self.names = [a.removesuffix("_ptr") for a in kernel.arg_names]
        self.failures: list = []
        self.tried = 0

    def __getitem__(self, grid):
        return lambda *args, **kw: self.launch(grid, args, kw)

    def launch(self, grid, args, kw):
        s = int(args[self.names.index("s")])
        if s != self.target:
            return self.kernel[grid](*args, **kw)
        bufs = {k: v for k, v in zip(self.names, args) if k in self.writes and v.dim() > 1}
        before = {k: v.clone() for k, v in bufs.items()}
        self.kernel[grid](*args, **kw)
        after = {k: v.clone() for k, v in bufs.items()}
        for consumer, listed in self.listed().items():
            for k, v in bufs.items():
                v.copy_(before[k])
            self.poison(bufs, s + 1 if self.backward else s - 1, listed)
            self.kernel[grid](*args, **kw)
            self.compare(bufs, after, s, consumer)
        for k, v in bufs.items():
            v.copy_(after[k])

    def listed(self) -> dict:
        """{consumer tile: the row tiles its program lists} from the producer table."""
        g0, g1, _ = self.state["geo"].grid
        out = {}
        for tile in self.state["tiles"]:
            row = self.state["tables"][int(self.backward)][tile[0] + g0 * tile[1]].tolist()  # channel tile 0
            listed = {(p % g0, (p // g0) % g1) for p in row if p >= 0}
            if self.drop == tile:
                listed.discard(sorted(listed - {tile})[0])
            out[tile] = listed
        return out

    @staticmethod
    def rows(buf, step):
        return buf[step].reshape(buf.shape[1] * buf.shape[2], -1)  # (B * N rows, the rest)

    def poison(self, bufs, step, listed):
        for k, v in bufs.items():
            idx = step + self.writes[k]
            if 0 <= idx < v.shape[0] and not (k == "hs" and step == 0):  # hs[0]: the given state
                rows = self.rows(v, idx)
                for tile, tile_rows in self.state["tiles"].items():
                    if tile not in listed:
                        rows[tile_rows] = float("nan")

    def compare(self, bufs, after, s, consumer):
        self.tried += 1
        mine = self.state["tiles"][consumer]
        for k, v in bufs.items():
            idx = s + self.writes[k]
            if 0 <= idx < v.shape[0] and not same(self.rows(v, idx)[mine], self.rows(after[k], idx)[mine]):
                self.failures.append((self.backward, s, consumer, k))


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal, NaN where NaN: the columns a step does not write (das's Q columns, completed after
    the loop) keep what torch.empty left there, which after other tests can be NaN in both runs;
    a poisoned read shows as NaN where the clean run has a number."""
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def _run_poisoned(tt, monkeypatch, config, depth, batch, menu, fwd_step, bwd_step, drop=(None, None)):
    """Run config through the per-step kernels with a Poisoner at the given forward and
    backward steps (float64, M = 16); returns (failures, experiments run)."""
    from tlstm_bench.models.triton_tlstm import autograd, deps, launch

    state: dict = {}
    real_forward = autograd.launch_forward

    def keep_geometry(geo, *a, **k):
        state.update(geo=geo, tables=deps.tables(geo),
                     tiles=dict(deps.row_tiles(geo.grid, geo.batch, geo.n, geo.tiles["BN"], geo.tiles["FOLD"])))
        return real_forward(geo, *a, **k)

    pf = Poisoner(launch.forward_step, fwd_step, False, state, drop[0])
    pb = Poisoner(launch.backward_step, bwd_step, True, state, drop[1])
    monkeypatch.setattr(autograd, "launch_forward", keep_geometry)
    monkeypatch.setattr(launch, "forward_step", pf)
    monkeypatch.setattr(launch, "backward_step", pb)
    with tt.forced(menu=menu, persistent=False):
        outputs_and_grads(config, depth, "triton", dtype=torch.float64, device=DEVICE, batch=batch, seq_len=3,
                          channels=16)
    return pf.failures + pb.failures, (pf.tried, pb.tried)


@pytest.fixture
def flag_tiles(tt, monkeypatch):
    """Several location tiles (2 rows) and channel tiles (8 of M = 16: two), per step; a
    folded twin (4 rows across examples). M = 16, not 20: a third channel tile doubles the
    interpreter's time (NJP 4, not 2); ragged channel tiles are checked against eager elsewhere."""
    if DEVICE != "cpu":
        pytest.skip("the poisoning runs the per-step kernels in the interpreter")
    from tlstm_bench.models.triton_tlstm import tiles

    monkeypatch.setitem(tiles.MENU, "dep", tiles.Menu(2, 8, 8, 16))
    monkeypatch.setitem(tiles.MENU, "dep-fold", tiles.Menu(4, 8, 8, 16, fold=True))


# (config, L, batch, menu, forward step, backward step); S = T + L - 1 steps with T = 3
POISON_CASES = [("3d-cn", 3, 1, "dep", 2, 2), ("2d", 6, 2, "dep-fold", 3, 5), ("3d-ln", 2, 2, "dep", 2, 2),
                ("2d-m:norm=cn", 6, 1, "dep", 3, 4)]  # no memory conv: the hidden window alone


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # numpy on the NaN rows
@pytest.mark.parametrize("config,depth,batch,menu,fwd_step,bwd_step", POISON_CASES)
def test_producer_tables_are_sufficient(tt, flag_tiles, monkeypatch, config, depth, batch, menu, fwd_step,
                                        bwd_step):
    """For every consumer tile, the step's outputs at its rows are the same when every row it
    does not list is NaN at the step it reads (forward s - 1, backward s + 1): what a program
    may read before its unlisted producers have written it cannot change what it computes."""
    failures, tried = _run_poisoned(tt, monkeypatch, config, depth, batch, menu, fwd_step, bwd_step)
    assert min(tried) >= 2 and failures == []


# ---- the device session: the flags variants last, probed in a process of their own --------

def test_the_session_times_the_flags_last_and_probes_them_first(monkeypatch, tmp_path):
    """benchmarks/triton_session.py: the two flags variants are the last of the m100 group, each
    beside its grid-barrier twin; they run first in a probe process (a program that waits forever
    for a flag costs the probe's time limit there, not the session), and one whose probe
    process was stopped is a one-line failure, never run in the session's process."""
    from benchmarks import triton_session as ts

    m100 = [v for v in ts.plan("cuda") if v.group == "m100"]
    assert [(v.config, v.depth, v.menu) for v in m100[-2:]] == [("2d", 10, "single-u3-flags"),
                                                                ("3d-cn", 10, "mid-u3-flags")]
    twins = {(v.config, v.depth, v.menu, v.persistent) for v in m100}
    assert {("2d", 10, "single-u3", True), ("3d-cn", 10, "mid-u3", True)} <= twins
    assert [v.menu for v in m100 if ts.probed_first(v) and v.kind == "triton"] == ["single-u3-flags", "mid-u3-flags"]
    flags = m100[-1]
    monkeypatch.setattr(ts, "probe_process", lambda todo, device, timeout: (
        [], "the graph probe's process was stopped after 100 s"))
    found = ts.graph_probe(ts.Session(tmp_path, 100.0, "cpu"), [ts.Variant("m100", "2d", 1), flags])
    assert found == {ts.vkey(flags): {"error": "the graph probe's process was stopped after 100 s"}}
    with pytest.raises(RuntimeError, match="stopped after 100 s"):
        ts.prepare(flags, ts.Session(tmp_path, 100.0, "cpu"), found[ts.vkey(flags)])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_the_sufficiency_check_fails_when_a_listed_producer_is_dropped(tt, flag_tiles, monkeypatch):
    """The check above can fail: with one listed tile dropped from one consumer's list (2d-m
    with CN, no memory conv, three location tiles), that consumer's outputs change, forward and
    backward, and no other consumer's."""
    failures, _ = _run_poisoned(tt, monkeypatch, "2d-m:norm=cn", 6, 1, "dep", 3, 4, drop=((0, 1), (0, 1)))
    assert {(backward, tile) for backward, _, tile, _ in failures} == {(False, (0, 1)), (True, (0, 1))}
