"""cublas::cublasZgemvBatched — ``y_b = alpha * op(A_b) @ x_b + beta * y_b`` for arrays of
pointers to column-major complex128 matrices and vectors."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _gemv
from operators.cublas import _gemv_triton as tri
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative

ROUTINE = "cublasZgemvBatched"
SOLUTION = tri.solution(ROUTINE, "complex128", tri.BATCHED)

# CUBLAS_OP_C computed as T: A_b^T x_b instead of A_b^H x_b (right for N and T).
NEGATIVE_C_AS_T = _blas.variant(SOLUTION, (tri.CONJ_FLAG, tri.NO_CONJ_FLAG))

# Reads every entry's x through the first pointer: right when the x pointers are all the same.
NEGATIVE_FIRST_X = _blas.variant(SOLUTION, (
    tri.pointer_load("x", "float64"),
    "    x = tl.load(x_ptr).to(tl.pointer_type(tl.float64))\n"))


@register("cublas::cublasZgemvBatched", version=2, kind=Kind.COMPUTE)
class ZgemvBatched(_gemv.Gemv):
    routine, precision, mode = ROUTINE, "complex128", tri.BATCHED
    entry_points = (
        EntryPoint(
            ROUTINE,
            "cublasZgemvBatched(trans: int, m: int, n: int, alpha: complex, Aarray: Tensor, "
            "lda: int, xarray: Tensor, incx: int, beta: complex, yarray: Tensor, incy: int, "
            "batchCount: int) -> None",
            "y_b = alpha * op(A_b) @ x_b + beta * y_b for b < batchCount (op: N, T or the "
            "conjugate transpose C); the arrays hold the addresses of complex128 column-major "
            "matrices and vectors.",
        ),
    )
    description = _gemv.describe(ROUTINE, "complex128", tri.BATCHED)
    solution = SOLUTION
    negatives = (
        Negative("c_as_t", "computes A^T x for CUBLAS_OP_C: the conjugation is missing",
                 NEGATIVE_C_AS_T),
        Negative("first_x", "reads x through xarray[0] for every entry; right only when all "
                 "x pointers are the same", NEGATIVE_FIRST_X),
    )
    # Relative to the sum of |terms| of each component (_gemv_operands.product, SUM_ULPS).
    tolerances = {"complex128": _blas.sum_tolerance("complex128")}

    def benchmark_cases(self) -> Sequence[Case]:
        N, _, C = _gemv.TRANS
        return [self._case((1024, 1024, 64), N, 1.5 - 0.5j, 0.5 + 0.25j),  # 1 GiB of A
                self._case((256, 256, 512), C, 1j, 0, 1, -1)]  # many small products
