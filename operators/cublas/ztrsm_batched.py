"""cublas::cublasZtrsmBatched — for every batch entry, solve ``op(A_e) X_e = alpha B_e`` or
``X_e op(A_e) = alpha B_e`` in place of B_e, A_e triangular, complex128 (op C the conjugate
transpose), the entries given as arrays of device pointers; judged by backward error
(``operators/cublas/_trsm.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _trsm, _trsm_triton
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative

SOLUTION = _trsm_triton.solution("cublasZtrsmBatched", "complex128", batched=True)

# Never conjugates: CUBLAS_OP_C solved as T; right for N and T (and for a real A).
NEGATIVE_NO_CONJUGATION = _blas.variant(SOLUTION, ("CONJ=(trans == 2)", "CONJ=False"))

# Takes the real part of alpha only: right for real alphas.
NEGATIVE_REAL_ALPHA = _blas.variant(SOLUTION, ("alpha.real, alpha.imag", "alpha.real, 0.0"))

# Divides by the stored diagonal even when diag is CUBLAS_DIAG_UNIT (NaN there).
NEGATIVE_READS_UNIT_DIAGONAL = _blas.variant(SOLUTION, ("UNIT=(diag == 1)", "UNIT=False"))


@register("cublas::cublasZtrsmBatched", version=2, kind=Kind.COMPUTE)
class ZtrsmBatched(_trsm.Trsm):
    routine, precision, batched = "cublasZtrsmBatched", "complex128", True
    entry_points = (
        EntryPoint(
            "cublasZtrsmBatched",
            "cublasZtrsmBatched(side: int, uplo: int, trans: int, diag: int, m: int, n: int, "
            "alpha: complex, Aarray: Tensor, lda: int, Barray: Tensor, ldb: int, "
            "batchCount: int) -> None",
            "For each entry e: solve op(A_e) @ X = alpha * B_e (side 0) or X @ op(A_e) = "
            "alpha * B_e (side 1), op C the conjugate transpose; X overwrites B_e. "
            "Aarray/Barray: int64 tensors of addresses of complex128 matrices.",
        ),
    )
    description = _trsm.statement("cublasZtrsmBatched", "complex128", batched=True)
    solution = SOLUTION
    negatives = (
        Negative("no_conjugation", "solves CUBLAS_OP_C as T, without conjugating A",
                 NEGATIVE_NO_CONJUGATION),
        Negative("real_alpha", "drops alpha's imaginary part", NEGATIVE_REAL_ALPHA),
        Negative("reads_unit_diagonal", "divides by the stored diagonal when diag is unit",
                 NEGATIVE_READS_UNIT_DIAGONAL),
    )
    tolerances = {"complex128": _blas.sum_tolerance("complex128")}  # see tolerance()

    def cases(self) -> Sequence[Case]:
        c = self.c
        first = [
            c("LLCN", 17, 5, alpha=complex(-0.5, 1.25), batch=1, cpu=True),  # two row blocks
            c("RUCU", 6, 9, alpha=1.0, batch=2, pad_a=2, pad_b=1, cpu=True),
            c("LUTN", 8, 6, alpha=complex(0.0, 2.0), batch=3, shared_a=True, pad_b=3,
              cpu=True),
            c("RLNN", 7, 10, alpha=complex(1.5, -0.25), batch=2, pad_a=1, cpu=True),
            c("LLNU", 9, 5, alpha=0.0, batch=2, pad_b=2, cpu=True),
            c("RUNN", 0, 6, alpha=1.0, batch=2, cpu=True),
            c("LUCN", 64, 33, alpha=1.0, batch=100, pad_a=1),
            c("RLCN", 40, 90, alpha=complex(0.0, -1.0), batch=13, shared_a=True, std=1e100),
            c("LUNU", 7, 5, alpha=0.0, batch=5, b_nan=True, pad_b=1),
            c("LLNN", 6, 6, alpha=1.0, batch=0),
        ]
        return self.grid(((1, 1), (32, 71), (71, 32), (160, 129), (257, 64)), first)

    def benchmark_cases(self) -> Sequence[Case]:
        # 4 k^2 r real FLOPs per entry: 256 x 4 x 192^3 and 2048 x 4 x 96^3 = 7.2e9 each (0.11
        # ms at the H200's fp64 peak); 151 MiB and 302 MiB each of A and B.
        c = self.c
        return [c("LLCN", 192, 192, alpha=complex(1.0, 0.5), batch=256),
                c("RUCU", 96, 96, alpha=-1.0, batch=2048)]
