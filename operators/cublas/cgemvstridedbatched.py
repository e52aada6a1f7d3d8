"""cublas::cublasCgemvStridedBatched — ``y_b = alpha * op(A_b) @ x_b + beta * y_b`` for strided
batches of column-major complex64 matrices and vectors."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _gemv
from operators.cublas import _gemv_triton as tri
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative

ROUTINE = "cublasCgemvStridedBatched"
SOLUTION = tri.solution(ROUTINE, "complex64", tri.STRIDED)

# Strides taken in floats of the real view instead of complex elements (not doubled): right
# for one entry or strides of 0.
NEGATIVE_STRIDE_IN_FLOATS = _blas.variant(SOLUTION, *(
    (tri.strided_base(v, True), tri.strided_base(v, False)) for v in "axy"))

# CUBLAS_OP_C computed as T: A_b^T x_b instead of A_b^H x_b (right for N and T).
NEGATIVE_C_AS_T = _blas.variant(SOLUTION, (tri.CONJ_FLAG, tri.NO_CONJ_FLAG))


@register("cublas::cublasCgemvStridedBatched", version=1, kind=Kind.COMPUTE)
class CgemvStridedBatched(_gemv.Gemv):
    routine, precision, mode = ROUTINE, "complex64", tri.STRIDED
    entry_points = (
        EntryPoint(
            ROUTINE,
            "cublasCgemvStridedBatched(trans: int, m: int, n: int, alpha: complex, A: Tensor, "
            "lda: int, strideA: int, x: Tensor, incx: int, stridex: int, beta: complex, "
            "y: Tensor, incy: int, stridey: int, batchCount: int) -> None",
            "y_b = alpha * op(A_b) @ x_b + beta * y_b for b < batchCount (op: N, T or the "
            "conjugate transpose C); A_b, x_b, y_b start b strides into their complex64 "
            "buffers.",
        ),
    )
    description = _gemv.describe(ROUTINE, "complex64", tri.STRIDED)
    solution = SOLUTION
    negatives = (
        Negative("stride_in_floats", "offsets entry b by b * stride floats of the real view "
                 "instead of b * stride complex elements", NEGATIVE_STRIDE_IN_FLOATS),
        Negative("c_as_t", "computes A^T x for CUBLAS_OP_C: the conjugation is missing",
                 NEGATIVE_C_AS_T),
    )
    # Relative to the sum of |terms| of each component (_gemv_operands.product, SUM_ULPS).
    tolerances = {"complex64": _blas.sum_tolerance("complex64")}

    def benchmark_cases(self) -> Sequence[Case]:
        N, _, C = _gemv.TRANS
        return [self._case((1024, 1024, 128), C, 1.5 - 0.5j, 0.5 + 0.25j),  # 1 GiB of A
                self._case((256, 256, 1024), N, 1j, 0, 1, 1, 0, sa="gap", sy="gap")]
