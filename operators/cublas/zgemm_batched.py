"""cublas::cublasZgemmBatched — ``C_e = alpha * op(A_e) @ op(B_e) + beta * C_e`` for each entry of
arrays of pointers, column-major complex128."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from operators.cublas import _gemm, _gemm_cases
from operators.registry import register
from operators.spec import Case, Kind


@register("cublas::cublasZgemmBatched", version=2, kind=Kind.COMPUTE)
class ZgemmBatched(_gemm.Gemm):
    routine, precision, convention = "cublasZgemmBatched", "complex128", "pointers"
    tiles, controls = "64, 64, 16, 8, 2", ("no_conjugation", "first_a_only")

    def benchmark_cases(self) -> Sequence[Case]:
        g = functools.partial(_gemm_cases.gemm_case, self.routine, self.precision)
        return [g("N", "N", 512, 512, 512, alpha=1.0, beta=0.0, batch=32),
                g("C", "N", 128, 128, 64, alpha=1 + 1j, beta=0.5j, batch=1024)]
