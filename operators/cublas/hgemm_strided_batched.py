"""cublas::cublasHgemmStridedBatched — ``C_e = alpha * op(A_e) @ op(B_e) + beta * C_e`` for entries a
fixed stride apart, column-major float16, accumulated in float16 by cuBLAS."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from operators.cublas import _gemm, _gemm_cases
from operators.registry import register
from operators.spec import Case, Kind


@register("cublas::cublasHgemmStridedBatched", version=2, kind=Kind.COMPUTE)
class HgemmStridedBatched(_gemm.Gemm):
    routine, precision, convention = "cublasHgemmStridedBatched", "float16", "strided"
    tiles, controls = "128, 128, 32, 8, 3", ("first_a_only", "op_c_as_n")

    def benchmark_cases(self) -> Sequence[Case]:
        s = functools.partial(_gemm_cases.strided_case, self.routine, self.precision)
        return [s("N", "N", 1024, 1024, 1024, 1.0, 0.0, 64),
                s("T", "N", 2048, 2048, 128, 1.0, 1.0, 128, sa="bcast")]
