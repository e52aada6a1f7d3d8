"""cublas::cublasZgemvStridedBatched — ``y_b = alpha * op(A_b) @ x_b + beta * y_b`` for strided
batches of column-major complex128 matrices and vectors."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _gemv
from operators.cublas import _gemv_triton as tri
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative

ROUTINE = "cublasZgemvStridedBatched"
SOLUTION = tri.solution(ROUTINE, "complex128", tri.STRIDED)

# Strides taken in floats of the real view instead of complex elements (not doubled): right
# for one entry or strides of 0.
NEGATIVE_STRIDE_IN_FLOATS = _blas.variant(SOLUTION, *(
    (tri.strided_base(v, True), tri.strided_base(v, False)) for v in "axy"))

# Computes alpha * op(A) x + beta * y even when beta == 0: NaN in the unread y propagates.
NEGATIVE_READS_Y = _blas.variant(SOLUTION, (tri.BETA_ZERO_FLAG, tri.READS_Y_FLAG))


@register("cublas::cublasZgemvStridedBatched", version=1, kind=Kind.COMPUTE)
class ZgemvStridedBatched(_gemv.Gemv):
    routine, precision, mode = ROUTINE, "complex128", tri.STRIDED
    entry_points = (
        EntryPoint(
            ROUTINE,
            "cublasZgemvStridedBatched(trans: int, m: int, n: int, alpha: complex, A: Tensor, "
            "lda: int, strideA: int, x: Tensor, incx: int, stridex: int, beta: complex, "
            "y: Tensor, incy: int, stridey: int, batchCount: int) -> None",
            "y_b = alpha * op(A_b) @ x_b + beta * y_b for b < batchCount (op: N, T or the "
            "conjugate transpose C); A_b, x_b, y_b start b strides into their complex128 "
            "buffers.",
        ),
    )
    description = _gemv.describe(ROUTINE, "complex128", tri.STRIDED)
    solution = SOLUTION
    negatives = (
        Negative("stride_in_floats", "offsets entry b by b * stride floats of the real view "
                 "instead of b * stride complex elements", NEGATIVE_STRIDE_IN_FLOATS),
        Negative("reads_y_when_beta_zero", "always adds beta * y, so NaN in an unread y leaks "
                 "through 0 * NaN when beta == 0", NEGATIVE_READS_Y),
    )
    # Relative to the sum of |terms| of each component (_gemv_operands.product, SUM_ULPS).
    tolerances = {"complex128": _blas.sum_tolerance("complex128")}

    def benchmark_cases(self) -> Sequence[Case]:
        N, T, _ = _gemv.TRANS
        return [self._case((1024, 1024, 64), N, 1.5 - 0.5j, 0.5 + 0.25j),  # 1 GiB of A
                self._case((256, 256, 512), T, -1, 1, 1, -1, 0, sa="gap")]
