"""Device helpers shared by the forward and backward step bodies: the product, activations,
the norm's deferred statistics, and the grid barrier of the persistent kernels."""

from __future__ import annotations

import os

import triton
import triton.language as tl

from ..tlstm import HIDDEN_OFFSET, INPUT_SLOT
from . import interpreter_compat

# Whether the kernels were defined for Triton's CPU interpreter (decided when triton.jit runs,
# i.e. when this package is first imported).
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
if INTERPRETED:
    interpreter_compat.apply()  # Triton 3.6/3.7's interpreter with NumPy 2.5 (the module says)

INPUT = tl.constexpr(INPUT_SLOT)
HOFF = tl.constexpr(HIDDEN_OFFSET)


@triton.jit
def mma(a, b, acc, PRECISION: tl.constexpr):
    """acc + a @ b, chosen at compile time: ``tl.dot`` where every side is >= 16 and the dtype is
    float32, with ``input_precision=PRECISION`` ("ieee": no TF32, so float32 results match
    eager's, the default; "tf32x3": tensor cores, three TF32 products, close to float32;
    "tf32": one TF32 product, about 3 decimal digits per product); otherwise a broadcast
    multiply-and-sum in plain float32 whatever PRECISION asks (launch.Geometry records whether
    any product used tensor cores). float64 always takes the sum: Triton 3.6's GPU compiler
    rejects a float64 ``tl.dot`` (the first H100 run), and float64 is for correctness checks,
    not speed. Small tiles (batch 1: one or two locations, a few channels per program) take it
    too, as ``tl.dot`` needs 16 on every side. Triton's interpreter ignores the precision: there
    tf32 and tf32x3 compute what ieee computes."""
    if a.dtype == tl.float64:
        return acc + tl.sum(a[:, :, None] * b[None, :, :], 1)
    elif a.shape[0] < 16 or a.shape[1] < 16 or b.shape[1] < 16:
        return acc + tl.sum(a[:, :, None] * b[None, :, :], 1)
    else:
        return tl.dot(a, b, acc, input_precision=PRECISION)


@triton.jit
def tile_rows(B, N, BN: tl.constexpr, FOLD: tl.constexpr):
    """(b, b * N, loc, ok) of a program's BN rows: the example, the row of its location 0 within
    a step, the location and whether the row exists. Buffers hold a step's rows example after
    example (row b * N + loc), so a row's offsets never need b and loc apart.

    Not folded (the grid (B, ceil(N/BN), NJ)): the rows are locations of one example b, a
    scalar. FOLD (the grid (1, ceil(B*N/BN), NJ)): the batch folded into the rows, so a tile
    may hold rows of several examples and b is a vector; at batch 15 and one location (2D,
    L = 1) one 16-row tile holds the whole batch instead of 15 tiles of one row."""
    if FOLD:
        r = tl.program_id(1) * BN + tl.arange(0, BN)
        ok = r < B * N
        b = r // N
        loc = r - b * N
    else:
        b = tl.program_id(0)
        loc = tl.program_id(1) * BN + tl.arange(0, BN)
        ok = loc < N
    return b, b * N, loc, ok


@triton.jit
def map_rows(map_ptr, loc, ok, KD, other, KDP: tl.constexpr, PRELOAD: tl.constexpr):
    """With PRELOAD, the rows ``loc`` of an (N, KD) index map as one (BN, KDP) block (``other``
    past KD and in rows not ``ok``), loaded at once for ``map_entry``; else ``loc`` (unused)."""
    if PRELOAD:
        kq = tl.arange(0, KDP)
        return tl.load(map_ptr + loc[:, None] * KD + kq[None, :], mask=ok[:, None] & (kq < KD)[None, :],
                       other=other)
    else:
        return loc


