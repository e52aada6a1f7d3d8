"""cublas::cublasSger_v2 — ``A = alpha * x * y^T + A``, column-major float32, in place."""

from __future__ import annotations

from operators.cublas import _blas, _ger
from operators.registry import register
from operators.spec import Case, Kind, Negative, Tolerance

SOLUTION = _ger.real_solution("cublasSger_v2")

# Takes the leading dimension to be m: right only when A has no padding rows.
NEGATIVE_IGNORES_LDA = _blas.variant(SOLUTION, (
    "_start(m, incx), _start(n, incy), lda,", "_start(m, incx), _start(n, incy), m,"))

# Returns early for empty sizes but not for alpha == 0: reads x, so a NaN in it poisons A
# (0 * NaN); right whenever alpha != 0.
NEGATIVE_NO_ALPHA_QUICK_RETURN = _blas.variant(SOLUTION, (
    "    if m <= 0 or n <= 0 or alpha == 0:", "    if m <= 0 or n <= 0:"))


@register("cublas::cublasSger_v2", version=1, kind=Kind.COMPUTE)
class Sger(_ger.Ger):
    routine, precision = "cublasSger_v2", "float32"
    alphas = (1.0, -1.5, 0.3)
    large = 1e17
    bench_shapes = ((16384, 16384),)  # A: 1 GiB, read and written once
    entry_points = (_ger.entry_point("cublasSger_v2", "float32", "float", "x * y^T"),)
    description = _ger.describe(
        "cublasSger_v2", "float32", "the rank-1 update `A = alpha * x * y^T + A`, that is "
        "`A(i, j) += alpha * x_i * y_j` for i < m, j < n", "a Python float used as a float32",
        "Compute in float32.")
    solution = SOLUTION
    negatives = (
        Negative("ignores_lda", "addresses A with leading dimension m instead of lda; right "
                 "only without padding rows", NEGATIVE_IGNORES_LDA),
        Negative("no_alpha_quick_return", "updates A even when alpha == 0, so a NaN in the "
                 "unread x poisons A through 0 * NaN", NEGATIVE_NO_ALPHA_QUICK_RETURN),
    )
    # Three roundings (alpha * x, times y, plus A) relative to |alpha x_i y_j| + |A_ij|.
    tolerances = {"float32": Tolerance.ulps("float32", 4)}

    def edge_cases(self) -> list[Case]:
        c = self.c
        return [
            c(37, 45, 1.5, 1, 1, 0, cpu=True),
            c(20, 70, -1.5, 2, -1, 3, cpu=True),
            c(64, 33, 0.3, -2, 3, 0, cpu=True),
            c(30, 20, 1.0, -1, -2, 7, cpu=True),
            c(1, 1, 2.0, 1, 1, 0, cpu=True),
            c(17, 9, 0.0, 2, -1, 3, cpu=True),
            c(0, 5, -1.5, 1, 1, 0, cpu=True),
            c(40, 25, 1.0, 1, 2, 1, specials=True, cpu=True),
            c(300, 200, -1.5, 1, 1, 5, std=self.large),
        ]
