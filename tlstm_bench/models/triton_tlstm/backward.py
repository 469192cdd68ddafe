"""The backward step body, and its two kernels: one launch per step (``backward_step``) and
one per sequence (``backward_persistent``), as in forward.py."""

from __future__ import annotations

import triton
import triton.language as tl

from .common import (ln_sums, ln_sums_rows, map_entry, mma, next_dcf, producer_row, row_sums, step_sync, tanh,
                     tile_map, tile_rows)


@triton.jit
def backward_body(cs_ptr, acts_ptr, mean_ptr, rstd_ptr, w_ptr, gain_ptr, bias_ptr, cidx_ptr, invh_ptr, invc_ptr,
                  das_ptr, e1_ptr, e2_ptr, dcs_ptr, dns_ptr, pa_ptr, pb_ptr, dql_ptr, dq1_ptr, dq2_ptr,
                  dout_ptr, dht_ptr, dct_ptr, ihrows, crows, icrows,
                  s, T, DELAY, B, N, M, GC, KD, NJ, R,
                  NORM: tl.constexpr, MEMCONV: tl.constexpr, HAS_NEXT: tl.constexpr,
                  FOLD: tl.constexpr, PRECISION: tl.constexpr,
                  BN: tl.constexpr, BM: tl.constexpr, BG: tl.constexpr, KDP: tl.constexpr, NJP: tl.constexpr,
                  UNROLL: tl.constexpr, DEFER: tl.constexpr):
    """Backward of step s for a tile: dA_s (local part), dc_s, and the deferred partials.

    Writes das[s] gate columns (G, I, F, O; the Q columns are completed after the
    loop), e1/e2[s] (LN/CN: the rows that alpha and beta multiply), dcs[s] (dc_s without
    the norm's deferred terms), dns[s] (dL/dN(c_s), for the gain and bias gradients),
    pa/pb[s] (partial sums of gain*dn and gain*dn*xhat per location and channel tile),
    dql/dq1/dq2[s] (partial sums of the Q gradient per location and channel tile).
    Rows as in forward_body (``common.tile_rows``); ``ihrows``, ``crows``, ``icrows``: this
    tile's rows of the inverse hidden map, cell_index and the inverse cell map (``index_maps``);
    the phases are helpers below (inlined).
    """
    b, ex, loc, lok = tile_rows(B, N, BN, FOLD)
    jt = tl.program_id(2)
    chn = jt * BM + tl.arange(0, BM)
    cok = chn < M
    own = lok[:, None] & cok[None, :]
    dt = w_ptr.dtype.element_ty
    s64 = tl.cast(s, tl.int64)  # s: an argument, a loop variable, or a plain int (interpreter)
    bt = B * N  # rows per step
    e_s = s64 * bt + ex  # row of location 0 of this example in step s (acts, das, dcs, ...)
    e_n = e_s + bt  # step s+1
    gh = tl.zeros((BN, BM), dt)  # dL/dh_s
    dci = tl.zeros((BN, BM), dt)  # dL/dc_s from outside and through step s+1
    if HAS_NEXT:
        ln_a, ln_b = next_ln_sums(pa_ptr, pb_ptr, e_n, loc, lok, N, M, NJ, NORM, FOLD, BN, NJP)
        gh = dh_next(acts_ptr, w_ptr, invh_ptr, ihrows, das_ptr, e1_ptr, e2_ptr, pa_ptr, pb_ptr, dql_ptr, dq1_ptr,
                     dq2_ptr, gh, loc, lok, chn, cok, e_n, ln_a, ln_b, M, GC, KD, NJ,
                     NORM, MEMCONV, PRECISION, BN, BM, BG, KDP, NJP, UNROLL, DEFER)
        dci = dc_from_next(cs_ptr, acts_ptr, mean_ptr, rstd_ptr, invc_ptr, icrows, dcs_ptr, pa_ptr, pb_ptr, dci,
                           loc, lok, chn, cok, e_n, bt, ln_a, ln_b, M, GC, KD, NJ, R, NORM, MEMCONV, KDP, NJP, UNROLL)
    gh, dci = grads_from_outside(dout_ptr, dht_ptr, dct_ptr, gh, dci, s, b, ex, loc, chn, own, T, DELAY, N, M)
    # This step's own values.
    own_r = e_s + loc
    ap = own_r[:, None] * GC + chn[None, :]
    g = tl.load(acts_ptr + ap, mask=own, other=0.0)
    i = tl.load(acts_ptr + ap + M, mask=own, other=0.0)
    f = tl.load(acts_ptr + ap + 2 * M, mask=own, other=0.0)
    o = tl.load(acts_ptr + ap + 3 * M, mask=own, other=0.0)
    mp = own_r[:, None] * M + chn[None, :]
    c = tl.load(cs_ptr + bt * M + mp, mask=own, other=0.0)  # cs[s+1] = c_s
    dc, da_o, e1v, e2v = cell_backward(mean_ptr, rstd_ptr, gain_ptr, bias_ptr, dns_ptr, pa_ptr, pb_ptr, gh, dci, o,
                                       c, loc, lok, chn, own, own_r, jt, M, NJ, NORM, BN, BM)
    tl.store(dcs_ptr + mp, dc, mask=own)
    if MEMCONV:  # c_{s-1} is in cs[s], the rows of step s
        cprev = memory_cell_backward(cs_ptr, acts_ptr, cidx_ptr, crows, dql_ptr, dq1_ptr, dq2_ptr, dc, f, e1v, e2v,
                                     loc, lok, chn, own, jt, e_s, M, GC, KD, NJ, NORM, BN, BM, KDP, UNROLL)
    else:
        cprev = tl.load(cs_ptr + mp, mask=own, other=0.0)
    store_gate_grads(das_ptr, e1_ptr, e2_ptr, dc, da_o, e1v, e2v, g, i, f, cprev, own_r, chn, own, M, GC, NORM,
                     BN, BM)


