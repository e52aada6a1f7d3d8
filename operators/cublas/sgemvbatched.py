"""cublas::cublasSgemvBatched — ``y_b = alpha * op(A_b) @ x_b + beta * y_b`` for arrays of
pointers to column-major float32 matrices and vectors."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _gemv
from operators.cublas import _gemv_triton as tri
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative

ROUTINE = "cublasSgemvBatched"
SOLUTION = tri.solution(ROUTINE, "float32", tri.BATCHED)

# Launches the programs of one entry: every y_b but y_0 is left as it was.
NEGATIVE_ONE_ENTRY = _blas.variant(SOLUTION, (tri.BATCH_GRID, tri.ONE_ENTRY_GRID))

# Computes alpha * op(A) x + beta * y even when beta == 0: NaN in the unread y propagates.
NEGATIVE_READS_Y = _blas.variant(SOLUTION, (tri.BETA_ZERO_FLAG, tri.READS_Y_FLAG))


@register("cublas::cublasSgemvBatched", version=2, kind=Kind.COMPUTE)
class SgemvBatched(_gemv.Gemv):
    routine, precision, mode = ROUTINE, "float32", tri.BATCHED
    entry_points = (
        EntryPoint(
            ROUTINE,
            "cublasSgemvBatched(trans: int, m: int, n: int, alpha: float, Aarray: Tensor, "
            "lda: int, xarray: Tensor, incx: int, beta: float, yarray: Tensor, incy: int, "
            "batchCount: int) -> None",
            "y_b = alpha * op(A_b) @ x_b + beta * y_b for b < batchCount; the arrays hold the "
            "addresses of float32 column-major matrices and vectors.",
        ),
    )
    description = _gemv.describe(ROUTINE, "float32", tri.BATCHED)
    solution = SOLUTION
    negatives = (
        Negative("one_entry", "launches one entry's programs only (the grid forgets "
                 "batchCount): y_1 and after are never written", NEGATIVE_ONE_ENTRY),
        Negative("reads_y_when_beta_zero", "always adds beta * y, so NaN in an unread y leaks "
                 "through 0 * NaN when beta == 0", NEGATIVE_READS_Y),
    )
    # Relative to sum |alpha a x| + |beta y| per element (_gemv_operands.product, SUM_ULPS).
    tolerances = {"float32": _blas.sum_tolerance("float32")}

    def benchmark_cases(self) -> Sequence[Case]:
        N, T, _ = _gemv.TRANS
        return [self._case((1024, 1024, 256), N, 1.5, 0.5),  # 1 GiB of A
                self._case((256, 256, 2048), T, -1.0, 0.0)]  # many small products
