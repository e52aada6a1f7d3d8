"""cublas::cublasCgemvBatched_64 — ``y_b = alpha * op(A_b) @ x_b + beta * y_b`` for arrays of
pointers to column-major complex64 matrices and vectors, through the 64-bit index API."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _gemv
from operators.cublas import _gemv_triton as tri
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative

ROUTINE = "cublasCgemvBatched_64"
SOLUTION = tri.solution(ROUTINE, "complex64", tri.BATCHED)

# For CUBLAS_OP_C conjugates x instead of A: a * conj(x) (right for N and T).
NEGATIVE_CONJUGATES_X = _blas.variant(SOLUTION, (tri.CONJ_A_IMAG, tri.CONJ_X_IMAG))

# Takes lda as m: right only when the matrices have no padding rows.
NEGATIVE_IGNORES_LDA = _blas.variant(SOLUTION, (
    "        n_out, n_red, s_out, s_red = m, n, 1, lda\n",
    "        n_out, n_red, s_out, s_red = m, n, 1, m\n"), (
    "        n_out, n_red, s_out, s_red = n, m, lda, 1\n",
    "        n_out, n_red, s_out, s_red = n, m, m, 1\n"))

# The benchmark case whose offsets pass 2^31 in the float32 view a kernel indexes: A is
# 30000 x 32768 with lda 32800 (8.0 GiB in all, 7.3 GiB of it the matrix), shared by both
# entries; its last element sits at complex offset 1,074,787,599, float offset 2,149,575,199.
WIDE_M, WIDE_N, WIDE_PAD = 30000, 32768, 2800


@register("cublas::cublasCgemvBatched_64", version=2, kind=Kind.COMPUTE)
class CgemvBatched64(_gemv.Gemv):
    routine, precision, mode = ROUTINE, "complex64", tri.BATCHED
    entry_points = (
        EntryPoint(
            ROUTINE,
            "cublasCgemvBatched_64(trans: int, m: int, n: int, alpha: complex, Aarray: Tensor, "
            "lda: int, xarray: Tensor, incx: int, beta: complex, yarray: Tensor, incy: int, "
            "batchCount: int) -> None",
            "y_b = alpha * op(A_b) @ x_b + beta * y_b for b < batchCount (op: N, T or the "
            "conjugate transpose C) with 64-bit sizes; the arrays hold the addresses of "
            "complex64 column-major matrices and vectors.",
        ),
    )
    description = _gemv.describe(ROUTINE, "complex64", tri.BATCHED, wide=True)
    solution = SOLUTION
    negatives = (
        Negative("conjugates_x", "for CUBLAS_OP_C conjugates x instead of A",
                 NEGATIVE_CONJUGATES_X),
        Negative("ignores_lda", "takes the leading dimension as m, ignoring lda's padding "
                 "rows", NEGATIVE_IGNORES_LDA),
    )
    # Relative to the sum of |terms| of each component (_gemv_operands.product, SUM_ULPS).
    tolerances = {"complex64": _blas.sum_tolerance("complex64")}

    def benchmark_cases(self) -> Sequence[Case]:
        N, _, C = _gemv.TRANS
        return [self._case((1024, 1024, 128), C, 1.5 - 0.5j, 0.5 + 0.25j),  # 1 GiB of A
                # Offsets past 2^31 (see WIDE_M): 32-bit index arithmetic wraps here, and the
                # re-check after timing compares the outputs with the reference.
                self._case((WIDE_M, WIDE_N, 2), N, 1 - 1j, 0.5, 1, 1, WIDE_PAD, share_a=True)]
