"""``triton``: the tLSTM sequence with ONE fused Triton kernel per timestep, forward and backward.

Same computation as ``eager`` (:mod:`tlstm_bench.models.tlstm`, SPEC section 3) and the
same structure as ``fast`` (:mod:`tlstm_bench.models.fast_tlstm`): one autograd Function
over the whole (T+L-1)-step sequence, preallocated buffers, a hand-written backward, and
the gradient of W^h deferred to one product over all steps. What changes is the step:
every location's whole step (window gather, W^h product, activations, softmax Q,
memory-cell convolution, LN/CN, new c) is one kernel launch, and so is every backward
step. At batch 1 a GPU spends a tLSTM step launching kernels, not computing (``fast``
issues a dozen or more per step); here it is 1 forward + 1 backward per timestep, plus
a number per sequence that does not grow with T or L (buffer set-up, one forward
"finisher" launch, and 10-30 torch ops after the backward loop, by configuration; the
weight-gradient product is split into chunks only past ~64 MB of windows, as in
``fast``).

Geometry comes only from the model's index maps
-----------------------------------------------
The kernels never compute window offsets from K or D. The forward reads the model's
``hidden_index`` (which slot of [0, z_s, h_{s-1}] each location reads for each kernel
entry) and ``cell_index`` (which memory-cell location). The backward reads their
inverses, built on the host from those same maps (``_inverse_maps``): ``inv_hidden[t,
k]`` is the location whose entry k reads hidden location t (unique for every k, since a
window is a translation; checked), and ``inv_cell[t, :]`` lists every (location, entry)
that reads cell location t (replicate padding makes these many-to-one). Any change to
the windows that keeps their shapes (the ``window`` knob changes ``cell_index`` only)
is inherited without touching a kernel.

Design: programs, and how LN/CN fit into one launch per step
------------------------------------------------------------
A program owns a tile of BN locations of one example and a tile of BM channels: grid
(B, ceil(N/BN), ceil(M/BM)). At batch 1 and M = 100 that is still several programs per
step (more SMs busy), and each program does a real matrix product (BN window rows x
the W^h columns of its channels, ``tl.dot``), so one W^h element read serves BN
locations. Programs never wait for each other inside a launch. Everything that needs
a reduction across programs is *deferred to the next launch*, which has to wait for
this one anyway:

* Forward. Launch s computes gates and c_s for its tile and writes per-(location,
  channel tile) partial statistics of c_s (mean and sum of squared deviations). It
  does NOT compute h_s: h_s = tanh(N(c_s)) * o_s needs LN's statistics over every
  location of the example (SPEC section 5), i.e. every program of launch s. Launch
  s+1 combines the partials (Chan's parallel formula: exact and stable, no atomics) and
  evaluates h_s on the fly while it gathers its windows; it also writes h_s of its own
  tile (kept for the outputs, the final state and the weight gradient) and the combined
  mean/rstd. One extra "finisher" launch per sequence writes h of the last step. CN
  uses the same path with per-location statistics, and norm none skips them. Q's
  softmax needs all <K> logits of a location: each channel-tile program computes them
  (BN x <K> extra columns of the product, cheap).
* Backward. Launch s needs dL/dh_s, which is W^h applied to the pre-activation
  gradients dA_{s+1} of the neighbouring locations: it gathers them with
  ``inv_hidden`` and multiplies by W^h (a gather, not a scatter, so no atomics and the
  result is deterministic); dL/dc_s gathers q_{s+1} * (dc_{s+1} * f_{s+1}) with
  ``inv_cell``. Two things of dA_s need a reduction over all channels of a location
  (the Q gradient, dq_k = sum_m Cwin * dc * f) or over the whole example (LN's backward
  terms mean(gain*dn) and mean(gain*dn*xhat)): both are linear in dc, so launch s
  stores dA_s computed without them plus the two coefficient rows E1, E2 they multiply
  (dA = dA_local - alpha*E1 - beta*E2) and per-tile partial sums of alpha, beta and dq;
  the consumer, launch s-1, completes them on the fly. After the loop the torch code
  completes every dA_s the same way (a handful of tensor ops per sequence) for the
  deferred products: dW^h = sum_s window_s^T dA_s (one product, chunked as ``fast``
  does), db^h, the norm gain/bias gradients, dz (through the few window entries that
  read z) and the initial-state gradients.

Alternatives considered: one program per example (loops over locations, LN local) puts
a whole step on one SM at batch 1 (3D at L = 10 is 100 locations x 900 x 409: far too
slow, and the runtime would not stay flat in L); a grid-wide barrier inside one launch
deadlocks under the interpreter (programs run one after another) and needs co-resident
programs; two launches per step for LN would break the 1 + 1 count.

Precision and coverage
----------------------
float32 and float64 (float64 checked under the interpreter only). Products use
``input_precision="ieee"`` (no TF32), so results match ``eager`` on a GPU to float32
rounding. tanh is written with ``exp`` (the interpreter has no libdevice), accurate to
about 1e-7 absolute. Every configuration the knobs allow: D >= 2, K >= 2, memory
convolution on/off, norm none/ln/cn, any batch, any M (tiles and loops over M and the
gate channels). Double backward is not supported (``once_differentiable``): use
``eager``. Other dtypes are refused with a one-line error naming ``fast``.

Running it
----------
On a CUDA GPU with ``pip install -e ".[gpu]"``. On a CPU the kernels run only under
Triton's interpreter, ``TRITON_INTERPRET=1`` set before this module is first imported:
that is how the tests check it against ``eager``; it is slow and for testing only.

Not yet measured: GPU timings (no GPU was available to its author). The tile sizes
(``_tiles``) and the persistent kernel over timesteps (the stretch goal: not tried) are
left to be tuned against ``benchmarks/gpu_evidence.py`` on an H100/H200; see
``docs/triton.md``.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from ..errors import UserError
from .tlstm import HIDDEN_OFFSET, INPUT_SLOT, NORM_EPS, TLSTM, SequenceShapes, TLSTMState

# Whether the kernels below were defined for Triton's CPU interpreter (decided when
# triton.jit runs, i.e. at this module's import).
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

_INPUT = tl.constexpr(INPUT_SLOT)
_HOFF = tl.constexpr(HIDDEN_OFFSET)


# ---- small device helpers ------------------------------------------------------------

@triton.jit
def _tanh(x):
    # tanh from exp: the interpreter has no libdevice. Abs error ~1e-7 in float32.
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


@triton.jit
def _tile_counts(M, NJ, BM: tl.constexpr, NJP: tl.constexpr):
    """Channels in each of the NJ channel tiles (0 past the last)."""
    j = tl.arange(0, NJP)
    return tl.where(j < NJ, tl.minimum(M - j * BM, BM), 0).to(tl.float32)


@triton.jit
def _cn_stats(pmean_ptr, pm2_ptr, base, rows, ok, M, NJ, eps, BM: tl.constexpr, NJP: tl.constexpr):
    """Mean and 1/std over the M channels of each location in ``rows`` (CN), combining the
    per-channel-tile partials (mean, sum of squared deviations) by Chan's formula."""
    j = tl.arange(0, NJP)
    cnt = _tile_counts(M, NJ, BM, NJP)
    msk = ok[:, None] & (j < NJ)[None, :]
    off = base + rows[:, None] * NJ + j[None, :]
    pm = tl.load(pmean_ptr + off, mask=msk, other=0.0)
    p2 = tl.load(pm2_ptr + off, mask=msk, other=0.0)
    mean = tl.sum(pm * cnt[None, :], 1) / M
    d = pm - mean[:, None]
    var = tl.sum(p2 + cnt[None, :] * d * d, 1) / M
    return mean, 1.0 / tl.sqrt(var + eps)


