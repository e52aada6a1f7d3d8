"""cublas::cublasSgemmBatched_64 — ``C_e = alpha * op(A_e) @ op(B_e) + beta * C_e`` for each entry
of arrays of pointers, column-major float32, with the 64-bit API's sizes."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from operators.cublas import _gemm, _gemm_cases
from operators.registry import register
from operators.spec import Case, Kind

# The offset case: one A shared by the batch, 4096 x 257 with lda = 2^23 + 4096, so its last
# column starts 256 * lda = 2^31 + 2^20 elements in (an int32 offset overflows). The buffer spans
# 8.03 GiB, nearly all of it padding (NaN); the timing harness holds six copies of a case.
OFFSET_PAD_A = 1 << 23


@register("cublas::cublasSgemmBatched_64", version=2, kind=Kind.COMPUTE)
class SgemmBatched64(_gemm.Gemm):
    routine, precision, convention, wide = "cublasSgemmBatched_64", "float32", "pointers", True
    tiles, controls = "128, 128, 32, 8, 3", ("tf32", "alpha_zero_returns")

    def benchmark_cases(self) -> Sequence[Case]:
        g = functools.partial(_gemm_cases.gemm_case, self.routine, self.precision)
        return [g("N", "N", 1024, 1024, 512, alpha=1.0, beta=0.0, batch=32),
                g("N", "N", 4096, 4096, 257, alpha=1.0, beta=0.5, batch=4, shared_a=True,
                  pad_a=OFFSET_PAD_A)]
