"""The forward step body, and the two kernels built from it: one launch per step
(``forward_step``, the fallback and what the interpreter tests) and one launch per sequence
(``forward_persistent``: the steps in a loop, a grid barrier between them)."""

from __future__ import annotations

import triton
import triton.language as tl

from .common import (HOFF, INPUT, grid_barrier, hidden, ln_stats, ln_stats_rows, map_entry, mma, producer_row,
                     row_stats, step_sync, tanh, tile_map, tile_rows)


@triton.jit
def forward_body(z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, mean_ptr, rstd_ptr,
                 w_ptr, bh_ptr, gain_ptr, bias_ptr, hidx_ptr, cidx_ptr, hrows, crows,
                 s, S, B, N, M, GC, KD, NJ, eps,
                 NORM: tl.constexpr, MEMCONV: tl.constexpr, FIRST: tl.constexpr, FINISH: tl.constexpr,
                 FOLD: tl.constexpr, PRECISION: tl.constexpr,
                 BN: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr, KDP: tl.constexpr,
                 NJP: tl.constexpr, UNROLL: tl.constexpr, DEFER: tl.constexpr):
    """Step s of one tile (one launch, or one turn of the persistent loop): finish h_{s-1} of
    this tile (unless FIRST: h_{s-1} is in hs already, the given state at s = 0 or made by a
    split tile set's FINISH launch, and the window reads it), then step s (unless FINISH).

    Buffers (contiguous): z (B, S, M); hs, cs (S+1, B, N, M) with hs[s] = h_{s-1},
    cs[s] = c_{s-1} (index 0: the given state); acts (S, B, N, GC) post-activation
    G, I, F, O, Q; partial statistics (S, B, N, NJ); mean, rstd (S, B, N). A row is one
    (step, example, location): row s * B * N + b * N + loc (``common.tile_rows``). ``hrows``,
    ``crows``: this tile's rows of hidden_index, cell_index (``common.tile_map``). The phases
    are helpers below (inlined: the same compiled code as one long body)."""
    b, ex, loc, lok = tile_rows(B, N, BN, FOLD)
    jt = tl.program_id(2)
    chn = jt * BM + tl.arange(0, BM)
    cok = chn < M
    own = lok[:, None] & cok[None, :]
    # scalar conditions become vectors before they meet a mask (the interpreter rejects vector & scalar)
    first_tile = (loc * 0 + jt) == 0
    dt = w_ptr.dtype.element_ty
    s64 = tl.cast(s, tl.int64)  # s: an argument, a loop variable, or a plain int (interpreter)
    bt = B * N  # rows per step
    e_cur = s64 * bt + ex  # row of location 0 of this example in cs[s] = c_{s-1}, hs[s], acts of step s
    e_prev = e_cur - bt  # acts, statistics of step s-1
    own_c = e_cur + loc
    ln_mean = tl.zeros([1], dt).sum(0)
    ln_rstd = ln_mean + 1.0
    if not FIRST:
        ln_mean, ln_rstd = finish_previous(hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, mean_ptr, rstd_ptr,
                                           gain_ptr, bias_ptr, loc, lok, chn, own, first_tile, e_cur, e_prev,
                                           N, M, GC, NJ, eps, NORM, FOLD, BN, BM, NJP)
    if not FINISH:
        acc_g, acc_i, acc_f, acc_o, acc_q = window(
            z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, w_ptr, gain_ptr, bias_ptr, hidx_ptr, hrows,
            b, loc, lok, chn, cok, s64, e_cur, e_prev, ln_mean, ln_rstd, S, M, GC, KD, NJ, eps,
            NORM, MEMCONV, FIRST, PRECISION, BN, BM, BK, KDP, NJP, UNROLL, DEFER)
        # Gates (eq. 11): G tanh, I F O sigmoid.
        g = tanh(acc_g + tl.load(bh_ptr + chn, mask=cok, other=0.0)[None, :])
        i = tl.sigmoid(acc_i + tl.load(bh_ptr + M + chn, mask=cok, other=0.0)[None, :])
        f = tl.sigmoid(acc_f + tl.load(bh_ptr + 2 * M + chn, mask=cok, other=0.0)[None, :])
        o = tl.sigmoid(acc_o + tl.load(bh_ptr + 3 * M + chn, mask=cok, other=0.0)[None, :])
        a_own = acts_ptr + own_c[:, None] * GC + chn[None, :]
        tl.store(a_own, g, mask=own)
        tl.store(a_own + M, i, mask=own)
        tl.store(a_own + 2 * M, f, mask=own)
        tl.store(a_own + 3 * M, o, mask=own)
        if MEMCONV:
            cc = memory_cell(cs_ptr, acts_ptr, bh_ptr, cidx_ptr, crows, acc_q, loc, lok, chn, own, first_tile, e_cur,
                             M, GC, KD, BN, BM, KDP, UNROLL)
        else:
            cc = tl.load(cs_ptr + own_c[:, None] * M + chn[None, :], mask=own, other=0.0)
        c = g * i + cc * f  # eq. 14
        tl.store(cs_ptr + (own_c + bt)[:, None] * M + chn[None, :], c, mask=own)
        if NORM != 0:
            partial_stats(pmean_ptr, pm2_ptr, c, own, own_c, lok, jt, M, NJ, BM)


