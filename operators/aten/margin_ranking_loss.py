"""aten::margin_ranking_loss — ``max(0, -target * (input1 - input2) + margin)`` with broadcasting,
reduced by none / mean / sum (overload default; ATen has no out= variant)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.inputs import randint, randn, sprinkle_specials, uniform, with_layout
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
    dtype_from_name,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl

MAX_DIMS = 5
BLOCK = 1024
FINISH_BLOCK = 1024


@triton.jit
def _margin_ranking_kernel(a_ptr, b_ptr, t_ptr, out_ptr, part_ptr, n, margin,
                           s1, s2, s3, s4,
                           a0, a1, a2, a3, a4,
                           b0, b1, b2, b3, b4,
                           t0, t1, t2, t3, t4,
                           o0, o1, o2, o3, o4,
                           REDUCE: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    idx = (pid * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = idx < n
    rem = idx
    i4 = rem % s4
    rem = rem // s4
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    a = tl.load(a_ptr + i0 * a0 + i1 * a1 + i2 * a2 + i3 * a3 + i4 * a4, mask=mask, other=0.0)
    b = tl.load(b_ptr + i0 * b0 + i1 * b1 + i2 * b2 + i3 * b3 + i4 * b4, mask=mask, other=0.0)
    t = tl.load(t_ptr + i0 * t0 + i1 * t1 + i2 * t2 + i3 * t3 + i4 * t4, mask=mask, other=0.0)
    v = -t.to(tl.float32) * (a.to(tl.float32) - b.to(tl.float32)) + margin
    # clamp_min(v, 0) that keeps NaN (a NaN fails `v < 0`)
    loss = tl.where(v < 0.0, 0.0, v)
    if REDUCE:
        # one float32 partial per program, summed by _finish_kernel (deterministic)
        tl.store(part_ptr + pid, tl.sum(tl.where(mask, loss, 0.0), axis=0))
    else:
        o_off = i0 * o0 + i1 * o1 + i2 * o2 + i3 * o3 + i4 * o4
        tl.store(out_ptr + o_off, loss.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _finish_kernel(part_ptr, out_ptr, n_parts, divisor, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_parts, BLOCK):
        acc += tl.load(part_ptr + start + offs, mask=start + offs < n_parts, other=0.0)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr, (total / divisor).to(out_ptr.dtype.element_ty))


def _pad(values, fill):
    values = list(values)
    return [fill] * (MAX_DIMS - len(values)) + values


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    a, b, t = torch.broadcast_tensors(input1, input2, target)
    n = a.numel()
    sizes = _pad(a.shape, 1)
    strides = _pad(a.stride(), 0) + _pad(b.stride(), 0) + _pad(t.stride(), 0)
    grid = (triton.cdiv(n, BLOCK),)
    if reduction == 0:
        out = torch.empty(a.shape, dtype=input1.dtype, device=input1.device)
        if n > 0:
            _margin_ranking_kernel[grid](a, b, t, out, out, n, float(margin), *sizes[1:],
                                         *strides, *_pad(out.stride(), 0), REDUCE=False,
                                         BLOCK=BLOCK)
        return out
    out = torch.empty((), dtype=input1.dtype, device=input1.device)
    parts = torch.empty((max(grid[0], 1),), dtype=torch.float32, device=input1.device)
    if n > 0:
        _margin_ranking_kernel[grid](a, b, t, out, parts, n, float(margin), *sizes[1:],
                                     *strides, 0, 0, 0, 0, 0, REDUCE=True, BLOCK=BLOCK)
    divisor = float(n) if reduction == 1 else 1.0  # mean of nothing is 0 / 0 = NaN
    _finish_kernel[(1,)](parts, out, grid[0], divisor, BLOCK=FINISH_BLOCK)
    return out

'''

# Forgets the margin: right whenever margin == 0 (the default).
NEGATIVE_NO_MARGIN = SOLUTION.replace(
    "v = -t.to(tl.float32) * (a.to(tl.float32) - b.to(tl.float32)) + margin",
    "v = -t.to(tl.float32) * (a.to(tl.float32) - b.to(tl.float32))")

# Clamps with `v > 0 ? v : 0`, which turns NaN into 0 where PyTorch's clamp_min keeps it.
NEGATIVE_CLAMP_DROPS_NAN = SOLUTION.replace(
    "loss = tl.where(v < 0.0, 0.0, v)", "loss = tl.where(v > 0.0, v, 0.0)")

_FLOATS = ("float16", "bfloat16", "float32")
_RED = {"none": 0, "mean": 1, "sum": 2}


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


_BIG = 1 << 22  # from this many elements (benchmark sizes) inputs are drawn in float32


def _randn(shape: Sequence[int], dtype: str, gen: torch.Generator, *, std: float = 1.0,
           layout: str = "contiguous") -> torch.Tensor:
    """``operators.inputs.randn``, except that benchmark-sized tensors are drawn in float32: the
    float64 draw is 4x slower and would dominate ``validate``'s time."""
    if _numel(shape) < _BIG:
        return randn(shape, dtype, gen, std=std, layout=layout)
    x = torch.randn(tuple(shape), generator=gen, dtype=torch.float32) * std
    return with_layout(x.to(dtype_from_name(dtype)), layout)


