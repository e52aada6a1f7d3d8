"""Triton source the GGML problems' reference solutions share (registers nothing).

Each solution is one self-contained candidate file, so these are source strings the solutions
concatenate: ``DECODE`` (any supported weight element, exactly, in float32), ``QUANT_Q8_1``
(vLLM's activation quantization, written out as ``q * d`` in float32) and ``GEMM`` (activations
times decoded weight rows, float32 products accumulated in float32). They compute the exact form
of every kernel (``x_q . w``); vLLM's shortcuts (the fp16 sum ``s`` for offsets, fp16 scale
products) are what the problems' error bound admits besides.
"""

from __future__ import annotations


def patched(src: str, old: str, new: str) -> str:
    """``src`` with ``old`` replaced (it must occur): how the negative controls are made."""
    if old not in src:
        raise AssertionError(f"negative control: {old!r} is not in the solution")
    return src.replace(old, new)


# Negative-control rewrites the GGML problems share: roundf's halves-away-from-zero replaced by
# half-to-even (torch.round / rint), and the Q8_1 quantization skipped (raw activations).
HALF_EVEN = ("q = fl + tl.where(a - fl >= 0.5, 1.0, 0.0)",
             "q = fl + tl.where((a - fl > 0.5) | ((a - fl == 0.5) & (fl % 2 == 1)), 1.0, 0.0)")
NO_Q8_1 = ("xq = tl.reshape(q * dh[:, :, None], (BLOCK_M, BLOCK_K))",
           "xq = tl.reshape(x, (BLOCK_M, BLOCK_K))")
# ... and the block scale d used in float32, never rounded to the fp16 vLLM stores.
D_NOT_FP16 = ("dh = tl.where(amax == 0.0, 0.0, d).to(tl.float16).to(tl.float32)",
              "dh = tl.where(amax == 0.0, 0.0, d)")

HEADER = r'''
import torch
import triton
import triton.language as tl
'''

DECODE = r'''

@triton.jit
def _f16(p):
    # The little-endian fp16 field at byte pointer p, as float32.
    lo = tl.load(p).to(tl.uint16)
    hi = tl.load(p + 1).to(tl.uint16)
    return (lo | (hi << 8)).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def _u8(p):
    return tl.load(p).to(tl.int32)


@triton.jit
def _ggml_decode(w_ptr, row_off, k, QT: tl.constexpr):
    # Element k (int64) of the packed row starting at byte row_off (int64), as float32: exact,
    # since every scale is an fp16 times a small integer.
    if QT == 2 or QT == 3 or QT == 6 or QT == 7 or QT == 8:
        BYTES: tl.constexpr = (18 if QT == 2 else (20 if QT == 3 else
                               (22 if QT == 6 else (24 if QT == 7 else 34))))
        blk = w_ptr + row_off + (k // 32) * BYTES
        j = k % 32
        d = _f16(blk)
        if QT == 8:
            q = tl.load(blk + 2 + j).to(tl.int8, bitcast=True).to(tl.float32)
            return q * d
        QS: tl.constexpr = 2 if QT == 2 else (4 if QT == 3 else (6 if QT == 6 else 8))
        byte = _u8(blk + QS + j % 16)
        q = tl.where(j < 16, byte & 15, byte >> 4)
        if QT == 6 or QT == 7:
            QH: tl.constexpr = 2 if QT == 6 else 4
            q = q | (((_u8(blk + QH + j // 8) >> (j % 8)) & 1) << 4)
        if QT == 2:
            return (q - 8).to(tl.float32) * d
        if QT == 6:
            return (q - 16).to(tl.float32) * d
        return q.to(tl.float32) * d + _f16(blk + 2)
    KBYTES: tl.constexpr = (84 if QT == 10 else (110 if QT == 11 else
                            (144 if QT == 12 else (176 if QT == 13 else 210))))
    blk = w_ptr + row_off + (k // 256) * KBYTES
    j = k % 256
    half = j // 128
    g = (j % 128) // 32
    lane = j % 32
    if QT == 10:
        sc = _u8(blk + j // 16)
        q = (_u8(blk + 16 + 32 * half + lane) >> (2 * g)) & 3
        d = _f16(blk + 80)
        dmin = _f16(blk + 82)
        return (d * (sc & 15).to(tl.float32)) * q.to(tl.float32) - dmin * (sc >> 4).to(tl.float32)
    if QT == 11:
        low = (_u8(blk + 32 + 32 * half + lane) >> (2 * g)) & 3
        hbit = (_u8(blk + lane) >> (4 * half + g)) & 1
        q = low - 4 * (1 - hbit)
        i = j // 16
        us = (((_u8(blk + 96 + i % 8) >> (4 * (i // 8))) & 15)
              | (((_u8(blk + 104 + i % 4) >> (2 * (i // 4))) & 3) << 4))
        return (_f16(blk + 108) * (us - 32).to(tl.float32)) * q.to(tl.float32)
    if QT == 12 or QT == 13:
        i = j // 32
        b0 = _u8(blk + 4 + i)
        b1 = _u8(blk + 4 + (i + 4) % 12)
        b2 = _u8(blk + 4 + i % 4)
        sc = tl.where(i < 4, b0 & 63, (b1 & 15) | ((b2 >> 6) << 4))
        m = tl.where(i < 4, b1 & 63, (b1 >> 4) | ((b0 >> 6) << 4))
        QS: tl.constexpr = 16 if QT == 12 else 48
        q = (_u8(blk + QS + 32 * (j // 64) + lane) >> (4 * (i % 2))) & 15
        if QT == 13:
            q = q | (((_u8(blk + 16 + lane) >> i) & 1) << 4)
        d = _f16(blk)
        dmin = _f16(blk + 2)
        return (d * sc.to(tl.float32)) * q.to(tl.float32) - dmin * m.to(tl.float32)
    low = (_u8(blk + 64 * half + 32 * (g % 2) + lane) >> (4 * (g // 2))) & 15
    high = (_u8(blk + 128 + 32 * half + lane) >> (2 * g)) & 3
    sc = tl.load(blk + 192 + j // 16).to(tl.int8, bitcast=True).to(tl.float32)
    return (_f16(blk + 208) * sc) * ((low | (high << 4)) - 32).to(tl.float32)
'''