@triton.jit(do_not_specialize=["s", "T", "DELAY", "B", "N", "M", "GC", "KD", "NJ", "R"])
def backward_step(cs_ptr, acts_ptr, mean_ptr, rstd_ptr, w_ptr, gain_ptr, bias_ptr, cidx_ptr, invh_ptr, invc_ptr,
                  das_ptr, e1_ptr, e2_ptr, dcs_ptr, dns_ptr, pa_ptr, pb_ptr, dql_ptr, dq1_ptr, dq2_ptr,
                  dout_ptr, dht_ptr, dct_ptr,
                  s, T, DELAY, B, N, M, GC, KD, NJ, R,
                  NORM: tl.constexpr, MEMCONV: tl.constexpr, HAS_NEXT: tl.constexpr,
                  FOLD: tl.constexpr, PRECISION: tl.constexpr,
                  BN: tl.constexpr, BM: tl.constexpr, BG: tl.constexpr, KDP: tl.constexpr, NJP: tl.constexpr,
                  UNROLL: tl.constexpr, DEFER: tl.constexpr = 0):
    """The backward of step s (launched for s = S-1 .. 0)."""
    ihrows, crows, icrows = index_maps(invh_ptr, cidx_ptr, invc_ptr, B, N, KD, R, BN, FOLD, KDP, UNROLL > 1)
    backward_body(cs_ptr, acts_ptr, mean_ptr, rstd_ptr, w_ptr, gain_ptr, bias_ptr, cidx_ptr, invh_ptr, invc_ptr,
                  das_ptr, e1_ptr, e2_ptr, dcs_ptr, dns_ptr, pa_ptr, pb_ptr, dql_ptr, dq1_ptr, dq2_ptr,
                  dout_ptr, dht_ptr, dct_ptr, ihrows, crows, icrows, s, T, DELAY, B, N, M, GC, KD, NJ, R,
                  NORM, MEMCONV, HAS_NEXT, FOLD, PRECISION, BN, BM, BG, KDP, NJP, UNROLL, DEFER)