@triton.jit
def partial_stats(pmean_ptr, pm2_ptr, c, own, own_c, lok, jt, M, NJ, BM: tl.constexpr):
    """This channel tile's mean and sum of squared deviations of c_s per row, for the next
    step's norm (combined there by Chan's formula)."""
    cnt = tl.minimum(M - jt * BM, BM).to(tl.float32)
    tm = tl.sum(tl.where(own, c, 0.0), 1) / cnt
    d = tl.where(own, c - tm[:, None], 0.0)
    tl.store(pmean_ptr + own_c * NJ + jt, tm, mask=lok)
    tl.store(pm2_ptr + own_c * NJ + jt, tl.sum(d * d, 1), mask=lok)


@triton.jit
def finish_previous(hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, mean_ptr, rstd_ptr, gain_ptr, bias_ptr,
                    loc, lok, chn, own, first_tile, e_cur, e_prev, N, M, GC, NJ, eps,
                    NORM: tl.constexpr, FOLD: tl.constexpr, BN: tl.constexpr, BM: tl.constexpr,
                    NJP: tl.constexpr):
    """h_{s-1} of this tile from the stored c, o and the norm's deferred statistics (stored in
    hs, with the statistics); returns LN's (mean, rstd) of step s-1 for the window's rows."""
    dt = pmean_ptr.dtype.element_ty
    ln_mean = tl.zeros([1], dt).sum(0)
    ln_rstd = ln_mean + 1.0
    if NORM == 2:
        if FOLD:
            ln_mean, ln_rstd = ln_stats_rows(pmean_ptr, pm2_ptr, e_prev + loc * 0, lok, N, M, NJ, eps, BM, NJP)
        else:
            ln_mean, ln_rstd = ln_stats(pmean_ptr, pm2_ptr, e_prev * NJ, N, M, NJ, eps, BN, BM, NJP)
    own_c, own_p = e_cur + loc, e_prev + loc
    mean_o, rstd_o = row_stats(pmean_ptr, pm2_ptr, own_p, lok, ln_mean, ln_rstd, M, NJ, eps, NORM, BM, NJP)
    h = hidden(cs_ptr, acts_ptr, gain_ptr, bias_ptr, own_c, own_p, loc, chn, own, mean_o, rstd_o, M, GC, NORM)
    tl.store(hs_ptr + own_c[:, None] * M + chn[None, :], h, mask=own)
    if NORM != 0:
        tl.store(mean_ptr + own_p, mean_o, mask=lok & first_tile)
        tl.store(rstd_ptr + own_p, rstd_o, mask=lok & first_tile)
    return ln_mean, ln_rstd


