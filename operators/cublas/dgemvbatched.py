"""cublas::cublasDgemvBatched — ``y_b = alpha * op(A_b) @ x_b + beta * y_b`` for arrays of
pointers to column-major float64 matrices and vectors."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _gemv
from operators.cublas import _gemv_triton as tri
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative

ROUTINE = "cublasDgemvBatched"
SOLUTION = tri.solution(ROUTINE, "float64", tri.BATCHED)

# Multiplies A and x by alpha even when alpha == 0: their NaN (unread by BLAS) propagates.
NEGATIVE_READS_A = _blas.variant(SOLUTION, (tri.ALPHA_ZERO_FLAG, tri.READS_A_FLAG))

# Walks forward from each vector's first element by |inc|: right when increments are positive.
NEGATIVE_ABS_INCREMENT = _blas.variant(SOLUTION, (tri.INCREMENTS, tri.ABS_INCREMENTS))


@register("cublas::cublasDgemvBatched", version=2, kind=Kind.COMPUTE)
class DgemvBatched(_gemv.Gemv):
    routine, precision, mode = ROUTINE, "float64", tri.BATCHED
    entry_points = (
        EntryPoint(
            ROUTINE,
            "cublasDgemvBatched(trans: int, m: int, n: int, alpha: float, Aarray: Tensor, "
            "lda: int, xarray: Tensor, incx: int, beta: float, yarray: Tensor, incy: int, "
            "batchCount: int) -> None",
            "y_b = alpha * op(A_b) @ x_b + beta * y_b for b < batchCount; the arrays hold the "
            "addresses of float64 column-major matrices and vectors.",
        ),
    )
    description = _gemv.describe(ROUTINE, "float64", tri.BATCHED)
    solution = SOLUTION
    negatives = (
        Negative("reads_a_when_alpha_zero", "computes alpha * op(A) x when alpha == 0, so NaN "
                 "in the unread A and x leaks through 0 * NaN", NEGATIVE_READS_A),
        Negative("abs_increment", "walks forward from x[0] and y[0] by |inc| for negative "
                 "increments; right only when both are positive", NEGATIVE_ABS_INCREMENT),
    )
    # Relative to sum |alpha a x| + |beta y| per element (_gemv_operands.product, SUM_ULPS).
    tolerances = {"float64": _blas.sum_tolerance("float64")}

    def benchmark_cases(self) -> Sequence[Case]:
        N, T, _ = _gemv.TRANS
        return [self._case((1024, 1024, 128), N, 1.5, 0.5),  # 1 GiB of A
                self._case((256, 256, 1024), T, -1.0, 0.0, -1, 1)]  # many small products