@triton.jit(do_not_specialize=["S", "T", "DELAY", "B", "N", "M", "GC", "KD", "NJ", "R"])
def backward_persistent(cs_ptr, acts_ptr, mean_ptr, rstd_ptr, w_ptr, gain_ptr, bias_ptr, cidx_ptr, invh_ptr,
                        invc_ptr, das_ptr, e1_ptr, e2_ptr, dcs_ptr, dns_ptr, pa_ptr, pb_ptr, dql_ptr, dq1_ptr,
                        dq2_ptr, dout_ptr, dht_ptr, dct_ptr, sem_ptr,
                        S, T, DELAY, B, N, M, GC, KD, NJ, R,
                        NORM: tl.constexpr, MEMCONV: tl.constexpr, FOLD: tl.constexpr, PRECISION: tl.constexpr,
                        BN: tl.constexpr, BM: tl.constexpr, BG: tl.constexpr, KDP: tl.constexpr,
                        NJP: tl.constexpr, UNROLL: tl.constexpr,
                        SYNC: tl.constexpr = 0, DEPW: tl.constexpr = 1, flags_ptr=None, deps_ptr=None,
                        DEFER: tl.constexpr = 0):
    """Steps S-1 .. 0 in one launch, a grid barrier between them (step s reads step s+1's
    dA, dc and partial sums, written by other programs), or with SYNC the step flags of the
    programs it reads (``common.step_flags``; turn r waits for their turn r - 1). The index
    maps' rows that the unrolled tile sets preload are loaded once, before the loop."""
    producers = producer_row(deps_ptr, SYNC, DEPW)
    ihrows, crows, icrows = index_maps(invh_ptr, cidx_ptr, invc_ptr, B, N, KD, R, BN, FOLD, KDP, UNROLL > 1)
    backward_body(cs_ptr, acts_ptr, mean_ptr, rstd_ptr, w_ptr, gain_ptr, bias_ptr, cidx_ptr, invh_ptr, invc_ptr,
                  das_ptr, e1_ptr, e2_ptr, dcs_ptr, dns_ptr, pa_ptr, pb_ptr, dql_ptr, dq1_ptr, dq2_ptr,
                  dout_ptr, dht_ptr, dct_ptr, ihrows, crows, icrows, S - 1, T, DELAY, B, N, M, GC, KD, NJ, R,
                  NORM, MEMCONV, False, FOLD, PRECISION, BN, BM, BG, KDP, NJP, UNROLL, DEFER)
    for r in range(1, S):
        step_sync(sem_ptr, flags_ptr, producers, r, SYNC)
        backward_body(cs_ptr, acts_ptr, mean_ptr, rstd_ptr, w_ptr, gain_ptr, bias_ptr, cidx_ptr, invh_ptr,
                      invc_ptr, das_ptr, e1_ptr, e2_ptr, dcs_ptr, dns_ptr, pa_ptr, pb_ptr, dql_ptr, dq1_ptr,
                      dq2_ptr, dout_ptr, dht_ptr, dct_ptr, ihrows, crows, icrows, S - 1 - r, T, DELAY, B, N, M, GC,
                      KD, NJ, R, NORM, MEMCONV, True, FOLD, PRECISION, BN, BM, BG, KDP, NJP, UNROLL, DEFER)



@triton.jit
def index_maps(invh_ptr, cidx_ptr, invc_ptr, B, N, KD, R, BN: tl.constexpr, FOLD: tl.constexpr,
               KDP: tl.constexpr, PRELOAD: tl.constexpr):
    """This tile's rows of the three maps the backward reads (``common.tile_map``; the inverse
    cell map has R <= KDP entries a row where PRELOAD, checked by the host)."""
    return (tile_map(invh_ptr, B, N, KD, -1, BN, FOLD, KDP, PRELOAD),
            tile_map(cidx_ptr, B, N, KD, 0, BN, FOLD, KDP, PRELOAD),
            tile_map(invc_ptr, B, N, R, -1, BN, FOLD, KDP, PRELOAD))


