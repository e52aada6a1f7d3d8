"""aten::sum — the sum of a tensor's elements, over all dims or over a list of dims
(overloads default, dim_IntList, IntList_out, out)."""

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

def _result_dtype(self, dtype):
    if dtype is not None:
        return dtype
    if self.dtype.is_floating_point or self.dtype.is_complex:
        return self.dtype
    return torch.int64  # integral and bool inputs promote to int64


def sum(self, *, dtype=None):
    out = torch.empty((), dtype=_result_dtype(self, dtype), device=self.device)
    return _reduce(self, _reduced_dims(self, None), out, False, False, False)


def sum_dim_IntList(self, dim, keepdim=False, *, dtype=None):
    red = _reduced_dims(self, dim)
    out = torch.empty(_out_shape(self, red, keepdim), dtype=_result_dtype(self, dtype),
                      device=self.device)
    return _reduce(self, red, out, keepdim, False, False)


def sum_IntList_out(self, dim, keepdim=False, *, dtype=None, out):
    return _reduce(self, _reduced_dims(self, dim), out, keepdim, False, False)


def sum_out(self, *, dtype=None, out):
    return _reduce(self, _reduced_dims(self, None), out, False, False, False)
'''

# Keeps the input dtype for integer and bool inputs (PyTorch promotes them to int64).
NEGATIVE_NO_PROMOTION = SOLUTION.replace("return torch.int64  # integral",
                                         "return self.dtype  # integral")

# Rounds the number of splits down: the tail split of a long reduction is never summed.
NEGATIVE_DROPS_TAIL = SOLUTION.replace("splits = triton.cdiv(n_red, per)",
                                       "splits = n_red // per")
assert NEGATIVE_NO_PROMOTION != SOLUTION and NEGATIVE_DROPS_TAIL != SOLUTION

_FLOATS = ("float16", "bfloat16", "float32")
_ENTRIES = ("sum_dim_IntList", "sum_IntList_out")


def _result_dtype(x: torch.Tensor, dtype: torch.dtype | None) -> torch.dtype:
    if dtype is not None:
        return dtype
    if x.dtype.is_floating_point:
        return x.dtype
    return torch.int64


@register("aten::sum", version=1, kind=Kind.COMPUTE)
class Sum(OperatorSpec):
    entry_points = (
        EntryPoint("sum", "sum(self: Tensor, *, dtype: ScalarType | None = None) -> Tensor",
                   "The sum of all elements of self as a 0-d tensor."),
        EntryPoint("sum_dim_IntList",
                   "sum_dim_IntList(self: Tensor, dim: list[int] | None, keepdim: bool = False, *, "
                   "dtype: ScalarType | None = None) -> Tensor",
                   "The sum over the dims in dim (None or [] means every dim); reduced dims are "
                   "kept with size 1 when keepdim."),
        EntryPoint("sum_IntList_out",
                   "sum_IntList_out(self: Tensor, dim: list[int] | None, keepdim: bool = False, *, "
                   "dtype: ScalarType | None = None, out: Tensor) -> Tensor",
                   "Writes sum_dim_IntList(self, dim, keepdim, dtype=dtype) into out (already of "
                   "the result shape and dtype) and returns out."),
        EntryPoint("sum_out",
                   "sum_out(self: Tensor, *, dtype: ScalarType | None = None, out: Tensor) -> Tensor",
                   "Writes sum(self, dtype=dtype) into the 0-d tensor out and returns out."),
    )
    description = (
        "Sum reduction, following PyTorch's `torch.sum`: the sum of self's elements over every "
        "dim (`sum`, `sum_out`) or over the dims listed in `dim` (`sum_dim_IntList`, "
        "`sum_IntList_out`): dims may be negative, several at once and in any order, `None` or "
        "`[]` reduce every dim, and `keepdim=True` keeps each reduced dim with size 1. A 0-d "
        "self is its own sum (dim 0 or -1 is allowed on it); an empty reduced dim sums to 0. "
        "Result dtype: `dtype` (a torch.dtype at least as wide as self's, e.g. float32 for a "
        "float16 self) when given, else self's dtype for float16, bfloat16, float32 and float64, "
        "and int64 for integer and bool inputs (bool counts Trues). Integer sums must be exact; "
        "accumulate floats in float32 (float64 for float64) and round each output once. inf and "
        "nan propagate as in IEEE arithmetic. Inputs may be non-contiguous (transposed or "
        "strided), have up to 5 dims and be large (tens of millions of elements, possibly all "
        "reduced into one output)."
    )
    solution = SOLUTION
    negatives = (
        Negative("no_int64_promotion", "returns the input's integer dtype instead of PyTorch's "
                 "int64 for integer and bool inputs", NEGATIVE_NO_PROMOTION),
        Negative("drops_tail_split", "splits a long reduction into whole chunks and forgets the "
                 "last, partial one", NEGATIVE_DROPS_TAIL),
    )
    # Relative to the sum of |terms|. Half outputs: the final rounding (<= 1 u of |value|, and
    # |value| <= scale) dominates; float32 accumulation adds ~2^-13 of that. float32/float64
    # outputs: a blocked tree summation (a few chunks per lane, then log2-depth trees) stays
    # within ~16 u of the scale for the sizes here (2^25 terms at most, error ~ sqrt(depth) u on
    # real data); PyTorch's cascade sum and sequential-per-thread CUDA sums do as well.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 16),
        "float64": Tolerance.ulps("float64", 16),
    }

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("sum", "float32", (1, 2), cpu=True),
            case("sum", "float32", (3000,), positive=True, cpu=True),  # split into partials
            case("sum", "float32", (), cpu=True),
            case("sum_dim_IntList", "float16", (63, 145), dim=(-1,), cpu=True),
            case("sum_dim_IntList", "bfloat16", (7, 17, 31), dim=(2, 0), keepdim=True, cpu=True),
            case("sum_dim_IntList", "float32", (33, 65), dim=(0,), layout="transposed", cpu=True),
            case("sum_dim_IntList", "int32", (49, 63), dim=(1,), cpu=True),
            case("sum_dim_IntList", "bool", (7, 17, 31), dim=(-2,), cpu=True),
            case("sum_dim_IntList", "float32", (5, 7, 11, 13), dim=(1, 3), specials=0.01,
                 cpu=True),
            case("sum_dim_IntList", "float32", (0,), dim=(0,), cpu=True),  # empty: 0
            case("sum_IntList_out", "float32", (20, 40), dim=(-1,), keepdim=True,
                 layout="strided", cpu=True),
            case("sum_out", "float16", (49, 63), cast="float32", cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case("sum_dim_IntList", dt, (1, 2), dim=(-1,)),
                case("sum_dim_IntList", dt, (4096, 256), dim=(-1,)),
                case("sum_dim_IntList", dt, (4096, 256), dim=(0,), keepdim=True),
                case("sum_dim_IntList", dt, (200, 40999, 3), dim=(1,)),
                case("sum_dim_IntList", dt, (200, 40999, 3), dim=(0, 2), positive=True),
                # positive terms would overflow float16 (24.6M of them sum to ~1.2e7)
                case("sum", dt, (200, 40999, 3), positive=dt != "float16"),
                case("sum_dim_IntList", dt, (511, 257), dim=(1,), layout="transposed"),
                case("sum_dim_IntList", dt, (16, 7, 57, 32, 29), dim=(-4, 2, -1),
                     layout="strided"),
                case("sum_dim_IntList", dt, (2, 3, 4, 5, 6), dim=None, keepdim=True),
                case("sum_IntList_out", dt, (7, 17, 31), dim=(0, 1), specials=0.02),
                case("sum_out", dt, (2065,), std=100.0),
            ]
        cs += [
            case("sum_dim_IntList", "float64", (4096, 256), dim=(0,)),
            case("sum", "float64", (200, 40999, 3)),
            case("sum_dim_IntList", "bfloat16", (4096, 256), dim=(1,), cast="float32"),
            case("sum_dim_IntList", "int32", (200, 40999, 3), dim=(1,)),
            case("sum_dim_IntList", "int16", (4096, 256), dim=(0,)),
            case("sum", "int32", (4097, 529)),
            case("sum_dim_IntList", "bool", (4096, 256), dim=(-1,)),
            case("sum_IntList_out", "int32", (511, 257), dim=(0,), layout="transposed"),
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
            n_red = 1
            for d in dims:
                n_red *= shape[d]
            # positive terms: the worst case for accumulation order, unless they would overflow
            # float16's range (~65504)
            if dt != "int32" and rng.random() < 0.3 and (dt != "float16" or n_red < 50_000):
                params["positive"] = True
            out.append(case(rng.choice(_ENTRIES), dt, shape, cpu=small, **params))
        n = rng.randrange(1000, 4000) if small else rng.randrange(100_000, 20_000_000)
        out.append(case("sum", rng.choice(_FLOATS), (n,), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # 64-100 MB read each: memory-bound, far from launch-bound on an H200.
        return [
            case("sum", "float32", (4096, 4096)),
            case("sum_dim_IntList", "float32", (200, 40999, 3), dim=(1,)),
            case("sum_dim_IntList", "bfloat16", (8192, 4096), dim=(-1,)),
            case("sum_dim_IntList", "float16", (4096, 8192), dim=(0,)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = make_input(c, gen)
        cast = c.get("cast")
        dtype = None if cast is None else dtype_from_name(cast)
        kwargs: dict[str, object] = {} if dtype is None else {"dtype": dtype}
        if c.entry in ("sum", "sum_out"):
            args: tuple[object, ...] = (x,)
            shape: tuple[int, ...] = ()
        else:
            dim = c["dim"]
            args = (x, None if dim is None else list(dim), c.get("keepdim", False))
            shape = out_shape(x.shape, reduced_dims(x.dim(), dim), c.get("keepdim", False))
        if c.entry.endswith("out"):
            kwargs["out"] = torch.empty(shape, dtype=_result_dtype(x, dtype))
            return Call(c.entry, args, kwargs, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, args, kwargs)

    @staticmethod
    def _operands(call: Call) -> tuple[torch.Tensor, list[int], bool, torch.dtype]:
        x = call.args[0]
        dim = call.args[1] if len(call.args) > 1 else None
        keepdim = bool(call.args[2]) if len(call.args) > 2 else False
        return x, reduced_dims(x.dim(), dim), keepdim, _result_dtype(x, call.kwargs.get("dtype"))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, dims, keepdim, out_dtype = self._operands(call)
        shape = out_shape(x.shape, dims, keepdim)
        if not out_dtype.is_floating_point:
            x64 = x.to(torch.int64)
            value = x64.sum(dim=dims, keepdim=keepdim) if dims else x64
            return (Expected(value.reshape(shape), out_dtype),)
        x64 = x.to(out_dtype).double()
        if not dims:
            return (Expected(x64.reshape(shape), out_dtype, x64.abs().reshape(shape)),)
        value = x64.sum(dim=dims, keepdim=keepdim)
        scale = x64.abs().sum(dim=dims, keepdim=keepdim)
        return (Expected(value, out_dtype, scale),)

    def baseline(self, call: Call) -> object:
        x, kw = call.args[0], dict(call.kwargs)
        if call.entry == "sum":
            return torch.sum(x, **kw)
        if call.entry == "sum_out":
            return torch.ops.aten.sum.out(x, **kw)
        dim, keepdim = call.args[1], call.args[2]
        if call.entry == "sum_IntList_out":
            return torch.ops.aten.sum.IntList_out(x, dim, keepdim, **kw)
        return torch.ops.aten.sum.dim_IntList(x, dim, keepdim, **kw)

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        dims = reduced_dims(len(c.shape), None if c.entry in ("sum", "sum_out") else c["dim"])
        n_out = numel(out_shape(c.shape, dims, False))
        in_dt = c.torch_dtype
        cast = c.get("cast")
        out_dt = dtype_from_name(cast) if cast else (
            in_dt if in_dt.is_floating_point else torch.int64)
        return Cost(flops=float(n), bytes=float(n * itemsize(in_dt) + n_out * itemsize(out_dt)),
                    dtype=cast or (c.dtype if in_dt.is_floating_point else "float32"))
