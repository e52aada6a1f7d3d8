"""aten::mean — the arithmetic mean of a float tensor's elements, over all dims or over a list
of dims (overloads default, dim, out, dtype_out)."""

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
    dtype_from_name,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + REDUCE_SOURCE + r'''

def mean(self, *, dtype=None):
    out = torch.empty((), dtype=dtype if dtype is not None else self.dtype, device=self.device)
    return _reduce(self, _reduced_dims(self, None), out, False, False, True)


def mean_dim(self, dim, keepdim=False, *, dtype=None):
    red = _reduced_dims(self, dim)
    out = torch.empty(_out_shape(self, red, keepdim),
                      dtype=dtype if dtype is not None else self.dtype, device=self.device)
    return _reduce(self, red, out, keepdim, False, True)


def mean_out(self, dim, keepdim=False, *, dtype=None, out):
    return _reduce(self, _reduced_dims(self, dim), out, keepdim, False, True)


def mean_dtype_out(self, *, dtype=None, out):
    return _reduce(self, _reduced_dims(self, None), out, False, False, True)
'''

# Divides by the number of elements of the whole input instead of the number of terms reduced
# into each output: right only when every dim is reduced.
NEGATIVE_NUMEL = SOLUTION.replace("float(n_red)", "float(x.numel())")
assert NEGATIVE_NUMEL != SOLUTION

_FLOATS = ("float16", "bfloat16", "float32")
_ENTRIES = ("mean_dim", "mean_out")
_FULL = ("mean", "mean_dtype_out")