@triton.jit
def tile_map(map_ptr, B, N, width, other, BN: tl.constexpr, FOLD: tl.constexpr, KDP: tl.constexpr,
             PRELOAD: tl.constexpr):
    """``map_rows`` of this program's rows (``tile_rows``) of an (N, width) index map, width
    <= KDP: what a kernel loads once, before its step loop in the persistent kernels, and
    passes to its step body (PRELOAD: the unrolled tile sets; else the rows, unused)."""
    _, _, loc, ok = tile_rows(B, N, BN, FOLD)
    return map_rows(map_ptr, loc, ok, width, other, KDP, PRELOAD)


@triton.jit
def map_entry(rows, map_ptr, loc, ok, k, KD, other, KDP: tl.constexpr, PRELOAD: tl.constexpr):
    """Entry k of an (N, KD) index map at rows ``loc``: picked from the block ``map_rows`` loaded
    (PRELOAD: no memory round trip inside the window loop), or loaded now."""
    if PRELOAD:
        kq = tl.arange(0, KDP)
        return tl.sum(tl.where(kq[None, :] == k, rows, 0), 1)
    else:
        return tl.load(map_ptr + loc * KD + k, mask=ok, other=other)


@triton.jit
def tanh(x):
    # tanh from exp: the interpreter has no libdevice. Abs error ~1e-7 in float32.
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


@triton.jit
def grid_barrier(sem_ptr):
    """Wait until every program of the grid got here (the persistent kernels, one per step).

    The atomics barrier of PyTorch inductor's ``x_grid_barrier``, over the whole 3D grid:
    program 0 adds 2^31 - (n - 1), the others 1, so the n arrivals add exactly 2^31 and flip
    the top bit; everyone spins until it sees the flip. The count returns to its start value,
    so one zero-initialised uint32 serves every barrier of a launch. Needs every program
    resident at once (a cooperative launch, grid <= SMs); in the interpreter, which runs
    programs one after another, only a one-program grid, where it is trivial.
    """
    tl.debug_barrier()  # every thread's stores issued before the release
    n0 = tl.num_programs(0)
    n1 = tl.num_programs(1)
    pid = tl.program_id(0) + n0 * (tl.program_id(1) + n1 * tl.program_id(2))
    expected = (n0 * n1 * tl.num_programs(2)).to(tl.uint32)
    one = tl.full([], 1, tl.uint32)
    if pid == 0:
        nb = 0x80000000 - (expected - one)
    else:
        nb = one
    old = tl.atomic_add(sem_ptr, nb, sem="release")
    flipped = False
    while not flipped:
        cur = tl.atomic_add(sem_ptr, 0, sem="acquire")
        flipped = ((old ^ cur) & 0x80000000) != 0
    tl.debug_barrier()



@triton.jit
def program_id_flat():
    """This program's id over the 3D grid, as ``grid_barrier`` counts it and as
    ``deps.program_ids`` numbers the dependency table's rows and entries."""
    n0 = tl.num_programs(0)
    return tl.program_id(0) + n0 * (tl.program_id(1) + tl.num_programs(1) * tl.program_id(2))


@triton.jit
def producer_row(deps_ptr, SYNC: tl.constexpr, DEPW: tl.constexpr):
    """With SYNC (step flags), this program's producers: its row of the (programs, DEPW)
    dependency table (program ids, -1 padded), loaded once before the step loop; else 0
    (unused: the grid barrier needs none, and no code is emitted for it)."""
    if SYNC:
        return tl.load(deps_ptr + program_id_flat() * DEPW + tl.arange(0, DEPW))
    else:
        return 0


@triton.jit
def step_sync(sem_ptr, flags_ptr, producers, done, SYNC: tl.constexpr):
    """Between two steps of a persistent kernel, ``done`` steps finished by this program:
    the grid barrier (SYNC 0, the default), or step flags (SYNC 1, ``step_flags``)."""
    if SYNC:
        step_flags(flags_ptr, producers, done)
    else:
        grid_barrier(sem_ptr)


