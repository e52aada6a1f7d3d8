"""aten::bernoulli — 0/1 samples with the given probabilities (overloads default, p)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.aten._random import SEED_HELPER, judged
from operators.distributions import BernoulliJudge
from operators.inputs import uniform
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
def _bernoulli(p_ptr, out_ptr, n, p_scalar, seed, s1, s2, p0, p1, p2,
               SCALAR_P: tl.constexpr, BLOCK: tl.constexpr):
    idx = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = idx < n
    if SCALAR_P:
        p = p_scalar
    else:
        i2 = idx % s2
        i1 = (idx // s2) % s1
        i0 = idx // (s1 * s2)
        p = tl.load(p_ptr + i0 * p0 + i1 * p1 + i2 * p2, mask=mask, other=0.0).to(tl.float32)
    u = tl.rand(seed, idx.to(tl.int32))
    tl.store(out_ptr + idx, (u < p).to(out_ptr.dtype.element_ty), mask=mask)


def _launch(self, p_scalar, scalar, generator):
    if self.dim() > 3:
        raise NotImplementedError("at most 3 dims")
    out = torch.empty(tuple(self.shape), dtype=self.dtype, device=self.device)
    n = out.numel()
    if n == 0:
        return out
    sizes = [1] * (3 - self.dim()) + list(self.shape)
    strides = [0] * (3 - self.dim()) + list(self.stride())
    BLOCK = 1024
    _bernoulli[(triton.cdiv(n, BLOCK),)](self, out, n, float(p_scalar), _seed(generator),
                                         sizes[1], sizes[2], *strides,
                                         SCALAR_P=scalar, BLOCK=BLOCK)
    return out


def bernoulli(self, *, generator=None):
    return _launch(self, 0.0, False, generator)


def bernoulli_p(self, p, generator=None):
    return _launch(self, p, True, generator)
'''

# Reads the scalar overload's p as 0.5 (a "fair coin" default): right only for p = 0.5.
NEGATIVE_FAIR_COIN = SOLUTION.replace(
    "    return _launch(self, p, True, generator)", "    return _launch(self, 0.5, True, generator)")


@register("aten::bernoulli", version=1, kind=Kind.RANDOM)
class Bernoulli(OperatorSpec):
    entry_points = (
        EntryPoint("bernoulli", "bernoulli(self: Tensor, *, generator: Optional[Generator] = "
                   "None) -> Tensor", "1 with probability self[i], else 0 (self's dtype)."),
        EntryPoint("bernoulli_p", "bernoulli_p(self: Tensor, p: float, generator: "
                   "Optional[Generator] = None) -> Tensor",
                   "A tensor of self's shape and dtype: 1 with probability p, else 0."),
    )
    description = (
        "Following `torch.bernoulli`: independent samples, 1 with probability `self[i]` (the "
        "`bernoulli` overload: self holds probabilities in [0, 1], any strides) or `p` (the "
        "`bernoulli_p` overload: only self's shape and dtype are used), else 0, as a new tensor "
        "of self's shape and dtype. Probabilities 0 and 1 give 0 and 1 exactly. Results are "
        "judged by distribution tests, not against PyTorch's random stream; every call must draw "
        "new samples (draw them in your Triton kernel, e.g. `tl.rand(seed, offsets)`, seeding "
        "from `torch.initial_seed()` or the generator plus a per-call counter)."
    )
    solution = SOLUTION
    negatives = (Negative("fair_coin", "uses p = 0.5 whatever p is", NEGATIVE_FAIR_COIN),)
    tolerances = {n: Tolerance(0.0, 0.0) for n in ("float16", "bfloat16", "float32", "float64")}

    def cases(self) -> Sequence[Case]:
        return [
            case("bernoulli", "float32", (128, 128), cpu=True),
            case("bernoulli", "float16", (64, 64), layout="transposed", cpu=True),
            case("bernoulli_p", "float32", (4096,), p=0.5, cpu=True),
            case("bernoulli_p", "bfloat16", (128, 128), p=0.2, cpu=True),
            case("bernoulli_p", "float64", (4, 4096), p=0.97),
            case("bernoulli", "float32", (0, 3), cpu=True),
            case("bernoulli", "float32", (512, 1024)),
            case("bernoulli_p", "float16", (777, 333), p=0.01),
        ]

    def hidden_cases(self, rng: object, tier: Tier) -> Sequence[Case]:
        return []

    def benchmark_cases(self) -> Sequence[Case]:
        return [case("bernoulli", "float32", (8192, 8192)),
                case("bernoulli_p", "bfloat16", (8192, 8192), p=0.3)]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        if c.entry == "bernoulli_p":
            x = torch.empty(c.shape, dtype=c.torch_dtype)
            x.zero_()
            return Call(c.entry, (x, c["p"]))
        p = uniform(c.shape, c.dtype, gen, low=0.0, high=1.0, layout=c.get("layout",
                                                                              "contiguous"))
        if p.numel() >= 4:  # the exact ends: 0 and 1 must come out exactly
            flat = p.view(-1) if p.is_contiguous() else None
            if flat is not None:
                flat[0], flat[1] = 0.0, 1.0
        return Call(c.entry, (p,))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x = call.args[0]
        if call.entry == "bernoulli_p":
            probs = torch.full(x.shape, float(call.args[1]), dtype=torch.float64)
        else:
            probs = x.double()
        return (judged(x.shape, x.dtype, BernoulliJudge(probs.contiguous())),)

    def baseline(self, call: Call) -> object:
        if call.entry == "bernoulli_p":
            return torch.bernoulli(call.args[0], call.args[1])
        return torch.bernoulli(call.args[0])

    def cost(self, c: Case) -> Cost:
        n = 1
        for d in c.shape:
            n *= d
        size = c.torch_dtype.itemsize
        reads = n * size if c.entry == "bernoulli" else 0
        return Cost(flops=float(n), bytes=float(reads + n * size), dtype=c.dtype)
