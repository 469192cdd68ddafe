"""Device helpers shared by the forward and backward step bodies: the product, activations,
the norm's deferred statistics, and the grid barrier of the persistent kernels."""

from __future__ import annotations

import os

import triton
import triton.language as tl

from ..tlstm import HIDDEN_OFFSET, INPUT_SLOT

# Whether the kernels were defined for Triton's CPU interpreter (decided when triton.jit runs,
# i.e. when this package is first imported).
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

INPUT = tl.constexpr(INPUT_SLOT)
HOFF = tl.constexpr(HIDDEN_OFFSET)


@triton.jit
def mma(a, b, acc):
    """acc + a @ b, chosen at compile time: ``tl.dot`` (IEEE float32, no TF32, so results match
    eager's) where every side is >= 16 and the dtype is float32; otherwise a broadcast
    multiply-and-sum. float64 always takes the sum: Triton 3.6's GPU compiler rejects a float64
    ``tl.dot`` (the first H100 run), and float64 is for correctness checks, not speed. Small
    tiles (batch 1: one or two locations, a few channels per program) take it too, as
    ``tl.dot`` needs 16 on every side."""
    if a.dtype == tl.float64:
        return acc + tl.sum(a[:, :, None] * b[None, :, :], 1)
    elif a.shape[0] < 16 or a.shape[1] < 16 or b.shape[1] < 16:
        return acc + tl.sum(a[:, :, None] * b[None, :, :], 1)
    else:
        return tl.dot(a, b, acc, input_precision="ieee")


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


# ---- the forward's deferred statistics (LN/CN of the previous step's c) ---------------

@triton.jit
def tile_counts(M, NJ, BM: tl.constexpr, NJP: tl.constexpr):
    """Channels in each of the NJ channel tiles (0 past the last)."""
    j = tl.arange(0, NJP)
    return tl.where(j < NJ, tl.minimum(M - j * BM, BM), 0).to(tl.float32)


@triton.jit
def cn_stats(pmean_ptr, pm2_ptr, base, rows, ok, M, NJ, eps, BM: tl.constexpr, NJP: tl.constexpr):
    """Mean and 1/std over the M channels of each location in ``rows`` (CN), combining the
    per-channel-tile partials (mean, sum of squared deviations) by Chan's formula."""
    j = tl.arange(0, NJP)
    cnt = tile_counts(M, NJ, BM, NJP)
    msk = ok[:, None] & (j < NJ)[None, :]
    off = base + rows[:, None] * NJ + j[None, :]
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
def row_stats(pmean_ptr, pm2_ptr, base, rows, ok, ln_mean, ln_rstd, M, NJ, eps, NORM: tl.constexpr,
              BM: tl.constexpr, NJP: tl.constexpr):
    """Per-row (mean, rstd) of the previous step's c: CN per location, LN the example's."""
    if NORM == 1:
        mean, rstd = cn_stats(pmean_ptr, pm2_ptr, base, rows, ok, M, NJ, eps, BM, NJP)
    else:
        mean = tl.zeros(rows.shape, ln_mean.dtype) + ln_mean
        rstd = tl.zeros(rows.shape, ln_rstd.dtype) + ln_rstd
    return mean, rstd


@triton.jit
def hidden(cs_ptr, acts_ptr, gain_ptr, bias_ptr, c_base, a_base, loc, chan, msk, mean, rstd, M, GC,
           NORM: tl.constexpr):
    """h = tanh(N(c)) * o at (loc, chan) from the stored c, O gate and statistics (eq. 15)."""
    c = tl.load(cs_ptr + c_base + loc[:, None] * M + chan[None, :], mask=msk, other=0.0)
    o = tl.load(acts_ptr + a_base + loc[:, None] * GC + 3 * M + chan[None, :], mask=msk, other=0.0)
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
def cn_sums(pa_ptr, pb_ptr, base, rows, ok, M, NJ, NJP: tl.constexpr):
    """alpha = mean_m(gain*dn), beta = mean_m(gain*dn*xhat) per location (CN's backward)."""
    j = tl.arange(0, NJP)
    msk = ok[:, None] & (j < NJ)[None, :]
    off = base + rows[:, None] * NJ + j[None, :]
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
def row_sums(pa_ptr, pb_ptr, base, rows, ok, ln_a, ln_b, M, NJ, NORM: tl.constexpr, NJP: tl.constexpr):
    if NORM == 1:
        alpha, beta = cn_sums(pa_ptr, pb_ptr, base, rows, ok, M, NJ, NJP)
    else:
        alpha = tl.zeros(rows.shape, ln_a.dtype) + ln_a
        beta = tl.zeros(rows.shape, ln_b.dtype) + ln_b
    return alpha, beta


@triton.jit
def next_dcf(dcs_ptr, acts_ptr, cs_ptr, mean_ptr, rstd_ptr, pa_ptr, pb_ptr, row_base, c_base, rows, ok, chn, cok,
             ln_a, ln_b, M, GC, NJ, NORM: tl.constexpr, NJP: tl.constexpr):
    """dc_{s+1} * f_{s+1} at ``rows``, completing dc with the norm's deferred terms."""
    msk = ok[:, None] & cok[None, :]
    dc = tl.load(dcs_ptr + (row_base + rows[:, None]) * M + chn[None, :], mask=msk, other=0.0)
    f = tl.load(acts_ptr + (row_base + rows[:, None]) * GC + 2 * M + chn[None, :], mask=msk, other=0.0)
    if NORM != 0:
        alpha, beta = row_sums(pa_ptr, pb_ptr, row_base * NJ, rows, ok, ln_a, ln_b, M, NJ, NORM, NJP)
        c = tl.load(cs_ptr + c_base + rows[:, None] * M + chn[None, :], mask=msk, other=0.0)
        mean = tl.load(mean_ptr + row_base + rows, mask=ok, other=0.0)
        rstd = tl.load(rstd_ptr + row_base + rows, mask=ok, other=0.0)
        xhat = (c - mean[:, None]) * rstd[:, None]
        dc = dc - rstd[:, None] * (alpha[:, None] + beta[:, None] * xhat)
    return dc * f
