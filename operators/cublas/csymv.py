"""cublas::cublasCsymv_v2 — ``y = alpha * A * x + beta * y``, A complex symmetric (not
Hermitian), one triangle stored, complex64."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.cublas import _blas, _cublas, _level2
from operators.registry import register
from operators.spec import Call, Case, Cost, EntryPoint, Expected, Kind, Negative, Out, Tier, case

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _csymv_kernel(a_ptr, x_ptr, y_ptr, n, lda, alpha_re, alpha_im, beta_re, beta_im, incx, incy,
                  x0, y0, UPPER: tl.constexpr, ALPHA_ZERO: tl.constexpr, BETA_ZERO: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # float32 views of complex64 buffers (real, imaginary interleaved). Rows rm of
    # y = alpha * A x + beta * y, A(i, j) read from the stored triangle: A(i, j) where (i, j)
    # lies in it, else its mirror A(j, i) (symmetric: not conjugated).
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    m_ok = rm < n
    acc_re = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc_im = tl.zeros((BLOCK_M,), dtype=tl.float32)
    if not ALPHA_ZERO:
        for start in range(0, n, BLOCK_N):
            rn = start + tl.arange(0, BLOCK_N).to(tl.int64)
            n_ok = rn < n
            px = 2 * (x0 + rn * incx)
            xr = tl.load(x_ptr + px, mask=n_ok, other=0.0)
            xi = tl.load(x_ptr + px + 1, mask=n_ok, other=0.0)
            valid = m_ok[:, None] & n_ok[None, :]
            if UPPER:
                stored = rm[:, None] <= rn[None, :]
            else:
                stored = rm[:, None] >= rn[None, :]
            direct = valid & stored
            mirror = valid & (~stored)
            pd = 2 * (rm[:, None] + rn[None, :] * lda)
            pm = 2 * (rn[None, :] + rm[:, None] * lda)
            ar = (tl.load(a_ptr + pd, mask=direct, other=0.0)
                  + tl.load(a_ptr + pm, mask=mirror, other=0.0))
            ai = (tl.load(a_ptr + pd + 1, mask=direct, other=0.0)
                  + tl.load(a_ptr + pm + 1, mask=mirror, other=0.0))
            acc_re += tl.sum(ar * xr[None, :] - ai * xi[None, :], axis=1)
            acc_im += tl.sum(ar * xi[None, :] + ai * xr[None, :], axis=1)
    out_re = alpha_re * acc_re - alpha_im * acc_im
    out_im = alpha_re * acc_im + alpha_im * acc_re
    py = 2 * (y0 + rm * incy)
    if not BETA_ZERO:  # beta == 0: y is not read (it may hold NaN)
        yr = tl.load(y_ptr + py, mask=m_ok, other=0.0)
        yi = tl.load(y_ptr + py + 1, mask=m_ok, other=0.0)
        out_re += beta_re * yr - beta_im * yi
        out_im += beta_re * yi + beta_im * yr
    tl.store(y_ptr + py, out_re, mask=m_ok)
    tl.store(y_ptr + py + 1, out_im, mask=m_ok)


def _start(n, inc):
    # A negative increment starts at the far end: element i is at (n - 1 - i) * |inc|.
    return (n - 1) * -inc if inc < 0 else 0


def cublasCsymv_v2(uplo, n, alpha, A, lda, x, incx, beta, y, incy):
    alpha, beta = complex(alpha), complex(beta)
    if n <= 0 or (alpha == 0 and beta == 1):  # BLAS's quick returns: y is left as it is
        return None
    BLOCK_M, BLOCK_N = (64, 64) if y.device.type == "cpu" else (32, 64)
    _csymv_kernel[(triton.cdiv(n, BLOCK_M),)](
        torch.view_as_real(A), torch.view_as_real(x), torch.view_as_real(y), n, lda,
        alpha.real, alpha.imag, beta.real, beta.imag, incx, incy, _start(n, incx),
        _start(n, incy), UPPER=(uplo == 1), ALPHA_ZERO=(alpha == 0), BETA_ZERO=(beta == 0),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=4)
    return None
'''

# Treats A as Hermitian (cublasChemv's rule): conjugates the mirrored elements; right only when
# A is real.
NEGATIVE_HERMITIAN = _blas.variant(SOLUTION, (
    "                  + tl.load(a_ptr + pm + 1, mask=mirror, other=0.0))",
    "                  - tl.load(a_ptr + pm + 1, mask=mirror, other=0.0))"))

# Always reads y: when beta == 0 the NaN an unset y holds leaks through 0 * NaN.
NEGATIVE_READS_Y = _blas.variant(SOLUTION, ("BETA_ZERO=(beta == 0)", "BETA_ZERO=False"))

# Reads the triangle uplo does not name (CUBLAS_FILL_MODE_LOWER is 0, UPPER 1, not the reverse):
# the NaN there poisons every row; right only when A is 1 x 1.
NEGATIVE_WRONG_UPLO = _blas.variant(SOLUTION, ("UPPER=(uplo == 1)", "UPPER=(uplo == 0)"))

# (alpha, beta) of the grid: beta == 0 (y unset, NaN), both complex, beta == 1, alpha == 0.
SCALARS = ((1 + 0j, 0j), (-1.5 + 0.5j, 0.5 - 1j), (0.3j, 1 + 0j), (0j, 0.5 + 0.25j))


@register("cublas::cublasCsymv_v2", version=2, kind=Kind.COMPUTE)
class Csymv(_level2.Level2):
    """Case shape ``(n,)``; params ``uplo``, ``alpha``, ``beta``, the layout (``incx``,
    ``incy``, ``pad``: lda = n + pad), optionally ``real_a`` (A with zero imaginary parts:
    symmetric and Hermitian agree) and ``std``. beta == 0 poisons y (not read); x stays finite
    when alpha == 0 (cuBLAS in DEVICE pointer mode reads it then: seen on an H100)."""

    routine, precision = "cublasCsymv_v2", "complex64"
    entry_points = (
        EntryPoint(
            "cublasCsymv_v2",
            "cublasCsymv_v2(uplo: int, n: int, alpha: complex, A: Tensor, lda: int, x: Tensor, "
            "incx: int, beta: complex, y: Tensor, incy: int) -> None",
            "y = alpha * A @ x + beta * y, A complex symmetric from one triangle, y in place.",
        ),
    )
    description = (
        "cuBLAS `cublasCsymv_v2` (handle omitted): `y = alpha * A * x + beta * y` with A an n x n "
        "complex SYMMETRIC matrix — A(j, i) == A(i, j), nothing conjugated (it is not "
        "Hermitian: cublasChemv would conjugate) — updating y in place and returning None. "
        "`A`, `x`, `y` are 1-D contiguous complex64 tensors holding the device buffers; "
        "`torch.view_as_real` gives float32 views, element k's real part at [k, 0] and "
        "imaginary part at [k, 1]. A is column-major, element (i, j) at `A[i + j*lda]`, "
        "lda >= max(1, n), and only the triangle `uplo` names is stored: uplo == 1 "
        "(CUBLAS_FILL_MODE_UPPER) the elements with i <= j, uplo == 0 (LOWER) those with "
        "i >= j; the other triangle and the padding rows may hold NaN and must not be read. "
        "`alpha` and `beta` are Python complex numbers used as cuComplex (float32 parts). "
        "Element i of x is `x[i*incx]` when incx > 0; a negative increment starts at the far "
        "end, element i being `x[(n-1-i)*|incx|]`; likewise for y with incy; increments are "
        "never 0. Elements of y that are not the vector's must be left untouched; A and x "
        "must not be modified. Quick returns: n == 0 does nothing; alpha == 0 gives y = beta * "
        "y (A and x then hold finite values: cuBLAS may read them); beta == 0 does not read y (it may hold "
        "NaN) and gives y = alpha * A * x. Compute in float32 (any summation order)."
    )
    solution = SOLUTION
    negatives = (
        Negative("hermitian", "conjugates the mirrored triangle (cublasChemv's rule); right "
                 "only for a real A", NEGATIVE_HERMITIAN),
        Negative("reads_y_when_beta_zero", "always adds beta * y, so the NaN of an unset y "
                 "leaks when beta == 0", NEGATIVE_READS_Y),
        Negative("wrong_uplo", "reads the triangle uplo does not name (takes LOWER=0 for "
                 "UPPER); right only for n == 1", NEGATIVE_WRONG_UPLO),
    )
    # Sums of n complex products, per component relative to |alpha| (|A| |x|) + |beta y|.
    tolerances = {"complex64": _blas.sum_tolerance("complex64")}

    def c(self, n: int, uplo: int, alpha: complex, beta: complex, incx: int, incy: int,
          pad: int, *, cpu: bool = False, **extra: object) -> Case:
        return case(self.routine, self.precision, (n,), uplo=uplo, alpha=complex(alpha),
                    beta=complex(beta), **_level2.layout(incx, incy, pad), **extra, cpu=cpu)

    def edge_cases(self) -> list[Case]:
        c = self.c
        return [
            c(37, 1, 1, 0, 1, 1, 0, cpu=True),
            c(45, 0, -1.5 + 0.5j, 0.5 - 1j, 2, -1, 3, cpu=True),
            c(64, 1, 0.3j, 1, -2, 3, 0, real_a=True, cpu=True),
            c(20, 0, 0, 0.5 + 0.25j, -1, -2, 7, cpu=True),
            c(70, 0, 1 + 1j, -1, 1, 1, 0, cpu=True),
            c(1, 1, -1.5 + 0.5j, 0.5 - 1j, 1, 1, 0, cpu=True),
            c(0, 0, 1, 1, 1, 1, 0, cpu=True),
            c(300, 1, -1.5 + 0.5j, 0.5 - 1j, 1, 2, 5, std=1e17),
        ]

    def grid(self) -> list[Case]:
        out = [self.c(n, uplo, a, b, *lay) for n in _level2.GRID_N for uplo in (0, 1)
               for a, b in SCALARS for lay in _level2.LAYOUTS]
        return out + [self.c(0, uplo, *SCALARS[1], *lay) for uplo in (0, 1)
                      for lay in _level2.LAYOUTS[:2]]

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for n in self.hidden_sizes(rng, tier):
            a, b = rng.choice(SCALARS + ((2 - 1j, -0.25j),))
            lay = _level2.pick_layout(rng, two=True)
            out.append(self.c(n, rng.choice((0, 1)), a, b, lay["incx"], lay["incy"], lay["pad"],
                              cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # A: 11000^2 complex64 = 968 MB, one triangle of it read.
        return [self.c(11000, 1, -1.5 + 0.5j, 0.5 - 1j, 1, 1, 0),
                self.c(11000, 0, 1, 0, -1, 1, 0)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        (n,) = c.shape
        std = float(c.get("std", 1.0))
        alpha, beta, lda = c["alpha"], c["beta"], max(n, 1) + c["pad"]
        a = _blas.make_triangle(n, lda, c["uplo"], self.precision, gen)
        if std != 1.0:
            a.mul_(std)
        if c.get("real_a"):
            a.imag[a.real.isfinite()] = 0.0
        x = _level2.vector(n, c["incx"], self.precision, gen, std=std, nan=False)
        y = _level2.vector(n, c["incy"], self.precision, gen, std=std, nan=beta == 0)
        return Call(c.entry, (c["uplo"], n, alpha, a, lda, x, c["incx"], beta, y, c["incy"]),
                    outputs=(Out.arg(8),), mutable=frozenset({8}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        uplo, n, alpha, a, lda, x, incx, beta, y, incy = call.args
        alpha, beta = _blas.as_c(alpha, self.precision), _blas.as_c(beta, self.precision)
        full = _level2.symmetric(a, n, lda, uplo)
        xv = _blas.hp(_blas.gather(x, n, incx))
        if alpha == 0:  # y = beta * y
            xv = torch.zeros_like(xv)
        return (_level2.mv_update(y, n, incy, alpha, beta, full @ xv, full.abs() @ xv.abs()),)

    def baseline(self, call: Call) -> object:
        uplo, n, alpha, a, lda, x, incx, beta, y, incy = call.args
        if _level2.on_cublas(y):
            dev = y.device
            _cublas.call(self.routine, uplo, n, _level2.cscalar(alpha, y.dtype, dev), a, lda, x,
                         incx, _level2.cscalar(beta, y.dtype, dev), y, incy)
        else:
            t = _blas.stored(a, n, n, lda)
            full = (t.triu() + t.triu(1).t()) if uplo == _blas.UPPER else (t.tril() + t.tril(-1).t())
            _level2.mv_baseline(y, n, incy, alpha, beta, lambda: full @ _blas.gather(x, n, incx))
        return None

    def cost(self, c: Case) -> Cost:
        (n,) = c.shape
        n = max(n, 0)
        return _level2.mv_cost(n, n * (n + 1) // 2, n * n, c["alpha"], c["beta"], self.precision)