@triton.jit
def _ln_stats(pmean_ptr, pm2_ptr, base, N, M, NJ, eps, BN: tl.constexpr, BM: tl.constexpr,
              NJP: tl.constexpr):
    """Mean and 1/std over all N locations and M channels of one example (LN)."""
    dt = pmean_ptr.dtype.element_ty
    j = tl.arange(0, NJP)
    cnt = _tile_counts(M, NJ, BM, NJP)
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
def _row_stats(pmean_ptr, pm2_ptr, base, rows, ok, ln_mean, ln_rstd, M, NJ, eps, NORM: tl.constexpr,
               BM: tl.constexpr, NJP: tl.constexpr):
    """Per-row (mean, rstd) of the previous step's c: CN per location, LN the example's."""
    if NORM == 1:
        mean, rstd = _cn_stats(pmean_ptr, pm2_ptr, base, rows, ok, M, NJ, eps, BM, NJP)
    else:
        mean = tl.zeros(rows.shape, ln_mean.dtype) + ln_mean
        rstd = tl.zeros(rows.shape, ln_rstd.dtype) + ln_rstd
    return mean, rstd


@triton.jit
def _hidden(cs_ptr, acts_ptr, gain_ptr, bias_ptr, c_base, a_base, loc, chan, msk, mean, rstd, M, GC,
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
    return _tanh(x) * o


# ---- the forward step ----------------------------------------------------------------

# Long on purpose (as _backward_step below): one kernel launch per step, whose phases (finish
# h_{s-1}, gather the windows, the gate matmul, the cell update, the norm's partial statistics)
# share the tile's offsets, masks and loaded blocks in registers. @triton.jit helpers would have
# to take a dozen of those each; the self-contained pieces (activations, the cell update, the
# norm's backward) are helpers already. tests/test_equivalence.py checks both against the oracle.
@triton.jit(do_not_specialize=["s"])
def _forward_step(z_ptr, hs_ptr, cs_ptr, acts_ptr, pmean_ptr, pm2_ptr, mean_ptr, rstd_ptr,
                  w_ptr, bh_ptr, gain_ptr, bias_ptr, hidx_ptr, cidx_ptr,
                  s, S, N, M, GC, KD, NJ, eps,
                  NORM: tl.constexpr, MEMCONV: tl.constexpr, FIRST: tl.constexpr, FINISH: tl.constexpr,
                  BN: tl.constexpr, BM: tl.constexpr, BK: tl.constexpr, KDP: tl.constexpr,
                  NJP: tl.constexpr):
    """Launch s: finish h_{s-1} of this tile (unless FIRST), then step s (unless FINISH).

    Buffers (contiguous): z (B, S, M); hs, cs (S+1, B, N, M) with hs[s] = h_{s-1},
    cs[s] = c_{s-1} (index 0: the given state); acts (S, B, N, GC) post-activation
    G, I, F, O, Q; partial statistics (S, B, N, NJ); mean, rstd (S, B, N).
    """
    b = tl.program_id(0)
    B = tl.num_programs(0)
    loc = tl.program_id(1) * BN + tl.arange(0, BN)
    jt = tl.program_id(2)
    chn = jt * BM + tl.arange(0, BM)
    lok = loc < N
    cok = chn < M
    own = lok[:, None] & cok[None, :]
    # (scalar conditions are broadcast to vectors before they meet a mask: the
    # interpreter rejects `vector & scalar` masks)
    first_tile = (loc * 0 + jt) == 0
    dt = w_ptr.dtype.element_ty
    s64 = s.to(tl.int64)
    c_prev = (s64 * B + b) * N * M  # cs[s] = c_{s-1}; hs[s] = h_{s-1} (same layout)
    a_prev = ((s64 - 1) * B + b) * N * GC  # acts of step s-1
    p_prev = ((s64 - 1) * B + b) * N * NJ  # partial statistics of step s-1
    ln_mean = tl.zeros([1], dt).sum(0)
    ln_rstd = ln_mean + 1.0
    if not FIRST:
        if NORM == 2:
            ln_mean, ln_rstd = _ln_stats(pmean_ptr, pm2_ptr, p_prev, N, M, NJ, eps, BN, BM, NJP)
        mean_o, rstd_o = _row_stats(pmean_ptr, pm2_ptr, p_prev, loc, lok, ln_mean, ln_rstd, M, NJ, eps,
                                    NORM, BM, NJP)
        h = _hidden(cs_ptr, acts_ptr, gain_ptr, bias_ptr, c_prev, a_prev, loc, chn, own, mean_o, rstd_o,
                    M, GC, NORM)
        tl.store(hs_ptr + c_prev + loc[:, None] * M + chn[None, :], h, mask=own)
        if NORM != 0:
            so = ((s64 - 1) * B + b) * N + loc
            tl.store(mean_ptr + so, mean_o, mask=lok & first_tile)
            tl.store(rstd_ptr + so, rstd_o, mask=lok & first_tile)
    if not FINISH:
        kq = tl.arange(0, KDP)
        acc_g = tl.zeros((BN, BM), dt)
        acc_i = tl.zeros((BN, BM), dt)
        acc_f = tl.zeros((BN, BM), dt)
        acc_o = tl.zeros((BN, BM), dt)
        acc_q = tl.zeros((BN, KDP), dt)
        z_row = (b * S + s64) * M
        # Cross-layer convolution (eq. 10, SPEC section 3 steps 2-3): window rows gathered
        # through hidden_index from [0, z_s, h_{s-1}], times W^h.
        for k in range(KD):
            slot = tl.load(hidx_ptr + loc * KD + k, mask=lok, other=0)
            is_z = slot == _INPUT
            is_h = slot >= _HOFF
            hl = tl.where(is_h, slot - _HOFF, 0)
            if not FIRST:
                mean_h, rstd_h = _row_stats(pmean_ptr, pm2_ptr, p_prev, hl, is_h, ln_mean, ln_rstd, M, NJ,
                                            eps, NORM, BM, NJP)
            for m0 in range(0, M, BK):
                cin = m0 + tl.arange(0, BK)
                iok = cin < M
                hm = is_h[:, None] & iok[None, :]
                if FIRST:  # h_{-1} is the given state, not a function of c_{-1}
                    hv = tl.load(hs_ptr + c_prev + hl[:, None] * M + cin[None, :], mask=hm, other=0.0)
                else:
                    hv = _hidden(cs_ptr, acts_ptr, gain_ptr, bias_ptr, c_prev, a_prev, hl, cin, hm, mean_h,
                                 rstd_h, M, GC, NORM)
                zv = tl.load(z_ptr + z_row + cin, mask=iok, other=0.0)
                win = tl.where(is_z[:, None], zv[None, :], hv)
                w_row = w_ptr + (k * M + cin)[:, None] * GC
                wm = iok[:, None] & cok[None, :]
                # ieee: no TF32, so float32 results match eager's (the accumulator is passed in)
                acc_g = tl.dot(win, tl.load(w_row + chn[None, :], mask=wm, other=0.0), acc_g,
                               input_precision="ieee")
                acc_i = tl.dot(win, tl.load(w_row + M + chn[None, :], mask=wm, other=0.0), acc_i,
                               input_precision="ieee")
                acc_f = tl.dot(win, tl.load(w_row + 2 * M + chn[None, :], mask=wm, other=0.0), acc_f,
                               input_precision="ieee")
                acc_o = tl.dot(win, tl.load(w_row + 3 * M + chn[None, :], mask=wm, other=0.0), acc_o,
                               input_precision="ieee")
                if MEMCONV:
                    wq = tl.load(w_row + 4 * M + kq[None, :], mask=iok[:, None] & (kq < KD)[None, :], other=0.0)
                    acc_q = tl.dot(win, wq, acc_q, input_precision="ieee")
        # Gates (eq. 11): G tanh, I F O sigmoid.
        g = _tanh(acc_g + tl.load(bh_ptr + chn, mask=cok, other=0.0)[None, :])
        i = tl.sigmoid(acc_i + tl.load(bh_ptr + M + chn, mask=cok, other=0.0)[None, :])
        f = tl.sigmoid(acc_f + tl.load(bh_ptr + 2 * M + chn, mask=cok, other=0.0)[None, :])
        o = tl.sigmoid(acc_o + tl.load(bh_ptr + 3 * M + chn, mask=cok, other=0.0)[None, :])
        a_cur = (s64 * B + b) * N * GC
        a_own = acts_ptr + a_cur + loc[:, None] * GC + chn[None, :]
        tl.store(a_own, g, mask=own)
        tl.store(a_own + M, i, mask=own)
        tl.store(a_own + 2 * M, f, mask=own)
        tl.store(a_own + 3 * M, o, mask=own)
        if MEMCONV:
            # Q = softmax over the <K> kernel channels (eq. 12), then the memory-cell
            # convolution through cell_index (eq. 13, SPEC section 3 step 5).
            qok = (kq < KD)[None, :]
            ql = acc_q + tl.load(bh_ptr + 4 * M + kq, mask=kq < KD, other=0.0)[None, :]
            ql = tl.where(qok, ql, float("-inf"))
            e = tl.exp(ql - tl.max(ql, 1)[:, None])
            q = e / tl.sum(e, 1)[:, None]
            tl.store(acts_ptr + a_cur + loc[:, None] * GC + 4 * M + kq[None, :], q,
                     mask=(lok & first_tile)[:, None] & qok)
            cc = tl.zeros((BN, BM), dt)
            for k in range(KD):
                cl = tl.load(cidx_ptr + loc * KD + k, mask=lok, other=0)
                qk = tl.sum(tl.where(kq[None, :] == k, q, 0.0), 1)
                cc += qk[:, None] * tl.load(cs_ptr + c_prev + cl[:, None] * M + chn[None, :], mask=own, other=0.0)
        else:
            cc = tl.load(cs_ptr + c_prev + loc[:, None] * M + chn[None, :], mask=own, other=0.0)
        c = g * i + cc * f  # eq. 14
        tl.store(cs_ptr + c_prev + B * N * M + loc[:, None] * M + chn[None, :], c, mask=own)
        if NORM != 0:
            cnt = tl.minimum(M - jt * BM, BM).to(tl.float32)
            tm = tl.sum(tl.where(own, c, 0.0), 1) / cnt
            d = tl.where(own, c - tm[:, None], 0.0)
            po = ((s64 * B + b) * N + loc) * NJ + jt
            tl.store(pmean_ptr + po, tm, mask=lok)
            tl.store(pm2_ptr + po, tl.sum(d * d, 1), mask=lok)


# ---- the backward step ---------------------------------------------------------------

@triton.jit
def _cn_sums(pa_ptr, pb_ptr, base, rows, ok, M, NJ, NJP: tl.constexpr):
    """alpha = mean_m(gain*dn), beta = mean_m(gain*dn*xhat) per location (CN's backward)."""
    j = tl.arange(0, NJP)
    msk = ok[:, None] & (j < NJ)[None, :]
    off = base + rows[:, None] * NJ + j[None, :]
    return (tl.sum(tl.load(pa_ptr + off, mask=msk, other=0.0), 1) / M,
            tl.sum(tl.load(pb_ptr + off, mask=msk, other=0.0), 1) / M)


@triton.jit
def _ln_sums(pa_ptr, pb_ptr, base, N, M, NJ, BN: tl.constexpr, NJP: tl.constexpr):
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
def _row_sums(pa_ptr, pb_ptr, base, rows, ok, ln_a, ln_b, M, NJ, NORM: tl.constexpr, NJP: tl.constexpr):
    if NORM == 1:
        alpha, beta = _cn_sums(pa_ptr, pb_ptr, base, rows, ok, M, NJ, NJP)
    else:
        alpha = tl.zeros(rows.shape, ln_a.dtype) + ln_a
        beta = tl.zeros(rows.shape, ln_b.dtype) + ln_b
    return alpha, beta


@triton.jit
def _next_dcf(dcs_ptr, acts_ptr, cs_ptr, mean_ptr, rstd_ptr, pa_ptr, pb_ptr, row_base, c_base, rows, ok, chn, cok,
              ln_a, ln_b, M, GC, NJ, NORM: tl.constexpr, NJP: tl.constexpr):
    """dc_{s+1} * f_{s+1} at ``rows``, completing dc with the norm's deferred terms."""
    msk = ok[:, None] & cok[None, :]
    dc = tl.load(dcs_ptr + (row_base + rows[:, None]) * M + chn[None, :], mask=msk, other=0.0)
    f = tl.load(acts_ptr + (row_base + rows[:, None]) * GC + 2 * M + chn[None, :], mask=msk, other=0.0)
    if NORM != 0:
        alpha, beta = _row_sums(pa_ptr, pb_ptr, row_base * NJ, rows, ok, ln_a, ln_b, M, NJ, NORM, NJP)
        c = tl.load(cs_ptr + c_base + rows[:, None] * M + chn[None, :], mask=msk, other=0.0)
        mean = tl.load(mean_ptr + row_base + rows, mask=ok, other=0.0)
        rstd = tl.load(rstd_ptr + row_base + rows, mask=ok, other=0.0)
        xhat = (c - mean[:, None]) * rstd[:, None]
        dc = dc - rstd[:, None] * (alpha[:, None] + beta[:, None] * xhat)
    return dc * f


# Long on purpose: see the comment above _forward_step.
@triton.jit(do_not_specialize=["s"])
def _backward_step(cs_ptr, acts_ptr, mean_ptr, rstd_ptr, w_ptr, gain_ptr, bias_ptr, cidx_ptr, invh_ptr, invc_ptr,
                   das_ptr, e1_ptr, e2_ptr, dcs_ptr, dns_ptr, pa_ptr, pb_ptr, dql_ptr, dq1_ptr, dq2_ptr,
                   dout_ptr, dht_ptr, dct_ptr,
                   s, T, DELAY, N, M, GC, KD, NJ, R,
                   NORM: tl.constexpr, MEMCONV: tl.constexpr, HAS_NEXT: tl.constexpr,
                   BN: tl.constexpr, BM: tl.constexpr, BG: tl.constexpr, KDP: tl.constexpr, NJP: tl.constexpr):
    """Backward of step s for a tile: dA_s (local part), dc_s, and the deferred partials.

    Writes das[s] gate columns (G, I, F, O; the Q columns are completed after the
    loop), e1/e2[s] (LN/CN: the rows that alpha and beta multiply), dcs[s] (dc_s without
    the norm's deferred terms), dns[s] (dL/dN(c_s), for the gain and bias gradients),
    pa/pb[s] (partial sums of gain*dn and gain*dn*xhat per location and channel tile),
    dql/dq1/dq2[s] (partial sums of the Q gradient per location and channel tile).
    """
    b = tl.program_id(0)
    B = tl.num_programs(0)
    loc = tl.program_id(1) * BN + tl.arange(0, BN)
    jt = tl.program_id(2)
    chn = jt * BM + tl.arange(0, BM)
    lok = loc < N
    cok = chn < M
    own = lok[:, None] & cok[None, :]
    dt = w_ptr.dtype.element_ty
    s64 = s.to(tl.int64)
    kq = tl.arange(0, KDP)
    qok = (kq < KD)[None, :]
    M4 = 4 * M
    gh = tl.zeros((BN, BM), dt)  # dL/dh_s
    dci = tl.zeros((BN, BM), dt)  # dL/dc_s from outside and through step s+1
    if HAS_NEXT:
        nb = ((s64 + 1) * B + b) * N  # row base of step s+1
        ln_a = tl.zeros([1], dt).sum(0)
        ln_b = ln_a
        if NORM == 2:
            ln_a, ln_b = _ln_sums(pa_ptr, pb_ptr, nb * NJ, N, M, NJ, BN, NJP)
        # dL/dh_s = sum over the windows that read h_s of W^h dA_{s+1} (inverse hidden map).
        for k in range(KD):
            src = tl.load(invh_ptr + loc * KD + k, mask=lok, other=-1)
            sok = src >= 0
            sl = tl.where(sok, src, 0)
            alpha, beta = _row_sums(pa_ptr, pb_ptr, nb * NJ, sl, sok, ln_a, ln_b, M, NJ, NORM, NJP)
            for g0 in range(0, M4, BG):
                gcol = g0 + tl.arange(0, BG)
                gok = gcol < M4
                rm = sok[:, None] & gok[None, :]
                da = tl.load(das_ptr + (nb + sl[:, None]) * GC + gcol[None, :], mask=rm, other=0.0)
                if NORM != 0:
                    eo = (nb + sl[:, None]) * M4 + gcol[None, :]
                    da = (da - alpha[:, None] * tl.load(e1_ptr + eo, mask=rm, other=0.0)
                          - beta[:, None] * tl.load(e2_ptr + eo, mask=rm, other=0.0))
                wt = tl.load(w_ptr + (k * M + chn[None, :]) * GC + gcol[:, None], mask=gok[:, None] & cok[None, :],
                             other=0.0)
                gh = tl.dot(da, wt, gh, input_precision="ieee")
            if MEMCONV:
                qm = sok[:, None] & qok
                q = tl.load(acts_ptr + (nb + sl[:, None]) * GC + M4 + kq[None, :], mask=qm, other=0.0)
                qo = ((nb + sl[:, None]) * NJ) * KDP + kq[None, :]
                dq = tl.zeros((BN, KDP), dt)
                for j in range(NJ):
                    dq += tl.load(dql_ptr + qo + j * KDP, mask=qm, other=0.0)
                    if NORM != 0:
                        dq -= (alpha[:, None] * tl.load(dq1_ptr + qo + j * KDP, mask=qm, other=0.0)
                               + beta[:, None] * tl.load(dq2_ptr + qo + j * KDP, mask=qm, other=0.0))
                daq = q * (dq - tl.sum(q * dq, 1)[:, None])  # softmax backward
                wq = tl.load(w_ptr + (k * M + chn[None, :]) * GC + M4 + kq[:, None],
                             mask=(kq < KD)[:, None] & cok[None, :], other=0.0)
                gh = tl.dot(daq, wq, gh, input_precision="ieee")
        # dL/dc_s through step s+1's memory-cell convolution (inverse cell map) or, without
        # it, straight through the forget gate.
        c_next = ((s64 + 2) * B + b) * N * M  # cs[s+2] = c_{s+1}
        if MEMCONV:
            for r in range(R):
                ent = tl.load(invc_ptr + loc * R + r, mask=lok, other=-1)
                eok = ent >= 0
                el = tl.where(eok, ent, 0)
                n2 = el // KD
                k2 = el % KD
                qv = tl.load(acts_ptr + (nb + n2) * GC + M4 + k2, mask=eok, other=0.0)
                dci += qv[:, None] * _next_dcf(dcs_ptr, acts_ptr, cs_ptr, mean_ptr, rstd_ptr, pa_ptr, pb_ptr, nb,
                                               c_next, n2, eok, chn, cok, ln_a, ln_b, M, GC, NJ, NORM, NJP)
        else:
            dci += _next_dcf(dcs_ptr, acts_ptr, cs_ptr, mean_ptr, rstd_ptr, pa_ptr, pb_ptr, nb, c_next, loc, lok,
                             chn, cok, ln_a, ln_b, M, GC, NJ, NORM, NJP)
    # Gradients from outside: y read at the output corner (step t + L - 1), final state at T-1.
    t = s - DELAY
    om = own & ((loc == N - 1) & (loc * 0 + t >= 0))[:, None]
    gh += tl.load(dout_ptr + (b * T + tl.maximum(t, 0)) * M + chn[None, :] + 0 * loc[:, None], mask=om, other=0.0)
    lm = own & (loc * 0 + s == T - 1)[:, None]
    so = (b * N + loc[:, None]) * M + chn[None, :]
    gh += tl.load(dht_ptr + so, mask=lm, other=0.0)
    dci += tl.load(dct_ptr + so, mask=lm, other=0.0)
    # This step's own values.
    rb = (s64 * B + b) * N  # row base of step s
    ap = (rb + loc[:, None]) * GC + chn[None, :]
    g = tl.load(acts_ptr + ap, mask=own, other=0.0)
    i = tl.load(acts_ptr + ap + M, mask=own, other=0.0)
    f = tl.load(acts_ptr + ap + 2 * M, mask=own, other=0.0)
    o = tl.load(acts_ptr + ap + 3 * M, mask=own, other=0.0)
    mp = (rb + loc[:, None]) * M + chn[None, :]
    c = tl.load(cs_ptr + B * N * M + mp, mask=own, other=0.0)  # cs[s+1] = c_s
    if NORM != 0:
        mean = tl.load(mean_ptr + rb + loc, mask=lok, other=0.0)
        rstd = tl.load(rstd_ptr + rb + loc, mask=lok, other=0.0)
        gofs = loc[:, None] * M + chn[None, :]
        gain = tl.load(gain_ptr + gofs, mask=own, other=0.0)
        xhat = (c - mean[:, None]) * rstd[:, None]
        x = xhat * gain + tl.load(bias_ptr + gofs, mask=own, other=0.0)
    else:
        x = c
    tn = _tanh(x)
    da_o = gh * tn * o * (1.0 - o)
    dn = gh * o * (1.0 - tn * tn)  # dL/dN(c_s)
    if NORM != 0:
        tl.store(dns_ptr + mp, dn, mask=own)
        gd = tl.where(own, gain * dn, 0.0)
        dc = dci + rstd[:, None] * gd  # the norm's local term; alpha/beta terms deferred
        po = (rb + loc) * NJ + jt
        tl.store(pa_ptr + po, tl.sum(gd, 1), mask=lok)
        tl.store(pb_ptr + po, tl.sum(gd * xhat, 1), mask=lok)
        e1v = tl.zeros((BN, BM), dt) + rstd[:, None]  # d dc / d(-alpha)
        e2v = rstd[:, None] * xhat  # d dc / d(-beta)
    else:
        dc = dci + dn
    tl.store(dcs_ptr + mp, dc, mask=own)
    cp = rb * M  # cs[s] = c_{s-1}
    if MEMCONV:
        q = tl.load(acts_ptr + (rb + loc[:, None]) * GC + M4 + kq[None, :], mask=lok[:, None] & qok, other=0.0)
        cprev = tl.zeros((BN, BM), dt)
        dq = tl.zeros((BN, KDP), dt)
        dq1 = tl.zeros((BN, KDP), dt)
        dq2 = tl.zeros((BN, KDP), dt)
        dcf = dc * f
        for k in range(KD):
            cl = tl.load(cidx_ptr + loc * KD + k, mask=lok, other=0)
            cw = tl.load(cs_ptr + cp + cl[:, None] * M + chn[None, :], mask=own, other=0.0)
            sel = kq[None, :] == k
            cprev += tl.sum(tl.where(sel, q, 0.0), 1)[:, None] * cw
            dq += tl.where(sel, tl.sum(cw * dcf, 1)[:, None], 0.0)
            if NORM != 0:
                dq1 += tl.where(sel, tl.sum(cw * e1v * f, 1)[:, None], 0.0)
                dq2 += tl.where(sel, tl.sum(cw * e2v * f, 1)[:, None], 0.0)
        qo = ((rb + loc[:, None]) * NJ + jt) * KDP + kq[None, :]
        qm = lok[:, None] & qok
        tl.store(dql_ptr + qo, dq, mask=qm)
        if NORM != 0:
            tl.store(dq1_ptr + qo, dq1, mask=qm)
            tl.store(dq2_ptr + qo, dq2, mask=qm)
    else:
        cprev = tl.load(cs_ptr + cp + loc[:, None] * M + chn[None, :], mask=own, other=0.0)
    # dA for G, I, F (through c_s = g*i + cprev*f) and O.
    fg = i * (1.0 - g * g)
    fi = g * i * (1.0 - i)
    ff = cprev * f * (1.0 - f)
    tl.store(das_ptr + ap, dc * fg, mask=own)
    tl.store(das_ptr + ap + M, dc * fi, mask=own)
    tl.store(das_ptr + ap + 2 * M, dc * ff, mask=own)
    tl.store(das_ptr + ap + 3 * M, da_o, mask=own)
    if NORM != 0:
        ep = (rb + loc[:, None]) * M4 + chn[None, :]
        zero = tl.zeros((BN, BM), dt)
        tl.store(e1_ptr + ep, e1v * fg, mask=own)
        tl.store(e1_ptr + ep + M, e1v * fi, mask=own)
        tl.store(e1_ptr + ep + 2 * M, e1v * ff, mask=own)
        tl.store(e1_ptr + ep + 3 * M, zero, mask=own)
        tl.store(e2_ptr + ep, e2v * fg, mask=own)
        tl.store(e2_ptr + ep + M, e2v * fi, mask=own)
        tl.store(e2_ptr + ep + 2 * M, e2v * ff, mask=own)
        tl.store(e2_ptr + ep + 3 * M, zero, mask=own)


# ---- host side -----------------------------------------------------------------------

def _pow2(x: int, least: int = 1) -> int:
    return max(least, triton.next_power_of_2(max(int(x), 1)))


def _tiles(n: int, m: int, kd: int) -> dict[str, int]:
    """Tile sizes (powers of two, >= 16 where ``tl.dot`` needs it). Not tuned on a GPU yet:
    BM = 16 while M <= 128 splits a 2D L=10, M=100 step over 7 programs at batch 1."""
    bm = 16 if m <= 128 else 32
    return dict(BN=16, BM=bm, BK=_pow2(min(m, 32), 16), BG=_pow2(min(4 * m, 64), 16), KDP=_pow2(kd, 16),
                NJP=_pow2(triton.cdiv(m, bm)))


class _Geometry(SequenceShapes):
    """Shapes and index maps of one model, on the model's device (int32 for the kernels)."""

    def __init__(self, model: TLSTM, seq_len: int):
        super().__init__(model, seq_len)
        maps = _maps(model)
        self.hidden_index, self.cell_index, self.inv_hidden, self.inv_cell, self.input_entries = maps
        # The model's own int64 maps, flat, for the backward's torch gathers (views: nothing copied).
        self.hidden_long = model.hidden_index.reshape(-1)
        self.cell_long = model.cell_index.reshape(-1)
        self.tiles = _tiles(self.n, self.m, self.kd)
        self.nj = triton.cdiv(self.m, self.tiles["BM"])


def _inverse_maps(hidden_index: torch.Tensor, cell_index: torch.Tensor):
    """Inverses of the model's index maps (N, Kd each), for the backward's gathers.

    Returns ``inv_hidden`` (N, Kd): the location whose entry k reads hidden location t,
    or -1; ``inv_cell`` (N, R): entries n*Kd + k of every window that reads cell
    location t, -1 padded; ``input_entries`` (P, 2): the (location, entry) pairs that
    read z. Built from the maps alone: the window geometry is never recomputed.
    """
    n, kd = hidden_index.shape
    hidden = hidden_index.tolist()
    inv_hidden = [[-1] * kd for _ in range(n)]
    input_entries = []
    for src in range(n):
        for k, slot in enumerate(hidden[src]):
            if slot >= HIDDEN_OFFSET:
                t = slot - HIDDEN_OFFSET
                if inv_hidden[t][k] != -1:
                    raise RuntimeError("hidden_index reads one location twice through one kernel entry; "
                                       "the triton backward assumes windows are translations")
                inv_hidden[t][k] = src
            elif slot == INPUT_SLOT:
                input_entries.append((src, k))
    readers: list[list[int]] = [[] for _ in range(n)]
    for src, row in enumerate(cell_index.tolist()):
        for k, t in enumerate(row):
            readers[t].append(src * kd + k)
    width = max(len(r) for r in readers)
    inv_cell = [r + [-1] * (width - len(r)) for r in readers]
    return (torch.tensor(inv_hidden, dtype=torch.int32), torch.tensor(inv_cell, dtype=torch.int32),
            torch.tensor(input_entries, dtype=torch.long).reshape(-1, 2))


def _maps(model: TLSTM):
    """The index maps and their inverses on the model's device, cached per map version."""
    hidx, cidx = model.hidden_index, model.cell_index
    key = (hidx.device, hidx.data_ptr(), hidx._version, cidx.data_ptr(), cidx._version)
    cached = model.__dict__.get("_triton_maps")
    if cached is not None and cached[0] == key:
        return cached[1]
    inv_hidden, inv_cell, input_entries = _inverse_maps(hidx.cpu(), cidx.cpu())
    dev = hidx.device
    maps = (hidx.to(torch.int32).contiguous(), cidx.to(torch.int32).contiguous(), inv_hidden.to(dev),
            inv_cell.to(dev), input_entries.to(dev))
    model.__dict__["_triton_maps"] = (key, maps)
    return maps


class TritonSequence(torch.autograd.Function):
    """(z_all, h0, c0, w_h, b_h, gain, bias) -> (h_out (B,T,M), h_T (B,N,M), c_T (B,N,M)).

    ``z_all`` (B, S, M) holds the T projected inputs followed by the L-1 flush inputs.
    """

    @staticmethod
    def forward(ctx, geo: _Geometry, z_all, h0, c0, w_h, b_h, gain, bias):
        b, steps, m = z_all.shape
        n, kd, gc, nj = geo.n, geo.kd, geo.g, geo.nj
        norm = geo.norm_code
        z_all = z_all.contiguous()
        w2 = w_h.reshape(kd * m, gc).contiguous()
        hs = z_all.new_empty(steps + 1, b, n, m)  # hs[s+1] = h_s
        hs[0] = h0
        cs = z_all.new_empty(steps + 1, b, n, m)  # cs[s+1] = c_s
        cs[0] = c0
        acts = z_all.new_empty(steps, b, n, gc)  # G, I, F, O, Q after their activations
        dummy = z_all.new_empty(1)
        pmean = z_all.new_empty(steps, b, n, nj) if norm else dummy
        pm2 = z_all.new_empty(steps, b, n, nj) if norm else dummy
        mean = z_all.new_empty(steps, b, n) if norm else dummy
        rstd = z_all.new_empty(steps, b, n) if norm else dummy
        gain_t = gain.contiguous() if gain is not None else dummy
        bias_t = bias.contiguous() if bias is not None else dummy
        tiles = geo.tiles
        grid = (b, triton.cdiv(n, tiles["BN"]), nj)
        common = dict(NORM=norm, MEMCONV=geo.memory_conv, BN=tiles["BN"], BM=tiles["BM"], BK=tiles["BK"],
                      KDP=tiles["KDP"], NJP=tiles["NJP"])
        for s in range(steps + 1):  # launch `steps` finishes h of the last step
            _forward_step[grid](z_all, hs, cs, acts, pmean, pm2, mean, rstd, w2, b_h, gain_t, bias_t,
                                geo.hidden_index, geo.cell_index, s, steps, n, m, gc, kd, nj, NORM_EPS,
                                FIRST=(s == 0), FINISH=(s == steps), **common)
        seq_len, depth = geo.seq_len, geo.depth
        h_out = hs[depth:, :, n - 1].transpose(0, 1).clone()  # y read at steps L-1 .. S-1
        h_t = hs[seq_len].clone()
        c_t = cs[seq_len].clone()
        ctx.geo = geo
        ctx.buffers = (z_all, hs, cs, acts, mean, rstd)
        ctx.save_for_backward(w_h, gain, bias)
        return h_out, h_t, c_t

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out, d_ht, d_ct):
        geo = ctx.geo
        z_all, hs, cs, acts, mean, rstd = ctx.buffers
        w_h, gain, bias = ctx.saved_tensors
        b, m, n = acts.shape[1], geo.m, geo.n
        d_out = d_out.contiguous() if d_out is not None else acts.new_zeros(b, geo.seq_len, m)
        d_ht = d_ht.contiguous() if d_ht is not None else acts.new_zeros(b, n, m)
        d_ct = d_ct.contiguous() if d_ct is not None else acts.new_zeros(b, n, m)
        w2 = w_h.reshape(geo.kd * m, geo.g).contiguous()
        g = _backward_steps(geo, ctx.buffers, w2, gain, bias, d_out, d_ht, d_ct)
        alpha, beta = _complete_gate_grads(geo, acts, g)
        needs = ctx.needs_input_grad
        # dz_s: W^h dA_s through the window entries that read z (INPUT_SLOT).
        dz = None
        if needs[1]:
            pairs = geo.input_entries
            dz = torch.einsum("sbpg,pmg->bsm", g["das"][:, :, pairs[:, 0]], w_h[pairs[:, 1]])
        d_h0 = _initial_hidden_grad(geo, g["das"], w2) if needs[2] else None
        d_c0 = _initial_cell_grad(geo, cs, acts, mean, rstd, g["dcs"], alpha, beta) if needs[3] else None
        d_wh = _weight_grad(geo, z_all, hs, acts, w2, g["das"]) if needs[4] else None
        d_bh = g["das"].view(-1, geo.g).sum(0) if needs[5] else None
        d_gain = d_bias = None
        if geo.norm != "none" and (needs[6] or needs[7]):
            xhat = (cs[1:] - mean.unsqueeze(-1)) * rstd.unsqueeze(-1)
            d_gain = (g["dns"] * xhat).sum((0, 1))
            d_bias = g["dns"].sum((0, 1))
        return None, dz, d_h0, d_c0, d_wh, d_bh, d_gain, d_bias


