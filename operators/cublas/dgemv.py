"""cublas::cublasDgemv_v2 — ``y = alpha * op(A) @ x + beta * y``, column-major float64."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _gemv
from operators.cublas import _gemv_triton as tri
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative

ROUTINE = "cublasDgemv_v2"
SOLUTION = tri.solution(ROUTINE, "float64", tri.PLAIN)

# Takes CUBLAS_OP_C (2) for an invalid argument on real data and returns without writing y:
# cuBLAS accepts it as T.
NEGATIVE_REJECTS_OP_C = _blas.variant(SOLUTION, (tri.TRANSPOSE_TEST, tri.REJECT_C + tri.TRANSPOSE_TEST))

# Takes lda as m: right only when A has no padding rows.
NEGATIVE_IGNORES_LDA = _blas.variant(SOLUTION, (
    "        n_out, n_red, s_out, s_red = m, n, 1, lda\n",
    "        n_out, n_red, s_out, s_red = m, n, 1, m\n"), (
    "        n_out, n_red, s_out, s_red = n, m, lda, 1\n",
    "        n_out, n_red, s_out, s_red = n, m, m, 1\n"))


@register("cublas::cublasDgemv_v2", version=1, kind=Kind.COMPUTE)
class Dgemv(_gemv.Gemv):
    routine, precision, mode = ROUTINE, "float64", tri.PLAIN
    entry_points = (
        EntryPoint(
            ROUTINE,
            "cublasDgemv_v2(trans: int, m: int, n: int, alpha: float, A: Tensor, lda: int, "
            "x: Tensor, incx: int, beta: float, y: Tensor, incy: int) -> None",
            "y = alpha * op(A) @ x + beta * y for a column-major float64 m x n matrix, y in "
            "place.",
        ),
    )
    description = _gemv.describe(ROUTINE, "float64", tri.PLAIN)
    solution = SOLUTION
    negatives = (
        Negative("rejects_op_c", "returns without writing y for CUBLAS_OP_C (2), which for "
                 "real data is T", NEGATIVE_REJECTS_OP_C),
        Negative("ignores_lda", "takes the leading dimension as m, ignoring lda's padding "
                 "rows", NEGATIVE_IGNORES_LDA),
    )
    # Relative to sum |alpha a x| + |beta y| per element (_gemv.product, _blas.SUM_ULPS).
    tolerances = {"float64": _blas.sum_tolerance("float64")}

    def benchmark_cases(self) -> Sequence[Case]:
        N, T, _ = _gemv.TRANS
        return [self._case((16384, 8192), N, 1.5, 0.5),  # 1 GiB of A
                self._case((8192, 16384), T, -1.0, 0.0),
                self._case((16384, 8192), N, 1.0, 1.0, -1, 2, 64)]
