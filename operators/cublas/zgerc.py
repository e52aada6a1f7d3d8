"""cublas::cublasZgerc_v2 — ``A = alpha * x * y^H + A`` (y conjugated), complex128."""

from __future__ import annotations

from operators.cublas import _blas, _ger
from operators.registry import register
from operators.spec import Case, Kind, Negative, Tolerance

SOLUTION = _ger.complex_solution("cublasZgerc_v2", "float64", conjugate_y=True)

# Conjugates nothing (computes cublasZgeru): right only when y is real.
NEGATIVE_NO_CONJUGATION = _blas.variant(SOLUTION, (_ger.CONJUGATED_YI, _ger.PLAIN_YI))

# Takes |incx| and walks x forward from x[0]: right only for a positive incx.
NEGATIVE_ABS_INCX = _blas.variant(SOLUTION, (
    "incx, incy, _start(m, incx), _start(n, incy)", "abs(incx), incy, 0, _start(n, incy)"))


@register("cublas::cublasZgerc_v2", version=1, kind=Kind.COMPUTE)
class Zgerc(_ger.Ger):
    routine, precision, conjugate_y = "cublasZgerc_v2", "complex128", True
    alphas = (1 + 0j, -0.75 + 2.5j, 0.1j)
    large = 1e150
    bench_shapes = ((8192, 8192),)  # A: 1 GiB of complex128, read and written once
    entry_points = (_ger.entry_point("cublasZgerc_v2", "complex128", "complex", "x * y^H"),)
    description = _ger.describe(
        "cublasZgerc_v2", "complex128", "the conjugated complex rank-1 update "
        "`A = alpha * x * y^H + A`, that is `A(i, j) += alpha * x_i * conj(y_j)` for i < m, "
        "j < n — y is conjugated, x is not",
        "a Python complex used as a cuDoubleComplex (float64 parts; a Python float reaches a "
        "Triton kernel as float32 unless the kernel parameter is annotated `tl.float64`)",
        "Compute in float64.")
    solution = SOLUTION
    negatives = (
        Negative("no_conjugation", "computes alpha * x * y^T (cublasZgeru); right only when y "
                 "is real", NEGATIVE_NO_CONJUGATION),
        Negative("abs_incx", "walks x forward from x[0] by |incx|; right only for a positive "
                 "incx", NEGATIVE_ABS_INCX),
    )
    # As cublasCgeru_v2: two complex products and a sum, per component.
    tolerances = {"complex128": Tolerance.ulps("complex128", 8)}

    def edge_cases(self) -> list[Case]:
        c = self.c
        return [
            c(37, 45, 1 + 0j, 1, 1, 0, cpu=True),
            c(20, 70, -0.75 + 2.5j, 2, -1, 3, cpu=True),
            c(64, 33, 0.1j, 2, 3, 0, real_y=True, cpu=True),
            c(30, 20, -2 + 1j, -1, -2, 7, cpu=True),
            c(1, 1, 1 + 0j, 1, 1, 0, cpu=True),
            c(17, 9, 0j, 2, -1, 3, cpu=True),
            c(5, 0, -0.75 + 2.5j, 1, 1, 0, cpu=True),
            c(300, 200, -0.75 + 2.5j, -1, 1, 5, std=self.large),
        ]
