"""The Triton source of the triangular solves' reference solutions (``trsm``): one real and one
complex kernel, one matrix or arrays of pointers, and the wrapper that reduces every
``side``/``uplo``/``trans`` to one canonical solve, so the three solutions cannot drift apart.
Each generated source is complete and standalone, as a candidate's must be. Registers nothing.

The canonical solve is ``T X = alpha B`` with ``T`` (k x k) lower or upper triangular and B
(k x r) overwritten by X. Side LEFT takes ``T = op(A)``; side RIGHT solves ``X op(A) = alpha B``
as ``op(A)^T X^T = alpha B^T`` — a plain transpose, never a conjugate, so ``T`` is ``A^T`` for
N, ``A`` for T and ``conj(A)`` for C. Each program owns BLOCK_N columns of X (and one batch
entry) and walks the row blocks in substitution order: the right-hand side of a block minus
``T[I, J] @ X[J]`` for the blocks already solved (read back from B after a barrier), then the
diagonal block by substitution in registers. ``alpha == 0`` writes zeros and reads nothing.
"""

from __future__ import annotations

_HEADER = "import triton\nimport triton.language as tl\n"

# The pieces both kernels share: the walk over row blocks in substitution order, the blocks
# already solved, the diagonal block's strict triangle.
_WALK = r'''{bases}    rn = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = rn < R
    r = tl.arange(0, BLOCK_M)
    nb = tl.cdiv(K, BLOCK_M)
    for step in range(0, nb):
        if LOWER:  # forward substitution
            ib = step
        else:
            ib = nb - 1 - step
        rows = ib * BLOCK_M + r.to(tl.int64)
        m_ok = rows < K
'''
_SOLVED = r'''            if LOWER:
                lo = 0
                hi = ib
            else:
                lo = ib + 1
                hi = nb
'''
# Substitution over the block's rows that exist (the last block may be short): forward from
# its first row, or backward from its last.
_STEPS = r'''            valid = tl.minimum(BLOCK_M, K - ib * BLOCK_M)
            if LOWER:
                s_lo = 0
                s_hi = valid
            else:
                s_lo = BLOCK_M - valid
                s_hi = BLOCK_M
            for s in range(s_lo, s_hi):
                if LOWER:
                    t_row = s
                else:
                    t_row = BLOCK_M - 1 - s
'''
_STRICT = r'''            if LOWER:
                strict = r[None, :] < r[:, None]
            else:
                strict = r[None, :] > r[:, None]
'''

_REAL_KERNEL = r'''

@triton.jit
def _trsm_kernel(a_ptr, b_ptr, K, R, alpha{ann}, s_tr, s_tc, s_bk, s_br,
                 LOWER: tl.constexpr, UNIT: tl.constexpr, ALPHA_ZERO: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # T(i, j) at a + i*s_tr + j*s_tc (k x k); B(i, j) at b + i*s_bk + j*s_br (k x r).
{walk}        pb = b_base + rows[:, None] * s_bk + rn[None, :] * s_br
        mask = m_ok[:, None] & n_ok[None, :]
        if ALPHA_ZERO:  # B = 0; neither A nor B is read
            tl.store(pb, tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.{real}), mask=mask)
        else:
            acc = alpha * tl.load(pb, mask=mask, other=0.0)
{solved}            for jb in range(lo, hi):  # subtract T[I, J] @ X[J] of the solved blocks
                cols = jb * BLOCK_M + r.to(tl.int64)
                c_ok = cols < K
                t = tl.load(a_base + rows[:, None] * s_tr + cols[None, :] * s_tc,
                            mask=m_ok[:, None] & c_ok[None, :], other=0.0)
                x = tl.load(b_base + cols[:, None] * s_bk + rn[None, :] * s_br,
                            mask=c_ok[:, None] & n_ok[None, :], other=0.0)
                acc -= tl.dot(t, x, input_precision="ieee", out_dtype=tl.{real})
            # The diagonal block: its strict triangle, and its diagonal unless unit (not read).
{strict}            d = tl.load(a_base + rows[:, None] * s_tr + rows[None, :] * s_tc,
                        mask=strict & m_ok[:, None] & m_ok[None, :], other=0.0)
            if not UNIT:  # rows scaled by 1 / T(i, i): the block gets a unit diagonal
                inv = 1.0 / tl.load(a_base + rows * (s_tr + s_tc), mask=m_ok, other=1.0)
                acc = acc * inv[:, None]
                d = d * inv[:, None]
{steps}                # Row t is solved (x_t); take it out of the rows after it (T(I, t) is zero
                # on and before row t, so row t itself stays x_t).
                x_t = tl.sum(tl.where(r[:, None] == t_row, acc, 0.0), axis=0)
                col = tl.sum(tl.where(r[None, :] == t_row, d, 0.0), axis=1)
                acc -= col[:, None] * x_t[None, :]
            tl.store(pb, acc, mask=mask)
        tl.debug_barrier()  # X[I] is read back by the next blocks' updates
'''

