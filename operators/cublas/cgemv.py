"""cublas::cublasCgemv_v2 — ``y = alpha * op(A) @ x + beta * y``, column-major complex64."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _gemv
from operators.cublas import _gemv_triton as tri
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative

ROUTINE = "cublasCgemv_v2"
SOLUTION = tri.solution(ROUTINE, "complex64", tri.PLAIN)

# CUBLAS_OP_C computed as T: A^T x instead of A^H x (right for N and T).
NEGATIVE_C_AS_T = _blas.variant(SOLUTION, (tri.CONJ_FLAG, tri.NO_CONJ_FLAG))

# No quick return for an empty matrix: with n == 0 (or m == 0 under T/C) it writes
# y = beta * y, where BLAS leaves y as it is.
NEGATIVE_SCALES_EMPTY = _blas.variant(SOLUTION, (tri.empty_return(tri.PLAIN),
                                                 "    if alpha == 0 and beta == 1:\n"))


@register("cublas::cublasCgemv_v2", version=1, kind=Kind.COMPUTE)
class Cgemv(_gemv.Gemv):
    routine, precision, mode = ROUTINE, "complex64", tri.PLAIN
    entry_points = (
        EntryPoint(
            ROUTINE,
            "cublasCgemv_v2(trans: int, m: int, n: int, alpha: complex, A: Tensor, lda: int, "
            "x: Tensor, incx: int, beta: complex, y: Tensor, incy: int) -> None",
            "y = alpha * op(A) @ x + beta * y for a column-major complex64 m x n matrix "
            "(op: N, T or the conjugate transpose C), y in place.",
        ),
    )
    description = _gemv.describe(ROUTINE, "complex64", tri.PLAIN)
    solution = SOLUTION
    negatives = (
        Negative("c_as_t", "computes A^T x for CUBLAS_OP_C: the conjugation is missing",
                 NEGATIVE_C_AS_T),
        Negative("scales_empty", "no quick return for n == 0 (m == 0 under T/C): scales y "
                 "by beta, which BLAS leaves as it is", NEGATIVE_SCALES_EMPTY),
    )
    # Relative to the sum of |terms| of each component (_gemv_operands.product, SUM_ULPS).
    tolerances = {"complex64": _blas.sum_tolerance("complex64")}

    def benchmark_cases(self) -> Sequence[Case]:
        N, T, C = _gemv.TRANS
        return [self._case((16384, 8192), N, 1.5 - 0.5j, 0.5 + 0.25j),  # 1 GiB of A
                self._case((8192, 16384), C, 1, 0),
                self._case((12000, 10000), T, -1j, 1, -1, 1, 16)]
