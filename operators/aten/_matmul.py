"""Shared machinery of the matmul family (bmm, matmul, linear): registers nothing.

``KERNEL`` is the Triton source of one batched GEMM kernel (up to three batch dims, any strides,
an optional bias added in float32 before the one rounding) and its launcher ``_gemm``; each
problem's solution string is ``KERNEL`` plus its own wrappers, so every solution stays a complete,
self-contained source. The spec-side helpers give the fp64 reference with the dot-product
conditioning ``|A| @ |B|`` and the tolerances aten::mm uses.
"""

from __future__ import annotations

import torch

from operators.spec import Expected, Tolerance

KERNEL = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, NB1, NB2,
                 sa0, sa1, sa2, sam, sak,
                 sb0, sb1, sb2, sbk, sbn,
                 sc0, sc1, sc2, scm, scn, s_bias,
                 HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, IEEE: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    tiles = num_m * num_n
    bid = pid // tiles
    pid = pid % tiles
    # Grouped ordering: GROUP_M row-blocks share the column blocks they read, for L2 reuse.
    per_group = GROUP_M * num_n
    group = pid // per_group
    first_m = group * GROUP_M
    group_size = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_size
    pid_n = (pid % per_group) // group_size
    # Batch coordinates (three batch dims, the first implied); broadcast dims have stride 0.
    bid = bid.to(tl.int64)
    b2 = bid % NB2
    rest = bid // NB2
    b1 = rest % NB1
    b0 = rest // NB1
    a_ptr += b0 * sa0 + b1 * sa1 + b2 * sa2
    b_ptr += b0 * sb0 + b1 * sb1 + b2 * sb2
    c_ptr += b0 * sc0 + b1 * sc1 + b2 * sc2

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Rows/columns past the edge wrap onto valid ones (always in bounds); their results are
    # never stored.
    am = (rm % M).to(tl.int64)
    bn = (rn % N).to(tl.int64)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + am[:, None] * sam + rk[None, :].to(tl.int64) * sak
    b_ptrs = b_ptr + rk[:, None].to(tl.int64) * sbk + bn[None, :] * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    if HAS_BIAS:
        bias = tl.load(bias_ptr + bn * s_bias)
        acc += bias.to(tl.float32)[None, :]
    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * scm + rn[None, :].to(tl.int64) * scn
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _pad3(values, fill):
    values = list(values)
    if len(values) > 3:
        raise ValueError("at most three batch dims are supported")
    return [fill] * (3 - len(values)) + values


def _gemm(a, b, c, bias=None):
    """c[..., m, n] = sum_k a[..., m, k] * b[..., k, n] (+ bias[n]); a, b, c share the batch
    shape (broadcast dims as stride-0 views), which may be empty."""
    M, K = a.shape[-2], a.shape[-1]
    N = b.shape[-1]
    batch = list(c.shape[:-2])
    nb = 1
    for d in batch:
        nb *= d
    if M == 0 or N == 0 or nb == 0:
        return c
    sizes = _pad3(batch, 1)
    sa = _pad3(a.stride()[:-2], 0)
    sb = _pad3(b.stride()[:-2], 0)
    sc = _pad3(c.stride()[:-2], 0)
    if a.dtype == torch.float32:
        bm, bn, bk, warps, stages, ieee = 64, 64, 32, 4, 3, True
    elif M >= 128 and N >= 256:
        bm, bn, bk, warps, stages, ieee = 128, 256, 64, 8, 3, False
    else:
        bm, bn, bk, warps, stages, ieee = 64, 64, 64, 4, 3, False
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn) * nb,)
    has_bias = bias is not None
    _gemm_kernel[grid](a, b, c, bias if has_bias else c, M, N, K, sizes[1], sizes[2],
                       *sa, a.stride(-2), a.stride(-1),
                       *sb, b.stride(-2), b.stride(-1),
                       *sc, c.stride(-2), c.stride(-1),
                       bias.stride(0) if has_bias else 0,
                       HAS_BIAS=has_bias, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                       IEEE=ieee, num_warps=warps, num_stages=stages)
    return c


def _merge_rows(t):
    """A 2-D (rows, last) view of t (no copy) when its leading dims fold into one strided dim,
    else None. Dims of size 1 may have any stride."""
    dims = [(s, st) for s, st in zip(t.shape[:-1], t.stride()[:-1]) if s != 1]
    rows = 1
    for s, _ in dims:
        rows *= s
    for (_, st), (s2, st2) in zip(dims[:-1], dims[1:]):
        if st != st2 * s2:
            return None
    row_stride = dims[-1][1] if dims else 1
    return t.as_strided((rows, t.shape[-1]), (row_stride, t.stride(-1)))
'''

# Relative to |A| @ |B| (+ |bias|): float32 accumulation errors are a few u of that scale (up to
# ~6 u measured for Triton, cuBLAS and PyTorch's CPU GEMM at K = 4096, see aten::mm; TF32 would
# be ~8000 u); half outputs cost one final rounding (<= 1 u of |value| <= scale).
TOLERANCES = {
    "float16": Tolerance.ulps("float16", 2),
    "bfloat16": Tolerance.ulps("bfloat16", 2),
    "float32": Tolerance.ulps("float32", 16),
}

FLOATS = ("float16", "bfloat16", "float32")


def dot_expected(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> Expected:
    """``a @ b`` (+ bias) in float64 with PyTorch's matmul broadcasting, scale ``|a| @ |b|``."""
    a64, b64 = a.double(), b.double()
    value = torch.matmul(a64, b64)
    scale = torch.matmul(a64.abs(), b64.abs())
    if bias is not None:
        value = value + bias.double()
        scale = scale + bias.double().abs()
    return Expected(value, a.dtype, scale)


def element_size(dtype: str) -> int:
    from operators.spec import dtype_from_name

    return torch.empty((), dtype=dtype_from_name(dtype)).element_size()