_COMPLEX_KERNEL = r'''

@triton.jit
def _cmul_re(ar, ai, br, bi):
    return ar * br - ai * bi


@triton.jit
def _cmul_im(ar, ai, br, bi):
    return ar * bi + ai * br


@triton.jit
def _trsm_kernel(a_ptr, b_ptr, K, R, alpha_re{ann}, alpha_im{ann}, s_tr, s_tc, s_bk, s_br,
                 CONJ: tl.constexpr, LOWER: tl.constexpr, UNIT: tl.constexpr,
                 ALPHA_ZERO: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # Complex buffers seen as {real} pairs (torch.view_as_real): element e's real part at 2e,
    # its imaginary part at 2e + 1; strides count complex elements. T(i, j) is A's element at
    # i*s_tr + j*s_tc, conjugated when CONJ; B(i, j) at i*s_bk + j*s_br.
{walk}        pb = b_base + 2 * (rows[:, None] * s_bk + rn[None, :] * s_br)
        mask = m_ok[:, None] & n_ok[None, :]
        if ALPHA_ZERO:  # B = 0; neither A nor B is read
            zero = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.{real})
            tl.store(pb, zero, mask=mask)
            tl.store(pb + 1, zero, mask=mask)
        else:
            br = tl.load(pb, mask=mask, other=0.0)
            bi = tl.load(pb + 1, mask=mask, other=0.0)
            acc_re = _cmul_re(alpha_re, alpha_im, br, bi)
            acc_im = _cmul_im(alpha_re, alpha_im, br, bi)
{solved}            for jb in range(lo, hi):  # subtract T[I, J] @ X[J] of the solved blocks
                cols = jb * BLOCK_M + r.to(tl.int64)
                c_ok = cols < K
                pt = a_base + 2 * (rows[:, None] * s_tr + cols[None, :] * s_tc)
                t_mask = m_ok[:, None] & c_ok[None, :]
                tr = tl.load(pt, mask=t_mask, other=0.0)
                ti = tl.load(pt + 1, mask=t_mask, other=0.0)
                if CONJ:
                    ti = -ti
                px = b_base + 2 * (cols[:, None] * s_bk + rn[None, :] * s_br)
                x_mask = c_ok[:, None] & n_ok[None, :]
                xr = tl.load(px, mask=x_mask, other=0.0)
                xi = tl.load(px + 1, mask=x_mask, other=0.0)
                acc_re -= tl.dot(tr, xr, input_precision="ieee", out_dtype=tl.{real})
                acc_re += tl.dot(ti, xi, input_precision="ieee", out_dtype=tl.{real})
                acc_im -= tl.dot(tr, xi, input_precision="ieee", out_dtype=tl.{real})
                acc_im -= tl.dot(ti, xr, input_precision="ieee", out_dtype=tl.{real})
{strict}            pd = a_base + 2 * (rows[:, None] * s_tr + rows[None, :] * s_tc)
            d_mask = strict & m_ok[:, None] & m_ok[None, :]
            dr = tl.load(pd, mask=d_mask, other=0.0)
            di = tl.load(pd + 1, mask=d_mask, other=0.0)
            if CONJ:
                di = -di
            if not UNIT:  # rows scaled by 1 / T(i, i): the block gets a unit diagonal
                pg = a_base + 2 * rows * (s_tr + s_tc)
                gr = tl.load(pg, mask=m_ok, other=1.0)
                gi = tl.load(pg + 1, mask=m_ok, other=0.0)
                if CONJ:
                    gi = -gi
                den = gr * gr + gi * gi
                qr = (gr / den)[:, None]  # 1 / g = conj(g) / |g|^2
                qi = (-gi / den)[:, None]
                acc_re, acc_im = _cmul_re(qr, qi, acc_re, acc_im), _cmul_im(qr, qi, acc_re, acc_im)
                dr, di = _cmul_re(qr, qi, dr, di), _cmul_im(qr, qi, dr, di)
{steps}                # Row t is solved (x_t); take it out of the rows after it (T(I, t) is zero
                # on and before row t, so row t itself stays x_t).
                row = r[:, None] == t_row
                xr = tl.sum(tl.where(row, acc_re, 0.0), axis=0)[None, :]
                xi = tl.sum(tl.where(row, acc_im, 0.0), axis=0)[None, :]
                col = r[None, :] == t_row
                cr = tl.sum(tl.where(col, dr, 0.0), axis=1)[:, None]
                ci = tl.sum(tl.where(col, di, 0.0), axis=1)[:, None]
                acc_re -= _cmul_re(cr, ci, xr, xi)
                acc_im -= _cmul_im(cr, ci, xr, xi)
            tl.store(pb, acc_re, mask=mask)
            tl.store(pb + 1, acc_im, mask=mask)
        tl.debug_barrier()  # X[I] is read back by the next blocks' updates
'''

