"""cublas::cublasDtrsmBatched — for every batch entry, solve ``op(A_e) X_e = alpha B_e`` or
``X_e op(A_e) = alpha B_e`` in place of B_e, A_e triangular, float64, the entries given as
arrays of device pointers; judged by backward error (``operators/cublas/_trsm.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from operators.cublas import _blas, _trsm, _trsm_triton
from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative

SOLUTION = _trsm_triton.solution("cublasDtrsmBatched", "float64", batched=True)

# Reads every entry's A through the first pointer: right only when the entries share one A.
NEGATIVE_FIRST_A_ONLY = _blas.variant(
    SOLUTION, ("tl.load(a_ptr + e).to(", "tl.load(a_ptr + 0 * e).to("))

# Transposes for CUBLAS_OP_T (1) only and takes CUBLAS_OP_C (2) as N (for real data C is T).
NEGATIVE_OP_C_AS_N = _blas.variant(
    SOLUTION,
    ("        s_tr, s_tc = (1, lda) if trans == 0 else (lda, 1)\n",
     "        s_tr, s_tc = (lda, 1) if trans == 1 else (1, lda)\n"),
    ("        lower = (uplo == 0) == (trans == 0)\n", "        lower = (uplo == 0) == (trans != 1)\n"),
    ("        s_tr, s_tc = (lda, 1) if trans == 0 else (1, lda)\n",
     "        s_tr, s_tc = (1, lda) if trans == 1 else (lda, 1)\n"),
    ("        lower = (uplo == 0) != (trans == 0)\n", "        lower = (uplo == 0) != (trans != 1)\n"))


# Solves with alpha == 0 like any other alpha: reads A (NaN: never to be read) and B.
NEGATIVE_NO_ALPHA_QUICK_RETURN = _blas.variant(SOLUTION, ("ALPHA_ZERO=(alpha == 0)",
                                                          "ALPHA_ZERO=False"))


@register("cublas::cublasDtrsmBatched", version=2, kind=Kind.COMPUTE)
class DtrsmBatched(_trsm.Trsm):
    routine, precision, batched = "cublasDtrsmBatched", "float64", True
    entry_points = (
        EntryPoint(
            "cublasDtrsmBatched",
            "cublasDtrsmBatched(side: int, uplo: int, trans: int, diag: int, m: int, n: int, "
            "alpha: float, Aarray: Tensor, lda: int, Barray: Tensor, ldb: int, "
            "batchCount: int) -> None",
            "For each entry e: solve op(A_e) @ X = alpha * B_e (side 0) or X @ op(A_e) = "
            "alpha * B_e (side 1); X overwrites B_e. Aarray/Barray: int64 tensors of addresses.",
        ),
    )
    description = _trsm.statement("cublasDtrsmBatched", "float64", batched=True)
    solution = SOLUTION
    negatives = (
        Negative("first_a_only", "reads every entry's A through Aarray[0]; right only when "
                 "all entries share one A", NEGATIVE_FIRST_A_ONLY),
        Negative("op_c_as_n", "transposes for CUBLAS_OP_T (1) only, taking CUBLAS_OP_C (2) "
                 "as N", NEGATIVE_OP_C_AS_N),
        Negative("no_alpha_quick_return", "solves when alpha == 0 instead of writing zeros, "
                 "reading A (NaN: never read then)", NEGATIVE_NO_ALPHA_QUICK_RETURN),
    )
    tolerances = {"float64": _blas.sum_tolerance("float64")}  # see tolerance(): grows with k

    def cases(self) -> Sequence[Case]:
        c = self.c
        first = [
            c("LLNN", 20, 9, alpha=1.0, batch=3, cpu=True),  # two row blocks on the cpu tier
            c("RUCN", 7, 12, alpha=-1.5, batch=2, pad_a=2, pad_b=1, cpu=True),
            c("LUCU", 10, 6, alpha=0.5, batch=3, shared_a=True, pad_b=3, cpu=True),
            c("RLTN", 9, 13, alpha=2.0, batch=2, pad_a=1, cpu=True),
            c("LLTU", 12, 5, alpha=0.0, batch=2, pad_b=2, cpu=True),
            c("RUNN", 6, 8, alpha=1.0, batch=0, cpu=True),
            c("LUNN", 0, 4, alpha=1.0, batch=2, cpu=True),
            c("LLNN", 64, 33, alpha=-1.0, batch=200, pad_a=1),
            c("RUTN", 40, 90, alpha=1.0, batch=13, shared_a=True, std=1e100),
            c("LUNU", 7, 5, alpha=0.0, batch=5, b_nan=True, pad_b=1),
        ]
        return self.grid(((1, 1), (32, 71), (71, 32), (160, 129), (257, 64)), first)

    def benchmark_cases(self) -> Sequence[Case]:
        # 512 x 256^3 and 4096 x 128^3 = 8.6e9 FLOPs each (0.13 ms at the H200's fp64 peak);
        # 256 MiB and 512 MiB each of A and B.
        c = self.c
        return [c("LLNN", 256, 256, alpha=1.0, batch=512),
                c("RUTU", 128, 128, alpha=-0.5, batch=4096)]
