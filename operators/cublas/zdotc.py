"""cublas::cublasZdotc_v2 — ``result[0] = sum_i conj(x_i) * y_i``, complex128."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _dots, _level1
from operators.registry import register
from operators.spec import (
    Case,
    EntryPoint,
    Kind,
    Negative,
    case,
)

SOLUTION = _dots.complex_dot_solution("cublasZdotc_v2", "float64", conjugate_x=True)

# Conjugates nothing (computes cublasZdotu): right when x is real.
NEGATIVE_NO_CONJUGATION = _blas.variant(SOLUTION, (_dots.CONJUGATED, _dots.UNCONJUGATED))

# Counts whole blocks only (floor instead of ceiling, at least one): drops the last, partial
# block when n exceeds a block and is not a multiple of it.
NEGATIVE_DROPS_TAIL_BLOCK = _blas.variant(SOLUTION, (
    "    blocks = triton.cdiv(n, BLOCK)\n", "    blocks = max(1, n // BLOCK)\n"))


@register("cublas::cublasZdotc_v2", version=1, kind=Kind.COMPUTE)
class Zdotc(_level1.Dot):
    routine, precision, conjugate_x = "cublasZdotc_v2", "complex128", True
    entry_points = (
        EntryPoint(
            "cublasZdotc_v2",
            "cublasZdotc_v2(n: int, x: Tensor, incx: int, y: Tensor, incy: int, result: Tensor) "
            "-> None",
            "result[0] = sum over i < n of conj(x_i) * y_i (complex128 strided vectors).",
        ),
    )
    description = (
        "cuBLAS `cublasZdotc_v2` (handle omitted): the conjugated dot product of the "
        "double-precision complex vectors x and y, `sum_i conj(x_i) * y_i` for i in 0..n-1 — x "
        "is conjugated, y is not — written into `result[0]`; returns None. `x` and `y` are 1-D "
        "contiguous complex128 tensors holding the device buffers; `result` is a 1-element "
        "complex128 device tensor (its old contents are garbage: write it, do not return the "
        "value). `torch.view_as_real` gives float64 views, element k's real part at [k, 0] and "
        "imaginary part at [k, 1]. Element i of x is `x[i*incx]` when incx > 0; a negative "
        "increment starts at the far end, element i being `x[(n-1-i)*|incx|]`; likewise for y "
        "with incy (increments are never 0). Each buffer holds at least 1 + (n-1)*|inc| "
        "elements; the others may hold NaN and must not be read; x and y must not be "
        "modified. When n <= 0 the result is 0. Compute in float64 (any summation order)."
    )
    solution = SOLUTION
    negatives = (
        Negative("no_conjugation", "computes sum x_i * y_i (cublasZdotu); right only when x "
                 "is real", NEGATIVE_NO_CONJUGATION),
        Negative("drops_tail_block", "sums whole blocks only, dropping the last partial block "
                 "of a vector longer than one block", NEGATIVE_DROPS_TAIL_BLOCK),
    )
    # Relative to the sum of |terms| of each component (_blas.product_terms, SUM_ULPS).
    tolerances = {"complex128": _blas.sum_tolerance("complex128")}

    def edge_cases(self) -> list[Case]:
        e, d = self.routine, self.precision
        return [
            case(e, d, (71,), incx=1, incy=1, cpu=True),
            case(e, d, (497,), incx=2, incy=3, cpu=True),
            case(e, d, (2300,), incx=1, incy=1, cpu=True),  # five blocks on four programs
            case(e, d, (1024,), incx=-1, incy=1, cpu=True),  # two whole blocks
            case(e, d, (160,), incx=-1, incy=-2, cpu=True),
            case(e, d, (1500,), incx=-3, incy=1, cpu=True),
            case(e, d, (333,), incx=1, incy=2, real_x=True, cpu=True),
            case(e, d, (0,), incx=1, incy=1, cpu=True),
            case(e, d, (1000,), incx=2, incy=-1, std=1e15),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        e, d = self.routine, self.precision
        return [case(e, d, (16 * 2**20,), incx=1, incy=1),
                case(e, d, (16 * 2**20,), incx=-1, incy=1)]
