"""aten::exponential_ — ``self`` filled in place with samples of Exp(lambd)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.aten._random import SEED_HELPER, judged
from operators.distributions import ExponentialJudge
from operators.registry import register
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    OperatorSpec,
    Out,
    Tier,
    Tolerance,
    case,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + SEED_HELPER + r'''

@triton.jit
def _exponential(out_ptr, n, rate, seed, s1, s2, o0, o1, o2, BLOCK: tl.constexpr):
    idx = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = idx < n
    i2 = idx % s2
    i1 = (idx // s2) % s1
    i0 = idx // (s1 * s2)
    u = tl.rand(seed, idx.to(tl.int32))          # [0, 1)
    x = -tl.log(1.0 - u) / rate                   # 1 - u in (0, 1]: finite, >= 0
    tl.store(out_ptr + i0 * o0 + i1 * o1 + i2 * o2, x.to(out_ptr.dtype.element_ty), mask=mask)


def exponential_(self, lambd=1.0, *, generator=None):
    if lambd <= 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    if self.dim() > 3:
        raise NotImplementedError("at most 3 dims")
    n = self.numel()
    if n == 0:
        return self
    sizes = [1] * (3 - self.dim()) + list(self.shape)
    strides = [0] * (3 - self.dim()) + list(self.stride())
    BLOCK = 1024
    _exponential[(triton.cdiv(n, BLOCK),)](self, n, float(lambd), _seed(generator),
                                           sizes[1], sizes[2], *strides, BLOCK=BLOCK)
    return self
'''

# Samples Exp(1) whatever lambd is: right only for lambd = 1.
NEGATIVE_UNIT_RATE = SOLUTION.replace("    x = -tl.log(1.0 - u) / rate ",
                                      "    x = -tl.log(1.0 - u) / 1.0  ")


@register("aten::exponential_", version=1, kind=Kind.RANDOM)
class ExponentialInplace(OperatorSpec):
    entry_points = (
        EntryPoint("exponential_", "exponential_(self: Tensor, lambd: float = 1.0, *, generator: "
                   "Optional[Generator] = None) -> Tensor",
                   "Fills self with samples of Exp(lambd) in place; returns self."),
    )
    description = (
        "Following `Tensor.exponential_`: overwrites every element of `self` (any strides) with "
        "an independent sample of the exponential distribution with rate `lambd` (density "
        "`lambd * exp(-lambd * x)`, x >= 0), rounded to self's dtype, and returns `self`. "
        "Samples must be finite and non-negative. Results are judged by a Kolmogorov-Smirnov "
        "test, not against PyTorch's random stream; every call must draw new samples (draw "
        "them in your Triton kernel from `tl.rand`, seeding from `torch.initial_seed()` or the "
        "generator plus a per-call counter)."
    )
    solution = SOLUTION
    negatives = (Negative("unit_rate", "samples Exp(1) whatever lambd is", NEGATIVE_UNIT_RATE),)
    tolerances = {n: Tolerance(0.0, 0.0) for n in ("float16", "bfloat16", "float32", "float64")}

    def cases(self) -> Sequence[Case]:
        return [
            case("exponential_", "float32", (128, 128), lambd=1.0, cpu=True),
            case("exponential_", "float32", (128, 128), lambd=3.5, layout="transposed",
                 cpu=True),
            case("exponential_", "bfloat16", (64, 64), lambd=0.25, cpu=True),
            case("exponential_", "float16", (4096,), lambd=10.0, cpu=True),
            case("exponential_", "float64", (8, 2048), lambd=0.5),
            case("exponential_", "float32", (0,), lambd=2.0, cpu=True),
        ]

    def hidden_cases(self, rng: object, tier: Tier) -> Sequence[Case]:
        return []

    def benchmark_cases(self) -> Sequence[Case]:
        return [case("exponential_", "float32", (8192, 8192), lambd=1.0),
                case("exponential_", "bfloat16", (8192, 8192), lambd=2.0)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        shape = c.shape
        if c.get("layout") == "transposed":
            x = torch.empty(shape[::-1], dtype=c.torch_dtype).t()
        else:
            x = torch.empty(shape, dtype=c.torch_dtype)
        x.fill_(-1.0)  # what was there before must all be overwritten
        return Call(c.entry, (x, c["lambd"]), outputs=(Out.arg(0),), mutable=frozenset({0}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, lambd = call.args
        return (judged(x.shape, x.dtype, ExponentialJudge(float(lambd))),)

    def baseline(self, call: Call) -> object:
        return call.args[0].exponential_(call.args[1])

    def cost(self, c: Case) -> Cost:
        n = 1
        for d in c.shape:
            n *= d
        return Cost(flops=float(n), bytes=float(n * c.torch_dtype.itemsize), dtype=c.dtype)
