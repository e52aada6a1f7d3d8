"""aten::square — ``self * self`` elementwise (overloads default, out), floats and int32."""

from __future__ import annotations

import torch

from operators.aten._unary import (
    FLOATS,
    INF,
    NAN,
    PLAIN_WRAPPERS,
    Unary,
    denormals,
    describe,
    ignores_strides,
    log_uniform,
    pick,
    solution,
)
from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Kind, Negative, Tolerance

OP = r'''
@triton.jit
def _op(x, p0, p1):
    return x * x
'''

SOLUTION = solution(OP, PLAIN_WRAPPERS, name="square")

# One float32 code path for every dtype: right for floats, wrong for integer squares past 2**24.
NEGATIVE_INT_VIA_FLOAT = SOLUTION.replace("    y = _op(x, p0, p1)",
                                          "    y = _op(x.to(tl.float32), p0, p1)")


@register("aten::square", version=1, kind=Kind.COMPUTE)
class Square(Unary):
    op = "square"
    int_dtypes = ("int32",)
    entry_points = (
        EntryPoint("square", "square(self: Tensor) -> Tensor", "self * self, elementwise."),
        EntryPoint("square_out", "square_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes self * self into out (same shape and dtype) and returns out."),
    )
    description = describe(
        "Elementwise square `out = self * self`, following PyTorch's `torch.square`. Results "
        "beyond the dtype's range are inf (e.g. |x| > 256 in float16).", FLOATS,
        ints="int32 inputs (|x| <= 46340, so no overflow) give exact int32 squares.")
    solution = SOLUTION
    negatives = (
        Negative("int_via_float32", "squares integers in float32, losing exactness past 2**24",
                 NEGATIVE_INT_VIA_FLOAT),
        Negative("ignores_input_strides", "indexes a sliced input as if contiguous",
                 ignores_strides(SOLUTION)),
    )
    # One correctly rounded product (for float16/bfloat16 the float32 product is exact, then
    # rounded once): at most 1 u of |x^2|; subnormal results may flush (absolute floor).
    tolerances = {
        "float16": Tolerance.ulps("float16", 1),
        "bfloat16": Tolerance.ulps("bfloat16", 1),
        "float32": Tolerance.ulps("float32", 1),
    }
    flops_per_element = 1.0

    def sample(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        sign = torch.randint(0, 2, (n,), generator=gen).double() * 2 - 1
        return pick(n, gen, torch.randn(n, generator=gen, dtype=torch.float64) * 10,
                    sign * log_uniform(n, gen, 1e-6, 200.0))

    def edges(self, dtype: torch.dtype, c: Case) -> list[float]:
        # 300 overflows float16's square, 1e20 float32's (and is already inf in float16)
        return [INF, -INF, NAN, 0.0, -0.0, 300.0, -1e20, *denormals(dtype)]

    def int_edges(self, dtype: torch.dtype) -> list[int]:
        return [0, 1, -1, 46340, -46340]

    def sample_int(self, n: int, c: Case, gen: torch.Generator) -> torch.Tensor:
        return torch.randint(-46340, 46341, (n,), generator=gen, dtype=torch.int64)

    def ref64(self, x: torch.Tensor, call: Call) -> tuple[torch.Tensor, None]:
        return x * x, None

    def ref_int(self, x: torch.Tensor, call: Call) -> torch.Tensor:
        return x.long() * x.long()
