"""cublas::cublasSgemmStridedBatched — ``C_e = alpha * op(A_e) @ op(B_e) + beta * C_e`` for entries a
fixed stride apart, column-major float32."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from operators.cublas import _gemm, _gemm_cases
from operators.registry import register
from operators.spec import Case, Kind


@register("cublas::cublasSgemmStridedBatched", version=2, kind=Kind.COMPUTE)
class SgemmStridedBatched(_gemm.Gemm):
    routine, precision, convention = "cublasSgemmStridedBatched", "float32", "strided"
    tiles, controls = "128, 128, 32, 8, 3", ("tf32", "c_packed")

    def benchmark_cases(self) -> Sequence[Case]:
        s = functools.partial(_gemm_cases.strided_case, self.routine, self.precision)
        return [s("N", "N", 1024, 1024, 512, 1.0, 0.0, 32),
                s("T", "N", 2048, 2048, 128, 1.0, 1.0, 64, sa="bcast")]
