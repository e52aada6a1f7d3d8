"""cublas::cublasCgemmStridedBatched — ``C_e = alpha * op(A_e) @ op(B_e) + beta * C_e`` for entries a
fixed stride apart, column-major complex64."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from operators.cublas import _gemm, _gemm_cases
from operators.registry import register
from operators.spec import Case, Kind


@register("cublas::cublasCgemmStridedBatched", version=2, kind=Kind.COMPUTE)
class CgemmStridedBatched(_gemm.Gemm):
    routine, precision, convention = "cublasCgemmStridedBatched", "complex64", "strided"
    tiles, controls = "64, 64, 32, 4, 3", ("tf32", "real_stride_units")

    def benchmark_cases(self) -> Sequence[Case]:
        s = functools.partial(_gemm_cases.strided_case, self.routine, self.precision)
        return [s("N", "N", 512, 512, 512, 1.0, 0.0, 32),
                s("T", "N", 1024, 1024, 128, 1 + 1j, 0.5j, 32, sa="bcast")]
