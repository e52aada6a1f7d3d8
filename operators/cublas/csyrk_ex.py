"""cublas::cublasCsyrkEx — ``C = alpha * op(A) @ op(A)^T + beta * C`` on the triangle ``uplo``
of a column-major complex64 n x n matrix, A given as complex64 (CUDA_C_32F) or as pairs of
int8 (CUDA_C_8I), computed in fp32. Symmetric, not Hermitian: nothing is conjugated."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.cublas import _blas, _blas3, _cublas, _syrk
from operators.cublas._syrk import CUDA_C_8I, CUDA_C_32F, syrk_case
from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Kind, Negative, Tolerance

_U, _L = _blas.UPPER, _blas.LOWER

SOLUTION = (
    r'''
import torch
import triton
import triton.language as tl

'''
    + _blas3.MMA
    + r'''

@triton.jit
def _ld(p, mask):
    # One part (real or imaginary) of complex elements, widened exactly to float32 from
    # float32 or int8 (CUDA_C_8I).
    x = tl.load(p, mask=mask, other=0)
    return x.to(tl.float32)


@triton.jit
def _csyrk_kernel(a_ptr, c_ptr, N, K, alpha_re, alpha_im, beta_re, beta_im, s_an, s_ak, ldc,
                  UPPER: tl.constexpr, BETA_ZERO: tl.constexpr, IEEE: tl.constexpr,
                  BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
    # Complex buffers as reals: element e's real part at 2e, its imaginary part at 2e + 1
    # (A: float32 from view_as_real, or int8 pairs for CUDA_C_8I). One BLOCK x BLOCK tile of
    # C = alpha * op(A) @ op(A)^T + beta * C; tiles wholly outside the triangle do nothing.
'''
    + _syrk.TILE
    + r'''    acc_re = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    acc_im = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        k_ok = kk < K
        # op(A)(i, p) for the tile's rows, op(A)^T(p, j) = op(A)(j, p) for its columns.
        a_mask = m_ok[:, None] & k_ok[None, :]
        pa = a_ptr + 2 * (rm[:, None] * s_an + kk[None, :] * s_ak)
        ar = _ld(pa, a_mask)
        ai = _ld(pa + 1, a_mask)
        b_mask = k_ok[:, None] & n_ok[None, :]
        pb = a_ptr + 2 * (kk[:, None] * s_ak + rn[None, :] * s_an)
        br = _ld(pb, b_mask)
        bi = _ld(pb + 1, b_mask)
        acc_re = _mma(ar, br, acc_re, IEEE)
        acc_re = _mma(-ai, bi, acc_re, IEEE)
        acc_im = _mma(ar, bi, acc_im, IEEE)
        acc_im = _mma(ai, br, acc_im, IEEE)
    pc = c_ptr + 2 * (rm[:, None] + rn[None, :] * ldc)
'''
    + _syrk.TRIANGLE_MASK
    + r''''''
    + _blas3.COMPLEX_EPILOGUE
    + r'''

def cublasCsyrkEx(uplo, trans, n, k, alpha, A, Atype, lda, beta, C, Ctype, ldc):
    if n <= 0:
        return None
    alpha, beta = complex(alpha), complex(beta)
    # CUDA_C_8I (7): A is already int8 (real, imaginary) pairs; CUDA_C_32F: view as reals.
    a = A if Atype == 7 else torch.view_as_real(A)
    # op(A) is n x k: N -> A(i, p) at i + p*lda; T -> A(p, i) at p + i*lda (complex elements).
    s_an, s_ak = (1, lda) if trans == 0 else (lda, 1)
    # alpha == 0: C = beta * C on the triangle, and A is not read (K = 0: no loads).
    kk = k if alpha != 0 else 0
    if C.device.type == "cpu":  # Triton's interpreter: few programs
        BLOCK, BK, warps, stages = 32, 32, 4, 1
    else:
        BLOCK, BK, warps, stages = 64, 32, 4, 3
    nt = triton.cdiv(n, BLOCK)
    _csyrk_kernel[(nt, nt)](a, torch.view_as_real(C), n, kk, alpha.real, alpha.imag,
                            beta.real, beta.imag, s_an, s_ak, ldc,
                            UPPER=(uplo == 1), BETA_ZERO=(beta == 0), IEEE=True,
                            BLOCK=BLOCK, BLOCK_K=BK, num_warps=warps, num_stages=stages)
    return None
'''
)

# Hermitian instead of symmetric: op(A) @ op(A)^H, the second factor conjugated (herk's
# product); right when nothing is multiplied.
NEGATIVE_HERMITIAN = _blas.variant(SOLUTION, ("        bi = _ld(pb + 1, b_mask)\n",
                                              "        bi = -_ld(pb + 1, b_mask)\n"))

# Triton's default tl.dot precision: float32 inputs read as TF32 (10 mantissa bits).
NEGATIVE_TF32 = _blas.variant(SOLUTION, ("IEEE=True,", "IEEE=False,"))

# CUDA_C_8I bytes read as unsigned (-1 becomes 255); right for CUDA_C_32F data.
NEGATIVE_INT8_UNSIGNED = _blas.variant(SOLUTION, (
    "    x = tl.load(p, mask=mask, other=0)\n",
    "    x = tl.load(p, mask=mask, other=0)\n"
    "    if p.dtype.element_ty == tl.int8:\n"
    "        x = x.to(tl.uint8, bitcast=True)\n"))


@register("cublas::cublasCsyrkEx", version=2, kind=Kind.COMPUTE)
class CsyrkEx(_syrk.Syrk):
    routine, precision = "cublasCsyrkEx", "complex64"
    transes = (_blas.OP_N, _blas.OP_T)
    atypes = (CUDA_C_32F, CUDA_C_8I)
    entry_points = (
        EntryPoint(
            "cublasCsyrkEx",
            "cublasCsyrkEx(uplo: int, trans: int, n: int, k: int, alpha: complex, A: Tensor, "
            "Atype: int, lda: int, beta: complex, C: Tensor, Ctype: int, ldc: int) -> None",
            "C = alpha * op(A) @ op(A)^T + beta * C (no conjugation) on the triangle uplo of "
            "the complex64 C, in place; A complex64 or int8 pairs by Atype.",
        ),
    )
    description = (
        "cuBLAS `cublasCsyrkEx` (handle omitted): the complex symmetric rank-k update `C = "
        "alpha * op(A) @ op(A)^T + beta * C` — transposed, never conjugated (this is not herk) "
        "— of the n x n complex64 matrix C, column-major (element (i, j) at i + j*ldc, ldc >= "
        "n), updating only the triangle `uplo` names (LOWER=0: i >= j; UPPER=1: i <= j, the "
        "diagonal included) in place and returning None; C's other triangle and its padding "
        "rows must come back bit for bit. op(A) is n x k: for `trans` CUBLAS_OP_N=0, A is "
        "stored n x k (A(i, p) at i + p*lda, lda >= n); for CUBLAS_OP_T=1, A is stored k x n "
        "(op(A)(i, p) = A(p, i) at p + i*lda, lda >= k); CUBLAS_OP_C is not accepted for this "
        "routine. `Atype` and `Ctype` are cudaDataType ints; covered combinations: Atype "
        "CUDA_C_32F=4 with Ctype CUDA_C_32F=4 (A a complex64 tensor) and Atype CUDA_C_8I=7 with "
        "Ctype CUDA_C_32F=4 (A a 1-D int8 tensor of (real, imaginary) pairs: element e's real "
        "part at A[2e], its imaginary part at A[2e + 1], e = i + j*lda counting complex "
        "elements). `alpha`, `beta` are Python complex numbers used as complex64. Compute in "
        "float32 (int8 data converted exactly) with float32 accumulation: no TF32, use "
        "input_precision=\"ieee\" for tl.dot. Quick returns: n == 0 does nothing; when alpha "
        "== 0 or k == 0, C = beta * C on the triangle (A then holds finite values: cuBLAS may "
        "read it); when "
        "beta == 0, C's old values are not read (the triangle may hold NaN, which must not "
        "propagate)."
    )
    solution = SOLUTION
    negatives = (
        Negative("hermitian", "conjugates the second factor, computing op(A) @ op(A)^H as herk "
                 "does; right only when nothing is multiplied", NEGATIVE_HERMITIAN),
        Negative("tf32", "uses Triton's default tl.dot precision, reading float32 inputs as "
                 "TF32 (10 mantissa bits)", NEGATIVE_TF32),
        Negative("int8_unsigned", "reads CUDA_C_8I bytes as unsigned (-1 as 255); right for "
                 "CUDA_C_32F data", NEGATIVE_INT8_UNSIGNED),
    )
    # Relative to |alpha| (|op(A)| @ |op(A)^T|) + |beta C| per component: the GEMM family's
    # allowance in fp32.
    tolerances = {"complex64": Tolerance.ulps("complex64", 16)}

    def pack(self, g: _syrk.Args) -> tuple[Any, ...]:
        return (g.uplo, g.trans, g.n, g.k, g.alpha, g.a, g.atype, g.lda, g.beta, g.c, CUDA_C_32F,
                g.ldc)

    def unpack(self, args: Sequence[Any]) -> _syrk.Args:
        uplo, trans, n, k, alpha, a, atype, lda, beta, c, _ctype, ldc = args
        return _syrk.Args(uplo, trans, n, k, complex(alpha), a, atype, lda, complex(beta), c,
                          ldc)

    @property
    def c_index(self) -> int:
        return 9

    def scalars(self, rng: random.Random) -> tuple[complex, complex]:
        return (rng.choice((1.0 + 0j, -1.5 + 0.5j, 0.25 - 2j, 1j)),
                rng.choice((1.0 + 0j, -0.75 + 0.25j, 0.5j)))

    def cases(self) -> Sequence[Case]:
        e, d = self.routine, self.precision
        f32, i8 = CUDA_C_32F, CUDA_C_8I
        first = [
            syrk_case(e, d, _U, _blas.OP_N, 37, 29, alpha=1.0, beta=0.0, atype=f32, cpu=True),
            syrk_case(e, d, _L, _blas.OP_T, 45, 33, alpha=-1.5 + 0.5j, beta=1.0, pad_a=3,
                      atype=f32, cpu=True),
            syrk_case(e, d, _U, _blas.OP_T, 41, 30, alpha=0.25 - 2j, beta=-0.75 + 0.25j,
                      pad_c=2, atype=i8, cpu=True),
            syrk_case(e, d, _L, _blas.OP_N, 50, 19, alpha=1j, beta=0.5j, pad_a=1, pad_c=3,
                      atype=i8, cpu=True),
            syrk_case(e, d, _U, _blas.OP_T, 33, 20, alpha=0.0, beta=1.5 - 1j, atype=f32,
                      cpu=True),
            syrk_case(e, d, _L, _blas.OP_N, 21, 0, alpha=1.0, beta=-0.5, atype=f32, cpu=True),
            syrk_case(e, d, _U, _blas.OP_N, 0, 7, alpha=1.0, beta=1.0, atype=i8, cpu=True),
        ]
        return self.grid(first)

    def benchmark_cases(self) -> Sequence[Case]:
        e, d = self.routine, self.precision
        return [syrk_case(e, d, _U, _blas.OP_N, 4096, 1024, alpha=1.0, beta=0.0,
                          atype=CUDA_C_32F),
                syrk_case(e, d, _L, _blas.OP_T, 4096, 2048, alpha=-1 + 0.5j, beta=1.0,
                          atype=CUDA_C_32F),
                syrk_case(e, d, _U, _blas.OP_T, 4096, 1024, alpha=0.5j, beta=0.25,
                          atype=CUDA_C_8I)]

    def baseline(self, call: Call) -> object:
        g = self.unpack(call.args)
        if g.c.is_cuda and _cublas.available():
            dev = g.c.device
            _cublas.call("cublasCsyrkEx", g.uplo, g.trans, g.n, g.k,
                         _cublas.scalar(g.alpha, torch.complex64, dev), g.a, g.atype, g.lda,
                         _cublas.scalar(g.beta, torch.complex64, dev), g.c, CUDA_C_32F, g.ldc)
        else:
            self.torch_baseline(g)
        return None