_BASES = {
    False: "    a_base = a_ptr\n    b_base = b_ptr\n",
    True: ("    # Arrays of pointers: entry e's matrices live wherever Aarray[e], Barray[e] point.\n"
           "    e = tl.program_id(0)\n"
           "    a_base = tl.load(a_ptr + e).to(tl.pointer_type(tl.{real}))\n"
           "    b_base = tl.load(b_ptr + e).to(tl.pointer_type(tl.{real}))\n"),
}

# The wrapper: quick returns, then side/trans reduced to the canonical T X = alpha B.
_WRAPPER = r'''

def {name}({params}):
    if m <= 0 or n <= 0{batch_quick}:  # quick return: B is left as it is
        return None
    if side == 0:  # LEFT: op(A) X = alpha B; T = op(A) is m x m, B is m x n
        k, r = m, n
        s_bk, s_br = 1, ldb
        # op(A)(i, j): A(i, j) at i + j*lda for N, A(j, i) for T and C (C conjugates).
        s_tr, s_tc = (1, lda) if trans == 0 else (lda, 1)
        lower = (uplo == 0) == (trans == 0)
    else:  # RIGHT: X op(A) = alpha B  <=>  op(A)^T X^T = alpha B^T; B^T is n x m
        k, r = n, m
        s_bk, s_br = ldb, 1
        # op(A)^T(i, j) = op(A)(j, i): A(j, i) for N, A(i, j) for T and C (C conjugates).
        s_tr, s_tc = (lda, 1) if trans == 0 else (1, lda)
        lower = (uplo == 0) != (trans == 0)
{prologue}    if {b}.device.type == "cpu":  # Triton's interpreter: few programs, small tiles
        BM, BN, warps = 16, max(16, min(64, triton.next_power_of_2(r))), 4
    else:
        BM, BN, warps = {gpu}
    grid = ({batch}, triton.cdiv(r, BN))
    _trsm_kernel[grid]({operands}, k, r, {scalars}, s_tr, s_tc, s_bk, s_br,
                       {flags}LOWER=lower, UNIT=(diag == 1), ALPHA_ZERO=(alpha == 0),
                       BLOCK_M=BM, BLOCK_N=BN, num_warps=warps)
    return None
'''

_TL = {"float32": "float32", "float64": "float64", "complex128": "float64"}


def solution(name: str, dtype: str, *, batched: bool) -> str:
    """The reference solution of the routine ``name`` (entry point and C parameter names as
    the C API has them), for ``dtype`` data, one matrix or arrays of pointers."""
    real = _TL[dtype]
    complex_ = dtype.startswith("complex")
    # A Python float reaches a kernel as float32 unless the parameter says float64.
    ann = ": tl.float64" if real == "float64" else ""
    kernel = ((_COMPLEX_KERNEL if complex_ else _REAL_KERNEL).replace("{walk}", _WALK)
              .replace("{solved}", _SOLVED).replace("{strict}", _STRICT)
              .replace("{steps}", _STEPS).replace("{ann}", ann))
    kernel = kernel.replace("{bases}", _BASES[batched]).replace("{real}", real)
    a, b = ("Aarray", "Barray") if batched else ("A", "B")
    params = ("side, uplo, trans, diag, m, n, alpha, " + a + ", lda, " + b + ", ldb"
              + (", batchCount" if batched else ""))
    prologue = ""
    operands = f"{a}, {b}"
    if complex_:
        # Complex buffers as interleaved float64 pairs (pointer arrays point at the same bytes).
        prologue = "    alpha = complex(alpha)\n"
        if not batched:
            operands = f"torch.view_as_real({a}), torch.view_as_real({b})"
    wrapper = (_WRAPPER.replace("{name}", name).replace("{params}", params)
               .replace("{batch_quick}", " or batchCount <= 0" if batched else "")
               .replace("{prologue}", prologue).replace("{b}", b)
               .replace("{gpu}", "64, 32, 4" if real == "float32" else "32, 32, 4")
               .replace("{batch}", "batchCount" if batched else "1")
               .replace("{operands}", operands)
               .replace("{scalars}", "alpha.real, alpha.imag" if complex_ else "float(alpha)")
               .replace("{flags}", "CONJ=(trans == 2), " if complex_ else ""))
    header = ("import torch\n" if complex_ and not batched else "") + _HEADER
    return header + kernel + wrapper