@triton.jit
def next_ln_sums(pa_ptr, pb_ptr, e_n, loc, lok, N, M, NJ, NORM: tl.constexpr, FOLD: tl.constexpr, BN: tl.constexpr,
                 NJP: tl.constexpr):
    """LN's alpha and beta of step s+1 (a scalar, or one per row with the batch folded); 0 and 0
    otherwise (CN's are per row: ``row_sums``)."""
    ln_a = tl.zeros([1], pa_ptr.dtype.element_ty).sum(0)
    ln_b = ln_a
    if NORM == 2:
        if FOLD:
            ln_a, ln_b = ln_sums_rows(pa_ptr, pb_ptr, e_n + loc * 0, lok, N, M, NJ, NJP)
        else:
            ln_a, ln_b = ln_sums(pa_ptr, pb_ptr, e_n * NJ, N, M, NJ, BN, NJP)
    return ln_a, ln_b


@triton.jit
def grads_from_outside(dout_ptr, dht_ptr, dct_ptr, gh, dci, s, b, ex, loc, chn, own, T, DELAY, N, M):
    """``gh``, ``dci`` + the gradients from outside: y read at the output corner (step
    t + L - 1), the final state at step T - 1."""
    t = s - DELAY
    om = own & ((loc == N - 1) & (loc * 0 + t >= 0))[:, None]
    orow = b * T + tl.maximum(t, 0) + loc * 0  # dout (B, T, M) of each row's example
    gh += tl.load(dout_ptr + orow[:, None] * M + chn[None, :], mask=om, other=0.0)
    lm = own & (loc * 0 + s == T - 1)[:, None]
    so = (ex + loc)[:, None] * M + chn[None, :]
    gh += tl.load(dht_ptr + so, mask=lm, other=0.0)
    dci += tl.load(dct_ptr + so, mask=lm, other=0.0)
    return gh, dci


@triton.jit
def dh_next(acts_ptr, w_ptr, invh_ptr, hrows, das_ptr, e1_ptr, e2_ptr, pa_ptr, pb_ptr, dql_ptr, dq1_ptr, dq2_ptr,
            gh, loc, lok, chn, cok, e_n, ln_a, ln_b, M, GC, KD, NJ,
            NORM: tl.constexpr, MEMCONV: tl.constexpr, PRECISION: tl.constexpr, BN: tl.constexpr,
            BM: tl.constexpr, BG: tl.constexpr, KDP: tl.constexpr, NJP: tl.constexpr, UNROLL: tl.constexpr,
            DEFER: tl.constexpr):
    """``gh`` + dL/dh_s through step s+1: ``dh_deferred`` (DEFER) or ``dh_from_next``."""
    if DEFER:
        return dh_deferred(acts_ptr, w_ptr, invh_ptr, hrows, das_ptr, e1_ptr, e2_ptr, pa_ptr, pb_ptr, dql_ptr,
                           dq1_ptr, dq2_ptr, gh, loc, lok, chn, cok, e_n, ln_a, ln_b, M, GC, KD, NJ,
                           NORM, MEMCONV, BN, BM, BG, KDP, NJP, UNROLL)
    else:
        return dh_from_next(acts_ptr, w_ptr, invh_ptr, hrows, das_ptr, e1_ptr, e2_ptr, pa_ptr, pb_ptr, dql_ptr,
                            dq1_ptr, dq2_ptr, gh, loc, lok, chn, cok, e_n, ln_a, ln_b, M, GC, KD, NJ,
                            NORM, MEMCONV, PRECISION, BN, BG, KDP, NJP, UNROLL)


