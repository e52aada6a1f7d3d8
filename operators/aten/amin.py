"""aten::amin — the minimum of a tensor's elements over a list of dims, NaN propagating
(overloads default, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._reduce import (
    REDUCE_SOURCE,
    itemsize,
    make_input,
    numel,
    out_shape,
    reduced_dims,
)
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
''' + REDUCE_SOURCE + r'''

def amin(self, dim=(), keepdim=False):
    red = _reduced_dims(self, dim)
    out = torch.empty(_out_shape(self, red, keepdim), dtype=self.dtype, device=self.device)
    return _reduce(self, red, out, keepdim, True, False)


def amin_out(self, dim=(), keepdim=False, *, out):
    return _reduce(self, _reduced_dims(self, dim), out, keepdim, True, False)
'''

# Takes the NaN-blind minimum (tl.min / fmin semantics): wrong on every row holding a NaN.
NEGATIVE_NAN_BLIND = SOLUTION.replace('res = tl.where(has_nan, float("nan"), res)', "pass")

# Lets masked-off lanes (loaded as 0) into the minimum: right whenever every row's minimum is
# negative or the tile is full, wrong for positive data with a ragged tail.
NEGATIVE_MASKED_ZERO = SOLUTION.replace("            x = tl.where(mask, x, IDENT)\n", "")
assert NEGATIVE_NAN_BLIND != SOLUTION and NEGATIVE_MASKED_ZERO != SOLUTION

_FLOATS = ("float16", "bfloat16", "float32")
_ENTRIES = ("amin", "amin_out")


@register("aten::amin", version=1, kind=Kind.COMPUTE)
class Amin(OperatorSpec):
    entry_points = (
        EntryPoint("amin",
                   "amin(self: Tensor, dim: list[int] = (), keepdim: bool = False) -> Tensor",
                   "The minimum over the dims in dim ([] means every dim); reduced dims are kept "
                   "with size 1 when keepdim."),
        EntryPoint("amin_out",
                   "amin_out(self: Tensor, dim: list[int] = (), keepdim: bool = False, *, "
                   "out: Tensor) -> Tensor",
                   "Writes amin(self, dim, keepdim) into out (already of the result shape and "
                   "dtype) and returns out."),
    )
    description = (
        "Minimum reduction, following PyTorch's `torch.amin(self, dim, keepdim)`: the smallest "
        "element of self over the dims listed in `dim` (negative dims allowed, several at once, "
        "in any order; `[]` reduces every dim); `keepdim=True` keeps each reduced dim with size "
        "1. The result has self's dtype (float16, bfloat16, float32, int32, int16) and is exact: "
        "it is one of the inputs. NaN propagates: an output is nan whenever any of its reduced "
        "elements is nan; -inf and inf order as usual, denormals are values like any other. A "
        "0-d self is its own minimum; no reduced dim is empty. Inputs may be non-contiguous "
        "(transposed or strided), have up to 5 dims and be large (tens of millions of elements, "
        "possibly all reduced into one output)."
    )
    solution = SOLUTION
    negatives = (
        Negative("nan_blind", "takes a NaN-ignoring minimum, so rows holding a nan give a "
                 "number instead of nan", NEGATIVE_NAN_BLIND),
        Negative("masked_lanes_are_zero", "loads masked-off tail lanes as 0 and lets them into "
                 "the minimum; wrong for positive rows with a ragged tail", NEGATIVE_MASKED_ZERO),
    )
    # The minimum is one of the inputs, in the input's dtype: exact, except that a device which
    # flushes subnormals may return one as ±0 (an absolute floor of one smallest normal).
    tolerances = {
        "float16": Tolerance.ulps("float16", 0, atol_ulps=1),
        "bfloat16": Tolerance.ulps("bfloat16", 0, atol_ulps=1),
        "float32": Tolerance.ulps("float32", 0, atol_ulps=1),
    }

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("amin", "float32", (1, 2), dim=(-1,), cpu=True),
            case("amin", "float32", (3000,), dim=(), positive=True, cpu=True),  # split
            case("amin", "float16", (), dim=(), cpu=True),
            case("amin", "float16", (63, 145), dim=(-1,), specials=0.01, cpu=True),
            case("amin", "bfloat16", (7, 17, 31), dim=(2, 0), keepdim=True, cpu=True),
            case("amin", "float32", (33, 65), dim=(0,), layout="transposed", positive=True,
                 cpu=True),
            case("amin", "int32", (49, 63), dim=(1,), cpu=True),
            case("amin", "float32", (5, 7, 11, 13), dim=(1, 3), denormals=True, cpu=True),
            case("amin_out", "float32", (20, 40), dim=(-1,), keepdim=True, layout="strided",
                 cpu=True),
        ]
        for dt in (*_FLOATS, "int32"):
            cs += [
                case("amin", dt, (1, 2), dim=(0,)),
                case("amin", dt, (4096, 256), dim=(-1,)),
                case("amin", dt, (4096, 256), dim=(0,), keepdim=True),
                case("amin", dt, (200, 40999, 3), dim=(1,)),
                case("amin", dt, (200, 40999, 3), dim=(0, 2)),
                case("amin", dt, (200, 40999, 3), dim=()),
                case("amin", dt, (511, 257), dim=(1,), layout="transposed"),
                case("amin", dt, (16, 7, 57, 32, 29), dim=(-4, 2, -1), layout="strided"),
                case("amin_out", dt, (2, 3, 4, 5, 6), dim=(), keepdim=True),
            ]
        for dt in _FLOATS:
            cs += [
                case("amin", dt, (4096, 256), dim=(1,), specials=0.001),
                case("amin", dt, (200, 40999, 3), dim=(1,), specials=0.00001),
                case("amin_out", dt, (2065,), dim=(0,), std=1e4 if dt != "float16" else 1e3),
            ]
        cs += [
            case("amin", "float32", (4096, 256), dim=(0,), denormals=True),
            case("amin", "int16", (4096, 256), dim=(-1,)),
            case("amin_out", "int16", (511, 257), dim=(0,), layout="transposed"),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in (*_FLOATS, "int32"):
            rank = rng.choice([1, 2, 3, 4])
            cap = {1: 3000, 2: 60, 3: 14, 4: 7}[rank] if small else \
                {1: 3_000_000, 2: 3000, 3: 200, 4: 40}[rank]
            shape = tuple(rng.randrange(1, cap + 1) for _ in range(rank))
            dims = tuple(d for d in range(rank) if rng.random() < 0.5) or (rank - 1,)
            dims = tuple(d - rank if rng.random() < 0.5 else d for d in dims)
            params: dict[str, object] = {
                "dim": dims, "keepdim": rng.random() < 0.5,
                "layout": rng.choice(["contiguous", "transposed", "strided"]),
            }
            if dt != "int32":
                params[rng.choice(["positive", "specials", "std"])] = \
                    rng.choice([0.001, 0.01]) if small else rng.choice([1e-5, 1e-3])
            out.append(case(rng.choice(_ENTRIES), dt, shape, cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # 64-100 MB read each: memory-bound, far from launch-bound on an H200.
        return [
            case("amin", "float32", (4096, 4096), dim=()),
            case("amin", "float32", (200, 40999, 3), dim=(1,)),
            case("amin", "bfloat16", (8192, 4096), dim=(-1,)),
            case("amin", "float16", (4096, 8192), dim=(0,)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = make_input(c, gen)
        if c.get("denormals"):
            # a quarter of the values scaled into float32's subnormal range (and so are the
            # smallest negatives of their rows often enough)
            tiny = torch.finfo(torch.float32).tiny
            x = x.clone()
            sub = torch.rand(x.shape, generator=gen) < 0.25
            x[sub] = (x[sub].double() * tiny * 0.5).to(x.dtype)
        args: tuple[object, ...] = (x, list(c["dim"]), c.get("keepdim", False))
        if c.entry == "amin_out":
            shape = out_shape(x.shape, reduced_dims(x.dim(), c["dim"]), c.get("keepdim", False))
            out = torch.empty(shape, dtype=x.dtype)
            return Call(c.entry, args, {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, args)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, dim, keepdim = call.args
        dims = reduced_dims(x.dim(), dim)
        xr = x.double() if x.dtype.is_floating_point else x
        value = xr.amin(dim=dims, keepdim=keepdim) if dims else xr.clone()
        return (Expected(value, x.dtype),)

    def baseline(self, call: Call) -> object:
        x, dim, keepdim = call.args
        if call.entry == "amin_out":
            return torch.amin(x, dim, keepdim, out=call.kwargs["out"])
        return torch.amin(x, dim, keepdim)

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        n_out = numel(out_shape(c.shape, reduced_dims(len(c.shape), c["dim"]), False))
        size = itemsize(c.torch_dtype)
        return Cost(flops=float(n), bytes=float((n + n_out) * size),
                    dtype=c.dtype if c.torch_dtype.is_floating_point else "float32")
