"""cublas::cublasZgemmStridedBatched — ``C_e = alpha * op(A_e) @ op(B_e) + beta * C_e`` for entries a
fixed stride apart, column-major complex128."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from operators.cublas import _gemm, _gemm_cases
from operators.registry import register
from operators.spec import Case, Kind


@register("cublas::cublasZgemmStridedBatched", version=2, kind=Kind.COMPUTE)
class ZgemmStridedBatched(_gemm.Gemm):
    routine, precision, convention = "cublasZgemmStridedBatched", "complex128", "strided"
    tiles, controls = "64, 64, 16, 8, 2", ("conjugates_t", "real_stride_units")

    def benchmark_cases(self) -> Sequence[Case]:
        s = functools.partial(_gemm_cases.strided_case, self.routine, self.precision)
        return [s("N", "N", 512, 512, 256, 1.0, 0.0, 32),
                s("T", "N", 512, 512, 128, 1 + 1j, 0.5j, 64, sa="bcast")]
