"""cublas::cublasCgemmStridedBatched_64 — ``C_e = alpha * op(A_e) @ op(B_e) + beta * C_e`` for
entries a fixed stride apart, column-major complex64, with the 64-bit API's sizes."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from operators.cublas import _gemm, _gemm_cases
from operators.registry import register
from operators.spec import Case, Kind

# The offset case: A's entries 2^29 + 2^20 complex elements apart, so entry 2 starts past 2^30
# complex elements, 2^31 + 2^21 floats into the real view a Triton kernel indexes (an int32
# offset overflows). The buffer spans 8.02 GiB, nearly all of it gaps (NaN); the timing harness
# holds six copies of a case.
OFFSET_STRIDE_A = (1 << 29) + (1 << 20)


@register("cublas::cublasCgemmStridedBatched_64", version=2, kind=Kind.COMPUTE)
class CgemmStridedBatched64(_gemm.Gemm):
    routine, precision, convention = "cublasCgemmStridedBatched_64", "complex64", "strided"
    wide, tiles, controls = True, "64, 64, 32, 4, 3", ("tf32", "alpha_zero_returns")

    def benchmark_cases(self) -> Sequence[Case]:
        s = functools.partial(_gemm_cases.strided_case, self.routine, self.precision)
        return [s("N", "N", 512, 512, 512, 1.0, 0.0, 32),
                s("N", "N", 2048, 2048, 512, 1 + 1j, 0.5j, 3, sa=OFFSET_STRIDE_A)]