QUANT_Q8_1 = r'''

@triton.jit
def _round_away(r):
    # roundf: halves away from zero (floor(|r|) and the fraction are exact in float32).
    a = tl.abs(r)
    fl = tl.floor(a)
    q = fl + tl.where(a - fl >= 0.5, 1.0, 0.0)
    return tl.where(r < 0, -q, q)


@triton.jit
def _q8_1_kernel(x_ptr, xq_ptr, M, K, sxm, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    # BLOCK_M rows, BLOCK_K // 32 blocks of 32 values at a time: d = amax / 127,
    # q = roundf(x / d), d kept as fp16; writes q * fp16(d) (float32, exact) -- the activations
    # every dot product sees.
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    NB: tl.constexpr = BLOCK_K // 32
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        mask = (rm < M)[:, None] & (rk < K)[None, :]
        x = tl.load(x_ptr + rm[:, None].to(tl.int64) * sxm + rk[None, :], mask=mask, other=0.0)
        x = tl.reshape(x.to(tl.float32), (BLOCK_M, NB, 32))
        amax = tl.max(tl.abs(x), axis=2)
        d = tl.math.div_rn(amax, tl.full(amax.shape, 127.0, tl.float32))
        safe = tl.where(amax == 0.0, 1.0, d)
        q = _round_away(tl.math.div_rn(x, tl.broadcast_to(safe[:, :, None], x.shape)))
        dh = tl.where(amax == 0.0, 0.0, d).to(tl.float16).to(tl.float32)
        xq = tl.reshape(q * dh[:, :, None], (BLOCK_M, BLOCK_K))
        tl.store(xq_ptr + rm[:, None].to(tl.int64) * K + rk[None, :], xq, mask=mask)


def _quantize_q8_1(x):
    # [M, K] activations -> float32 [M, K] of their Q8_1 values.
    M, K = x.shape
    xq = torch.empty((M, K), dtype=torch.float32, device=x.device)
    if M > 0:
        _q8_1_kernel[(triton.cdiv(M, 16),)](x, xq, M, K, x.stride(0), BLOCK_M=16, BLOCK_K=256)
    return xq
'''

# A [BLOCK_M, BLOCK_N] tile of y[m, n] = sum_k xq[row(m), k] * w[expert(m), n, k]. Rows of xq come
# from a_rows (the gathered activation row of each output row, -1 for none) and the weight
# matrix from w_off (the byte offset of the expert's weight; one per program).
GEMM = r'''

@triton.jit
def _ggml_tile(xq_ptr, w_ptr, w_off, a_rows, rn, K, RB, QT: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    valid = a_rows >= 0
    xrow = tl.where(valid, a_rows, 0).to(tl.int64) * K
    row_off = w_off + rn.to(tl.int64) * RB
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        kmask = rk < K
        x = tl.load(xq_ptr + xrow[:, None] + rk[None, :], mask=valid[:, None] & kmask[None, :],
                    other=0.0)
        kk = tl.where(kmask, rk, 0).to(tl.int64)
        w = _ggml_decode(w_ptr, row_off[None, :], kk[:, None], QT)
        w = tl.where(kmask[:, None], w, 0.0)
        acc += tl.dot(x, w, input_precision="ieee")
    return acc
'''

# y = Q8_1(X) @ dequant(W).T for a dense [row, bytes] weight (ggml_mul_mat_vec_a8, ggml_mul_mat_a8).
DENSE = r'''

# The sizes are not specialized on (divisibility by 16, == 1): with ten quant types, three
# dtypes and two row blocks the constexprs already make dozens of variants, each compiled once.
@triton.jit(do_not_specialize=["M", "N", "K", "RB"])
def _dense_kernel(xq_ptr, w_ptr, y_ptr, M, N, K, RB, QT: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    a_rows = tl.where(rm < M, rm, -1)
    acc = _ggml_tile(xq_ptr, w_ptr, 0, a_rows, tl.where(rn < N, rn, 0), K, RB, QT,
                     BLOCK_M, BLOCK_N, BLOCK_K)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    ptrs = y_ptr + rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask)


def _ggml_dense(W, X, quant_type, row, block_m):
    M, K = X.shape
    y = torch.empty((M, row), dtype=X.dtype, device=X.device)
    if M == 0 or row == 0:
        return y
    xq = _quantize_q8_1(X)
    grid = (triton.cdiv(M, block_m), triton.cdiv(row, 64))
    _dense_kernel[grid](xq, W, y, M, row, K, W.shape[-1], QT=quant_type,
                        BLOCK_M=block_m, BLOCK_N=64, BLOCK_K=128)
    return y
'''
