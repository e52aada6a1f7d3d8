"""cublas::cublasCdotu_v2 — ``result[0] = sum_i x_i * y_i`` (no conjugation), complex64."""

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

SOLUTION = _dots.complex_dot_solution("cublasCdotu_v2", "float32", conjugate_x=False)

# Conjugates x (computes cublasCdotc): right when x is real.
NEGATIVE_CONJUGATES_X = _blas.variant(SOLUTION, (_dots.UNCONJUGATED, _dots.CONJUGATED))

# Takes |inc| and walks forward from x[0]: right when both increments have the same sign.
NEGATIVE_ABS_INCREMENT = _blas.variant(SOLUTION, (
    "incx, incy, _start(n, incx), _start(n, incy),", "abs(incx), abs(incy), 0, 0,"))


@register("cublas::cublasCdotu_v2", version=1, kind=Kind.COMPUTE)
class Cdotu(_level1.Dot):
    routine, precision = "cublasCdotu_v2", "complex64"
    entry_points = (
        EntryPoint(
            "cublasCdotu_v2",
            "cublasCdotu_v2(n: int, x: Tensor, incx: int, y: Tensor, incy: int, result: Tensor) "
            "-> None",
            "result[0] = sum over i < n of x_i * y_i, unconjugated (complex64 strided vectors).",
        ),
    )
    description = (
        "cuBLAS `cublasCdotu_v2` (handle omitted): the unconjugated dot product of the "
        "single-precision complex vectors x and y, `sum_i x_i * y_i` for i in 0..n-1 — neither "
        "vector is conjugated — written into `result[0]`; returns None. `x` and `y` are 1-D "
        "contiguous complex64 tensors holding the device buffers; `result` is a 1-element "
        "complex64 device tensor (its old contents are garbage: write it, do not return the "
        "value). `torch.view_as_real` gives float32 views, element k's real part at [k, 0] and "
        "imaginary part at [k, 1]. Element i of x is `x[i*incx]` when incx > 0; a negative "
        "increment starts at the far end, element i being `x[(n-1-i)*|incx|]`; likewise for y "
        "with incy (increments are never 0). Each buffer holds at least 1 + (n-1)*|inc| "
        "elements; the others may hold NaN and must not be read; x and y must not be "
        "modified. When n <= 0 the result is 0. Compute in float32 (any summation order)."
    )
    solution = SOLUTION
    negatives = (
        Negative("conjugates_x", "computes sum conj(x_i) * y_i (cublasCdotc); right only when "
                 "x is real", NEGATIVE_CONJUGATES_X),
        Negative("abs_increment", "walks forward from x[0] and y[0] by |inc| for negative "
                 "increments; right only when both increments have the same sign",
                 NEGATIVE_ABS_INCREMENT),
    )
    # Relative to the sum of |terms| of each component (_blas.product_terms, SUM_ULPS).
    tolerances = {"complex64": _blas.sum_tolerance("complex64")}

    def edge_cases(self) -> list[Case]:
        e, d = self.routine, self.precision
        return [
            case(e, d, (71,), incx=1, incy=1, cpu=True),
            case(e, d, (497,), incx=2, incy=3, cpu=True),
            case(e, d, (2300,), incx=1, incy=1, cpu=True),  # five blocks on four programs
            case(e, d, (160,), incx=-1, incy=-2, cpu=True),
            case(e, d, (1500,), incx=-3, incy=1, cpu=True),
            case(e, d, (333,), incx=1, incy=2, real_x=True, cpu=True),
            case(e, d, (0,), incx=1, incy=1, cpu=True),
            case(e, d, (1000,), incx=2, incy=-1, std=1e15),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        e, d = self.routine, self.precision
        return [case(e, d, (32 * 2**20,), incx=1, incy=1),
                case(e, d, (16 * 2**20,), incx=1, incy=-1)]