def _backward_steps(geo: _Geometry, buffers: tuple, w2, gain, bias, d_out, d_ht, d_ct) -> dict:
    """Launch the backward kernel for s = S-1 .. 0; its buffers by name (see ``_backward_step``)."""
    z_all, hs, cs, acts, mean, rstd = buffers
    steps, b = acts.shape[0], acts.shape[1]
    m, n, kd, gc, nj = geo.m, geo.n, geo.kd, geo.g, geo.nj
    norm = geo.norm_code
    tiles = geo.tiles
    kdp = tiles["KDP"]
    dummy = acts.new_empty(1)
    g = {
        "das": acts.new_empty(steps, b, n, gc),  # dL/dA_s (gate columns local until completed)
        "dcs": acts.new_empty(steps, b, n, m),  # dc_s without the norm's deferred terms
        "e1": acts.new_empty(steps, b, n, 4 * m) if norm else dummy,
        "e2": acts.new_empty(steps, b, n, 4 * m) if norm else dummy,
        "dns": acts.new_empty(steps, b, n, m) if norm else dummy,
        "pa": acts.new_empty(steps, b, n, nj) if norm else dummy,
        "pb": acts.new_empty(steps, b, n, nj) if norm else dummy,
        "dql": acts.new_empty(steps, b, n, nj, kdp) if geo.memory_conv else dummy,
        "dq1": acts.new_empty(steps, b, n, nj, kdp) if geo.memory_conv and norm else dummy,
        "dq2": acts.new_empty(steps, b, n, nj, kdp) if geo.memory_conv and norm else dummy,
    }
    gain_t = gain.contiguous() if gain is not None else dummy
    bias_t = bias.contiguous() if bias is not None else dummy
    grid = (b, triton.cdiv(n, tiles["BN"]), nj)
    for s in range(steps - 1, -1, -1):
        _backward_step[grid](cs, acts, mean, rstd, w2, gain_t, bias_t, geo.cell_index, geo.inv_hidden,
                             geo.inv_cell, g["das"], g["e1"], g["e2"], g["dcs"], g["dns"], g["pa"], g["pb"],
                             g["dql"], g["dq1"], g["dq2"], d_out, d_ht, d_ct,
                             s, geo.seq_len, geo.depth - 1, n, m, gc, kd, nj, geo.inv_cell.shape[1],
                             NORM=norm, MEMCONV=geo.memory_conv, HAS_NEXT=(s < steps - 1), BN=tiles["BN"],
                             BM=tiles["BM"], BG=tiles["BG"], KDP=kdp, NJP=tiles["NJP"])
    return g