@triton.jit
def window(z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, w_ptr, gain_ptr, bias_ptr, hidx_ptr, hrows,
           b, loc, lok, chn, cok, s64, e_cur, e_prev, ln_mean, ln_rstd, S, M, GC, KD, NJ, eps,
           NORM: tl.constexpr, MEMCONV: tl.constexpr, FIRST: tl.constexpr, PRECISION: tl.constexpr,
           BN: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr, KDP: tl.constexpr, NJP: tl.constexpr,
           UNROLL: tl.constexpr, DEFER: tl.constexpr):
    """The window's products: ``window_deferred`` (DEFER) or ``window_products``."""
    if DEFER:
        return window_deferred(z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, w_ptr, gain_ptr, bias_ptr,
                               hidx_ptr, hrows, b, loc, lok, chn, cok, s64, e_cur, e_prev, ln_mean, ln_rstd, S, M,
                               GC, KD, NJ, eps, NORM, MEMCONV, FIRST, BN, BM, BK, KDP, NJP, UNROLL)
    else:
        return window_products(z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, w_ptr, gain_ptr, bias_ptr,
                               hidx_ptr, hrows, b, loc, lok, chn, cok, s64, e_cur, e_prev, ln_mean, ln_rstd, S, M,
                               GC, KD, NJ, eps, NORM, MEMCONV, FIRST, PRECISION, BN, BM, BK, KDP, NJP, UNROLL)


@triton.jit
def window_entry(hrows, hidx_ptr, pmean_ptr, pm2_ptr, loc, lok, k, e_prev, ln_mean, ln_rstd, M, KD, NJ, eps,
                 NORM: tl.constexpr, FIRST: tl.constexpr, BM: tl.constexpr, KDP: tl.constexpr, NJP: tl.constexpr,
                 UNROLL: tl.constexpr):
    """Window entry k of each row: (reads z, reads h, the h location read, and unless FIRST that
    location's norm statistics of step s-1 for ``hidden``; with FIRST, unused placeholders)."""
    slot = map_entry(hrows, hidx_ptr, loc, lok, k, KD, 0, KDP, UNROLL > 1)
    is_z = slot == INPUT
    is_h = slot >= HOFF
    hl = tl.where(is_h, slot - HOFF, 0)
    if FIRST:
        mean_h = tl.zeros(hl.shape, pmean_ptr.dtype.element_ty)
        rstd_h = mean_h
    else:
        mean_h, rstd_h = row_stats(pmean_ptr, pm2_ptr, e_prev + hl, is_h, ln_mean, ln_rstd, M, NJ, eps, NORM, BM,
                                   NJP)
    return is_z, is_h, hl, mean_h, rstd_h


@triton.jit
def window_products(z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, w_ptr, gain_ptr, bias_ptr, hidx_ptr, hrows,
                    b, loc, lok, chn, cok, s64, e_cur, e_prev, ln_mean, ln_rstd, S, M, GC, KD, NJ, eps,
                    NORM: tl.constexpr, MEMCONV: tl.constexpr, FIRST: tl.constexpr, PRECISION: tl.constexpr,
                    BN: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr, KDP: tl.constexpr, NJP: tl.constexpr,
                    UNROLL: tl.constexpr):
    """The cross-layer convolution (eq. 10, SPEC section 3 steps 2-3): the window rows gathered
    through hidden_index from [0, z_s, h_{s-1}] (h recomputed from c, o and the statistics),
    times W^h; the gate pre-activations (G, I, F, O) and the Q logits, without biases."""
    dt = w_ptr.dtype.element_ty
    kq = tl.arange(0, KDP)
    acc_g = tl.zeros((BN, BM), dt)
    acc_i = tl.zeros((BN, BM), dt)
    acc_f = tl.zeros((BN, BM), dt)
    acc_o = tl.zeros((BN, BM), dt)
    acc_q = tl.zeros((BN, KDP), dt)
    z_row = (b * S + s64) * M + loc * 0  # z (B, S, M) of each row's example
    for k in tl.range(0, KD, 1, loop_unroll_factor=UNROLL):
        is_z, is_h, hl, mean_h, rstd_h = window_entry(hrows, hidx_ptr, pmean_ptr, pm2_ptr, loc, lok, k, e_prev,
                                                      ln_mean, ln_rstd, M, KD, NJ, eps, NORM, FIRST, BM, KDP, NJP,
                                                      UNROLL)
        for m0 in range(0, M, BK):
            cin = m0 + tl.arange(0, BK)
            iok = cin < M
            hm = is_h[:, None] & iok[None, :]
            if FIRST:  # h_{s-1} is in hs: the given state, or made by a split set's FINISH launch
                hv = tl.load(hs_ptr + (e_cur + hl)[:, None] * M + cin[None, :], mask=hm, other=0.0)
            else:
                hv = hidden(cs_ptr, acts_ptr, gain_ptr, bias_ptr, e_cur + hl, e_prev + hl, hl, cin, hm,
                             mean_h, rstd_h, M, GC, NORM)
            zv = tl.load(z_ptr + z_row[:, None] + cin[None, :], mask=is_z[:, None] & iok[None, :], other=0.0)
            win = tl.where(is_z[:, None], zv, hv)
            w_row = w_ptr + (k * M + cin)[:, None] * GC
            wm = iok[:, None] & cok[None, :]
            acc_g = mma(win, tl.load(w_row + chn[None, :], mask=wm, other=0.0), acc_g, PRECISION)
            acc_i = mma(win, tl.load(w_row + M + chn[None, :], mask=wm, other=0.0), acc_i, PRECISION)
            acc_f = mma(win, tl.load(w_row + 2 * M + chn[None, :], mask=wm, other=0.0), acc_f, PRECISION)
            acc_o = mma(win, tl.load(w_row + 3 * M + chn[None, :], mask=wm, other=0.0), acc_o, PRECISION)
            if MEMCONV:
                wq = tl.load(w_row + 4 * M + kq[None, :], mask=iok[:, None] & (kq < KD)[None, :], other=0.0)
                acc_q = mma(win, wq, acc_q, PRECISION)
    return acc_g, acc_i, acc_f, acc_o, acc_q


