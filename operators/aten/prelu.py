"""aten::prelu — ``self if self > 0 else weight * self`` with one weight per channel (dim 1)
or a single shared weight (overload default)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.aten._binary import (
    TENSOR,
    BinaryProblem,
    numel,
    solution,
    uniform,
)
from operators.registry import register
from operators.spec import Case, Cost, EntryPoint, Kind, Negative, Tier, Tolerance, case

_OP = r'''
@triton.jit
def _op(a, b, p, MODE: tl.constexpr):
    # b is the weight of a's channel; NaN is not > 0, so it goes through w * nan = nan
    return tl.where(a > 0, a, b * a)
'''

_WRAPPERS = r'''

def prelu(self, weight):
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    # The weight as a stride-0 view of self's shape: its one element everywhere, or element c
    # along dim 1 (the channels; a 1-d self has a single channel).
    strides = [0] * self.dim()
    if weight.numel() > 1:
        strides[1] = weight.stride(0)
    w = weight.as_strided(self.shape, strides)
    return _launch(self, w, out)
'''

SOLUTION = solution(_OP, _WRAPPERS)

# Uses the first channel's weight for every channel: right only with a single weight.
NEGATIVE_ONE_WEIGHT = SOLUTION.replace("    if weight.numel() > 1:\n        strides[1] = "
                                       "weight.stride(0)\n", "")


@register("aten::prelu", version=1, kind=Kind.COMPUTE)
class Prelu(BinaryProblem):
    op_name = "prelu"
    forms = {"prelu": TENSOR}
    entry_points = (
        EntryPoint("prelu", "prelu(self: Tensor, weight: Tensor) -> Tensor",
                   "self where self > 0, else weight * self, with weight[c] for channel c "
                   "(dim 1) or one shared weight."),
    )
    description = (
        "Parametric ReLU following PyTorch's `torch.prelu` / `F.prelu`: "
        "`out = self if self > 0 else weight * self`, computed as `self > 0 ? self : "
        "weight * self` (a NaN self gives NaN). `weight` is 1-d: either one element shared by "
        "all of self, or C elements, one per channel, where the channels are dim 1 of self "
        "(self of shape (N, C, ...): element [n, c, ...] uses weight[c]); a 0-d or 1-d self has "
        "a single channel and takes a one-element weight. Not numpy-style broadcasting: the "
        "weight never aligns with the last dim. `self` (and `weight`) may be non-contiguous "
        "(transposed or strided); empty tensors give empty results. Both have the same dtype "
        "(float16, bfloat16 or float32), the result has self's shape and dtype. For "
        "float16/bfloat16, compute in float32 and round once."
    )
    solution = SOLUTION
    negatives = (
        Negative("one_weight", "applies weight[0] to every channel", NEGATIVE_ONE_WEIGHT),
    )
    # One rounding of weight * self (or none).
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 2),
    }

    def draw(self, role: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator,
             c: Case) -> torch.Tensor:
        if role == "other":  # weights: mostly small slopes, some negative or above 1
            return uniform(shape, dtype, gen, low=-0.5, high=1.5)
        return super().draw(role, shape, dtype, gen, c)

    def edge_values(self, role: str, dtype: torch.dtype) -> Sequence[float]:
        return super().edge_values(role, dtype) if role == "self" else ()

    def ref64(self, a: torch.Tensor, b: torch.Tensor, kw: dict[str, Any],
              dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        w = b.reshape([1, -1] + [1] * (a.dim() - 2)) if a.dim() >= 2 else b.reshape(())
        value = torch.where(a > 0, a, w * a)
        return value, value.abs()

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = []
        for dt in ("float16", "bfloat16", "float32"):
            main = dt == "float32"
            cs += [
                case("prelu", dt, (16, 64, 7, 9), other=(64,)),
                case("prelu", dt, (20, 320, 15), other=(320,)),
                case("prelu", dt, (7, 33), other=(33,), cpu=main),
                case("prelu", dt, (3, 17, 5, 19), other=(17,), layout="transposed",
                     cpu=dt == "float16"),
                case("prelu", dt, (4, 9, 40), other=(9,), layout="strided", cpu=main),
                case("prelu", dt, (8, 3, 31, 33), other=(1,), cpu=dt == "bfloat16"),
                case("prelu", dt, (511, 257), other=(257,), edge=True),
                case("prelu", dt, (5, 7, 45), other=(7,), edge=True, cpu=main),
                case("prelu", dt, (2065,), other=(1,)),
                case("prelu", dt, (), other=(1,), cpu=main),
            ]
        cs.append(case("prelu", "float32", (0, 5), other=(5,), cpu=True))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        cs = []
        for _ in range(2 if small else 8):
            dt = rng.choice(["float16", "bfloat16", "float32"])
            n = rng.randrange(1, 4 if small else 16)
            ch = rng.randrange(2, 17 if small else 130)
            rest = rng.randrange(3, 40 if small else 400)
            shape = (n, ch, rest)
            weight = rng.choice([(ch,), (ch,), (1,)])
            cs.append(case("prelu", dt, shape, other=weight,
                           layout=rng.choice(["contiguous", "transposed", "strided"]),
                           edge=rng.random() < 0.5, cpu=small))
        return cs

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("prelu", "float32", (64, 128, 64, 64), other=(128,)),  # 256 MiB
            case("prelu", "bfloat16", (32, 256, 56, 56), other=(256,)),  # 98 MiB
            case("prelu", "float16", (4096, 4096), other=(1,)),  # 64 MiB
        ]

    def cost(self, c: Case) -> Cost:
        size = c.torch_dtype.itemsize
        n = numel(c.shape)
        return Cost(flops=float(n), bytes=float((2 * n + numel(c["other"])) * size),
                    dtype=c.dtype)
