"""cublas::cublasStrsm_v2 — solve ``op(A) X = alpha B`` or ``X op(A) = alpha B`` for X in place
of B, A triangular, float32; judged by backward error (``operators/cublas/_trsm.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _trsm, _trsm_triton
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative

SOLUTION = _trsm_triton.solution("cublasStrsm_v2", "float32", batched=False)

# Chooses forward or backward substitution from uplo alone: for a transposed op(A) (and for
# every right-side solve with N) it runs the wrong way; right whenever the triangle op(A)
# applies is the stored one.
NEGATIVE_DIRECTION_FROM_UPLO = _blas.variant(
    SOLUTION,
    ("        lower = (uplo == 0) == (trans == 0)\n", "        lower = uplo == 0\n"),
    ("        lower = (uplo == 0) != (trans == 0)\n", "        lower = uplo == 0\n"))

# Solves X op(A)^T = alpha B for side RIGHT (op(A) taken as on the left): right for side LEFT.
NEGATIVE_RIGHT_AS_LEFT = _blas.variant(
    SOLUTION,
    ("        s_tr, s_tc = (lda, 1) if trans == 0 else (1, lda)\n",
     "        s_tr, s_tc = (1, lda) if trans == 0 else (lda, 1)\n"),
    ("        lower = (uplo == 0) != (trans == 0)\n", "        lower = (uplo == 0) == (trans == 0)\n"))

# Divides by the stored diagonal even when diag is CUBLAS_DIAG_UNIT (NaN there).
NEGATIVE_READS_UNIT_DIAGONAL = _blas.variant(SOLUTION, ("UNIT=(diag == 1)", "UNIT=False"))

# tl.dot at its default precision: TF32 products (10-bit mantissas) in the block updates.
NEGATIVE_TF32 = SOLUTION.replace('input_precision="ieee", ', "")


@register("cublas::cublasStrsm_v2", version=1, kind=Kind.COMPUTE)
class Strsm(_trsm.Trsm):
    routine, precision = "cublasStrsm_v2", "float32"
    entry_points = (
        EntryPoint(
            "cublasStrsm_v2",
            "cublasStrsm_v2(side: int, uplo: int, trans: int, diag: int, m: int, n: int, "
            "alpha: float, A: Tensor, lda: int, B: Tensor, ldb: int) -> None",
            "Solve op(A) @ X = alpha * B (side 0) or X @ op(A) = alpha * B (side 1) for the "
            "triangular A; X overwrites B.",
        ),
    )
    description = _trsm.statement("cublasStrsm_v2", "float32", batched=False)
    solution = SOLUTION
    negatives = (
        Negative("direction_from_uplo", "picks forward or backward substitution from uplo "
                 "alone; wrong whenever op(A)'s triangle differs from the stored one",
                 NEGATIVE_DIRECTION_FROM_UPLO),
        Negative("right_as_left", "uses op(A) instead of op(A)^T for side RIGHT (solves "
                 "X op(A)^T = alpha B)", NEGATIVE_RIGHT_AS_LEFT),
        Negative("reads_unit_diagonal", "divides by the stored diagonal when diag is unit",
                 NEGATIVE_READS_UNIT_DIAGONAL),
        Negative("tf32", "block updates with tl.dot's default TF32 precision", NEGATIVE_TF32),
    )
    tolerances = {"float32": _blas.sum_tolerance("float32")}  # see tolerance(): grows with k

    def cases(self) -> Sequence[Case]:
        c = self.c
        first = [
            c("LLNN", 20, 12, alpha=1.0, cpu=True),  # two row blocks on the cpu tier
            c("LUTN", 13, 18, alpha=-1.5, pad_a=3, pad_b=2, cpu=True),
            c("RUNU", 19, 14, alpha=0.25, pad_b=1, cpu=True),
            c("RLCN", 9, 17, alpha=1.0, pad_a=2, cpu=True),  # two column blocks of A
            c("LLCU", 11, 9, alpha=2.0, pad_b=3, cpu=True),
            c("RUTN", 10, 7, alpha=-1.0, cpu=True),
            c("LUNN", 12, 10, alpha=0.0, b_nan=True, pad_a=1, pad_b=2, cpu=True),
            c("RLNN", 0, 7, cpu=True),
            c("LUNN", 300, 65, alpha=1.0, std=1e30),
            c("RLTN", 64, 513, alpha=-1.0, std=1e-30),
        ]
        return self.grid(((1, 1), (71, 32), (32, 71), (160, 129), (497, 160), (1024, 257)),
                         first)

    def benchmark_cases(self) -> Sequence[Case]:
        # 4096^3 = 6.9e10 FLOPs (about 1 ms at the H200's fp32 peak); 64 MiB each of A and B.
        c = self.c
        return [c("LLNN", 4096, 4096, alpha=1.0), c("RUTU", 4096, 4096, alpha=-0.5)]
