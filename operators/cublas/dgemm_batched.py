"""cublas::cublasDgemmBatched — ``C_e = alpha * op(A_e) @ op(B_e) + beta * C_e`` for each entry of
arrays of pointers, column-major float64."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from operators.cublas import _gemm, _gemm_cases
from operators.registry import register
from operators.spec import Case, Kind


@register("cublas::cublasDgemmBatched", version=2, kind=Kind.COMPUTE)
class DgemmBatched(_gemm.Gemm):
    routine, precision, convention = "cublasDgemmBatched", "float64", "pointers"
    tiles, controls = "64, 64, 16, 4, 3", ("first_a_only", "op_c_as_n")

    def benchmark_cases(self) -> Sequence[Case]:
        g = functools.partial(_gemm_cases.gemm_case, self.routine, self.precision)
        return [g("N", "N", 512, 512, 512, alpha=1.0, beta=0.0, batch=64),
                g("T", "N", 128, 128, 128, alpha=1.0, beta=1.0, batch=2048)]
