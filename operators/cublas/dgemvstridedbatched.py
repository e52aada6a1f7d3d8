"""cublas::cublasDgemvStridedBatched — ``y_b = alpha * op(A_b) @ x_b + beta * y_b`` for strided
batches of column-major float64 matrices and vectors."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _gemv
from operators.cublas import _gemv_triton as tri
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative

ROUTINE = "cublasDgemvStridedBatched"
SOLUTION = tri.solution(ROUTINE, "float64", tri.STRIDED)

# Takes lda as m: right only when the matrices have no padding rows.
NEGATIVE_IGNORES_LDA = _blas.variant(SOLUTION, (
    "        n_out, n_red, s_out, s_red = m, n, 1, lda\n",
    "        n_out, n_red, s_out, s_red = m, n, 1, m\n"), (
    "        n_out, n_red, s_out, s_red = n, m, lda, 1\n",
    "        n_out, n_red, s_out, s_red = n, m, m, 1\n"))

# No quick return for an empty matrix: with n == 0 (or m == 0 under T/C) it writes
# y_b = beta * y_b, where BLAS leaves y as it is.
NEGATIVE_SCALES_EMPTY = _blas.variant(SOLUTION, (
    tri.empty_return(tri.STRIDED), "    if batchCount <= 0 or (alpha == 0 and beta == 1):\n"))


@register("cublas::cublasDgemvStridedBatched", version=1, kind=Kind.COMPUTE)
class DgemvStridedBatched(_gemv.Gemv):
    routine, precision, mode = ROUTINE, "float64", tri.STRIDED
    entry_points = (
        EntryPoint(
            ROUTINE,
            "cublasDgemvStridedBatched(trans: int, m: int, n: int, alpha: float, A: Tensor, "
            "lda: int, strideA: int, x: Tensor, incx: int, stridex: int, beta: float, "
            "y: Tensor, incy: int, stridey: int, batchCount: int) -> None",
            "y_b = alpha * op(A_b) @ x_b + beta * y_b for b < batchCount; A_b, x_b, y_b start "
            "b strides into their float64 buffers.",
        ),
    )
    description = _gemv.describe(ROUTINE, "float64", tri.STRIDED)
    solution = SOLUTION
    negatives = (
        Negative("ignores_lda", "takes the leading dimension as m, ignoring lda's padding "
                 "rows", NEGATIVE_IGNORES_LDA),
        Negative("scales_empty", "no quick return for n == 0 (m == 0 under T/C): scales y "
                 "by beta, which BLAS leaves as it is", NEGATIVE_SCALES_EMPTY),
    )
    # Relative to sum |alpha a x| + |beta y| per element (_gemv_operands.product, SUM_ULPS).
    tolerances = {"float64": _blas.sum_tolerance("float64")}

    def benchmark_cases(self) -> Sequence[Case]:
        N, T, _ = _gemv.TRANS
        return [self._case((1024, 1024, 128), N, 1.5, 0.5),  # 1 GiB of A, packed
                self._case((256, 256, 1024), T, -1.0, 0.0, -1, 1, 0, sx="zero")]