def _uniform(shape: Sequence[int], dtype: str, gen: torch.Generator, *, low: float,
             high: float, layout: str = "contiguous") -> torch.Tensor:
    """``operators.inputs.uniform``, drawn in float32 for benchmark-sized tensors (as _randn)."""
    if _numel(shape) < _BIG:
        return uniform(shape, dtype, gen, low=low, high=high, layout=layout)
    x = torch.rand(tuple(shape), generator=gen, dtype=torch.float32) * (high - low) + low
    return with_layout(x.to(dtype_from_name(dtype)), layout)


@register("aten::margin_ranking_loss", version=1, kind=Kind.COMPUTE)
class MarginRankingLoss(OperatorSpec):
    entry_points = (
        EntryPoint("margin_ranking_loss",
                   "margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, "
                   "margin: float = 0.0, reduction: int = 1) -> Tensor",
                   "max(0, -target * (input1 - input2) + margin) elementwise (the three inputs "
                   "broadcast), reduced by reduction (0 none, 1 mean, 2 sum)."),
    )
    description = (
        "Margin ranking loss, following PyTorch's `torch.margin_ranking_loss(input1, input2, "
        "target, margin, reduction)` (as `torch.nn.functional.margin_ranking_loss`): "
        "`loss = max(0, -target * (input1 - input2) + margin)` elementwise, where input1, input2 "
        "and target (usually +1/-1, any float allowed) broadcast against each other. "
        "`reduction` is an int: 0 returns the elementwise loss (broadcast shape), 1 its mean and "
        "2 its sum as a 0-d tensor; the mean of an empty input is NaN, the sum 0. The clamp is "
        "PyTorch's clamp_min: NaN stays NaN (it is not clamped to 0), inf propagates. The result "
        "has the inputs' dtype (float16, bfloat16 or float32); inputs may be non-contiguous, 0-d "
        "or empty. Compute in float32, accumulate reductions in float32, round once."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_margin", "drops the margin term: right only for margin == 0",
                 NEGATIVE_NO_MARGIN),
        Negative("clamp_drops_nan", "clamps with v > 0 ? v : 0, so NaN losses become 0",
                 NEGATIVE_CLAMP_DROPS_NAN),
    )

    def tolerance(self, c: Case, dtype: torch.dtype) -> Tolerance:
        # Relative to |target| (|input1| + |input2|) + |margin| per element (summed for
        # reductions): input1 - input2, the product and the margin addition each round once
        # (PyTorch's half kernels round each to the half type), and the clamp is 1-Lipschitz,
        # so the error of v carries over whichever side of 0 it lands. float32 reductions: a
        # tree over 1024-element blocks plus a sequential pass over the partials (~16 u).
        if dtype in (torch.float16, torch.bfloat16):
            return Tolerance.ulps(dtype, 4)
        return Tolerance.ulps(dtype, 16 if c["reduction"] != "none" else 4)

    def cases(self) -> Sequence[Case]:
        e = "margin_ranking_loss"
        cs: list[Case] = [
            case(e, "float32", (2065,), reduction="none", margin=0.0, cpu=True),
            case(e, "float32", (63, 145), reduction="none", margin=0.5, cpu=True),
            case(e, "float32", (7, 17, 31), reduction="mean", margin=0.1, cpu=True),
            case(e, "float16", (49, 63), reduction="none", margin=1.0, cpu=True),
            case(e, "bfloat16", (2065,), reduction="sum", margin=0.3, cpu=True),
            case(e, "float32", (33, 65), reduction="none", margin=0.2, layout="transposed",
                 input2=(65,), target=(33, 1), cpu=True),
            case(e, "float32", (24, 50), reduction="none", margin=0.0, layout="strided",
                 specials=True, cpu=True),
            case(e, "float32", (), reduction="none", margin=0.5, cpu=True),
            case(e, "float32", (0,), reduction="mean", margin=0.5, cpu=True),
            case(e, "float32", (500,), reduction="mean", margin=0.0, defaults=True,
                 soft_target=True, cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case(e, dt, (1000000,), reduction="mean", margin=0.0),
                case(e, dt, (1024, 1024), reduction="none", margin=0.5),
                case(e, dt, (511, 257), reduction="mean", margin=1.0, std=3.0),
                case(e, dt, (16, 7, 57, 32, 29), reduction="none", margin=0.1,
                     input2=(7, 1, 32, 29), target=(16, 7, 57, 1, 1)),
                case(e, dt, (200, 4099), reduction="mean", margin=0.25, layout="transposed"),
                case(e, dt, (127, 33), reduction="none", margin=0.5, specials=True),
                case(e, dt, (20, 320, 15), reduction="none", margin=2.0, layout="strided",
                     soft_target=True),
                case(e, dt, (), reduction="sum", margin=0.5),
            ]
        cs.append(case(e, "float32", (3000, 2000), reduction="sum", margin=0.5))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS if not small else ("float32", rng.choice(("float16", "bfloat16"))):
            rows = rng.randrange(1, 60 if small else 1500)
            cols = rng.randrange(1, 70 if small else 1500)
            red = rng.choice(["none", "mean", "sum"])
            if dt != "float32" and red == "sum":
                red = "mean"  # a half sum of many terms overflows
            params: dict[str, object] = {
                "reduction": red, "margin": rng.choice([0.0, 0.1, 0.5, 1.0, 3.0]),
                "layout": rng.choice(["contiguous", "transposed", "strided"]),
                "std": rng.choice([0.5, 1.0, 4.0]), "soft_target": rng.random() < 0.3,
            }
            if rng.random() < 0.3:
                params["input2"] = (cols,)
            if rng.random() < 0.3:
                params["target"] = (rows, 1)
            out.append(case("margin_ranking_loss", dt, (rows, cols), cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        e = "margin_ranking_loss"
        return [
            # >= 64 MB of traffic each, no more (inputs are drawn in float64 on the CPU)
            case(e, "float32", (6291456,), reduction="mean", margin=0.5),
            case(e, "bfloat16", (2048, 4096), reduction="none", margin=0.5),
            case(e, "float16", (12582912,), reduction="mean", margin=0.0),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        std = c.get("std", 1.0)
        a = _randn(c.shape, c.dtype, gen, std=std)
        if c.get("specials"):
            a = sprinkle_specials(a, gen, fraction=0.05)
        a = with_layout(a, layout)
        b = _randn(c.get("input2", c.shape), c.dtype, gen, std=std, layout=layout)
        t_shape = c.get("target", c.shape)
        if c.get("soft_target"):
            t = _uniform(t_shape, c.dtype, gen, low=-1.0, high=1.0, layout=layout)
        else:  # +1 / -1 labels
            t = with_layout(randint(t_shape, torch.int64, gen, low=0, high=2).to(
                torch.float32).mul(2).sub(1).to(a.dtype), layout)
        if c.get("defaults"):
            return Call(c.entry, (a, b, t))
        return Call(c.entry, (a, b, t), {"margin": c["margin"], "reduction": _RED[c["reduction"]]})

    def reference(self, call: Call) -> tuple[Expected, ...]:
        a, b, t = (x.double() for x in call.args)
        margin = call.kwargs.get("margin", 0.0)
        red = call.kwargs.get("reduction", 1)
        loss = (-t * (a - b) + margin).clamp_min(0.0)
        scale = t.abs() * (a.abs() + b.abs()) + abs(margin)
        scale = scale.expand(loss.shape)
        dtype = call.args[0].dtype
        if red == 0:
            return (Expected(loss, dtype, scale),)
        if red == 1:
            return (Expected(loss.mean(), dtype, scale.sum() / max(loss.numel(), 1)),)
        return (Expected(loss.sum(), dtype, scale.sum()),)

    def baseline(self, call: Call) -> object:
        return torch.ops.aten.margin_ranking_loss(*call.args, **call.kwargs)

    def cost(self, c: Case) -> Cost:
        n = _numel(c.shape)
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        reads = n + _numel(c.get("input2", c.shape)) + _numel(c.get("target", c.shape))
        out = n if c["reduction"] == "none" else 1
        return Cost(flops=4.0 * n, bytes=float(size * (reads + out)), dtype="float32")
