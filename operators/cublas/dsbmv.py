"""cublas::cublasDsbmv_v2 — ``y = alpha * A * x + beta * y``, A a symmetric band matrix in BLAS
band storage, float64."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.cublas import _blas, _cublas, _level2
from operators.registry import register
from operators.spec import Call, Case, Cost, EntryPoint, Expected, Kind, Negative, Out, Tier, case

SOLUTION = r'''
import triton
import triton.language as tl


@triton.jit
def _dsbmv_kernel(a_ptr, x_ptr, y_ptr, n, k, lda, alpha: tl.float64, beta: tl.float64, incx,
                  incy, x0, y0, UPPER: tl.constexpr, ALPHA_ZERO: tl.constexpr,
                  BETA_ZERO: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    # Rows rm of y = alpha * A x + beta * y. Row i of the symmetric band A holds A(i, i+d) and
    # A(i, i-d) = A(i-d, i) for d = 0..k, both read from the stored triangle: upper A(r, c) at
    # band row k + r - c of column c, lower at band row r - c of column c.
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    m_ok = rm < n
    acc = tl.zeros((BLOCK_M,), dtype=tl.float64)
    if not ALPHA_ZERO:
        for d0 in range(0, k + 1, BLOCK_D):
            d = d0 + tl.arange(0, BLOCK_D)
            d_ok = d <= k
            right = rm[:, None] + d[None, :]  # column i + d
            left = rm[:, None] - d[None, :]  # column i - d
            r_ok = m_ok[:, None] & d_ok[None, :] & (right < n)
            l_ok = m_ok[:, None] & d_ok[None, :] & (left >= 0) & (d[None, :] > 0)
            if UPPER:
                p_right = (k - d)[None, :] + right * lda  # A(i, i+d)
                p_left = (k - d)[None, :] + rm[:, None] * lda  # A(i-d, i)
            else:
                p_right = d[None, :] + rm[:, None] * lda  # A(i+d, i)
                p_left = d[None, :] + left * lda  # A(i, i-d)
            a_r = tl.load(a_ptr + p_right, mask=r_ok, other=0.0)
            a_l = tl.load(a_ptr + p_left, mask=l_ok, other=0.0)
            x_r = tl.load(x_ptr + x0 + right * incx, mask=r_ok, other=0.0)
            x_l = tl.load(x_ptr + x0 + left * incx, mask=l_ok, other=0.0)
            acc += tl.sum(a_r * x_r + a_l * x_l, axis=1)
    out = alpha * acc
    py = y_ptr + y0 + rm * incy
    if not BETA_ZERO:  # beta == 0: y is not read (it may hold NaN)
        out += beta * tl.load(py, mask=m_ok, other=0.0)
    tl.store(py, out, mask=m_ok)


def _start(n, inc):
    # A negative increment starts at the far end: element i is at (n - 1 - i) * |inc|.
    return (n - 1) * -inc if inc < 0 else 0


def cublasDsbmv_v2(uplo, n, k, alpha, A, lda, x, incx, beta, y, incy):
    if n <= 0 or (alpha == 0 and beta == 1):  # BLAS's quick returns: y is left as it is
        return None
    on_cpu = y.device.type == "cpu"
    BLOCK_M, BLOCK_D = (64, 32) if on_cpu else (128, 16)
    _dsbmv_kernel[(triton.cdiv(n, BLOCK_M),)](
        A, x, y, n, k, lda, float(alpha), float(beta), incx, incy, _start(n, incx),
        _start(n, incy), UPPER=(uplo == 1), ALPHA_ZERO=(alpha == 0), BETA_ZERO=(beta == 0),
        BLOCK_M=BLOCK_M, BLOCK_D=BLOCK_D, num_warps=4)
    return None
'''

# Addresses the band as if it were packed (lda == k + 1): right only without padding rows.
NEGATIVE_IGNORES_LDA = _blas.variant(SOLUTION, (
    "        A, x, y, n, k, lda, float(alpha)", "        A, x, y, n, k, k + 1, float(alpha)"))

# Reads an upper band at band row d (the lower layout) instead of k - d: right only when k == 0
# (the diagonal alone, row 0 either way) or uplo is lower.
NEGATIVE_UPPER_ROWS_AS_LOWER = _blas.variant(SOLUTION, (
    "                p_right = (k - d)[None, :] + right * lda  # A(i, i+d)\n"
    "                p_left = (k - d)[None, :] + rm[:, None] * lda  # A(i-d, i)\n",
    "                p_right = d[None, :] + right * lda\n"
    "                p_left = d[None, :] + rm[:, None] * lda\n"))

# Takes alpha == 0 as a quick return whatever beta is, leaving y unscaled (BLAS returns at once
# only when beta == 1 too); right whenever alpha != 0 or beta == 1.
NEGATIVE_ALPHA_ZERO_RETURNS = _blas.variant(SOLUTION, (
    "    if n <= 0 or (alpha == 0 and beta == 1):", "    if n <= 0 or alpha == 0:"))

# (alpha, beta) of the grid: beta == 0 (y unset, NaN), both general, beta == 1, alpha == 0.
SCALARS = ((1.0, 0.0), (-1.5, 0.5), (0.3, 1.0), (0.0, 0.5))
# (n, k) of the grid: no off-diagonals, a band wider than the matrix, narrow and wide bands.
SHAPES = ((1, 0), (1, 3), (32, 3), (71, 0), (160, 7), (497, 31), (1024, 64), (70, 100),
          (2049, 1), (4113, 15))


@register("cublas::cublasDsbmv_v2", version=2, kind=Kind.COMPUTE)
class Dsbmv(_level2.Level2):
    """Case shape ``(n,)``; params ``uplo``, ``k``, ``alpha``, ``beta``, the layout (``incx``,
    ``incy``, ``pad``: lda = k + 1 + pad) and optionally ``std``. beta == 0 poisons y (not
    read); x stays finite when alpha == 0 (cuBLAS in DEVICE pointer mode reads it then: seen on
    an H100)."""

    routine, precision = "cublasDsbmv_v2", "float64"
    entry_points = (
        EntryPoint(
            "cublasDsbmv_v2",
            "cublasDsbmv_v2(uplo: int, n: int, k: int, alpha: float, A: Tensor, lda: int, "
            "x: Tensor, incx: int, beta: float, y: Tensor, incy: int) -> None",
            "y = alpha * A @ x + beta * y, A symmetric with k off-diagonals in band storage.",
        ),
    )
    description = (
        "cuBLAS `cublasDsbmv_v2` (handle omitted): `y = alpha * A * x + beta * y` with A an "
        "n x n symmetric band matrix with k sub- and super-diagonals (A(i, j) == A(j, i), zero "
        "where |i - j| > k), updating y in place and returning None. `A`, `x`, `y` are 1-D "
        "contiguous float64 tensors holding the device buffers; `alpha`, `beta` are Python "
        "floats used as float64 (a Python float reaches a Triton kernel as float32 unless the "
        "kernel parameter is annotated `tl.float64`). A is given in BLAS band storage, a "
        "column-major lda x n array (element (r, c) at `A[r + c*lda]`, lda >= k + 1) holding "
        "only the triangle `uplo` names: uplo == 1 (CUBLAS_FILL_MODE_UPPER) stores A(i, j), "
        "max(0, j-k) <= i <= j, at band row k + i - j of column j (the diagonal in row k); "
        "uplo == 0 (LOWER) stores A(i, j), j <= i <= min(n-1, j+k), at band row i - j of column "
        "j (the diagonal in row 0). The storage's other elements (the unused corner of the "
        "band, rows beyond k) may hold NaN and must not be read. Element i of x is "
        "`x[i*incx]` when incx > 0; a negative increment starts at the far end, element i being "
        "`x[(n-1-i)*|incx|]`; likewise for y with incy; increments are never 0. Elements of y "
        "that are not the vector's must be left untouched; A and x must not be modified. Quick "
        "returns: n == 0 does nothing; alpha == 0 gives y = beta * y (A and x then hold "
        "finite values: cuBLAS may read them); beta == 0 does not read y (it may hold NaN) and gives "
        "y = alpha * A * x. Compute in float64 (any summation order)."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_lda", "addresses the band as if lda were k + 1; right only without "
                 "padding rows", NEGATIVE_IGNORES_LDA),
        Negative("upper_rows_as_lower", "reads an upper band at row i - j instead of "
                 "k + i - j; right only for k == 0 or a lower band", NEGATIVE_UPPER_ROWS_AS_LOWER),
        Negative("alpha_zero_returns", "returns at once when alpha == 0, leaving y unscaled "
                 "when beta != 1", NEGATIVE_ALPHA_ZERO_RETURNS),
    )
    # Sums of up to 2k + 1 products relative to |alpha| (|A| |x|) + |beta y|.
    tolerances = {"float64": _blas.sum_tolerance("float64")}

    def c(self, n: int, k: int, uplo: int, alpha: float, beta: float, incx: int, incy: int,
          pad: int, *, cpu: bool = False, **extra: object) -> Case:
        return case(self.routine, self.precision, (n,), uplo=uplo, k=k, alpha=float(alpha),
                    beta=float(beta), **_level2.layout(incx, incy, pad), **extra, cpu=cpu)

    def edge_cases(self) -> list[Case]:
        c = self.c
        return [
            c(37, 3, 1, 1, 0, 1, 1, 0, cpu=True),
            c(45, 5, 0, -1.5, 0.5, 2, -1, 3, cpu=True),
            c(64, 0, 1, 0.3, 1, -2, 3, 0, cpu=True),
            c(20, 30, 0, 0, 0.5, -1, -2, 7, cpu=True),
            c(70, 6, 1, 1.25, -1, 1, 1, 2, cpu=True),
            c(1, 2, 1, -1.5, 0.5, 1, 1, 0, cpu=True),
            c(0, 2, 0, 1, 1, 1, 1, 0, cpu=True),
            c(300, 20, 1, -1.5, 0.5, 1, 2, 5, std=1e150),
        ]

    def grid(self) -> list[Case]:
        out = [self.c(n, k, uplo, a, b, *lay) for n, k in SHAPES for uplo in (0, 1)
               for a, b in SCALARS for lay in _level2.LAYOUTS]
        return out + [self.c(0, 3, uplo, *SCALARS[1], *lay) for uplo in (0, 1)
                      for lay in _level2.LAYOUTS[:2]]

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for n in self.hidden_sizes(rng, tier):
            a, b = rng.choice(SCALARS + ((2.0, -0.25),))
            lay = _level2.pick_layout(rng, two=True)
            k = rng.choice((0, 1, 2, 5, 17, 40)) if small else rng.randrange(0, 200)
            out.append(self.c(n, k, rng.choice((0, 1)), a, b, lay["incx"], lay["incy"],
                              lay["pad"], cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # The band storage: 4M x 16 and 1M x 64 float64 elements, 512 MiB each.
        return [self.c(4 * 2**20, 15, 1, -1.5, 0.5, 1, 1, 0),
                self.c(2**20, 63, 0, 1, 0, -1, 1, 0)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        (n,) = c.shape
        std = float(c.get("std", 1.0))
        k, alpha, beta = c["k"], c["alpha"], c["beta"]
        lda = k + 1 + c["pad"]
        a = _blas.make_band(n, k, lda, c["uplo"], self.precision, gen).mul_(std)
        x = _level2.vector(n, c["incx"], self.precision, gen, std=std, nan=False)
        y = _level2.vector(n, c["incy"], self.precision, gen, std=std, nan=beta == 0)
        return Call(c.entry, (c["uplo"], n, k, alpha, a, lda, x, c["incx"], beta, y, c["incy"]),
                    outputs=(Out.arg(9),), mutable=frozenset({9}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        uplo, n, k, alpha, a, lda, x, incx, beta, y, incy = call.args
        xv = _blas.gather(x, n, incx)
        if alpha == 0:  # y = beta * y
            xv = torch.zeros_like(xv)
        prod, mag = _level2.band_product(a, n, k, lda, uplo, xv, symmetric=True)
        return (_level2.mv_update(y, n, incy, alpha, beta, prod, mag),)

    def baseline(self, call: Call) -> object:
        uplo, n, k, alpha, a, lda, x, incx, beta, y, incy = call.args
        if _level2.on_cublas(y):
            dev = y.device
            _cublas.call(self.routine, uplo, n, k, _cublas.scalar(alpha, y.dtype, dev), a, lda,
                         x, incx, _cublas.scalar(beta, y.dtype, dev), y, incy)
        else:
            _level2.mv_baseline(y, n, incy, alpha, beta, lambda: _level2.band_product(
                a, n, k, lda, uplo, _blas.gather(x, n, incx), symmetric=True, precise=False)[0])
        return None

    def cost(self, c: Case) -> Cost:
        (n,) = c.shape
        n = max(n, 0)
        band = sum(n - d for d in range(min(c["k"], n - 1) + 1)) if n else 0
        return _level2.mv_cost(n, band, 2 * band - n, c["alpha"], c["beta"], self.precision)