@triton.jit
def dh_from_next(acts_ptr, w_ptr, invh_ptr, hrows, das_ptr, e1_ptr, e2_ptr, pa_ptr, pb_ptr, dql_ptr, dq1_ptr, dq2_ptr,
                 gh, loc, lok, chn, cok, e_n, ln_a, ln_b, M, GC, KD, NJ,
                 NORM: tl.constexpr, MEMCONV: tl.constexpr, PRECISION: tl.constexpr, BN: tl.constexpr,
                 BG: tl.constexpr, KDP: tl.constexpr, NJP: tl.constexpr, UNROLL: tl.constexpr):
    """``gh`` + dL/dh_s through step s+1: for each window that reads h_s (the inverse hidden map),
    W^h times that neighbour's dA_{s+1}, completed with the norm's and the Q gradient's deferred
    terms as it is read."""
    kq = tl.arange(0, KDP)
    M4 = 4 * M
    # dL/dh_s = sum over the windows that read h_s of W^h dA_{s+1} (inverse hidden map).
    for k in tl.range(0, KD, 1, loop_unroll_factor=UNROLL):
        src = map_entry(hrows, invh_ptr, loc, lok, k, KD, -1, KDP, UNROLL > 1)
        sok = src >= 0
        srow = e_n + tl.where(sok, src, 0)
        alpha, beta = row_sums(pa_ptr, pb_ptr, srow, sok, ln_a, ln_b, M, NJ, NORM, NJP)
        for g0 in range(0, M4, BG):
            gcol = g0 + tl.arange(0, BG)
            gok = gcol < M4
            da = gate_grad(das_ptr, e1_ptr, e2_ptr, srow[:, None], gcol[None, :], sok[:, None] & gok[None, :],
                           alpha[:, None], beta[:, None], GC, M4, NORM)
            wt = tl.load(w_ptr + (k * M + chn[None, :]) * GC + gcol[:, None], mask=gok[:, None] & cok[None, :],
                         other=0.0)
            gh = mma(da, wt, gh, PRECISION)
        if MEMCONV:
            daq = q_logit_grad(acts_ptr, dql_ptr, dq1_ptr, dq2_ptr, srow, sok, alpha, beta, GC, KD, NJ, 4 * M,
                               NORM, BN, KDP)
            wq = tl.load(w_ptr + (k * M + chn[None, :]) * GC + M4 + kq[:, None],
                         mask=(kq < KD)[:, None] & cok[None, :], other=0.0)
            gh = mma(daq, wq, gh, PRECISION)
    return gh


@triton.jit
def gate_grad(das_ptr, e1_ptr, e2_ptr, row, col, msk, alpha, beta, GC, M4, NORM: tl.constexpr):
    """dA of step s+1's gate columns at rows ``row`` and columns ``col`` (shaped to broadcast
    into the block wanted; ``alpha``, ``beta`` shaped as ``row``), completed with the norm's
    deferred terms."""
    da = tl.load(das_ptr + row * GC + col, mask=msk, other=0.0)
    if NORM != 0:
        eo = row * M4 + col
        da = (da - alpha * tl.load(e1_ptr + eo, mask=msk, other=0.0)
              - beta * tl.load(e2_ptr + eo, mask=msk, other=0.0))
    return da


@triton.jit
def q_logit_grad(acts_ptr, dql_ptr, dq1_ptr, dq2_ptr, srow, sok, alpha, beta, GC, KD, NJ, M4,
                 NORM: tl.constexpr, BN: tl.constexpr, KDP: tl.constexpr):
    """dL/d(Q logits) at rows ``srow`` of step s+1 (BN, KDP): its channel tiles' partial sums
    of the Q gradient, completed with the norm's deferred terms, through the softmax."""
    kq = tl.arange(0, KDP)
    qm = sok[:, None] & (kq < KD)[None, :]
    q = tl.load(acts_ptr + srow[:, None] * GC + M4 + kq[None, :], mask=qm, other=0.0)
    qo = (srow[:, None] * NJ) * KDP + kq[None, :]
    dq = tl.zeros((BN, KDP), dql_ptr.dtype.element_ty)
    for j in range(NJ):
        dq += tl.load(dql_ptr + qo + j * KDP, mask=qm, other=0.0)
        if NORM != 0:
            dq -= (alpha[:, None] * tl.load(dq1_ptr + qo + j * KDP, mask=qm, other=0.0)
                   + beta[:, None] * tl.load(dq2_ptr + qo + j * KDP, mask=qm, other=0.0))
    return q * (dq - tl.sum(q * dq, 1)[:, None])  # softmax backward


