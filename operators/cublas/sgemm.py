"""cublas::cublasSgemm_v2 — ``C = alpha * op(A) @ op(B) + beta * C``, column-major, float32."""

from __future__ import annotations

import random
from collections.abc import Sequence

from operators.cublas import _blas, _gemm, _gemm_cases
from operators.registry import register
from operators.spec import (
    Case,
    EntryPoint,
    Kind,
    Negative,
    Tier,
    Tolerance,
    case,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _sgemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, alpha, beta,
                  s_am, s_ak, s_bk, s_bn, ldc,
                  BETA_ZERO: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m

    rm = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    n_ok = rn < N
    a_ptrs = a_ptr + rm[:, None] * s_am + rk[None, :] * s_ak
    b_ptrs = b_ptr + rk[:, None] * s_bk + rn[None, :] * s_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + rk) < K
        a = tl.load(a_ptrs, mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * s_ak
        b_ptrs += BLOCK_K * s_bk

    c_ptrs = c_ptr + rm[:, None] + rn[None, :] * ldc
    c_mask = m_ok[:, None] & n_ok[None, :]
    out = alpha * acc
    if not BETA_ZERO:
        c = tl.load(c_ptrs, mask=c_mask, other=0.0)
        out = out + beta * c
    tl.store(c_ptrs, out, mask=c_mask)


def cublasSgemm_v2(transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc):
    if m <= 0 or n <= 0:
        return None
    # Column-major: element (i, j) of an ld-by-cols matrix is at i + j * ld.
    # op(A) is m x k: N -> A(i, p) at i + p*lda; T/C -> A(p, i) at p + i*lda.
    if transa == 0:
        s_am, s_ak = 1, lda
    else:
        s_am, s_ak = lda, 1
    # op(B) is k x n: N -> B(p, j) at p + j*ldb; T/C -> B(j, p) at j + p*ldb.
    if transb == 0:
        s_bk, s_bn = 1, ldb
    else:
        s_bk, s_bn = ldb, 1
    if C.device.type == "cpu":  # Triton's interpreter: few programs, moderate tiles
        BM, BN, BK, warps, stages = 32, 32, 32, 4, 1
    else:
        BM, BN, BK, warps, stages = 128, 128, 32, 8, 3
    grid = (triton.cdiv(m, BM) * triton.cdiv(n, BN),)
    _sgemm_kernel[grid](A, B, C, m, n, k, alpha, beta, s_am, s_ak, s_bk, s_bn, ldc,
                        BETA_ZERO=(beta == 0), BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=8,
                        num_warps=warps, num_stages=stages)
    return None
'''

# Reads C even when beta == 0: NaN in the (uninitialised) C propagates through 0 * NaN.
NEGATIVE_READS_C = SOLUTION.replace("BETA_ZERO=(beta == 0)", "BETA_ZERO=False")

# Only CUBLAS_OP_T (1) transposes; CUBLAS_OP_C (2), the conjugate transpose, is taken as N.
# (Its loads are also clamped to the buffers, so the wrong strides never leave them.)
NEGATIVE_OP_C_AS_N = (
    SOLUTION.replace("    if transa == 0:\n", "    if transa != 1:\n")
    .replace("    if transb == 0:\n", "    if transb != 1:\n")
    .replace("                  s_am, s_ak, s_bk, s_bn, ldc,\n",
             "                  s_am, s_ak, s_bk, s_bn, ldc, a_numel, b_numel,\n")
    .replace("alpha, beta, s_am, s_ak, s_bk, s_bn, ldc,\n",
             "alpha, beta, s_am, s_ak, s_bk, s_bn, ldc, A.numel(), B.numel(),\n")
    .replace("mask=m_ok[:, None] & k_ok[None, :], other=0.0)",
             "mask=m_ok[:, None] & k_ok[None, :]\n"
             "                    & (rm[:, None] * s_am + (k0 + rk)[None, :] * s_ak < a_numel), other=0.0)")
    .replace("mask=k_ok[:, None] & n_ok[None, :], other=0.0)",
             "mask=k_ok[:, None] & n_ok[None, :]\n"
             "                    & ((k0 + rk)[:, None] * s_bk + rn[None, :] * s_bn < b_numel), other=0.0)")
)

# Applies alpha after adding beta * C: alpha * (op(A) @ op(B) + beta * C); right when alpha == 1
# or beta == 0.
NEGATIVE_ALPHA_SCALES_C = SOLUTION.replace(
    "        out = out + beta * c\n", "        out = alpha * (acc + beta * c)\n")

# Takes the leading dimensions as the stored row counts, ignoring lda/ldb/ldc padding.
NEGATIVE_IGNORES_LD = SOLUTION.replace(
    "    if transa == 0:\n",
    "    lda = m if transa == 0 else k\n    ldb = k if transb == 0 else n\n    ldc = m\n"
    "    if transa == 0:\n",
)

# A fast path for k >= 64 that keeps Triton's default tl.dot precision: float32 inputs read as
# TF32 (10 mantissa bits). Right for the smaller products only.
NEGATIVE_TF32 = _blas.variant(
    SOLUTION,
    ("                  BETA_ZERO: tl.constexpr,\n",
     "                  BETA_ZERO: tl.constexpr, FAST: tl.constexpr,\n"),
    ('        acc = tl.dot(a, b, acc, input_precision="ieee")\n',
     '        if FAST:\n            acc = tl.dot(a, b, acc)\n        else:\n'
     '            acc = tl.dot(a, b, acc, input_precision="ieee")\n'),
    ("BETA_ZERO=(beta == 0),", "BETA_ZERO=(beta == 0), FAST=(k >= 64),"))

_OPS = _gemm_cases.OPS


def _gemm_case(ta: str, tb: str, m: int, n: int, k: int, *, alpha: float, beta: float,
               pad_a: int = 0, pad_b: int = 0, pad_c: int = 0, cpu: bool = False) -> Case:
    return case("cublasSgemm_v2", "float32", (m, n, k), transa=_OPS[ta], transb=_OPS[tb],
                alpha=alpha, beta=beta, pad_a=pad_a, pad_b=pad_b, pad_c=pad_c, cpu=cpu)


@register("cublas::cublasSgemm_v2", version=1, kind=Kind.COMPUTE)
class Sgemm(_gemm.Gemm):
    """Inputs, reference, baseline and cost are the GEMM family's (operators/cublas/_gemm.py);
    the cases, text and controls predate it and are kept as they were."""

    routine, precision, convention = "cublasSgemm_v2", "float32", "none"
    entry_points = (
        EntryPoint(
            "cublasSgemm_v2",
            "cublasSgemm_v2(transa: int, transb: int, m: int, n: int, k: int, alpha: float, A: Tensor, "
            "lda: int, B: Tensor, ldb: int, beta: float, C: Tensor, ldc: int) -> None",
            "C = alpha * op(A) @ op(B) + beta * C on column-major matrices, C updated in place.",
        ),
    )
    description = (
        "cuBLAS `cublasSgemm_v2` (handle omitted): `C = alpha * op(A) @ op(B) + beta * C` with "
        "column-major matrices, updating `C` in place and returning None. `A`, `B`, `C` are 1-D "
        "contiguous float32 tensors holding the device buffers; element (i, j) of a matrix with "
        "leading dimension ld is at index i + j*ld. `transa`/`transb` are CUBLAS_OP_N=0, "
        "CUBLAS_OP_T=1, CUBLAS_OP_C=2 (for real data C is the same as T). op(A) is m x k: A is "
        "stored m x k with lda >= m when transa is N, else k x m with lda >= k; op(B) is k x n: B is "
        "stored k x n with ldb >= k when transb is N, else n x k with ldb >= n; C is m x n with "
        "ldc >= m. Leading dimensions may exceed the row counts: padding elements (rows beyond the "
        "matrix) must be ignored and, in C, left untouched. `alpha` and `beta` are Python floats "
        "used as float32. When beta == 0, C is not read (it may hold NaN, which must not "
        "propagate). Compute in float32 with float32 accumulation (no TF32: use "
        "input_precision=\"ieee\" for tl.dot)."
    )
    solution = SOLUTION
    negatives = (
        Negative("reads_c_when_beta_zero",
                 "always computes alpha*acc + beta*C, so NaN in an uninitialised C leaks when beta == 0",
                 NEGATIVE_READS_C),
        Negative("op_c_as_n", "treats CUBLAS_OP_C (2) as no transpose instead of as T",
                 NEGATIVE_OP_C_AS_N),
        Negative("alpha_scales_c", "computes alpha * (op(A) @ op(B) + beta * C)", NEGATIVE_ALPHA_SCALES_C),
        Negative("ignores_leading_dims", "assumes lda/ldb/ldc equal the stored row counts",
                 NEGATIVE_IGNORES_LD),
        Negative("tf32_fast_path", "for k >= 64 uses Triton's default tl.dot precision, "
                 "reading float32 inputs as TF32 (10 mantissa bits)", NEGATIVE_TF32),
    )
    # Relative to scale = |alpha| * (|op(A)| @ |op(B)|) + |beta * C|. Measured worst case over
    # the full tier (up to 1M outputs per case): plain sequential fp32 accumulation (with or
    # without FMA) 6.3 ulps, MKL sgemm on CPU 5.2; 16 leaves headroom for 16M-output cases and
    # other summation orders (split-K), while TF32 inputs (~2^-11 per product) land at hundreds.
    tolerances = {"float32": Tolerance.ulps("float32", 16)}

    def cases(self) -> Sequence[Case]:
        g = _gemm_case
        cs = [
            g("N", "N", 37, 45, 29, alpha=1.0, beta=0.0, cpu=True),
            g("T", "N", 64, 33, 50, alpha=-1.5, beta=1.0, pad_a=3, cpu=True),
            g("N", "T", 19, 70, 41, alpha=0.5, beta=-0.75, pad_b=5, pad_c=2, cpu=True),
            g("T", "T", 50, 21, 65, alpha=2.0, beta=0.0, pad_a=1, pad_b=4, pad_c=3, cpu=True),
            g("N", "N", 64, 64, 64, alpha=1.0, beta=1.0, cpu=True),
            g("C", "N", 33, 40, 47, alpha=-1.5, beta=0.5, cpu=True),
            g("N", "C", 45, 31, 38, alpha=1.0, beta=0.0, pad_a=2, cpu=True),
            g("N", "N", 1, 1, 1, alpha=1.0, beta=1.0),
            g("T", "N", 1, 97, 300, alpha=-1.5, beta=0.0),
            g("N", "T", 255, 1, 129, alpha=0.5, beta=1.0, pad_c=1),
            g("N", "N", 128, 128, 128, alpha=1.0, beta=0.0),
            g("N", "N", 511, 257, 1023, alpha=-1.5, beta=0.5, pad_a=7, pad_b=1, pad_c=13),
            g("T", "N", 333, 555, 777, alpha=1.0, beta=1.0),
            g("N", "T", 1000, 999, 65, alpha=2.0, beta=0.0, pad_b=24),
            g("T", "T", 257, 383, 511, alpha=-1.5, beta=-1.0, pad_a=16, pad_b=3, pad_c=5),
            g("C", "C", 190, 210, 230, alpha=0.5, beta=0.0),
            g("N", "N", 1024, 1024, 1024, alpha=1.0, beta=0.0),
            g("T", "N", 1024, 1024, 1024, alpha=-1.5, beta=1.0),
            g("N", "N", 2048, 64, 4096, alpha=1.0, beta=1.0),
            g("N", "T", 96, 2048, 2000, alpha=0.25, beta=0.0, pad_a=32, pad_c=32),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        hi = 72 if small else 900
        out = []
        for _ in range(3 if small else 6):
            m, n, k = (rng.randrange(1, hi) for _ in range(3))
            out.append(_gemm_case(
                rng.choice("NTC"), rng.choice("NTC"), m, n, k,
                alpha=rng.choice([1.0, -1.5, 0.5, 3.0, 0.1]), beta=rng.choice([0.0, 1.0, -0.75, 0.3]),
                pad_a=rng.choice([0, 0, 1, 5]), pad_b=rng.choice([0, 0, 2, 9]),
                pad_c=rng.choice([0, 0, 1, 3]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        g = _gemm_case
        return [
            g("N", "N", 4096, 4096, 4096, alpha=1.0, beta=0.0),
            g("T", "N", 4096, 4096, 4096, alpha=1.0, beta=1.0),
        ]