@triton.jit
def window_deferred(z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, w_ptr, gain_ptr, bias_ptr, hidx_ptr, hrows,
                    b, loc, lok, chn, cok, s64, e_cur, e_prev, ln_mean, ln_rstd, S, M, GC, KD, NJ, eps,
                    NORM: tl.constexpr, MEMCONV: tl.constexpr, FIRST: tl.constexpr,
                    BN: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr, KDP: tl.constexpr, NJP: tl.constexpr,
                    UNROLL: tl.constexpr):
    """``window_products`` with its reductions deferred (the DEFER tile sets, issue 28): every
    operand is loaded in the product's 3-D shape, the window (BN, BK, 1) and the weights
    (1, BK, BM), so that each window entry adds its products elementwise into (BN, BK, BM)
    accumulators, with no reduction inside the loop; each is summed over BK once, after it.
    ``window_products`` sums over BK, across the program's warps, for every entry and inner
    turn: a round of shuffles and shared-memory barriers each time. (With more than one row a
    program the compiler still changes the window's layout inside the loop, a barrier or two a
    turn: results/evidence/cpu/defer_ptx/.) The same values (``hidden`` and the loads take the
    row and channel offsets already shaped: rows (BN, 1), channels (BK, 1)), summed in another
    order."""
    dt = w_ptr.dtype.element_ty
    kq = tl.arange(0, KDP)[None, None, :]
    ch = chn[None, None, :]
    cok3 = cok[None, None, :]
    acc_g = tl.zeros((BN, BK, BM), dt)
    acc_i = tl.zeros((BN, BK, BM), dt)
    acc_f = tl.zeros((BN, BK, BM), dt)
    acc_o = tl.zeros((BN, BK, BM), dt)
    acc_q = tl.zeros((BN, BK, KDP), dt)
    z_row = ((b * S + s64) * M + loc * 0)[:, None]  # z (B, S, M) of each row's example, (BN, 1)
    e_cur2 = (e_cur + loc * 0)[:, None]
    e_prev2 = (e_prev + loc * 0)[:, None]
    for k in tl.range(0, KD, 1, loop_unroll_factor=UNROLL):
        is_z, is_h, hl, mean_h, rstd_h = window_entry(hrows, hidx_ptr, pmean_ptr, pm2_ptr, loc, lok, k, e_prev,
                                                      ln_mean, ln_rstd, M, KD, NJ, eps, NORM, FIRST, BM, KDP, NJP,
                                                      UNROLL)
        is_z, is_h, hl = is_z[:, None], is_h[:, None], hl[:, None]
        for m0 in range(0, M, BK):
            cin = (m0 + tl.arange(0, BK))[:, None]  # (BK, 1)
            iok = cin < M
            hm = is_h[:, None] & iok[None, :]  # (BN, BK, 1)
            if FIRST:  # h_{s-1} is in hs: the given state, or made by a split set's FINISH launch
                hv = tl.load(hs_ptr + (e_cur2 + hl)[:, None] * M + cin[None, :], mask=hm, other=0.0)
            else:
                hv = hidden(cs_ptr, acts_ptr, gain_ptr, bias_ptr, e_cur2 + hl, e_prev2 + hl, hl, cin, hm,
                            mean_h[:, None], rstd_h[:, None], M, GC, NORM)
            zv = tl.load(z_ptr + z_row[:, None] + cin[None, :], mask=is_z[:, None] & iok[None, :], other=0.0)
            win = tl.where(is_z[:, None], zv, hv)
            w_row = w_ptr + (k * M + cin)[None, :] * GC  # (1, BK, 1)
            wm = iok[None, :] & cok3
            acc_g += win * tl.load(w_row + ch, mask=wm, other=0.0)
            acc_i += win * tl.load(w_row + M + ch, mask=wm, other=0.0)
            acc_f += win * tl.load(w_row + 2 * M + ch, mask=wm, other=0.0)
            acc_o += win * tl.load(w_row + 3 * M + ch, mask=wm, other=0.0)
            if MEMCONV:
                acc_q += win * tl.load(w_row + 4 * M + kq, mask=iok[None, :] & (kq < KD), other=0.0)
    return tl.sum(acc_g, 1), tl.sum(acc_i, 1), tl.sum(acc_f, 1), tl.sum(acc_o, 1), tl.sum(acc_q, 1)


