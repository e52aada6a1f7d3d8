"""cublas::cublasCsymm_v2 — ``C = alpha * A @ B + beta * C`` (side LEFT) or ``alpha * B @ A +
beta * C`` (side RIGHT) with A complex symmetric (not Hermitian), only its triangle ``uplo``
stored, on column-major complex64 matrices."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.cublas import _blas, _blas3, _cublas
from operators.registry import register
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    OperatorSpec,
    Out,
    Tier,
    Tolerance,
    case,
)

_U, _L = _blas.UPPER, _blas.LOWER
_LEFT, _RIGHT = _blas.LEFT, _blas.RIGHT

SOLUTION = (
    r'''
import torch
import triton
import triton.language as tl

'''
    + _blas3.MMA
    + r'''

@triton.jit
def _load_sym(a_ptr, r, c, lda, mask, UPPER: tl.constexpr):
    # A(r, c) of the symmetric A from its stored triangle (A(r, c) = A(c, r), no conjugation):
    # the other triangle is never read. Complex element e at reals 2e, 2e + 1.
    lo = tl.minimum(r, c)
    hi = tl.maximum(r, c)
    if UPPER:
        off = lo + hi * lda
    else:
        off = hi + lo * lda
    re = tl.load(a_ptr + 2 * off, mask=mask, other=0.0)
    im = tl.load(a_ptr + 2 * off + 1, mask=mask, other=0.0)
    return re, im


@triton.jit
def _csymm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, alpha_re, alpha_im, beta_re, beta_im,
                  lda, ldb, ldc, LEFT: tl.constexpr, UPPER: tl.constexpr,
                  BETA_ZERO: tl.constexpr, IEEE: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # One BLOCK_M x BLOCK_N tile of C = alpha * X @ Y + beta * C: X, Y = A, B (LEFT, K = M)
    # or B, A (RIGHT, K = N).
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K).to(tl.int64)
    m_ok = rm < M
    n_ok = rn < N
    acc_re = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_im = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        k_ok = kk < K
        x_mask = m_ok[:, None] & k_ok[None, :]
        y_mask = k_ok[:, None] & n_ok[None, :]
        if LEFT:
            xr, xi = _load_sym(a_ptr, rm[:, None], kk[None, :], lda, x_mask, UPPER)
            pb = b_ptr + 2 * (kk[:, None] + rn[None, :] * ldb)
            yr = tl.load(pb, mask=y_mask, other=0.0)
            yi = tl.load(pb + 1, mask=y_mask, other=0.0)
        else:
            pb = b_ptr + 2 * (rm[:, None] + kk[None, :] * ldb)
            xr = tl.load(pb, mask=x_mask, other=0.0)
            xi = tl.load(pb + 1, mask=x_mask, other=0.0)
            yr, yi = _load_sym(a_ptr, kk[:, None], rn[None, :], lda, y_mask, UPPER)
        acc_re = _mma(xr, yr, acc_re, IEEE)
        acc_re = _mma(-xi, yi, acc_re, IEEE)
        acc_im = _mma(xr, yi, acc_im, IEEE)
        acc_im = _mma(xi, yr, acc_im, IEEE)
    pc = c_ptr + 2 * (rm[:, None] + rn[None, :] * ldc)
    c_mask = m_ok[:, None] & n_ok[None, :]
'''
    + _blas3.COMPLEX_EPILOGUE
    + r'''

def cublasCsymm_v2(side, uplo, m, n, alpha, A, lda, B, ldb, beta, C, ldc):
    if m <= 0 or n <= 0:
        return None
    alpha, beta = complex(alpha), complex(beta)
    # A is m x m for side LEFT (0), n x n for RIGHT (1); alpha == 0 reads neither A nor B.
    k = (m if side == 0 else n) if alpha != 0 else 0
    if C.device.type == "cpu":  # Triton's interpreter: few programs
        BM, BN, BK, warps, stages = 32, 32, 32, 4, 1
    else:
        BM, BN, BK, warps, stages = 64, 64, 32, 4, 3
    grid = (triton.cdiv(m, BM), triton.cdiv(n, BN))
    _csymm_kernel[grid](torch.view_as_real(A), torch.view_as_real(B), torch.view_as_real(C),
                        m, n, k, alpha.real, alpha.imag, beta.real, beta.imag, lda, ldb, ldc,
                        LEFT=(side == 0), UPPER=(uplo == 1), BETA_ZERO=(beta == 0), IEEE=True,
                        BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_warps=warps,
                        num_stages=stages)
    return None
'''
)

# Hermitian instead of symmetric: the mirrored elements conjugated (A(r, c) = conj(A(c, r))),
# as hemm reads A; right when nothing is multiplied.
NEGATIVE_HERMITIAN = _blas.variant(SOLUTION, (
    "    return re, im\n",
    "    if UPPER:\n        stored = r <= c\n    else:\n        stored = r >= c\n"
    "    return re, tl.where(stored, im, -im)\n"))

# Triton's default tl.dot precision: float32 inputs read as TF32 (10 mantissa bits).
NEGATIVE_TF32 = _blas.variant(SOLUTION, ("IEEE=True,", "IEEE=False,"))

# uplo read backwards: the stored triangle taken as the other one, so the unreferenced
# triangle (NaN) is read; right when nothing is multiplied.
NEGATIVE_UPLO_FLIPPED = _blas.variant(SOLUTION, ("UPPER=(uplo == 1),", "UPPER=(uplo == 0),"))


def symm_case(side: int, uplo: int, m: int, n: int, *, alpha: complex, beta: complex,
              pad_a: int = 0, pad_b: int = 0, pad_c: int = 0, cpu: bool = False) -> Case:
    return case("cublasCsymm_v2", "complex64", (m, n), side=side, uplo=uplo, alpha=alpha,
                beta=beta, pad_a=pad_a, pad_b=pad_b, pad_c=pad_c, cpu=cpu)


_ALPHAS = (1.0 + 0j, -1.5 + 0.5j, 0.25 - 2j, 1j)
_BETAS = (1.0 + 0j, -0.75 + 0.25j, 0.5j)


@register("cublas::cublasCsymm_v2", version=2, kind=Kind.COMPUTE)
class Csymm(OperatorSpec):
    entry_points = (
        EntryPoint(
            "cublasCsymm_v2",
            "cublasCsymm_v2(side: int, uplo: int, m: int, n: int, alpha: complex, A: Tensor, "
            "lda: int, B: Tensor, ldb: int, beta: complex, C: Tensor, ldc: int) -> None",
            "C = alpha * A @ B + beta * C (side LEFT) or alpha * B @ A + beta * C (RIGHT), A "
            "complex symmetric from its triangle uplo, C updated in place.",
        ),
    )
    description = (
        "cuBLAS `cublasCsymm_v2` (handle omitted): `C = alpha * A @ B + beta * C` when `side` "
        "is CUBLAS_SIDE_LEFT=0 (A is m x m, lda >= m) or `C = alpha * B @ A + beta * C` when "
        "it is CUBLAS_SIDE_RIGHT=1 (A is n x n, lda >= n); B and C are m x n (ldb, ldc >= m). "
        "All are column-major complex64 (element (i, j) at i + j*ld), updating C in place and "
        "returning None. A is complex symmetric — A(i, j) = A(j, i), NOT conjugated (this is "
        "not hemm; the diagonal's imaginary parts count) — and only the triangle `uplo` names "
        "is stored and may be read (CUBLAS_FILL_MODE_LOWER=0: i >= j; UPPER=1: i <= j); the "
        "other triangle holds NaN. `alpha`, `beta` are Python complex numbers used as "
        "complex64. Quick returns: m == 0 or n == 0 does nothing; alpha == 0 gives C = beta * C "
        "(A and B then hold finite values: cuBLAS may read them); beta == 0 does not read C (it may hold "
        "NaN, which must not propagate). Padding rows (up to ld) are neither used nor written. "
        "Compute in float32 with float32 accumulation (no TF32: use input_precision=\"ieee\" "
        "for tl.dot)."
    )
    solution = SOLUTION
    negatives = (
        Negative("hermitian", "conjugates the mirrored triangle (A(i, j) = conj(A(j, i))), as "
                 "hemm does; right only when nothing is multiplied", NEGATIVE_HERMITIAN),
        Negative("tf32", "uses Triton's default tl.dot precision, reading float32 inputs as "
                 "TF32 (10 mantissa bits)", NEGATIVE_TF32),
        Negative("uplo_flipped", "takes the stored triangle for the other one, reading the "
                 "NaN triangle", NEGATIVE_UPLO_FLIPPED),
    )
    # Relative to |alpha| (|A| @ |B|) + |beta C| per component: the GEMM family's allowance.
    tolerances = {"complex64": Tolerance.ulps("complex64", _blas3.PRODUCT_ULPS)}

    def cases(self) -> Sequence[Case]:
        g = symm_case
        cs = [
            g(_LEFT, _U, 37, 29, alpha=1.0, beta=0.0, cpu=True),
            g(_RIGHT, _L, 45, 33, alpha=-1.5 + 0.5j, beta=1.0, pad_a=3, cpu=True),
            g(_LEFT, _L, 30, 41, alpha=0.25 - 2j, beta=-0.75 + 0.25j, pad_b=2, pad_c=1,
              cpu=True),
            g(_RIGHT, _U, 50, 19, alpha=1j, beta=0.5j, pad_a=1, pad_c=3, cpu=True),
            g(_LEFT, _U, 33, 20, alpha=0.0, beta=1.5 - 1j, cpu=True),
            g(_RIGHT, _L, 0, 7, alpha=1.0, beta=1.0, cpu=True),
        ]
        rng = random.Random("cublasCsymm_v2-grid")
        shapes = [(1, 1), (1, 300), (255, 1), (128, 128), (511, 257), (333, 777), (1000, 65),
                  (257, 511), (1024, 1024), (64, 2048)]
        for i, (m, n) in enumerate(shapes):
            for side in (_LEFT, _RIGHT):
                cs.append(g(side, (_U, _L)[(i + side) % 2], m, n, alpha=rng.choice(_ALPHAS),
                            beta=rng.choice(_BETAS) if i % 3 else 0.0, pad_a=(0, 7, 1)[i % 3],
                            pad_b=(0, 2, 16)[(i + 1) % 3], pad_c=(0, 3, 13)[i % 3]))
        for side in (_LEFT, _RIGHT):  # quick returns: n == 0; alpha == 0 gives beta * C
            cs.append(g(side, _U, 40, 0, alpha=1.0, beta=1.0))
            cs.append(g(side, _L, 70, 30, alpha=0.0, beta=0.0, pad_c=2))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        hi = 48 if small else 700
        return [symm_case(rng.choice((_LEFT, _RIGHT)), rng.choice((_U, _L)), rng.randrange(1, hi),
                          rng.randrange(1, hi), alpha=0.0 if i == 0 else rng.choice(_ALPHAS),
                          beta=rng.choice((*_BETAS, 0.0)), pad_a=rng.choice((0, 0, 1, 5)),
                          pad_b=rng.choice((0, 2)), pad_c=rng.choice((0, 0, 3)), cpu=small)
                for i in range(3 if small else 6)]

    def benchmark_cases(self) -> Sequence[Case]:
        return [symm_case(_LEFT, _U, 2048, 2048, alpha=1.0, beta=0.0),
                symm_case(_RIGHT, _L, 4096, 1024, alpha=-1 + 0.5j, beta=0.5)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        m, n = c.shape
        ka = m if c["side"] == _LEFT else n
        lda, ldb, ldc = max(1, ka) + c["pad_a"], max(1, m) + c["pad_b"], max(1, m) + c["pad_c"]
        # alpha == 0: A and B as usual, finite (cuBLAS in DEVICE pointer mode reads them then,
        # seen on an H100: NaN there came back as NaN); empty products: NaN throughout.
        if m <= 0 or n <= 0:
            a = torch.full((lda * max(ka, 1),), _blas.NAN, dtype=torch.complex64)
            b = torch.full((ldb * max(n, 1),), _blas.NAN, dtype=torch.complex64)
        else:
            a = _blas.make_triangle(ka, lda, c["uplo"], "complex64", gen)
            b = _blas.make_matrix(m, n, ldb, "complex64", gen)
        if m <= 0 or n <= 0:  # nothing is C's: random values that must come back as they were
            cbuf = _blas.random_values(ldc * max(n, 1), "complex64", gen)
        else:
            cbuf = _blas3.output_matrix(m, n, ldc, "complex64", gen, read=c["beta"] != 0)
        args = (c["side"], c["uplo"], m, n, c["alpha"], a, lda, b, ldb, c["beta"], cbuf, ldc)
        return Call(c.entry, args, outputs=(Out.arg(10),), mutable=frozenset({10}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        side, uplo, m, n, alpha, a, lda, b, ldb, beta, cbuf, ldc = call.args
        value = _blas.hp(cbuf)
        scale = torch.zeros_like(value)  # padding: must come back bit for bit
        if m <= 0 or n <= 0:
            return (Expected(value, cbuf.dtype, scale),)
        alpha, beta = _blas3.scalars(alpha, beta, "complex64")
        cv = _blas.stored(value, m, n, ldc)
        new = torch.zeros_like(cv)
        cond = torch.zeros_like(cv)
        if alpha != 0:
            ka = m if side == _LEFT else n
            full = _blas.dense_from_triangle(a, ka, lda, uplo, "symmetric")
            bm = _blas.stored(_blas.hp(b), m, n, ldb)
            x, y = (full, bm) if side == _LEFT else (bm, full)
            new += alpha * (x @ y)
            cond += _blas3.scaled_abs(alpha, _blas3.abs_product(x, y))
        if beta != 0:  # beta == 0: C is not read (NaN there must not propagate)
            new += beta * cv
            cond += _blas3.scaled_abs(beta, cv)
        cv.copy_(new)
        _blas.stored(scale, m, n, ldc).copy_(cond)
        return (Expected(value, cbuf.dtype, scale),)

    def baseline_library(self) -> str:
        return _cublas.library()

    def baseline(self, call: Call) -> object:
        side, uplo, m, n, alpha, a, lda, b, ldb, beta, cbuf, ldc = call.args
        if cbuf.is_cuda and _cublas.available():
            dev = cbuf.device
            _cublas.call("cublasCsymm_v2", side, uplo, m, n,
                         _cublas.scalar(alpha, torch.complex64, dev), a, lda, b, ldb,
                         _cublas.scalar(beta, torch.complex64, dev), cbuf, ldc)
            return None
        if m <= 0 or n <= 0:
            return None
        c = _blas.stored(cbuf, m, n, ldc)
        out = beta * c if beta != 0 else torch.zeros_like(c)
        if alpha != 0:
            ka = m if side == _LEFT else n
            full = _symmetric(_blas.stored(a, ka, ka, lda), uplo)
            bm = _blas.stored(b, m, n, ldb)
            out += alpha * (full @ bm if side == _LEFT else bm @ full)
        c.copy_(out)
        return None

    def cost(self, c: Case) -> Cost:
        """``8 m n k`` real FLOPs (k = m for LEFT, n for RIGHT); A's triangle, B and C read
        once (C only if beta != 0), C written once."""
        m, n = c.shape
        ka = m if c["side"] == _LEFT else n
        product = c["alpha"] != 0
        elems = (ka * (ka + 1) / 2 + m * n) * product + m * n * (2 if c["beta"] != 0 else 1)
        return Cost(flops=8.0 * m * n * ka * product + 6.0 * m * n, bytes=8.0 * elems,
                    dtype="float32")


def _symmetric(a: torch.Tensor, uplo: int) -> torch.Tensor:
    """The full symmetric matrix from the triangle ``uplo`` of ``a`` (on its device), never
    touching the other triangle's values."""
    n = a.shape[0]
    strict = _blas.in_triangle(n, uplo, diagonal=False).to(a.device)
    body = torch.where(strict, a, torch.zeros_like(a))
    return body + body.t() + torch.diag(a.diagonal())