@triton.jit
def step_flags(flags_ptr, producers, done):
    """Publish that this program finished ``done`` steps, then wait until every producer (a
    program whose previous-step values this program's next step reads; ``deps.py``) has too.

    ``flags`` holds one int32 a program, zeroed per launch, the count of steps it finished.
    Publish: ``tl.debug_barrier()`` (bar.sync: every thread of the program has issued its
    stores of the step), then one release exchange of the count (a scalar atomic: one thread).
    Wait: every thread polls its share of the producers' flags with acquire atomics (a masked
    vector ``atomic_add`` of 0; -1 entries are padding) until all are >= ``done``, then
    ``tl.debug_barrier()``.

    Memory order (the argument of ``grid_barrier``, per producer instead of for the grid):
    a producer's stores of step k by any of its threads come before its bar.sync, which comes
    before its release of a count > k; an acquire that reads that count (or a later one: the
    counts only grow, each written by a release after the same bar.sync) synchronizes with it,
    and the consumer's bar.sync after the poll orders the acquire before every load of the
    next step by any thread of the consumer. So each load of step k + 1 sees the producers'
    step k. No buffer is written twice in a launch (every one is indexed by step), so a
    producer that runs ahead overwrites nothing a slower consumer still reads. The acquire
    atomics invalidate L1 as the barrier's do; they are no cheaper per poll, but a program
    waits only for the few it reads, not for the slowest of the grid."""
    tl.debug_barrier()
    tl.atomic_xchg(flags_ptr + program_id_flat(), done, sem="release", scope="gpu")
    live = producers >= 0
    ready = False
    while not ready:
        seen = tl.atomic_add(flags_ptr + tl.where(live, producers, 0), 0, mask=live, sem="acquire", scope="gpu")
        ready = tl.min(tl.where(live, seen, done), 0) >= done
    tl.debug_barrier()


# ---- the forward's deferred statistics (LN/CN of the previous step's c) ---------------

@triton.jit
def tile_counts(M, NJ, BM: tl.constexpr, NJP: tl.constexpr):
    """Channels in each of the NJ channel tiles (0 past the last)."""
    j = tl.arange(0, NJP)
    return tl.where(j < NJ, tl.minimum(M - j * BM, BM), 0).to(tl.float32)


@triton.jit
def cn_stats(pmean_ptr, pm2_ptr, rows, ok, M, NJ, eps, BM: tl.constexpr, NJP: tl.constexpr):
    """Mean and 1/std over the M channels of each row in ``rows`` (CN), combining the
    per-channel-tile partials (mean, sum of squared deviations) by Chan's formula."""
    j = tl.arange(0, NJP)
    cnt = tile_counts(M, NJ, BM, NJP)
    msk = ok[:, None] & (j < NJ)[None, :]
    off = rows[:, None] * NJ + j[None, :]
    pm = tl.load(pmean_ptr + off, mask=msk, other=0.0)
    p2 = tl.load(pm2_ptr + off, mask=msk, other=0.0)
    mean = tl.sum(pm * cnt[None, :], 1) / M
    d = pm - mean[:, None]
    var = tl.sum(p2 + cnt[None, :] * d * d, 1) / M
    return mean, 1.0 / tl.sqrt(var + eps)


@triton.jit
def ln_stats(pmean_ptr, pm2_ptr, base, N, M, NJ, eps, BN: tl.constexpr, BM: tl.constexpr, NJP: tl.constexpr):
    """Mean and 1/std over all N locations and M channels of one example (LN)."""
    dt = pmean_ptr.dtype.element_ty
    j = tl.arange(0, NJP)
    cnt = tile_counts(M, NJ, BM, NJP)
    total = tl.zeros([BN], dt)
    for n0 in range(0, N, BN):
        rows = n0 + tl.arange(0, BN)
        msk = (rows < N)[:, None] & (j < NJ)[None, :]
        pm = tl.load(pmean_ptr + base + rows[:, None] * NJ + j[None, :], mask=msk, other=0.0)
        total += tl.sum(pm * cnt[None, :], 1)
    mean = tl.sum(total, 0) / (N * M)
    m2 = tl.zeros([BN], dt)
    for n0 in range(0, N, BN):
        rows = n0 + tl.arange(0, BN)
        msk = (rows < N)[:, None] & (j < NJ)[None, :]
        off = base + rows[:, None] * NJ + j[None, :]
        pm = tl.load(pmean_ptr + off, mask=msk, other=0.0)
        p2 = tl.load(pm2_ptr + off, mask=msk, other=0.0)
        d = pm - mean
        m2 += tl.sum(tl.where(msk, p2 + cnt[None, :] * d * d, 0.0), 1)
    return mean, 1.0 / tl.sqrt(tl.sum(m2, 0) / (N * M) + eps)


