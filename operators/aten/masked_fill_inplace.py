"""aten::masked_fill_ — in place, ``self[mask] = value`` with a mask broadcast to self's shape
(overloads Scalar, Tensor)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._indexing import esize, numel
from operators.inputs import randint, randn, with_layout
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
import math

import torch
import triton
import triton.language as tl

MAX_DIMS = 6
BLOCK = 1024


@triton.jit
def _masked_fill_kernel(x_ptr, m_ptr, v_ptr, n,
                        s1, s2, s3, s4, s5,
                        x0, x1, x2, x3, x4, x5,
                        m0, m1, m2, m3, m4, m5,
                        BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    r = (pid * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    inb = r < n
    rem = r
    i5 = rem % s5
    rem = rem // s5
    i4 = rem % s4
    rem = rem // s4
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    x_off = i0 * x0 + i1 * x1 + i2 * x2 + i3 * x3 + i4 * x4 + i5 * x5
    m_off = i0 * m0 + i1 * m1 + i2 * m2 + i3 * m3 + i4 * m4 + i5 * m5
    hit = tl.load(m_ptr + m_off, mask=inb, other=0) != 0
    # the value is converted to self's dtype once (round to nearest), as PyTorch does
    v = tl.load(v_ptr).to(x_ptr.dtype.element_ty)
    tl.store(x_ptr + x_off, v, mask=inb & hit)


def _pad(values, fill):
    values = list(values)
    return [fill] * (MAX_DIMS - len(values)) + values


def _fill(self, mask, value):
    n = self.numel()
    if n == 0:
        return self
    m = mask.expand(self.shape)  # broadcast: stride 0 along the mask's size-1 / missing dims
    grid = (triton.cdiv(n, BLOCK),)
    _masked_fill_kernel[grid](self, m, value, n, *_pad(self.shape, 1)[1:],
                              *_pad(self.stride(), 0), *_pad(m.stride(), 0), BLOCK=BLOCK)
    return self


def masked_fill__Scalar(self, mask, value):
    # a 0-d tensor of self's dtype holds the value, rounded from the Python number directly
    v = torch.empty((), dtype=self.dtype, device=self.device)
    v.fill_(value)
    return _fill(self, mask, v)


def masked_fill__Tensor(self, mask, value):
    return _fill(self, mask, value)
'''

# Reads the mask as if it had self's shape and contiguous layout: right when it does.
NEGATIVE_NO_BROADCAST = SOLUTION.replace(
    "m_off = i0 * m0 + i1 * m1 + i2 * m2 + i3 * m3 + i4 * m4 + i5 * m5", "m_off = r")

# Writes self as if it were contiguous: right for contiguous self only.
NEGATIVE_CONTIGUOUS_SELF = SOLUTION.replace(
    "x_off = i0 * x0 + i1 * x1 + i2 * x2 + i3 * x3 + i4 * x4 + i5 * x5", "x_off = r")

_FLOATS = ("float16", "bfloat16", "float32")


@register("aten::masked_fill_", version=1, kind=Kind.COMPUTE)
class MaskedFillInplace(OperatorSpec):
    entry_points = (
        EntryPoint("masked_fill__Scalar",
                   "masked_fill__Scalar(self: Tensor, mask: Tensor, value: Scalar) -> Tensor",
                   "Sets self's elements where mask is True to the Python number value, in "
                   "place; returns self."),
        EntryPoint("masked_fill__Tensor",
                   "masked_fill__Tensor(self: Tensor, mask: Tensor, value: Tensor) -> Tensor",
                   "Same with value a 0-d tensor (possibly of another float dtype), converted to "
                   "self's dtype."),
    )
    description = (
        "In-place masked fill, following PyTorch's `Tensor.masked_fill_(mask, value)`: every "
        "element of `self` whose position is True in `mask` becomes `value`; the others are left "
        "untouched; returns `self`. `mask` is a bool tensor that broadcasts to self's shape (it "
        "may have fewer dims or size-1 dims, and be non-contiguous); `self` is never broadcast "
        "and may be non-contiguous (transposed or strided), 0-d or empty, of dtype float16, "
        "bfloat16, float32 or int32. `value` is a Python number (Scalar overload) or a 0-d "
        "tensor (Tensor overload, float32 or self's dtype); it is converted to self's dtype by "
        "rounding to nearest (so 100.001 becomes 100.0 in float16) and may be inf, -inf or nan."
    )
    solution = SOLUTION
    negatives = (
        Negative("mask_not_broadcast", "indexes the mask with self's contiguous linear index, "
                 "ignoring its broadcast shape and strides", NEGATIVE_NO_BROADCAST),
        Negative("assumes_contiguous_self", "writes self as if it were contiguous",
                 NEGATIVE_CONTIGUOUS_SELF),
    )
    # A fill copies one value (rounded once to self's dtype, as in the reference): exact.
    tolerances = {dt: Tolerance(0.0, 0.0) for dt in _FLOATS}

    def cases(self) -> Sequence[Case]:
        s, t = "masked_fill__Scalar", "masked_fill__Tensor"
        inf, nan = float("inf"), float("nan")
        cs: list[Case] = [
            case(s, "float32", (63, 145), mask=(63, 145), value=-0.999, cpu=True),
            case(s, "float16", (63, 145), mask=(145,), value=100.001, cpu=True),
            case(s, "bfloat16", (7, 17, 31), mask=(7, 1, 31), value=inf, cpu=True),
            case(t, "float32", (33, 65), mask=(33, 65), value=nan, layout="transposed",
                 mask_layout="transposed", cpu=True),
            case(t, "bfloat16", (20, 40), mask=(1, 40), value=-111.999, vdtype="float32",
                 layout="strided", cpu=True),
            case(s, "int32", (49, 63), mask=(49, 1), value=7, cpu=True),
            case(s, "float32", (), mask=(), value=2.5, cpu=True),
            case(t, "float16", (5, 7, 11, 13), mask=(7, 1, 13), value=0.001, cpu=True),
            case(s, "float32", (0, 5), mask=(0, 5), value=1.0, cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case(s, dt, (1024, 1024), mask=(1024, 1024), value=0.001),
                case(s, dt, (16, 7, 57, 32, 29), mask=(1, 7, 1, 32, 1), value=-inf),
                case(t, dt, (20, 320, 15), mask=(320, 15), value=-0.999),
                case(t, dt, (511, 257), mask=(511, 257), value=nan, layout="transposed",
                     mask_layout="strided"),
                case(s, dt, (2, 3, 4, 5, 6), mask=(3, 1, 5, 1), value=100.001,
                     layout="strided"),
                case(t, dt, (16, 128, 64, 60), mask=(16, 1, 64, 60), value=3.0,
                     vdtype="float32"),
            ]
        cs.append(case(s, "int32", (2065, 529), mask=(2065, 529), value=-111))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        top = 20 if small else 300
        out = []
        for dt in (rng.choice(_FLOATS), rng.choice(_FLOATS), "int32"):
            rank = rng.choice([1, 2, 3])
            shape = [rng.randrange(1, top) for _ in range(rank)]
            mask = [d if rng.random() < 0.7 else 1 for d in shape][rng.randrange(rank):]
            entry = "masked_fill__Scalar" if dt == "int32" else rng.choice(
                ["masked_fill__Scalar", "masked_fill__Tensor"])
            value = rng.choice([3, -12]) if dt == "int32" else rng.choice(
                [0.001, -0.999, 100.001, float("inf"), float("nan")])
            out.append(case(entry, dt, shape, mask=tuple(mask), value=value,
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # 64-100 MB each: the mask read once, about half of self written
        return [
            case("masked_fill__Scalar", "float32", (8192, 4096), mask=(8192, 4096), value=0.0),
            case("masked_fill__Tensor", "bfloat16", (8192, 4096), mask=(8192, 4096),
                 value=-1.0),
            case("masked_fill__Scalar", "float16", (32, 32, 256, 256), mask=(32, 1, 256, 256),
                 value=float("-inf")),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        if c.dtype == "int32":
            x = randint(c.shape, c.dtype, gen, low=-1000, high=1000, layout=layout)
        else:
            x = randn(c.shape, c.dtype, gen, layout=layout)
        mask = with_layout(torch.rand(c["mask"], generator=gen) < 0.5,
                           c.get("mask_layout", "contiguous"))
        value = c["value"]
        if c.entry == "masked_fill__Tensor":
            vdt = dtype_from_name(c.get("vdtype", c.dtype))
            value = torch.full((), value, dtype=vdt)
        return Call(c.entry, (x, mask, value), outputs=(Out.arg(0),), mutable=frozenset({0}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, mask, value = call.args
        # the value converted to self's dtype the way PyTorch converts it
        v = value.to(x.dtype) if isinstance(value, torch.Tensor) else \
            torch.full((), value, dtype=x.dtype)
        if not x.dtype.is_floating_point:
            return (Expected(torch.where(mask, v, x), x.dtype),)
        return (Expected(torch.where(mask, v.double(), x.double()), x.dtype),)

    def baseline(self, call: Call) -> object:
        x, mask, value = call.args
        return x.masked_fill_(mask, value)

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        # the mask is read once; about half the elements (a random mask) are written
        return Cost(flops=0.0, bytes=float(numel(c["mask"]) + n * esize(c.torch_dtype) // 2),
                    dtype=c.dtype)
