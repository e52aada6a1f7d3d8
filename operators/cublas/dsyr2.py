"""cublas::cublasDsyr2_v2 — ``A = alpha * (x * y^T + y * x^T) + A`` on one triangle of a
symmetric float64 matrix, in place."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.cublas import _blas, _cublas, _level2
from operators.registry import register
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    Out,
    Tier,
    Tolerance,
    case,
)

SOLUTION = r'''
import triton
import triton.language as tl


@triton.jit
def _dsyr2_kernel(x_ptr, y_ptr, a_ptr, n, alpha: tl.float64, incx, incy, x0, y0, lda,
                  UPPER: tl.constexpr, BLOCK: tl.constexpr):
    # One BLOCK x BLOCK tile of the column-major A: A(i, j) += x_i * (alpha * y_j)
    # + y_i * (alpha * x_j) where (i, j) lies in the stored triangle; the other is not touched.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if UPPER:
        inside = pid_m <= pid_n
    else:
        inside = pid_m >= pid_n
    if inside:  # tiles wholly outside the triangle have nothing to update
        rm = pid_m.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        rn = pid_n.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m_ok = rm < n
        n_ok = rn < n
        xi = tl.load(x_ptr + x0 + rm * incx, mask=m_ok, other=0.0)
        yi = tl.load(y_ptr + y0 + rm * incy, mask=m_ok, other=0.0)
        xj = tl.load(x_ptr + x0 + rn * incx, mask=n_ok, other=0.0)
        yj = tl.load(y_ptr + y0 + rn * incy, mask=n_ok, other=0.0)
        if UPPER:
            in_tri = rm[:, None] <= rn[None, :]
        else:
            in_tri = rm[:, None] >= rn[None, :]
        mask = m_ok[:, None] & n_ok[None, :] & in_tri
        ptrs = a_ptr + rm[:, None] + rn[None, :] * lda
        a = tl.load(ptrs, mask=mask)
        upd = xi[:, None] * (alpha * yj)[None, :] + yi[:, None] * (alpha * xj)[None, :]
        tl.store(ptrs, a + upd, mask=mask)


def _start(n, inc):
    # A negative increment starts at the far end: element i is at (n - 1 - i) * |inc|.
    return (n - 1) * -inc if inc < 0 else 0


def cublasDsyr2_v2(uplo, n, alpha, x, incx, y, incy, A, lda):
    if n <= 0 or alpha == 0:  # BLAS's quick returns: A is left as it is
        return None
    BLOCK = 64
    grid = (triton.cdiv(n, BLOCK), triton.cdiv(n, BLOCK))
    _dsyr2_kernel[grid](x, y, A, n, float(alpha), incx, incy, _start(n, incx), _start(n, incy),
                        lda, UPPER=(uplo == 1), BLOCK=BLOCK, num_warps=4)
    return None
'''

# Updates the whole square: the triangle uplo does not name changes too; right only for n == 1
# or when that triangle holds NaN (NaN plus anything stays NaN).
NEGATIVE_BOTH_TRIANGLES = _blas.variant(
    SOLUTION,
    ("    if inside:  # tiles wholly outside the triangle have nothing to update\n",
     "    if True:\n"),
    ("        mask = m_ok[:, None] & n_ok[None, :] & in_tri\n",
     "        mask = m_ok[:, None] & n_ok[None, :]\n"))

# Takes uplo 0 for UPPER (CUBLAS_FILL_MODE_LOWER is 0): updates the wrong triangle.
NEGATIVE_UPLO_INVERTED = _blas.variant(SOLUTION, ("UPPER=(uplo == 1)", "UPPER=(uplo == 0)"))

# Takes the update as symmetric in x and y, adding 2 alpha x_i y_j (the y x^T term written as
# a second x y^T); right only when x and y hold the same values.
NEGATIVE_ONE_SIDED = _blas.variant(SOLUTION, (
    "+ yi[:, None] * (alpha * xj)[None, :]", "+ xi[:, None] * (alpha * yj)[None, :]"))

ALPHAS = (1.0, -1.5, 0.3, 0.0)


@register("cublas::cublasDsyr2_v2", version=2, kind=Kind.COMPUTE)
class Dsyr2(_level2.Level2):
    """Case shape ``(n,)``; params ``uplo``, ``alpha``, the layout (``incx``, ``incy``,
    ``pad``: lda = n + pad), optionally ``other_nan`` and ``std``. The triangle uplo does not
    name holds finite values that must come back bit for bit (NaN there would hide a write:
    NaN plus anything is NaN), except with ``other_nan``; padding rows hold NaN. x and y stay
    finite when alpha == 0 (cuBLAS in DEVICE pointer mode reads them then: seen on an H100)."""

    routine, precision = "cublasDsyr2_v2", "float64"
    entry_points = (
        EntryPoint(
            "cublasDsyr2_v2",
            "cublasDsyr2_v2(uplo: int, n: int, alpha: float, x: Tensor, incx: int, y: Tensor, "
            "incy: int, A: Tensor, lda: int) -> None",
            "A = alpha * (x y^T + y x^T) + A on the stored triangle of a symmetric float64 A.",
        ),
    )
    description = (
        "cuBLAS `cublasDsyr2_v2` (handle omitted): the symmetric rank-2 update "
        "`A = alpha * (x * y^T + y * x^T) + A`, that is "
        "`A(i, j) += alpha * (x_i * y_j + y_i * x_j)`, on the triangle of the n x n symmetric "
        "matrix A that `uplo` names, in place; returns None. `x`, `y`, `A` are 1-D contiguous "
        "float64 tensors holding the device buffers; `alpha` is a Python float used as float64 "
        "(a Python float reaches a Triton kernel as float32 unless the kernel parameter is "
        "annotated `tl.float64`). A is column-major, element (i, j) at `A[i + j*lda]`, "
        "lda >= max(1, n). uplo == 1 (CUBLAS_FILL_MODE_UPPER): update only the elements with "
        "i <= j; uplo == 0 (LOWER): only those with i >= j. The other triangle and the padding "
        "rows (rows n..lda-1 of each column) must be left bit for bit as they are (they may "
        "hold anything, NaN included). Element i of x is `x[i*incx]` when incx > 0; a negative "
        "increment starts at the far end, element i being `x[(n-1-i)*|incx|]`; likewise for y "
        "with incy; increments are never 0; x and y must not be modified. Quick returns: when "
        "n == 0 or alpha == 0 A is left as it is (x and y then hold finite values: cuBLAS may "
        "read them). "
        "Compute in float64."
    )
    solution = SOLUTION
    negatives = (
        Negative("updates_both_triangles", "updates the whole square, changing the triangle "
                 "uplo does not name", NEGATIVE_BOTH_TRIANGLES),
        Negative("uplo_inverted", "takes uplo 0 for UPPER and updates the wrong triangle",
                 NEGATIVE_UPLO_INVERTED),
        Negative("one_sided_update", "adds alpha x y^T twice instead of alpha (x y^T + y x^T)",
                 NEGATIVE_ONE_SIDED),
    )
    # Relative to |alpha x_i y_j| + |alpha y_i x_j| + |A_ij|: two products, their sum, alpha
    # and the addition of A round at most 5 times in any order (x_i * (alpha y_j) + ... and
    # alpha * (x_i y_j + ...) alike; the solution measured 3.99 u in the first form).
    tolerances = {"float64": Tolerance.ulps("float64", 6)}

    def c(self, n: int, uplo: int, alpha: float, incx: int, incy: int, pad: int, *,
          cpu: bool = False, **extra: object) -> Case:
        return case(self.routine, self.precision, (n,), uplo=uplo, alpha=float(alpha),
                    **_level2.layout(incx, incy, pad), **extra, cpu=cpu)

    def edge_cases(self) -> list[Case]:
        c = self.c
        return [
            c(37, 1, 1, 1, 1, 0, cpu=True),
            c(45, 0, -1.5, 2, -1, 3, cpu=True),
            c(70, 1, 0.3, -2, 3, 1, cpu=True),
            c(66, 0, 2.5, -1, -2, 7, cpu=True),
            c(40, 1, -0.75, 1, 2, 0, other_nan=True, cpu=True),
            c(1, 0, 1.25, 1, 1, 0, cpu=True),
            c(20, 1, 0, 2, -1, 3, cpu=True),
            c(0, 0, 1, 1, 1, 0, cpu=True),
            c(300, 0, -1.5, 1, 1, 5, std=1e150),
        ]

    def grid(self) -> list[Case]:
        out = [self.c(n, uplo, a, *lay) for n in _level2.GRID_N for uplo in (0, 1)
               for a in ALPHAS for lay in _level2.LAYOUTS]
        out += [self.c(n, uplo, -1.5, 1, 1, 2, other_nan=True) for n in (71, 497)
                for uplo in (0, 1)]
        return out + [self.c(0, uplo, -1.5, *lay) for uplo in (0, 1)
                      for lay in _level2.LAYOUTS[:2]]

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for n in self.hidden_sizes(rng, tier):
            lay = _level2.pick_layout(rng, two=True)
            out.append(self.c(n, rng.choice((0, 1)), rng.choice(ALPHAS + (0.1, -4.0)),
                              lay["incx"], lay["incy"], lay["pad"], cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # A: 11264^2 float64 = 1.0 GB, one triangle of it read and written.
        return [self.c(11264, 1, 1.5, 1, 1, 0), self.c(11264, 0, -0.5, -1, 2, 0)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        (n,) = c.shape
        std, alpha, lda = float(c.get("std", 1.0)), c["alpha"], max(n, 1) + c["pad"]
        x = _level2.vector(n, c["incx"], self.precision, gen, std=std, nan=False)
        y = _level2.vector(n, c["incy"], self.precision, gen, std=std, nan=False)
        if c.get("other_nan"):
            a = _blas.make_triangle(n, lda, c["uplo"], self.precision, gen).mul_(std)
        else:
            a = _blas.make_matrix(n, n, lda, self.precision, gen, std=std)
        return Call(c.entry, (c["uplo"], n, alpha, x, c["incx"], y, c["incy"], a, lda),
                    outputs=(Out.arg(7),), mutable=frozenset({7}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        uplo, n, alpha, x, incx, y, incy, a, lda = call.args
        value = _blas.hp(a)
        scale = torch.zeros_like(value)  # the other triangle and the padding: exact
        if n > 0 and alpha != 0:
            xv, yv = _blas.hp(_blas.gather(x, n, incx)), _blas.hp(_blas.gather(y, n, incy))
            target = _blas.stored(value, n, n, lda)
            upd = alpha * (xv[:, None] * yv[None, :] + yv[:, None] * xv[None, :])
            cond = abs(alpha) * (xv.abs()[:, None] * yv.abs()[None, :]
                                 + yv.abs()[:, None] * xv.abs()[None, :]) + target.abs()
            mask = _level2.triangle_mask(n, uplo, a.device)
            _blas.stored(scale, n, n, lda).copy_(torch.where(mask, cond, 0.0))
            target.copy_(torch.where(mask, target + upd, target))
        return (Expected(value, a.dtype, scale),)

    def baseline(self, call: Call) -> object:
        uplo, n, alpha, x, incx, y, incy, a, lda = call.args
        if _level2.on_cublas(a):
            _cublas.call(self.routine, uplo, n, _cublas.scalar(alpha, a.dtype, a.device), x,
                         incx, y, incy, a, lda)
        elif n > 0 and alpha != 0:
            xv, yv = _blas.gather(x, n, incx), _blas.gather(y, n, incy)
            target = _blas.stored(a, n, n, lda)
            upd = alpha * (torch.outer(xv, yv) + torch.outer(yv, xv))
            mask = _level2.triangle_mask(n, uplo, a.device)
            target.copy_(torch.where(mask, target + upd, target))
        return None

    def cost(self, c: Case) -> Cost:
        (n,) = c.shape
        n = max(n, 0)
        tri = n * (n + 1) // 2 if c["alpha"] != 0 else 0
        return _blas.streaming_cost(4.0 * tri, 2 * tri + (2 * n if tri else 0), self.precision)