def _complete_gate_grads(geo: _Geometry, acts, g: dict):
    """Complete every dA_s with the deferred terms (the kernels did it on the fly for their
    neighbours; here it is done once for the per-sequence products). The norm's (alpha, beta),
    or (None, None) without a norm."""
    m, n, kd = geo.m, geo.n, geo.kd
    das = g["das"]
    alpha = beta = None
    if geo.norm != "none":
        alpha, beta = g["pa"].sum(-1), g["pb"].sum(-1)  # (S, B, N)
        if geo.norm == "ln":
            alpha, beta = alpha.sum(-1, keepdim=True) / (n * m), beta.sum(-1, keepdim=True) / (n * m)
        else:
            alpha, beta = alpha / m, beta / m
        das[..., :4 * m] -= alpha.unsqueeze(-1) * g["e1"] + beta.unsqueeze(-1) * g["e2"]
    if geo.memory_conv:
        dq = g["dql"].sum(3)[..., :kd]
        if alpha is not None:
            dq -= alpha.unsqueeze(-1) * g["dq1"].sum(3)[..., :kd] + beta.unsqueeze(-1) * g["dq2"].sum(3)[..., :kd]
        q = acts[..., 4 * m:]
        das[..., 4 * m:] = q * (dq - (q * dq).sum(-1, keepdim=True))  # softmax backward (eq. 12)
    return alpha, beta