@triton.jit
def ln_stats_rows(pmean_ptr, pm2_ptr, e0, ok, N, M, NJ, eps, BM: tl.constexpr, NJP: tl.constexpr):
    """LN's mean and 1/std per row when a tile holds rows of several examples (FOLD): ``e0``,
    the row of location 0 of each row's example. The same sums as ``ln_stats``, in another
    order (one location at a time)."""
    dt = pmean_ptr.dtype.element_ty
    j = tl.arange(0, NJP)
    cnt = tile_counts(M, NJ, BM, NJP)
    msk = ok[:, None] & (j < NJ)[None, :]
    total = tl.zeros(e0.shape, dt)
    for n in range(N):
        pm = tl.load(pmean_ptr + (e0 + n)[:, None] * NJ + j[None, :], mask=msk, other=0.0)
        total += tl.sum(pm * cnt[None, :], 1)
    mean = total / (N * M)
    m2 = tl.zeros(e0.shape, dt)
    for n in range(N):
        off = (e0 + n)[:, None] * NJ + j[None, :]
        pm = tl.load(pmean_ptr + off, mask=msk, other=0.0)
        p2 = tl.load(pm2_ptr + off, mask=msk, other=0.0)
        d = pm - mean[:, None]
        m2 += tl.sum(tl.where(msk, p2 + cnt[None, :] * d * d, 0.0), 1)
    return mean, 1.0 / tl.sqrt(m2 / (N * M) + eps)


@triton.jit
def row_stats(pmean_ptr, pm2_ptr, rows, ok, ln_mean, ln_rstd, M, NJ, eps, NORM: tl.constexpr,
              BM: tl.constexpr, NJP: tl.constexpr):
    """Per-row (mean, rstd) of the previous step's c: CN per location, LN the example's (a
    scalar, or a vector of one per row when the batch is folded into the rows)."""
    if NORM == 1:
        mean, rstd = cn_stats(pmean_ptr, pm2_ptr, rows, ok, M, NJ, eps, BM, NJP)
    else:
        mean = tl.zeros(rows.shape, ln_mean.dtype) + ln_mean
        rstd = tl.zeros(rows.shape, ln_rstd.dtype) + ln_rstd
    return mean, rstd


@triton.jit
def hidden(cs_ptr, acts_ptr, gain_ptr, bias_ptr, crow, arow, loc, chan, msk, mean, rstd, M, GC,
           NORM: tl.constexpr):
    """h = tanh(N(c)) * o at (loc, chan) from the stored c (row ``crow`` of cs), O gate (row
    ``arow`` of acts) and statistics (eq. 15)."""
    c = tl.load(cs_ptr + crow[:, None] * M + chan[None, :], mask=msk, other=0.0)
    o = tl.load(acts_ptr + arow[:, None] * GC + 3 * M + chan[None, :], mask=msk, other=0.0)
    if NORM != 0:
        gofs = loc[:, None] * M + chan[None, :]
        gain = tl.load(gain_ptr + gofs, mask=msk, other=0.0)
        bias = tl.load(bias_ptr + gofs, mask=msk, other=0.0)
        x = (c - mean[:, None]) * rstd[:, None] * gain + bias
    else:
        x = c
    return tanh(x) * o


# ---- the backward's deferred sums (LN/CN's two means) ----------------------------------

@triton.jit
def cn_sums(pa_ptr, pb_ptr, rows, ok, M, NJ, NJP: tl.constexpr):
    """alpha = mean_m(gain*dn), beta = mean_m(gain*dn*xhat) per row (CN's backward)."""
    j = tl.arange(0, NJP)
    msk = ok[:, None] & (j < NJ)[None, :]
    off = rows[:, None] * NJ + j[None, :]
    return (tl.sum(tl.load(pa_ptr + off, mask=msk, other=0.0), 1) / M,
            tl.sum(tl.load(pb_ptr + off, mask=msk, other=0.0), 1) / M)


