"""aten::bitwise_not — elementwise ``~self`` for integers, logical not for bool (overloads
default, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._pointwise import LAUNCHER, PRELUDE, itemsize, numel, out_call, strided_kernel
from operators.inputs import with_layout
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
    case,
    dtype_from_name,
)

_BODY = """    x = tl.load(x_ptr + x_off, mask=mask)
    if U8:
        y = x ^ 0xFF  # the same bits as ~x (Triton's interpreter rejects ~ on unsigned types)
    else:
        y = ~x  # on int1 (bool) logical not; on signed integers every bit flipped
    tl.store(out_ptr + out_off, y, mask=mask)
"""

SOLUTION = PRELUDE + LAUNCHER + strided_kernel("_bitwise_not_kernel", ("x", "out"), _BODY,
                                               constexprs=("U8",)) + r'''

def bitwise_not(self):
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    return bitwise_not_out(self, out=out)


def bitwise_not_out(self, *, out):
    _launch(_bitwise_not_kernel, (self, out), U8=self.dtype == torch.uint8)
    return out
'''

# Decides the flat fast path from the output alone: right for contiguous inputs, wrong for
# transposed or strided ones (read as if dense, still inside their storage).
NEGATIVE_OUTPUT_LAYOUT_ONLY = SOLUTION.replace("flat = all(_dense(t, shape) for t in tensors)",
                                               "flat = _dense(out, shape)")
assert NEGATIVE_OUTPUT_LAYOUT_ONLY != SOLUTION

_DTYPES = ("bool", "uint8", "int32", "int64")


def _values(shape: Sequence[int], dtype: str, gen: torch.Generator, layout: str,
            plain: bool = False) -> torch.Tensor:
    """Uniform over the dtype's whole range, with its extremes and 0 / -1 sprinkled in
    (``plain``: the uniform draw alone, cheap for large benchmark operands)."""
    dt = dtype_from_name(dtype)
    shape = tuple(shape)
    if dt == torch.bool:
        return with_layout(torch.randint(0, 2, shape, generator=gen, dtype=torch.uint8).bool(),
                           layout)
    info = torch.iinfo(dt)
    if plain:
        return with_layout(torch.randint(info.min, info.max, shape, generator=gen, dtype=dt),
                           layout)
    if dt == torch.int64:
        # torch.randint cannot span all of int64: combine two 32-bit halves
        hi = torch.randint(-(2**31), 2**31, shape, generator=gen, dtype=torch.int64)
        lo = torch.randint(0, 2**32, shape, generator=gen, dtype=torch.int64)
        t = hi * 2**32 + lo
    else:
        t = torch.randint(info.min, info.max + 1, shape, generator=gen, dtype=torch.int64)
    pick = torch.rand(shape, generator=gen)
    edge = torch.tensor([info.min, info.max, 0, -1 if info.min < 0 else 1], dtype=torch.int64)
    which = torch.randint(0, 4, shape, generator=gen)
    t = torch.where(pick < 0.1, edge[which], t)
    return with_layout(t.to(dt), layout)


@register("aten::bitwise_not", version=1, kind=Kind.COMPUTE)
class BitwiseNot(OperatorSpec):
    entry_points = (
        EntryPoint("bitwise_not", "bitwise_not(self: Tensor) -> Tensor",
                   "~self elementwise (logical not for bool), same dtype and shape as self."),
        EntryPoint("bitwise_not_out", "bitwise_not_out(self: Tensor, *, out: Tensor) -> Tensor",
                   "Writes bitwise_not(self) into out (same shape and dtype) and returns out."),
    )
    description = (
        "Elementwise bitwise NOT, following PyTorch's `torch.bitwise_not`: for integer dtypes "
        "every bit is flipped (`~x`, so `~0 == -1`, `~INT_MIN == INT_MAX`, and for uint8 "
        "`~x == 255 - x`); for bool it is the logical not (True <-> False, stored as 0/1 "
        "bytes). Dtypes: bool, uint8, int32, int64; the result has self's dtype and shape and "
        "must be exact. Inputs may be non-contiguous (transposed or strided), 0-d or empty, "
        "with up to 6 dims."
    )
    solution = SOLUTION
    negatives = (
        Negative("output_layout_only", "takes the dense fast path whenever the output is "
                 "contiguous, reading non-contiguous inputs as if they were dense",
                 NEGATIVE_OUTPUT_LAYOUT_ONLY),
    )
    bitwise_deterministic = True

    def cases(self) -> Sequence[Case]:
        cs = [
            case("bitwise_not", "bool", (63, 145), cpu=True),
            case("bitwise_not", "uint8", (7, 17, 31), cpu=True),
            case("bitwise_not", "int32", (33, 65), layout="transposed", cpu=True),
            case("bitwise_not", "int64", (24, 50), layout="strided", cpu=True),
            case("bitwise_not", "bool", (40, 30), layout="transposed", cpu=True),
            case("bitwise_not", "int32", (), cpu=True),
            case("bitwise_not", "int64", (0, 5), cpu=True),
            case("bitwise_not_out", "uint8", (49, 63), layout="strided", cpu=True),
            case("bitwise_not_out", "int32", (2065,), cpu=True),
        ]
        for dt in _DTYPES:
            cs += [
                case("bitwise_not", dt, (1024, 1024)),
                case("bitwise_not", dt, (16, 7, 57, 32, 29)),
                case("bitwise_not", dt, (511, 257), layout="transposed"),
                case("bitwise_not", dt, (5, 7, 11, 13), layout="strided"),
                case("bitwise_not_out", dt, (20, 320, 15)),
                case("bitwise_not_out", dt, (4097,)),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _DTYPES:
            rank = rng.choice([1, 2, 3])
            shape = [rng.randrange(1, 12 if small else 64) for _ in range(rank)]
            shape[-1] = rng.randrange(1, 200 if small else 4000)
            out.append(case(rng.choice(["bitwise_not", "bitwise_not_out"]), dt, shape,
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            cpu=small))
        return out[:2] if small else out

    def benchmark_cases(self) -> Sequence[Case]:
        # ~134 MB of traffic each
        return [
            case("bitwise_not", "int32", (4096, 4096), plain=True),
            case("bitwise_not", "uint8", (8192, 8192), plain=True),
            case("bitwise_not", "bool", (8192, 8192), plain=True),
            case("bitwise_not", "int64", (4096, 2048), plain=True),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = _values(c.shape, c.dtype, gen, c.get("layout", "contiguous"), c.get("plain", False))
        if c.entry == "bitwise_not_out":
            return out_call(c.entry, (x,), "out", x.shape, x.dtype)
        return Call(c.entry, (x,))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x = call.args[0]
        # an exact integer op: PyTorch's CPU result is the answer (logical not for bool)
        return (Expected(torch.bitwise_not(x), x.dtype),)

    def baseline(self, call: Call) -> object:
        if call.entry == "bitwise_not_out":
            return torch.bitwise_not(call.args[0], out=call.kwargs["out"])
        return torch.bitwise_not(call.args[0])

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        return Cost(flops=float(n), bytes=float(2 * n * itemsize(c.dtype)), dtype=c.dtype)