def _initial_hidden_grad(geo: _Geometry, das, w2):
    """dL/dh_0: the first step's dA through the window entries that read h_0."""
    b, n, kd, m, gc = das.shape[1], geo.n, geo.kd, geo.m, geo.g
    dwin = (das[0].reshape(b * n, gc) @ w2.t()).view(b, n * kd, m)
    return das.new_zeros(b, HIDDEN_OFFSET + n, m).index_add_(
        1, geo.hidden_long, dwin)[:, HIDDEN_OFFSET:]


def _initial_cell_grad(geo: _Geometry, cs, acts, mean, rstd, dcs, alpha, beta):
    """dL/dc_0: through the first step's forget gate (and its memory-cell convolution)."""
    b, n, kd, m = acts.shape[1], geo.n, geo.kd, geo.m
    dc0 = dcs[0]
    if alpha is not None:
        xhat0 = (cs[1] - mean[0].unsqueeze(-1)) * rstd[0].unsqueeze(-1)
        dc0 = dc0 - rstd[0].unsqueeze(-1) * (alpha[0].unsqueeze(-1) + beta[0].unsqueeze(-1) * xhat0)
    dcf0 = dc0 * acts[0, :, :, 2 * m:3 * m]
    if not geo.memory_conv:
        return dcf0
    contrib = (acts[0, :, :, 4 * m:].unsqueeze(-1) * dcf0.unsqueeze(2)).reshape(b, n * kd, m)
    return acts.new_zeros(b, n, m).index_add_(1, geo.cell_long, contrib)