@triton.jit
def dh_deferred(acts_ptr, w_ptr, invh_ptr, hrows, das_ptr, e1_ptr, e2_ptr, pa_ptr, pb_ptr, dql_ptr, dq1_ptr, dq2_ptr,
                gh, loc, lok, chn, cok, e_n, ln_a, ln_b, M, GC, KD, NJ,
                NORM: tl.constexpr, MEMCONV: tl.constexpr, BN: tl.constexpr, BM: tl.constexpr,
                BG: tl.constexpr, KDP: tl.constexpr, NJP: tl.constexpr, UNROLL: tl.constexpr):
    """``dh_from_next`` with its reductions deferred, as ``forward.window_deferred``: the
    neighbours' dA loaded as (BN, BG, 1) and W^h's rows as (1, BG, BM) (the Q columns' as
    (1, KDP, BM)), their products added elementwise, each accumulator summed once after the
    loop."""
    dt = w_ptr.dtype.element_ty
    kq = tl.arange(0, KDP)[None, :, None]
    ch = chn[None, None, :]
    cok3 = cok[None, None, :]
    M4 = 4 * M
    acc = tl.zeros((BN, BG, BM), dt)
    accq = tl.zeros((BN, KDP, BM), dt)
    for k in tl.range(0, KD, 1, loop_unroll_factor=UNROLL):
        src = map_entry(hrows, invh_ptr, loc, lok, k, KD, -1, KDP, UNROLL > 1)
        sok = src >= 0
        srow = e_n + tl.where(sok, src, 0)
        alpha, beta = row_sums(pa_ptr, pb_ptr, srow, sok, ln_a, ln_b, M, NJ, NORM, NJP)
        srow3 = srow[:, None, None]
        for g0 in range(0, M4, BG):
            gcol = (g0 + tl.arange(0, BG))[None, :, None]  # (1, BG, 1)
            gok = gcol < M4
            da = gate_grad(das_ptr, e1_ptr, e2_ptr, srow3, gcol, sok[:, None, None] & gok, alpha[:, None, None],
                           beta[:, None, None], GC, M4, NORM)
            acc += da * tl.load(w_ptr + (k * M + ch) * GC + gcol, mask=gok & cok3, other=0.0)
        if MEMCONV:
            daq = q_logit_grad(acts_ptr, dql_ptr, dq1_ptr, dq2_ptr, srow, sok, alpha, beta, GC, KD, NJ, M4,
                               NORM, BN, KDP)
            wq = tl.load(w_ptr + (k * M + ch) * GC + M4 + kq, mask=(kq < KD) & cok3, other=0.0)
            accq += daq[:, :, None] * wq
    return gh + tl.sum(acc, 1) + tl.sum(accq, 1)


