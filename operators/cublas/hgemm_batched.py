"""cublas::cublasHgemmBatched — ``C_e = alpha * op(A_e) @ op(B_e) + beta * C_e`` for each entry of
arrays of pointers, column-major float16, accumulated in float16 by cuBLAS."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from operators.cublas import _gemm, _gemm_cases
from operators.registry import register
from operators.spec import Case, Kind


@register("cublas::cublasHgemmBatched", version=2, kind=Kind.COMPUTE)
class HgemmBatched(_gemm.Gemm):
    routine, precision, convention = "cublasHgemmBatched", "float16", "pointers"
    tiles, controls = "128, 128, 32, 8, 3", ("reversed_b", "k_zero_returns")

    def benchmark_cases(self) -> Sequence[Case]:
        g = functools.partial(_gemm_cases.gemm_case, self.routine, self.precision)
        return [g("N", "N", 1024, 1024, 1024, alpha=1.0, beta=0.0, batch=64),
                g("T", "N", 256, 256, 256, alpha=1.0, beta=1.0, batch=4096)]
