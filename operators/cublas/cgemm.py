"""cublas::cublasCgemm_v2 — ``C = alpha * op(A) @ op(B) + beta * C``, column-major complex64."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from operators.cublas import _gemm, _gemm_cases
from operators.registry import register
from operators.spec import Case, Kind


@register("cublas::cublasCgemm_v2", version=2, kind=Kind.COMPUTE)
class Cgemm(_gemm.Gemm):
    routine, precision, convention = "cublasCgemm_v2", "complex64", "none"
    tiles, controls = "64, 64, 32, 4, 3", ("tf32", "no_conjugation", "reads_c_when_beta_zero")

    def cases(self) -> Sequence[Case]:
        g = functools.partial(_gemm_cases.gemm_case, self.routine, self.precision)
        return [
            g("N", "N", 37, 45, 29, alpha=1.0, beta=0j, cpu=True),
            g("C", "N", 33, 40, 27, alpha=-1.5 + 0.5j, beta=0.5j, pad_a=3, cpu=True),
            g("N", "C", 19, 30, 41, alpha=0.5j, beta=1.0, pad_b=5, pad_c=2, cpu=True),
            g("T", "T", 24, 21, 35, alpha=1.0 + 1.0j, beta=-0.75 + 0.25j, pad_a=1, pad_c=3,
              cpu=True),
            g("C", "C", 20, 18, 22, alpha=2.0 - 1.0j, beta=0j, pad_b=2, cpu=True),
            g("N", "T", 16, 20, 12, alpha=0j, beta=0.5j, cpu=True),  # alpha == 0: A, B NaN
            g("T", "N", 17, 9, 0, alpha=1.0, beta=-0.75 + 0.25j, cpu=True),  # k == 0
            g("N", "N", 1, 1, 1, alpha=1.0, beta=1.0),
            g("C", "N", 1, 97, 300, alpha=-1.5 + 0.5j, beta=0j),
            g("N", "C", 255, 1, 129, alpha=0.5j, beta=1.0, pad_c=1),
            g("N", "N", 0, 7, 5, alpha=1.0, beta=1.0),  # m == 0: nothing
            g("T", "C", 7, 0, 5, alpha=1.0, beta=0j),  # n == 0: nothing
            *_gemm_cases.plain_grid(self.routine, self.precision),
            g("N", "N", 511, 257, 1023, alpha=-1.5 + 0.5j, beta=0.5j, pad_a=7, pad_b=1,
              pad_c=13),
            g("C", "N", 1024, 1024, 256, alpha=1.0, beta=0j),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        g = functools.partial(_gemm_cases.gemm_case, self.routine, self.precision)
        return [g("N", "N", 2048, 2048, 2048, alpha=1.0, beta=0j),
                g("C", "N", 4096, 2048, 1024, alpha=1.0 + 1.0j, beta=0.5j)]