@triton.jit
def memory_cell_backward(cs_ptr, acts_ptr, cidx_ptr, crows, dql_ptr, dq1_ptr, dq2_ptr, dc, f, e1v, e2v,
                         loc, lok, chn, own, jt, e_s, M, GC, KD, NJ, NORM: tl.constexpr, BN: tl.constexpr,
                         BM: tl.constexpr, KDP: tl.constexpr, UNROLL: tl.constexpr):
    """The memory-cell convolution's backward at step s: stores this channel tile's partial sums
    of the Q gradient (and, with a norm, of the rows alpha and beta multiply); returns
    cprev = sum_k Q_k c_{s-1} at the window's cells, the forget gate's input."""
    dt = cs_ptr.dtype.element_ty
    kq = tl.arange(0, KDP)
    qok = (kq < KD)[None, :]
    own_r = e_s + loc
    M4 = 4 * M
    q = tl.load(acts_ptr + own_r[:, None] * GC + M4 + kq[None, :], mask=lok[:, None] & qok, other=0.0)
    cprev = tl.zeros((BN, BM), dt)
    dq = tl.zeros((BN, KDP), dt)
    dq1 = tl.zeros((BN, KDP), dt)
    dq2 = tl.zeros((BN, KDP), dt)
    dcf = dc * f
    for k in tl.range(0, KD, 1, loop_unroll_factor=UNROLL):
        cl = map_entry(crows, cidx_ptr, loc, lok, k, KD, 0, KDP, UNROLL > 1)
        cw = tl.load(cs_ptr + (e_s + cl)[:, None] * M + chn[None, :], mask=own, other=0.0)
        sel = kq[None, :] == k
        cprev += tl.sum(tl.where(sel, q, 0.0), 1)[:, None] * cw
        dq += tl.where(sel, tl.sum(cw * dcf, 1)[:, None], 0.0)
        if NORM != 0:
            dq1 += tl.where(sel, tl.sum(cw * e1v * f, 1)[:, None], 0.0)
            dq2 += tl.where(sel, tl.sum(cw * e2v * f, 1)[:, None], 0.0)
    qo = (own_r[:, None] * NJ + jt) * KDP + kq[None, :]
    qm = lok[:, None] & qok
    tl.store(dql_ptr + qo, dq, mask=qm)
    if NORM != 0:
        tl.store(dq1_ptr + qo, dq1, mask=qm)
        tl.store(dq2_ptr + qo, dq2, mask=qm)
    return cprev


@triton.jit
def dc_from_next(cs_ptr, acts_ptr, mean_ptr, rstd_ptr, invc_ptr, icrows, dcs_ptr, pa_ptr, pb_ptr, dci, loc, lok,
                 chn, cok, e_n, bt, ln_a, ln_b, M, GC, KD, NJ, R, NORM: tl.constexpr, MEMCONV: tl.constexpr,
                 KDP: tl.constexpr, NJP: tl.constexpr, UNROLL: tl.constexpr):
    """``dci`` + dL/dc_s through step s+1 (its dc completed with the norm's deferred terms)."""
    M4 = 4 * M
    # dL/dc_s through step s+1's memory-cell convolution (inverse cell map) or, without
    # it, straight through the forget gate (c_{s+1} is in cs[s+2], bt rows after step s+1's).
    if MEMCONV:
        for r in tl.range(0, R, 1, loop_unroll_factor=UNROLL):
            ent = map_entry(icrows, invc_ptr, loc, lok, r, R, -1, KDP, UNROLL > 1)
            eok = ent >= 0
            el = tl.where(eok, ent, 0)
            n2 = el // KD
            k2 = el % KD
            qv = tl.load(acts_ptr + (e_n + n2) * GC + M4 + k2, mask=eok, other=0.0)
            dci += qv[:, None] * next_dcf(dcs_ptr, acts_ptr, cs_ptr, mean_ptr, rstd_ptr, pa_ptr, pb_ptr, e_n + n2,
                                           bt, eok, chn, cok, ln_a, ln_b, M, GC, NJ, NORM, NJP)
    else:
        dci += next_dcf(dcs_ptr, acts_ptr, cs_ptr, mean_ptr, rstd_ptr, pa_ptr, pb_ptr, e_n + loc, bt, lok,
                         chn, cok, ln_a, ln_b, M, GC, NJ, NORM, NJP)
    return dci


