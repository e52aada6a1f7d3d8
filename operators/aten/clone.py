"""aten::clone — a new tensor with the same values as ``self`` (overloads default, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._copying import COPY_SOURCE, EXACT, convert, itemsize, make_values, numel
from operators.inputs import bounded
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
    case,
)

SOLUTION = COPY_SOURCE + r'''

def clone(self, *, memory_format=None):
    # preserve_format (None): empty_like keeps self's strides when self is dense and
    # non-overlapping, so the copy below is usually a flat one.
    if memory_format is None:
        out = torch.empty_like(self)
    else:
        out = torch.empty_like(self, memory_format=memory_format)
    return _copy(out, self)


def clone_out(self, *, memory_format=None, out):
    return _copy(out, self)
'''

# Copies self's storage span as if it were dense: right whenever self is dense (contiguous,
# transposed, channels_last — empty_like gives the output the same strides), wrong for inputs
# with gaps (slices, every-other-element views).
NEGATIVE_STORAGE_MEMCPY = SOLUTION.replace(
    "if len(dims) == 1 and dims[0][1] == 1 and dims[0][2] == 1:", "if True:")

# Ignores self's strides and reads it as contiguous row-major.
NEGATIVE_ROW_MAJOR = SOLUTION.replace(
    "    if src_strides is None:\n        src_strides = src.stride()\n",
    "    if src_strides is None:\n        src_strides = torch.empty(src.shape).stride()\n")

_DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64",
           "bool")


@register("aten::clone", version=3, kind=Kind.COMPUTE)
class Clone(OperatorSpec):
    entry_points = (
        EntryPoint("clone", "clone(self: Tensor, *, memory_format: MemoryFormat | None = None) "
                   "-> Tensor",
                   "A new tensor with self's shape, dtype and values (never a view of self)."),
        EntryPoint("clone_out", "clone_out(self: Tensor, *, memory_format: MemoryFormat | None = "
                   "None, out: Tensor) -> Tensor",
                   "Writes self's values into out (already of self's shape and dtype, any "
                   "strides) and returns out."),
    )
    description = (
        "Copy a tensor, following PyTorch's `torch.clone(self, memory_format=...)`: the result is "
        "a new tensor (not sharing storage with `self`) with `self`'s shape, dtype and values. "
        "`self` can have any dtype (float16, bfloat16, float32, float64, int8, uint8, int32, "
        "int64, bool), 0 to 5 dims, zero elements, and any strides: transposed, permuted, "
        "channels_last, or with gaps (slices, every-other-element views). `memory_format` "
        "(None meaning torch.preserve_format) only chooses the result's strides: preserve_format "
        "keeps self's strides when self is dense and non-overlapping (as `torch.empty_like` "
        "does, otherwise row-major), torch.contiguous_format gives row-major, torch.channels_last "
        "NHWC for 4-D; `clone`'s result strides are checked. The values must be bit-exact "
        "copies (NaN, inf and subnormals included). `clone_out` writes into a given `out` (any "
        "strides) instead."
    )
    solution = SOLUTION
    negatives = (
        Negative("storage_memcpy", "copies self's storage linearly as if self were dense; wrong "
                 "for inputs with gaps (slices, strided views)", NEGATIVE_STORAGE_MEMCPY),
        Negative("assumes_row_major_self", "ignores self's strides and reads it as contiguous",
                 NEGATIVE_ROW_MAJOR),
    )
    tolerances = EXACT  # a copy: bit-exact values
    # v2: clone's result strides are checked (preserve_format), as PyTorch gives them

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("clone", "float32", (1000,), cpu=True),
            case("clone", "float16", (63, 145), layout="transposed", cpu=True),
            case("clone", "bfloat16", (7, 17, 31), layout="strided", cpu=True),
            case("clone", "float32", (2, 6, 9, 11), layout="channels_last", cpu=True),
            case("clone", "int32", (5, 7, 11, 13), layout="sliced", cpu=True),
            case("clone_out", "float32", (33, 65), layout="permuted", cpu=True),
            case("clone", "bool", (49, 63), cpu=True),
            case("clone", "float64", (), cpu=True),
            case("clone", "float32", (0, 17), cpu=True),
        ]
        for dt in _DTYPES:
            cs += [
                case("clone", dt, (1024, 1024)),
                case("clone", dt, (511, 257), layout="transposed"),
                case("clone", dt, (16, 7, 57, 32, 29), layout="permuted"),
                case("clone_out", dt, (2, 3, 4, 5, 6), layout="sliced"),
            ]
        for dt in ("float16", "bfloat16", "float32"):
            cs += [
                case("clone", dt, (16, 64, 33, 31), layout="channels_last"),
                case("clone", dt, (20, 320, 15), layout="strided"),
                case("clone", dt, (2065,)),
                case("clone", dt, ()),
                case("clone_out", dt, (4097, 3), layout="transposed"),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(2 if small else 8):
            dt = rng.choice(_DTYPES)
            rank = rng.choice([1, 2, 3, 4])
            shape = [rng.randrange(1, 9 if small else 40) for _ in range(rank)]
            shape[-1] = rng.randrange(2, 200 if small else 3000)
            shape = bounded(shape)
            layouts = ["contiguous", "transposed", "strided", "permuted", "sliced"]
            if rank == 4:
                layouts.append("channels_last")
            out.append(case(rng.choice(["clone", "clone_out"]), dt, shape,
                            layout=rng.choice(layouts), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("clone", "float32", (8192, 8192)),
            case("clone", "bfloat16", (8192, 8192), layout="strided"),
            case("clone", "float16", (64, 256, 56, 56), layout="channels_last"),
            case("clone_out", "float32", (8192, 8192), layout="transposed"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = make_values(c.shape, c.dtype, None, gen, c.get("layout", "contiguous"))
        if c.entry == "clone_out":
            out = torch.empty(c.shape, dtype=x.dtype)
            return Call(c.entry, (x,), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, (x,))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x = call.args[0]
        if call.entry == "clone_out":
            return (Expected(convert(x, x.dtype), x.dtype),)
        # preserve_format: PyTorch's rule is empty_like's (self's strides when dense and
        # non-overlapping, else row-major or channels_last as suggested by self's strides)
        strides = tuple(torch.empty_like(x).stride())
        return (Expected(convert(x, x.dtype), x.dtype, strides=strides),)

    def baseline(self, call: Call) -> object:
        if call.entry == "clone_out":
            return torch.ops.aten.clone.out(call.args[0], out=call.kwargs["out"])
        return torch.clone(call.args[0])

    def cost(self, c: Case) -> Cost:
        return Cost(flops=0.0, bytes=float(2 * numel(c.shape) * itemsize(c.dtype)),
                    dtype=c.dtype)