@triton.jit
def memory_cell(cs_ptr, acts_ptr, bh_ptr, cidx_ptr, crows, acc_q, loc, lok, chn, own, first_tile, e_cur,
                M, GC, KD, BN: tl.constexpr, BM: tl.constexpr, KDP: tl.constexpr, UNROLL: tl.constexpr):
    """Q = softmax over the <K> kernel channels (eq. 12, stored by the first channel tile), then
    the memory-cell convolution of c_{s-1} through cell_index (eq. 13, SPEC section 3 step 5)."""
    kq = tl.arange(0, KDP)
    qok = (kq < KD)[None, :]
    ql = acc_q + tl.load(bh_ptr + 4 * M + kq, mask=kq < KD, other=0.0)[None, :]
    ql = tl.where(qok, ql, float("-inf"))
    e = tl.exp(ql - tl.max(ql, 1)[:, None])
    q = e / tl.sum(e, 1)[:, None]
    tl.store(acts_ptr + (e_cur + loc)[:, None] * GC + 4 * M + kq[None, :], q, mask=(lok & first_tile)[:, None] & qok)
    cc = tl.zeros((BN, BM), cs_ptr.dtype.element_ty)
    for k in tl.range(0, KD, 1, loop_unroll_factor=UNROLL):
        cl = map_entry(crows, cidx_ptr, loc, lok, k, KD, 0, KDP, UNROLL > 1)
        qk = tl.sum(tl.where(kq[None, :] == k, q, 0.0), 1)
        cc += qk[:, None] * tl.load(cs_ptr + (e_cur + cl)[:, None] * M + chn[None, :], mask=own, other=0.0)
    return cc


# Integer arguments are not specialized (Triton would make a 1, e.g. N at L = 1, a constant):
# one compiled variant per constexpr set, the set benchmarks/triton_compile.py compiles.
@triton.jit(do_not_specialize=["s", "S", "B", "N", "M", "GC", "KD", "NJ"])
def forward_step(z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, mean_ptr, rstd_ptr,
                 w_ptr, bh_ptr, gain_ptr, bias_ptr, hidx_ptr, cidx_ptr,
                 s, S, B, N, M, GC, KD, NJ, eps,
                 NORM: tl.constexpr, MEMCONV: tl.constexpr, FIRST: tl.constexpr, FINISH: tl.constexpr,
                 FOLD: tl.constexpr, PRECISION: tl.constexpr,
                 BN: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr, KDP: tl.constexpr,
                 NJP: tl.constexpr, UNROLL: tl.constexpr, DEFER: tl.constexpr = 0):
    """Launch s of S + 1 (the last finishes h of step S - 1)."""
    hrows = tile_map(hidx_ptr, B, N, KD, 0, BN, FOLD, KDP, UNROLL > 1)
    crows = tile_map(cidx_ptr, B, N, KD, 0, BN, FOLD, KDP, UNROLL > 1)
    forward_body(z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, mean_ptr, rstd_ptr,
                 w_ptr, bh_ptr, gain_ptr, bias_ptr, hidx_ptr, cidx_ptr, hrows, crows, s, S, B, N, M, GC, KD, NJ, eps,
                 NORM, MEMCONV, FIRST, FINISH, FOLD, PRECISION, BN, BM, BK, KDP, NJP, UNROLL, DEFER)