@triton.jit
def cell_backward(mean_ptr, rstd_ptr, gain_ptr, bias_ptr, dns_ptr, pa_ptr, pb_ptr, gh, dci, o, c, loc, lok, chn,
                  own, own_r, jt, M, NJ, NORM: tl.constexpr, BN: tl.constexpr, BM: tl.constexpr):
    """Through h_s = tanh(N(c_s)) o_s: (dc_s without the norm's deferred terms, dA of O, and the
    rows that alpha and beta multiply, e1 and e2); stores dL/dN(c_s) and the partial sums of
    gain*dn and gain*dn*xhat (with a norm)."""
    dt = gh.dtype
    mp = own_r[:, None] * M + chn[None, :]
    if NORM != 0:
        mean = tl.load(mean_ptr + own_r, mask=lok, other=0.0)
        rstd = tl.load(rstd_ptr + own_r, mask=lok, other=0.0)
        gofs = loc[:, None] * M + chn[None, :]
        gain = tl.load(gain_ptr + gofs, mask=own, other=0.0)
        xhat = (c - mean[:, None]) * rstd[:, None]
        x = xhat * gain + tl.load(bias_ptr + gofs, mask=own, other=0.0)
    else:
        x = c
    tn = tanh(x)
    da_o = gh * tn * o * (1.0 - o)
    dn = gh * o * (1.0 - tn * tn)  # dL/dN(c_s)
    if NORM != 0:
        tl.store(dns_ptr + mp, dn, mask=own)
        gd = tl.where(own, gain * dn, 0.0)
        dc = dci + rstd[:, None] * gd  # the norm's local term; alpha/beta terms deferred
        po = own_r * NJ + jt
        tl.store(pa_ptr + po, tl.sum(gd, 1), mask=lok)
        tl.store(pb_ptr + po, tl.sum(gd * xhat, 1), mask=lok)
        e1v = tl.zeros((BN, BM), dt) + rstd[:, None]  # d dc / d(-alpha)
        e2v = rstd[:, None] * xhat  # d dc / d(-beta)
    else:
        dc = dci + dn
        e1v = dc  # (no norm: not read)
        e2v = dc
    return dc, da_o, e1v, e2v


@triton.jit
def store_gate_grads(das_ptr, e1_ptr, e2_ptr, dc, da_o, e1v, e2v, g, i, f, cprev, own_r, chn, own, M, GC,
                     NORM: tl.constexpr, BN: tl.constexpr, BM: tl.constexpr):
    """dA_s of G, I, F (through c_s = g*i + cprev*f) and O, and with a norm the rows e1, e2 that
    alpha and beta multiply in each (completed by the reader of step s)."""
    dt = dc.dtype
    M4 = 4 * M
    ap = own_r[:, None] * GC + chn[None, :]
    fg = i * (1.0 - g * g)
    fi = g * i * (1.0 - i)
    ff = cprev * f * (1.0 - f)
    tl.store(das_ptr + ap, dc * fg, mask=own)
    tl.store(das_ptr + ap + M, dc * fi, mask=own)
    tl.store(das_ptr + ap + 2 * M, dc * ff, mask=own)
    tl.store(das_ptr + ap + 3 * M, da_o, mask=own)
    if NORM != 0:
        ep = own_r[:, None] * M4 + chn[None, :]
        zero = tl.zeros((BN, BM), dt)
        tl.store(e1_ptr + ep, e1v * fg, mask=own)
        tl.store(e1_ptr + ep + M, e1v * fi, mask=own)
        tl.store(e1_ptr + ep + 2 * M, e1v * ff, mask=own)
        tl.store(e1_ptr + ep + 3 * M, zero, mask=own)
        tl.store(e2_ptr + ep, e2v * fg, mask=own)
        tl.store(e2_ptr + ep + M, e2v * fi, mask=own)
        tl.store(e2_ptr + ep + 2 * M, e2v * ff, mask=own)
        tl.store(e2_ptr + ep + 3 * M, zero, mask=own)
