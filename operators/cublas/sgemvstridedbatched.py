"""cublas::cublasSgemvStridedBatched — ``y_b = alpha * op(A_b) @ x_b + beta * y_b`` for strided
batches of column-major float32 matrices and vectors."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _gemv
from operators.cublas import _gemv_triton as tri
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative

ROUTINE = "cublasSgemvStridedBatched"
SOLUTION = tri.solution(ROUTINE, "float32", tri.STRIDED)

# Takes CUBLAS_OP_C (2) for an invalid argument on real data and returns without writing y:
# cuBLAS accepts it as T.
NEGATIVE_REJECTS_OP_C = _blas.variant(SOLUTION, (tri.TRANSPOSE_TEST,
                                                 tri.REJECT_C + tri.TRANSPOSE_TEST))

# Reads every entry's x at x_0 (stridex ignored): right when stridex == 0 (x broadcast).
NEGATIVE_X_STRIDE_IGNORED = _blas.variant(SOLUTION, (tri.strided_base("x", False),
                                                     "    x = x_ptr\n"))


@register("cublas::cublasSgemvStridedBatched", version=1, kind=Kind.COMPUTE)
class SgemvStridedBatched(_gemv.Gemv):
    routine, precision, mode = ROUTINE, "float32", tri.STRIDED
    entry_points = (
        EntryPoint(
            ROUTINE,
            "cublasSgemvStridedBatched(trans: int, m: int, n: int, alpha: float, A: Tensor, "
            "lda: int, strideA: int, x: Tensor, incx: int, stridex: int, beta: float, "
            "y: Tensor, incy: int, stridey: int, batchCount: int) -> None",
            "y_b = alpha * op(A_b) @ x_b + beta * y_b for b < batchCount; A_b, x_b, y_b start "
            "b strides into their float32 buffers.",
        ),
    )
    description = _gemv.describe(ROUTINE, "float32", tri.STRIDED)
    solution = SOLUTION
    negatives = (
        Negative("rejects_op_c", "returns without writing y for CUBLAS_OP_C (2), which for "
                 "real data is T", NEGATIVE_REJECTS_OP_C),
        Negative("x_stride_ignored", "reads x_0 for every entry; right only when stridex is "
                 "0", NEGATIVE_X_STRIDE_IGNORED),
    )
    # Relative to sum |alpha a x| + |beta y| per element (_gemv_operands.product, SUM_ULPS).
    tolerances = {"float32": _blas.sum_tolerance("float32")}

    def benchmark_cases(self) -> Sequence[Case]:
        N, T, _ = _gemv.TRANS
        return [self._case((1024, 1024, 256), N, 1.5, 0.5),  # 1 GiB of A, packed
                self._case((256, 256, 2048), T, -1.0, 0.0, 1, 1, 0, sa="gap", sx="gap",
                           sy="gap")]  # many small products
