"""cublas::cublasDgemmStridedBatched_64 — ``C_e = alpha * op(A_e) @ op(B_e) + beta * C_e`` for
entries a fixed stride apart, column-major float64, with the 64-bit API's sizes."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from operators.cublas import _gemm, _gemm_cases
from operators.registry import register
from operators.spec import Case, Kind

# The offset case: A's entries 2^30 + 2^20 elements apart, so entry 2 starts 2^31 + 2^21
# elements in (an int32 offset overflows). The buffer spans 16.02 GiB, nearly all of it gaps
# (NaN): the timing harness holds six copies of a case, 96 GiB — an H200's memory, not an 80 GB
# H100's.
OFFSET_STRIDE_A = (1 << 30) + (1 << 20)


@register("cublas::cublasDgemmStridedBatched_64", version=2, kind=Kind.COMPUTE)
class DgemmStridedBatched64(_gemm.Gemm):
    routine, precision, convention = "cublasDgemmStridedBatched_64", "float64", "strided"
    wide, tiles, controls = True, "64, 64, 16, 4, 3", ("k_zero_returns", "c_packed")

    def benchmark_cases(self) -> Sequence[Case]:
        s = functools.partial(_gemm_cases.strided_case, self.routine, self.precision)
        return [s("N", "N", 512, 512, 512, 1.0, 0.0, 64),
                s("N", "N", 2048, 2048, 512, -1.5, 0.5, 3, sa=OFFSET_STRIDE_A)]