@triton.jit(do_not_specialize=["S", "B", "N", "M", "GC", "KD", "NJ"])
def forward_persistent(z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, mean_ptr, rstd_ptr,
                       w_ptr, bh_ptr, gain_ptr, bias_ptr, hidx_ptr, cidx_ptr, sem_ptr,
                       S, B, N, M, GC, KD, NJ, eps,
                       NORM: tl.constexpr, MEMCONV: tl.constexpr, FOLD: tl.constexpr, PRECISION: tl.constexpr,
                       BN: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr, KDP: tl.constexpr,
                       NJP: tl.constexpr, UNROLL: tl.constexpr,
                       SYNC: tl.constexpr = 0, DEPW: tl.constexpr = 1, flags_ptr=None, deps_ptr=None,
                       DEFER: tl.constexpr = 0, SPLIT: tl.constexpr = 0):
    """All S steps and the finisher in one launch: what launch s + 1 of ``forward_step`` reads
    from launch s (c_s, the gates, the partial statistics) it reads here after one grid
    barrier (or, with SYNC, once the programs it reads from flagged step s done:
    ``common.step_flags``), so the results are the same, step for step. The index maps' rows
    that the unrolled tile sets preload are loaded once, before the loop. SPLIT (with the grid
    barrier): each turn finishes h_{s-1}, meets the grid again, and runs step s reading it."""
    producers = producer_row(deps_ptr, SYNC, DEPW)
    zero = S * 0  # a run-time 0: the body takes s as a tensor
    hrows = tile_map(hidx_ptr, B, N, KD, 0, BN, FOLD, KDP, UNROLL > 1)
    crows = tile_map(cidx_ptr, B, N, KD, 0, BN, FOLD, KDP, UNROLL > 1)
    forward_body(z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, mean_ptr, rstd_ptr,
                 w_ptr, bh_ptr, gain_ptr, bias_ptr, hidx_ptr, cidx_ptr, hrows, crows, zero, S, B, N, M, GC, KD, NJ, eps,
                 NORM, MEMCONV, True, False, FOLD, PRECISION, BN, BM, BK, KDP, NJP, UNROLL, DEFER)
    for s in range(1, S):
        step_sync(sem_ptr, flags_ptr, producers, s, SYNC)
        if SPLIT:
            forward_body(z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, mean_ptr, rstd_ptr,
                         w_ptr, bh_ptr, gain_ptr, bias_ptr, hidx_ptr, cidx_ptr, hrows, crows, s, S, B, N, M, GC, KD,
                         NJ, eps, NORM, MEMCONV, False, True, FOLD, PRECISION, BN, BM, BK, KDP, NJP, UNROLL, DEFER)
            grid_barrier(sem_ptr)
        forward_body(z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, mean_ptr, rstd_ptr,
                     w_ptr, bh_ptr, gain_ptr, bias_ptr, hidx_ptr, cidx_ptr, hrows, crows, s, S, B, N, M, GC, KD, NJ,
                     eps, NORM, MEMCONV, SPLIT != 0, False, FOLD, PRECISION, BN, BM, BK, KDP, NJP, UNROLL, DEFER)
    step_sync(sem_ptr, flags_ptr, producers, S, SYNC)
    forward_body(z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, mean_ptr, rstd_ptr,
                 w_ptr, bh_ptr, gain_ptr, bias_ptr, hidx_ptr, cidx_ptr, hrows, crows, S, S, B, N, M, GC, KD, NJ, eps,
                 NORM, MEMCONV, False, True, FOLD, PRECISION, BN, BM, BK, KDP, NJP, UNROLL, DEFER)
