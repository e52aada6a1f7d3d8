"""cublas::cublasSsyrk_v2 — ``C = alpha * op(A) @ op(A)^T + beta * C`` on the triangle
``uplo`` of a column-major float32 n x n matrix; the other triangle is left as it was."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.cublas import _blas, _blas3, _cublas, _syrk
from operators.cublas._syrk import syrk_case
from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Kind, Negative, Tolerance

_U, _L = _blas.UPPER, _blas.LOWER

SOLUTION = (
    r'''
import triton
import triton.language as tl

'''
    + _blas3.MMA
    + r'''

@triton.jit
def _syrk_kernel(a_ptr, c_ptr, N, K, alpha, beta, s_an, s_ak, ldc,
                 UPPER: tl.constexpr, BETA_ZERO: tl.constexpr, IEEE: tl.constexpr,
                 BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
    # One BLOCK x BLOCK tile of C = alpha * op(A) @ op(A)^T + beta * C, column-major; tiles
    # wholly outside the triangle uplo do nothing.
'''
    + _syrk.TILE
    + r'''    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        k_ok = kk < K
        # op(A)(i, p) for the tile's rows, and op(A)^T(p, j) = op(A)(j, p) for its columns.
        a = tl.load(a_ptr + rm[:, None] * s_an + kk[None, :] * s_ak,
                    mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        at = tl.load(a_ptr + kk[:, None] * s_ak + rn[None, :] * s_an,
                     mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = _mma(a, at, acc, IEEE)
    c_ptrs = c_ptr + rm[:, None] + rn[None, :] * ldc
'''
    + _syrk.TRIANGLE_MASK
    + r'''    out = alpha * acc
    if not BETA_ZERO:
        out += beta * tl.load(c_ptrs, mask=c_mask, other=0.0)
    tl.store(c_ptrs, out, mask=c_mask)


def cublasSsyrk_v2(uplo, trans, n, k, alpha, A, lda, beta, C, ldc):
    if n <= 0:
        return None
    # op(A) is n x k: N -> A(i, p) at i + p*lda; T/C -> A(p, i) at p + i*lda.
    s_an, s_ak = (1, lda) if trans == 0 else (lda, 1)
    # alpha == 0: C = beta * C on the triangle, and A is not read (K = 0: no loads).
    kk = k if alpha != 0 else 0
    if C.device.type == "cpu":  # Triton's interpreter: few programs
        BLOCK, BK, warps, stages = 32, 32, 4, 1
    else:
        BLOCK, BK, warps, stages = 128, 32, 8, 3
    nt = triton.cdiv(n, BLOCK)
    _syrk_kernel[(nt, nt)](A, C, n, kk, float(alpha), float(beta), s_an, s_ak, ldc,
                           UPPER=(uplo == 1), BETA_ZERO=(beta == 0), IEEE=True,
                           BLOCK=BLOCK, BLOCK_K=BK, num_warps=warps, num_stages=stages)
    return None
'''
)

# Triton's default tl.dot precision: float32 inputs read as TF32 (10 mantissa bits).
NEGATIVE_TF32 = _blas.variant(SOLUTION, ("IEEE=True,", "IEEE=False,"))

# Computes every tile of C, both triangles: the triangle uplo is right, the other one is
# overwritten with its half of the symmetric product.
NEGATIVE_BOTH_TRIANGLES = _blas.variant(
    SOLUTION,
    ("    if UPPER:\n        if pid_m > pid_n:\n            return\n"
     "    else:\n        if pid_m < pid_n:\n            return\n", ""),
    ("    c_mask = m_ok[:, None] & n_ok[None, :] & tri\n",
     "    c_mask = m_ok[:, None] & n_ok[None, :]\n"))

# Only CUBLAS_OP_T (1) transposes: CUBLAS_OP_C (2), which is T for real data, taken as N.
NEGATIVE_OP_C_AS_N = _blas.variant(SOLUTION, ("(1, lda) if trans == 0 else (lda, 1)",
                                              "(1, lda) if trans != 1 else (lda, 1)"))


@register("cublas::cublasSsyrk_v2", version=2, kind=Kind.COMPUTE)
class Ssyrk(_syrk.Syrk):
    routine, precision = "cublasSsyrk_v2", "float32"
    transes = (_blas.OP_N, _blas.OP_T, _blas.OP_C)
    entry_points = (
        EntryPoint(
            "cublasSsyrk_v2",
            "cublasSsyrk_v2(uplo: int, trans: int, n: int, k: int, alpha: float, A: Tensor, "
            "lda: int, beta: float, C: Tensor, ldc: int) -> None",
            "C = alpha * op(A) @ op(A)^T + beta * C on the triangle uplo of C, in place.",
        ),
    )
    description = (
        "cuBLAS `cublasSsyrk_v2` (handle omitted): the symmetric rank-k update `C = alpha * "
        "op(A) @ op(A)^T + beta * C` of the n x n float32 matrix C, column-major (element (i, j) "
        "at i + j*ldc, ldc >= n), updating only the triangle `uplo` names (LOWER=0: i >= j; "
        "UPPER=1: i <= j, the diagonal included) in place and returning None; C's other "
        "triangle and its padding rows must come back bit for bit. op(A) is n x k: for "
        "`trans` CUBLAS_OP_N=0, A is stored n x k (A(i, p) at i + p*lda, lda >= n); for "
        "CUBLAS_OP_T=1 and CUBLAS_OP_C=2 (the same for real data) A is stored k x n (op(A)(i, "
        "p) = A(p, i) at p + i*lda, lda >= k). `alpha`, `beta` are Python floats used as "
        "float32. Quick returns: n == 0 does nothing; when alpha == 0 or k == 0, C = beta * C "
        "on the triangle (A then holds finite values: cuBLAS may read it); when beta == 0, C's old values "
        "are not read (the triangle may hold NaN, which must not propagate). Compute in float32 "
        "with float32 accumulation (no TF32: use input_precision=\"ieee\" for tl.dot)."
    )
    solution = SOLUTION
    negatives = (
        Negative("tf32", "uses Triton's default tl.dot precision, reading float32 inputs as "
                 "TF32 (10 mantissa bits)", NEGATIVE_TF32),
        Negative("both_triangles", "computes and stores every tile of C, overwriting the "
                 "triangle uplo does not name", NEGATIVE_BOTH_TRIANGLES),
        Negative("op_c_as_n", "takes CUBLAS_OP_C (2) as no transpose instead of as T",
                 NEGATIVE_OP_C_AS_N),
    )
    # Relative to |alpha| (|op(A)| @ |op(A)^T|) + |beta C|: the GEMM family's allowance.
    tolerances = {"float32": Tolerance.ulps("float32", 16)}

    def pack(self, g: _syrk.Args) -> tuple[Any, ...]:
        return (g.uplo, g.trans, g.n, g.k, g.alpha.real, g.a, g.lda, g.beta.real, g.c, g.ldc)

    def unpack(self, args: Sequence[Any]) -> _syrk.Args:
        uplo, trans, n, k, alpha, a, lda, beta, c, ldc = args
        return _syrk.Args(uplo, trans, n, k, complex(alpha), a, None, lda, complex(beta), c, ldc)

    @property
    def c_index(self) -> int:
        return 8

    def scalars(self, rng: random.Random) -> tuple[complex, complex]:
        return rng.choice((1.0, -1.5, 0.5, 2.0)), rng.choice((1.0, -0.75, 0.3))

    def cases(self) -> Sequence[Case]:
        e, d = self.routine, self.precision
        first = [
            syrk_case(e, d, _U, _blas.OP_N, 37, 29, alpha=1.0, beta=0.0, cpu=True),
            syrk_case(e, d, _L, _blas.OP_T, 45, 33, alpha=-1.5, beta=1.0, pad_a=3, cpu=True),
            syrk_case(e, d, _U, _blas.OP_C, 41, 30, alpha=0.5, beta=-0.75, pad_c=2, cpu=True),
            syrk_case(e, d, _L, _blas.OP_N, 50, 19, alpha=2.0, beta=0.5, pad_a=1, pad_c=3,
                      cpu=True),
            syrk_case(e, d, _U, _blas.OP_T, 33, 20, alpha=0.0, beta=1.5, cpu=True),
            syrk_case(e, d, _L, _blas.OP_C, 21, 0, alpha=1.0, beta=-0.5, cpu=True),
            syrk_case(e, d, _U, _blas.OP_N, 0, 7, alpha=1.0, beta=1.0, cpu=True),
        ]
        return self.grid(first)

    def benchmark_cases(self) -> Sequence[Case]:
        e, d = self.routine, self.precision
        return [syrk_case(e, d, _U, _blas.OP_N, 4096, 4096, alpha=1.0, beta=0.0),
                syrk_case(e, d, _L, _blas.OP_T, 8192, 1024, alpha=-1.0, beta=1.0)]

    def baseline(self, call: Call) -> object:
        g = self.unpack(call.args)
        if g.c.is_cuda and _cublas.available():
            dev = g.c.device
            _cublas.call("cublasSsyrk_v2", g.uplo, g.trans, g.n, g.k,
                         _cublas.scalar(g.alpha.real, torch.float32, dev), g.a, g.lda,
                         _cublas.scalar(g.beta.real, torch.float32, dev), g.c, g.ldc)
        else:
            self.torch_baseline(g)
        return None
