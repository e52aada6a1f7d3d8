"""cublas::cublasDgemmStridedBatched — ``C_e = alpha * op(A_e) @ op(B_e) + beta * C_e`` for entries a
fixed stride apart, column-major float64."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from operators.cublas import _gemm, _gemm_cases
from operators.registry import register
from operators.spec import Case, Kind


@register("cublas::cublasDgemmStridedBatched", version=2, kind=Kind.COMPUTE)
class DgemmStridedBatched(_gemm.Gemm):
    routine, precision, convention = "cublasDgemmStridedBatched", "float64", "strided"
    tiles, controls = "64, 64, 16, 4, 3", ("first_a_only", "c_packed")

    def benchmark_cases(self) -> Sequence[Case]:
        s = functools.partial(_gemm_cases.strided_case, self.routine, self.precision)
        return [s("N", "N", 512, 512, 512, 1.0, 0.0, 64),
                s("T", "N", 1024, 1024, 128, 1.0, 1.0, 64, sa="bcast")]