@register("aten::mean", version=1, kind=Kind.COMPUTE)
class Mean(OperatorSpec):
    entry_points = (
        EntryPoint("mean", "mean(self: Tensor, *, dtype: ScalarType | None = None) -> Tensor",
                   "The mean of all elements of self as a 0-d tensor."),
        EntryPoint("mean_dim",
                   "mean_dim(self: Tensor, dim: list[int] | None, keepdim: bool = False, *, "
                   "dtype: ScalarType | None = None) -> Tensor",
                   "The mean over the dims in dim (None or [] means every dim); reduced dims are "
                   "kept with size 1 when keepdim."),
        EntryPoint("mean_out",
                   "mean_out(self: Tensor, dim: list[int] | None, keepdim: bool = False, *, "
                   "dtype: ScalarType | None = None, out: Tensor) -> Tensor",
                   "Writes mean_dim(self, dim, keepdim, dtype=dtype) into out (already of the "
                   "result shape and dtype) and returns out."),
        EntryPoint("mean_dtype_out",
                   "mean_dtype_out(self: Tensor, *, dtype: ScalarType | None = None, "
                   "out: Tensor) -> Tensor",
                   "Writes mean(self, dtype=dtype) into the 0-d tensor out and returns out."),
    )
    description = (
        "Mean reduction, following PyTorch's `torch.mean`: the sum of self's elements over every "
        "dim (`mean`, `mean_dtype_out`) or over the dims listed in `dim` (`mean_dim`, "
        "`mean_out`), divided by the number of elements reduced into each output. Dims may be "
        "negative, several at once and in any order, `None` or `[]` reduce every dim, and "
        "`keepdim=True` keeps each reduced dim with size 1. A 0-d self is its own mean; an empty "
        "reduction gives nan (0/0). self is floating point (float16, bfloat16, float32, "
        "float64); the result has `dtype` (a torch.dtype at least as wide as self's, e.g. "
        "float32 for a float16 self) when given, else self's dtype. Accumulate in float32 "
        "(float64 for float64), divide, and round each output once. inf and nan propagate as in "
        "IEEE arithmetic. Inputs may be non-contiguous (transposed or strided), have up to 5 dims "
        "and be large (tens of millions of elements, possibly all reduced into one output)."
    )
    solution = SOLUTION
    negatives = (
        Negative("divides_by_numel", "divides every sum by the input's total element count "
                 "instead of the number of reduced elements", NEGATIVE_NUMEL),
    )
    # Relative to the mean of |terms| (the sum's conditioning divided by the count). Half
    # outputs: the final rounding (<= 1 u of |value| <= scale; Triton's interpreter converts to
    # bfloat16 by truncation, <= 2 u) dominates. float32/float64: the blocked tree summation
    # (see aten::sum, <= ~16 u of the scale here) plus one rounding for the division.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 16),
        "float64": Tolerance.ulps("float64", 16),
    }

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("mean", "float32", (1, 2), cpu=True),
            case("mean", "float32", (3000,), positive=True, cpu=True),  # split into partials
            case("mean", "float16", (), cpu=True),
            case("mean", "float32", (0,), cpu=True),  # empty: nan
            case("mean_dim", "float16", (63, 145), dim=(-1,), cpu=True),
            case("mean_dim", "bfloat16", (7, 17, 31), dim=(2, 0), keepdim=True, cpu=True),
            case("mean_dim", "float32", (33, 65), dim=(0,), layout="transposed", cpu=True),
            case("mean_dim", "float32", (5, 7, 11, 13), dim=(1, 3), specials=0.01, cpu=True),
            case("mean_out", "float32", (20, 40), dim=(-1,), keepdim=True, layout="strided",
                 cpu=True),
            case("mean_dtype_out", "float16", (49, 63), cast="float32", cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case("mean_dim", dt, (1, 2), dim=(-1,)),
                case("mean_dim", dt, (4096, 256), dim=(-1,)),
                case("mean_dim", dt, (4096, 256), dim=(0,), keepdim=True),
                case("mean_dim", dt, (200, 40999, 3), dim=(1,)),
                case("mean_dim", dt, (200, 40999, 3), dim=(0, 2), positive=True),
                case("mean", dt, (200, 40999, 3), positive=True),
                case("mean_dim", dt, (511, 257), dim=(1,), layout="transposed"),
                case("mean_dim", dt, (16, 7, 57, 32, 29), dim=(-4, 2, -1), layout="strided"),
                case("mean_dim", dt, (2, 3, 4, 5, 6), dim=None, keepdim=True),
                case("mean_out", dt, (7, 17, 31), dim=(0, 1), specials=0.02),
                case("mean_dtype_out", dt, (2065,), std=100.0),
            ]
        cs += [
            case("mean_dim", "float64", (4096, 256), dim=(0,)),
            case("mean", "float64", (200, 40999, 3)),
            case("mean_dim", "bfloat16", (4096, 256), dim=(1,), cast="float32"),
            case("mean", "float16", (4097, 529), cast="float32"),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS:
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
            if rng.random() < 0.3:
                params["positive"] = True
            if dt != "float32" and rng.random() < 0.3:
                params["cast"] = "float32"
            out.append(case(rng.choice(_ENTRIES), dt, shape, cpu=small, **params))
        n = rng.randrange(1000, 4000) if small else rng.randrange(100_000, 20_000_000)
        out.append(case(rng.choice(_FULL), rng.choice(_FLOATS), (n,), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # 64-100 MB read each: memory-bound, far from launch-bound on an H200.
        return [
            case("mean", "float32", (4096, 4096)),
            case("mean_dim", "float32", (200, 40999, 3), dim=(1,)),
            case("mean_dim", "bfloat16", (8192, 4096), dim=(-1,)),
            case("mean_dim", "float16", (4096, 8192), dim=(0,)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = make_input(c, gen)
        cast = c.get("cast")
        dtype = None if cast is None else dtype_from_name(cast)
        kwargs: dict[str, object] = {} if dtype is None else {"dtype": dtype}
        if c.entry in _FULL:
            args: tuple[object, ...] = (x,)
            shape: tuple[int, ...] = ()
        else:
            dim = c["dim"]
            args = (x, None if dim is None else list(dim), c.get("keepdim", False))
            shape = out_shape(x.shape, reduced_dims(x.dim(), dim), c.get("keepdim", False))
        if c.entry.endswith("out"):
            kwargs["out"] = torch.empty(shape, dtype=x.dtype if dtype is None else dtype)
            return Call(c.entry, args, kwargs, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, args, kwargs)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x = call.args[0]
        dims = reduced_dims(x.dim(), call.args[1] if len(call.args) > 1 else None)
        keepdim = bool(call.args[2]) if len(call.args) > 2 else False
        out_dtype = call.kwargs.get("dtype") or x.dtype
        x64 = x.to(out_dtype).double()
        if not dims:
            return (Expected(x64.clone(), out_dtype, x64.abs()),)
        value = x64.mean(dim=dims, keepdim=keepdim)
        scale = x64.abs().mean(dim=dims, keepdim=keepdim)
        return (Expected(value, out_dtype, scale),)

    def baseline(self, call: Call) -> object:
        x, kw = call.args[0], dict(call.kwargs)
        if call.entry == "mean":
            return torch.mean(x, **kw)
        if call.entry == "mean_dtype_out":
            return torch.ops.aten.mean.dtype_out(x, **kw)
        dim, keepdim = call.args[1], call.args[2]
        if call.entry == "mean_out":
            return torch.ops.aten.mean.out(x, dim, keepdim, **kw)
        return torch.ops.aten.mean.dim(x, dim, keepdim, **kw)

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        dims = reduced_dims(len(c.shape), None if c.entry in _FULL else c["dim"])
        n_out = numel(out_shape(c.shape, dims, False))
        cast = c.get("cast")
        out_dt = dtype_from_name(cast) if cast else c.torch_dtype
        return Cost(flops=float(n + n_out),
                    bytes=float(n * itemsize(c.torch_dtype) + n_out * itemsize(out_dt)),
                    dtype=cast or c.dtype)
