"""cublas::cublasCgeru_v2 — ``A = alpha * x * y^T + A`` (nothing conjugated), complex64."""

from __future__ import annotations

from operators.cublas import _blas, _ger
from operators.registry import register
from operators.spec import Case, Kind, Negative, Tolerance

SOLUTION = _ger.complex_solution("cublasCgeru_v2", "float32", conjugate_y=False)

# Conjugates y (computes cublasCgerc): right only when y is real.
NEGATIVE_CONJUGATES_Y = _blas.variant(SOLUTION, (_ger.PLAIN_YI, _ger.CONJUGATED_YI))

# Passes alpha's real part only: right only when alpha is real.
NEGATIVE_REAL_ALPHA = _blas.variant(SOLUTION, ("alpha.real, alpha.imag, incx", "alpha.real, 0.0, incx"))


@register("cublas::cublasCgeru_v2", version=1, kind=Kind.COMPUTE)
class Cgeru(_ger.Ger):
    routine, precision = "cublasCgeru_v2", "complex64"
    alphas = (1 + 0j, -1.5 + 0.5j, 0.3 - 2j)
    large = 1e17
    bench_shapes = ((8192, 16384),)  # A: 1 GiB of complex64, read and written once
    entry_points = (_ger.entry_point("cublasCgeru_v2", "complex64", "complex", "x * y^T"),)
    description = _ger.describe(
        "cublasCgeru_v2", "complex64", "the unconjugated complex rank-1 update "
        "`A = alpha * x * y^T + A`, that is `A(i, j) += alpha * x_i * y_j` for i < m, j < n — "
        "neither x nor y is conjugated (cublasCgerc would conjugate y)",
        "a Python complex used as a cuComplex (float32 parts)", "Compute in float32.")
    solution = SOLUTION
    negatives = (
        Negative("conjugates_y", "computes alpha * x * y^H (cublasCgerc); right only when y "
                 "is real", NEGATIVE_CONJUGATES_Y),
        Negative("real_alpha", "drops alpha's imaginary part; right only for a real alpha",
                 NEGATIVE_REAL_ALPHA),
    )
    # Two complex products (each component within 2 u of the factors' moduli' product) and a
    # sum, relative to |alpha| |x_i| |y_j| + |A_ij| on each component.
    tolerances = {"complex64": Tolerance.ulps("complex64", 8)}

    def edge_cases(self) -> list[Case]:
        c = self.c
        return [
            c(37, 45, 1 + 0j, 1, 1, 0, cpu=True),
            c(20, 70, -1.5 + 0.5j, 2, -1, 3, cpu=True),
            c(64, 33, 0.3 - 2j, -2, 3, 0, real_y=True, cpu=True),
            c(30, 20, 2j, -1, -2, 7, cpu=True),
            c(1, 1, 1 + 0j, 1, 1, 0, cpu=True),
            c(17, 9, 0j, 2, -1, 3, cpu=True),
            c(0, 5, -1.5 + 0.5j, 1, 1, 0, cpu=True),
            c(300, 200, -1.5 + 0.5j, 1, 1, 5, std=self.large),
        ]