def _weight_grad(geo: _Geometry, z_all, hs, acts, w2, das):
    """The deferred weight gradient: sum over steps of window_s^T dA_s, chunked so the gathered
    windows stay under ~64 MB (as in ``fast``)."""
    steps, b = acts.shape[0], acts.shape[1]
    kd, m, gc, n = geo.kd, geo.m, geo.g, geo.n
    hidx = geo.hidden_long
    d_wh = w2.new_zeros(kd * m, gc)
    per_step = b * n * kd * m * acts.element_size()
    chunk = max(1, (64 << 20) // max(per_step, 1))
    for s0 in range(0, steps, chunk):
        s1 = min(steps, s0 + chunk)
        src = torch.cat([acts.new_zeros(s1 - s0, b, 1, m), z_all[:, s0:s1].transpose(0, 1).unsqueeze(2),
                         hs[s0:s1]], dim=2)  # [0, z_s, h_{s-1}]
        windows = src.index_select(2, hidx).view(-1, kd * m)
        d_wh.addmm_(windows.t(), das[s0:s1].view(-1, gc))
    return d_wh.view(kd, m, gc)


_DTYPES = (torch.float32, torch.float64)


def check_runnable(z: torch.Tensor, model: TLSTM) -> None:
    """One-line errors for what this implementation cannot run."""
    if z.dtype not in _DTYPES or model.w_h.dtype != z.dtype:
        raise UserError(f"implementation 'triton' supports float32 and float64, got {z.dtype}; "
                        "use implementation 'fast'")
    if not z.is_cuda and not INTERPRETED:
        raise UserError("implementation 'triton' runs Triton kernels, which need a CUDA GPU and the model on it "
                        "(model.to('cuda')); on a CPU use implementation 'fast' (TRITON_INTERPRET=1, set before "
                        "the first use, runs them on the CPU for testing only)")


def run_triton(model: TLSTM, z: torch.Tensor, state: TLSTMState):
    """T + L - 1 steps through :class:`TritonSequence`; same contract as ``run_eager``."""
    check_runnable(z, model)
    batch, seq_len, m = z.shape
    if model.depth > 1:
        z = torch.cat([z, model.b_x.expand(batch, model.depth - 1, m)], dim=1)  # flush: x = 0
    norm = model.arch.norm != "none"
    h_out, h_t, c_t = TritonSequence.apply(
        _Geometry(model, seq_len), z, state.h.contiguous(), state.c.contiguous(), model.w_h, model.b_h,
        model.norm_gain if norm else None, model.norm_bias if norm else None)
    return h_out, TLSTMState(h_t, c_t)