@triton.jit
def ln_sums(pa_ptr, pb_ptr, base, N, M, NJ, BN: tl.constexpr, NJP: tl.constexpr):
    """alpha, beta over all locations and channels of one example (LN's backward)."""
    dt = pa_ptr.dtype.element_ty
    j = tl.arange(0, NJP)
    sa = tl.zeros([BN], dt)
    sb = tl.zeros([BN], dt)
    for n0 in range(0, N, BN):
        rows = n0 + tl.arange(0, BN)
        msk = (rows < N)[:, None] & (j < NJ)[None, :]
        off = base + rows[:, None] * NJ + j[None, :]
        sa += tl.sum(tl.load(pa_ptr + off, mask=msk, other=0.0), 1)
        sb += tl.sum(tl.load(pb_ptr + off, mask=msk, other=0.0), 1)
    return tl.sum(sa, 0) / (N * M), tl.sum(sb, 0) / (N * M)


@triton.jit
def ln_sums_rows(pa_ptr, pb_ptr, e0, ok, N, M, NJ, NJP: tl.constexpr):
    """``ln_sums`` per row when a tile holds rows of several examples (FOLD; ``e0`` as in
    ``ln_stats_rows``)."""
    dt = pa_ptr.dtype.element_ty
    j = tl.arange(0, NJP)
    msk = ok[:, None] & (j < NJ)[None, :]
    sa = tl.zeros(e0.shape, dt)
    sb = tl.zeros(e0.shape, dt)
    for n in range(N):
        off = (e0 + n)[:, None] * NJ + j[None, :]
        sa += tl.sum(tl.load(pa_ptr + off, mask=msk, other=0.0), 1)
        sb += tl.sum(tl.load(pb_ptr + off, mask=msk, other=0.0), 1)
    return sa / (N * M), sb / (N * M)


@triton.jit
def row_sums(pa_ptr, pb_ptr, rows, ok, ln_a, ln_b, M, NJ, NORM: tl.constexpr, NJP: tl.constexpr):
    if NORM == 1:
        alpha, beta = cn_sums(pa_ptr, pb_ptr, rows, ok, M, NJ, NJP)
    else:
        alpha = tl.zeros(rows.shape, ln_a.dtype) + ln_a
        beta = tl.zeros(rows.shape, ln_b.dtype) + ln_b
    return alpha, beta


@triton.jit
def next_dcf(dcs_ptr, acts_ptr, cs_ptr, mean_ptr, rstd_ptr, pa_ptr, pb_ptr, rows, BT, ok, chn, cok,
             ln_a, ln_b, M, GC, NJ, NORM: tl.constexpr, NJP: tl.constexpr):
    """dc_{s+1} * f_{s+1} at ``rows`` (rows of step s+1; c_{s+1} is BT rows further in cs),
    completing dc with the norm's deferred terms."""
    msk = ok[:, None] & cok[None, :]
    dc = tl.load(dcs_ptr + rows[:, None] * M + chn[None, :], mask=msk, other=0.0)
    f = tl.load(acts_ptr + rows[:, None] * GC + 2 * M + chn[None, :], mask=msk, other=0.0)
    if NORM != 0:
        alpha, beta = row_sums(pa_ptr, pb_ptr, rows, ok, ln_a, ln_b, M, NJ, NORM, NJP)
        c = tl.load(cs_ptr + (rows + BT)[:, None] * M + chn[None, :], mask=msk, other=0.0)
        mean = tl.load(mean_ptr + rows, mask=ok, other=0.0)
        rstd = tl.load(rstd_ptr + rows, mask=ok, other=0.0)
        xhat = (c - mean[:, None]) * rstd[:, None]
        dc = dc - rstd[:, None] * (alpha[:, None] + beta[:, None] * xhat)
    return dc * f
