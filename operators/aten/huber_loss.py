"""aten::huber_loss — ``0.5 z^2`` if ``|z| < delta`` else ``delta (|z| - delta / 2)`` for
``z = self - target``, reduced by none / mean / sum (overloads default, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.inputs import broadcast_shapes, randn, sprinkle_specials, with_layout
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
def _huber_kernel(x_ptr, t_ptr, out_ptr, part_ptr, n, delta,
                  s1, s2, s3, s4,
                  x0, x1, x2, x3, x4,
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
    x = tl.load(x_ptr + i0 * x0 + i1 * x1 + i2 * x2 + i3 * x3 + i4 * x4, mask=mask, other=0.0)
    t = tl.load(t_ptr + i0 * t0 + i1 * t1 + i2 * t2 + i3 * t3 + i4 * t4, mask=mask, other=0.0)
    z = tl.abs(x.to(tl.float32) - t.to(tl.float32))
    # NaN fails `z < delta` and propagates through the linear branch.
    loss = tl.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))
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


def _huber(self, target, reduction, delta, out):
    x, t = torch.broadcast_tensors(self, target)
    n = x.numel()
    sizes = _pad(x.shape, 1)
    xs = _pad(x.stride(), 0)
    ts = _pad(t.stride(), 0)
    grid = (triton.cdiv(n, BLOCK),)
    if reduction == 0:
        if out is None:
            out = torch.empty(x.shape, dtype=self.dtype, device=self.device)
        if n > 0:
            _huber_kernel[grid](x, t, out, out, n, float(delta), *sizes[1:], *xs, *ts,
                                *_pad(out.stride(), 0), REDUCE=False, BLOCK=BLOCK)
        return out
    if out is None:
        out = torch.empty((), dtype=self.dtype, device=self.device)
    parts = torch.empty((max(grid[0], 1),), dtype=torch.float32, device=self.device)
    if n > 0:
        _huber_kernel[grid](x, t, out, parts, n, float(delta), *sizes[1:], *xs, *ts,
                            0, 0, 0, 0, 0, REDUCE=True, BLOCK=BLOCK)
    divisor = float(n) if reduction == 1 else 1.0  # mean of nothing is 0 / 0 = NaN
    _finish_kernel[(1,)](parts, out, grid[0], divisor, BLOCK=FINISH_BLOCK)
    return out


def huber_loss(self, target, reduction=1, delta=1.0):
    return _huber(self, target, reduction, delta, None)


def huber_loss_out(self, target, reduction=1, delta=1.0, *, out):
    return _huber(self, target, reduction, delta, out)
'''

# Confuses Huber with smooth L1 (beta = delta): the same function when delta == 1, scaled by
# 1 / delta otherwise.
NEGATIVE_SMOOTH_L1 = SOLUTION.replace(
    "loss = tl.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))",
    "loss = tl.where(z < delta, 0.5 * z * z / delta, z - 0.5 * delta)")

# Divides the sum by the number of programs' partials instead of the element count: right for
# reduction sum and none.
NEGATIVE_MEAN_BY_PARTS = SOLUTION.replace(
    "divisor = float(n) if reduction == 1 else 1.0", "divisor = float(grid[0]) if reduction == 1 else 1.0")

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


@register("aten::huber_loss", version=1, kind=Kind.COMPUTE)
class HuberLoss(OperatorSpec):
    entry_points = (
        EntryPoint("huber_loss",
                   "huber_loss(self: Tensor, target: Tensor, reduction: int = 1, "
                   "delta: float = 1.0) -> Tensor",
                   "Huber loss of self against target, reduced by reduction (0 none, 1 mean, "
                   "2 sum)."),
        EntryPoint("huber_loss_out",
                   "huber_loss_out(self: Tensor, target: Tensor, reduction: int = 1, "
                   "delta: float = 1.0, *, out: Tensor) -> Tensor",
                   "Writes huber_loss(self, target, reduction, delta) into out (the broadcast "
                   "shape for reduction 0, a 0-d tensor otherwise) and returns out."),
    )
    description = (
        "Huber loss, following PyTorch's `torch.ops.aten.huber_loss(self, target, reduction, "
        "delta)` (as `torch.nn.functional.huber_loss`): with `z = self - target` elementwise "
        "(self and target broadcast against each other), `loss = 0.5 * z**2` where `|z| < delta` "
        "and `delta * (|z| - 0.5 * delta)` elsewhere (note: not divided by delta, unlike "
        "smooth L1). `reduction` is an int: 0 returns the elementwise loss (broadcast shape), 1 "
        "its mean and 2 its sum as a 0-d tensor; the mean of an empty input is NaN, the sum 0. "
        "The result has the inputs' dtype (float16, bfloat16 or float32); inputs may be "
        "non-contiguous, 0-d or empty. NaN and inf propagate (a NaN difference gives NaN, an "
        "infinite one inf). Compute in float32, accumulate reductions in float32, round once."
    )
    solution = SOLUTION
    negatives = (
        Negative("smooth_l1_instead", "computes smooth L1 with beta = delta (0.5 z^2 / delta, "
                 "|z| - delta / 2): right only when delta == 1", NEGATIVE_SMOOTH_L1),
        Negative("mean_divides_by_blocks", "the mean divides the sum by the number of partial "
                 "sums instead of the element count", NEGATIVE_MEAN_BY_PARTS),
    )

    def tolerance(self, c: Case, dtype: torch.dtype) -> Tolerance:
        # Relative to |loss| (elementwise) or the sum of |loss| (reductions; every term is >= 0
        # so that is |value|). z = self - target is exact or one rounding; the loss is a few
        # roundings more, each <= 1 u of the loss (|z| - delta / 2 >= |z| / 2 on the linear
        # branch, and the branches meet smoothly at |z| = delta, so a flipped branch costs
        # nothing). PyTorch's half kernels round z, delta and each product to the half type: up
        # to ~4 u. float32 reductions: a tree over 1024-element blocks plus a sequential pass
        # over the partials stays under ~16 u on positive terms.
        if dtype in (torch.float16, torch.bfloat16):
            return Tolerance.ulps(dtype, 6)
        return Tolerance.ulps(dtype, 16 if c["reduction"] != "none" else 8)

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("huber_loss", "float32", (63, 145), reduction="none", delta=1.0, cpu=True),
            case("huber_loss", "float32", (7, 17, 31), reduction="mean", delta=0.5, cpu=True),
            case("huber_loss", "float16", (49, 63), reduction="none", delta=0.3, std=2.0,
                 cpu=True),
            case("huber_loss", "bfloat16", (2065,), reduction="sum", delta=2.0, cpu=True),
            case("huber_loss", "float32", (33, 65), reduction="none", delta=1.5,
                 layout="transposed", target=(65,), cpu=True),
            case("huber_loss_out", "float32", (24, 50), reduction="none", delta=0.7,
                 layout="strided", specials=True, cpu=True),
            case("huber_loss_out", "float16", (40, 30), reduction="mean", delta=1.0, cpu=True),
            case("huber_loss", "float32", (), reduction="none", delta=1.0, cpu=True),
            case("huber_loss", "float32", (0, 7), reduction="mean", delta=1.0, cpu=True),
            case("huber_loss", "float32", (500,), reduction="mean", delta=1.0, defaults=True,
                 cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case("huber_loss", dt, (1024, 1024), reduction="none", delta=1.0),
                case("huber_loss", dt, (511, 257), reduction="mean", delta=0.25, std=3.0),
                case("huber_loss", dt, (16, 7, 57, 32, 29), reduction="none", delta=2.0,
                     target=(7, 1, 32, 1)),
                case("huber_loss", dt, (200, 4099), reduction="mean", delta=1.0,
                     layout="transposed"),
                case("huber_loss", dt, (127, 33), reduction="sum", delta=0.5, specials=True),
                case("huber_loss_out", dt, (20, 320, 15), reduction="none", delta=0.1,
                     layout="strided"),
                case("huber_loss_out", dt, (1000, 999), reduction="mean", delta=3.0, std=5.0),
                case("huber_loss", dt, (), reduction="sum", delta=1.0),
            ]
        cs.append(case("huber_loss", "float32", (3000, 2000), reduction="sum", delta=1.0))
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
                "reduction": red, "delta": rng.choice([0.1, 0.5, 1.0, 1.7, 4.0]),
                "layout": rng.choice(["contiguous", "transposed", "strided"]),
                "std": rng.choice([0.5, 1.0, 4.0]),
            }
            if rng.random() < 0.3:
                params["target"] = (cols,)
            entry = rng.choice(["huber_loss", "huber_loss_out"])
            out.append(case(entry, dt, (rows, cols), cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            # >= 64 MB of traffic each, no more (inputs are drawn in float64 on the CPU)
            case("huber_loss", "float32", (2048, 4096), reduction="mean", delta=1.0),
            case("huber_loss", "bfloat16", (4096, 4096), reduction="none", delta=0.5),
            case("huber_loss", "float16", (4096, 4096), reduction="mean", delta=1.0),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        std = c.get("std", 1.0)
        x = _randn(c.shape, c.dtype, gen, std=std)
        if c.get("specials"):
            x = sprinkle_specials(x, gen, fraction=0.05)
        x = with_layout(x, layout)
        t = _randn(c.get("target", c.shape), c.dtype, gen, std=std, layout=layout)
        red = _RED[c["reduction"]]
        kwargs: dict[str, object] = {}
        if not c.get("defaults"):
            kwargs = {"reduction": red, "delta": c["delta"]}
        if c.entry == "huber_loss_out":
            shape = broadcast_shapes(x.shape, t.shape) if red == 0 else ()
            kwargs["out"] = torch.empty(shape, dtype=x.dtype)
            return Call(c.entry, (x, t), kwargs, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, (x, t), kwargs)

    @staticmethod
    def _operands(call: Call) -> tuple[torch.Tensor, torch.Tensor, int, float]:
        return (call.args[0], call.args[1], call.kwargs.get("reduction", 1),
                call.kwargs.get("delta", 1.0))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, t, red, delta = self._operands(call)
        z = (x.double() - t.double()).abs()
        loss = torch.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))
        if red == 0:
            return (Expected(loss, x.dtype, loss.abs()),)
        total = loss.sum()
        scale = loss.abs().sum()
        if red == 1:
            n = max(loss.numel(), 1)
            total = loss.mean()  # NaN for an empty input
            scale = scale / n
        return (Expected(total, x.dtype, scale),)

    def baseline(self, call: Call) -> object:
        x, t, red, delta = self._operands(call)
        if call.entry == "huber_loss_out":
            return torch.ops.aten.huber_loss.out(x, t, red, delta, out=call.kwargs["out"])
        return torch.ops.aten.huber_loss(x, t, red, delta)

    def cost(self, c: Case) -> Cost:
        n = _numel(c.shape)
        size = torch.empty((), dtype=c.torch_dtype).element_size()
        out = n if c["reduction"] == "none" else 1
        return Cost(flops=5.0 * n, bytes=float(size * (n + _numel(c.get("target", c.shape)) + out)),
                    dtype="float32")
