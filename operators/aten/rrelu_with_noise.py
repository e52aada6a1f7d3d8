"""aten::rrelu_with_noise — randomized leaky ReLU: random negative slopes in training, their
mean in evaluation; the slopes are written to ``noise``."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.aten._random import SEED_HELPER, judged
from operators.distributions import RReluJudge
from operators.inputs import randn
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
    unit_roundoff,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + SEED_HELPER + r'''

@triton.jit
def _rrelu(x_ptr, noise_ptr, out_ptr, n, lower, upper, seed, s1, x0, x1, q0, q1,
           TRAINING: tl.constexpr, BLOCK: tl.constexpr):
    idx = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = idx < n
    i1 = idx % s1
    i0 = idx // s1
    x = tl.load(x_ptr + i0 * x0 + i1 * x1, mask=mask, other=0.0).to(tl.float32)
    if TRAINING:
        a = lower + (upper - lower) * tl.rand(seed, idx.to(tl.int32))
        y = tl.where(x > 0, x, x * a)
        tl.store(noise_ptr + i0 * q0 + i1 * q1,
                 tl.where(x > 0, 1.0, a).to(noise_ptr.dtype.element_ty), mask=mask)
    else:
        y = tl.where(x > 0, x, x * ((lower + upper) * 0.5))
    tl.store(out_ptr + idx, y.to(out_ptr.dtype.element_ty), mask=mask)


def rrelu_with_noise(self, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    if self.dim() > 2 or noise.shape != self.shape:
        raise NotImplementedError("self and noise of the same shape, at most 2 dims")
    out = torch.empty(tuple(self.shape), dtype=self.dtype, device=self.device)
    n = out.numel()
    if n == 0:
        return out
    sizes = [1] * (2 - self.dim()) + list(self.shape)
    xs = [0] * (2 - self.dim()) + list(self.stride())
    qs = [0] * (2 - self.dim()) + list(noise.stride())
    BLOCK = 1024
    _rrelu[(triton.cdiv(n, BLOCK),)](self, noise, out, n, float(lower), float(upper),
                                     _seed(generator), sizes[1], *xs, *qs,
                                     TRAINING=bool(training), BLOCK=BLOCK)
    return out
'''

# Draws the training slopes from U(0, upper), forgetting lower: right in evaluation mode only.
NEGATIVE_NO_LOWER = SOLUTION.replace(
    "        a = lower + (upper - lower) * tl.rand(seed, idx.to(tl.int32))",
    "        a = upper * tl.rand(seed, idx.to(tl.int32))")


@register("aten::rrelu_with_noise", version=1, kind=Kind.RANDOM)
class RReluWithNoise(OperatorSpec):
    entry_points = (
        EntryPoint("rrelu_with_noise",
                   "rrelu_with_noise(self: Tensor, noise: Tensor, lower: Scalar = 0.125, "
                   "upper: Scalar = 0.3333333333333333, training: bool = False, generator: "
                   "Optional[Generator] = None) -> Tensor",
                   "x where x > 0, else x * slope; training draws the slopes into noise."),
    )
    description = (
        "Following `torch.ops.aten.rrelu_with_noise`: returns a new tensor `out` of self's shape "
        "and dtype. With `training=True`, each element with self <= 0 gets its own slope "
        "a ~ U(lower, upper): out = self * a and noise = a (written in place); elements with "
        "self > 0 give out = self and noise = 1. With `training=False`, out = self where self > 0 "
        "else self * (lower + upper) / 2, and noise is left untouched. Training results are "
        "judged by distribution tests of the slopes (in out and in noise), not against "
        "PyTorch's random stream; every call must draw new slopes (draw them in your Triton "
        "kernel from `tl.rand`, seeding from `torch.initial_seed()` or the generator plus a "
        "per-call counter). Compute in float32 for half types."
    )
    solution = SOLUTION
    negatives = (Negative("forgets_lower", "draws training slopes from U(0, upper)",
                          NEGATIVE_NO_LOWER),)
    tolerances = {n: Tolerance.ulps(n, 2) for n in ("float16", "bfloat16", "float32")}

    def cases(self) -> Sequence[Case]:
        return [
            case("rrelu_with_noise", "float32", (64, 64), lower=0.125, upper=1 / 3,
                 training=True, cpu=True),
            case("rrelu_with_noise", "bfloat16", (64, 64), lower=0.1, upper=0.3, training=True,
                 layout="transposed", cpu=True),
            case("rrelu_with_noise", "float32", (63, 145), lower=0.125, upper=1 / 3,
                 training=False, cpu=True),
            case("rrelu_with_noise", "float16", (4096,), lower=0.2, upper=0.8, training=True),
            case("rrelu_with_noise", "float32", (0, 4), lower=0.1, upper=0.2, training=True,
                 cpu=True),
        ]

    def hidden_cases(self, rng: object, tier: Tier) -> Sequence[Case]:
        return []

    def benchmark_cases(self) -> Sequence[Case]:
        return [case("rrelu_with_noise", "float32", (8192, 8192), lower=0.125, upper=1 / 3,
                     training=True),
                case("rrelu_with_noise", "bfloat16", (8192, 8192), lower=0.125, upper=1 / 3,
                     training=True)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = randn(c.shape, c.dtype, gen, layout=c.get("layout", "contiguous"))
        noise = torch.empty(c.shape, dtype=c.torch_dtype)
        noise.fill_(-1.0)
        if not c["training"]:  # noise is then an input that must stay as it is
            return Call(c.entry, (x, noise, c["lower"], c["upper"], False))
        return Call(c.entry, (x, noise, c["lower"], c["upper"], True),
                    outputs=(Out.ret(), Out.arg(1)), mutable=frozenset({1}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, noise, lower, upper, training = call.args
        if training:
            rel = 2 * unit_roundoff(x.dtype)
            return (judged(x.shape, x.dtype, RReluJudge(x.double(), lower, upper, False, rel)),
                    judged(x.shape, x.dtype, RReluJudge(x.double(), lower, upper, True, rel)))
        x64 = x.double()
        out = torch.where(x64 > 0, x64, x64 * ((lower + upper) / 2))
        return (Expected(out, x.dtype),)

    def baseline(self, call: Call) -> object:
        return torch.ops.aten.rrelu_with_noise(*call.args)

    def cost(self, c: Case) -> Cost:
        n = 1
        for d in c.shape:
            n *= d
        return Cost(flops=2.0 * n, bytes=float(3 * n * c.torch_dtype.itemsize), dtype=c.dtype)
