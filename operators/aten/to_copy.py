"""aten::_to_copy — always a new tensor: ``self`` copied, converted to ``dtype`` when given
(overloads default, out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._copying import (
    COPY_SOURCE,
    DTYPES,
    EXACT,
    PAIRS,
    convert,
    covered,
    itemsize,
    make_values,
    numel,
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
    case,
    dtype_from_name,
)

SOLUTION = COPY_SOURCE + r'''

def _to_copy(self, *, dtype=None, layout=None, device=None, pin_memory=None,
             non_blocking=False, memory_format=None):
    if dtype is None:
        dtype = self.dtype
    if memory_format is None:  # preserve_format: keep self's strides when self is dense
        out = torch.empty_like(self, dtype=dtype)
    else:
        out = torch.empty_like(self, dtype=dtype, memory_format=memory_format)
    return _copy(out, self)


def _to_copy_out(self, *, non_blocking=False, memory_format=None, out):
    return _copy(out, self)  # out's dtype is the target
'''

# Converts through float32: right for float16/bfloat16/float32 data, wrong for int64 beyond
# 2**24, float64 precision and integer narrowing (which must wrap).
NEGATIVE_VIA_FP32 = SOLUTION.replace(
    "x.to(dst_ptr.dtype.element_ty), mask=mask)",
    "x.to(tl.float32).to(dst_ptr.dtype.element_ty), mask=mask)")

# Reads self as if it were contiguous: right for contiguous inputs, wrong for transposed ones,
# slices and strided views.
NEGATIVE_ROW_MAJOR = SOLUTION.replace(
    "    if src_strides is None:\n        src_strides = src.stride()\n",
    "    if src_strides is None:\n        src_strides = torch.empty(src.shape).stride()\n")


@register("aten::_to_copy", version=2, kind=Kind.COMPUTE)
class ToCopy(OperatorSpec):
    entry_points = (
        EntryPoint("_to_copy",
                   "_to_copy(self: Tensor, *, dtype: ScalarType | None = None, "
                   "layout: Layout | None = None, device: Device | None = None, "
                   "pin_memory: bool | None = None, non_blocking: bool = False, "
                   "memory_format: MemoryFormat | None = None) -> Tensor",
                   "A new tensor with self's values converted to dtype (None: self's dtype); "
                   "layout, device and pin_memory are None (this device, strided)."),
        EntryPoint("_to_copy_out",
                   "_to_copy_out(self: Tensor, *, non_blocking: bool = False, "
                   "memory_format: MemoryFormat | None = None, out: Tensor) -> Tensor",
                   "Writes self's values converted to out's dtype into out (self's shape, any "
                   "strides) and returns out."),
    )
    description = (
        "The copy behind `Tensor.to`, following PyTorch's `torch.ops.aten._to_copy`: always "
        "returns a new tensor (never `self` or a view of it), with `self`'s shape and values "
        "converted to `dtype` (None: `self`'s dtype, a plain copy). `_to_copy_out` converts into "
        "`out`'s dtype instead. `self` has 0 to 5 dims, possibly zero elements, and any strides "
        "(transposed, permuted, channels_last, gaps). Dtypes: float16, bfloat16, float32, float64, "
        "int8, uint8, int16, int32, int64, bool, in any combination. Conversions follow PyTorch (C "
        "casts): float narrowing rounds to nearest even, overflowing to +-inf and keeping "
        "subnormals; float -> integer truncates toward zero (only values inside the target's range "
        "are given); integer -> integer keeps the low bits (two's-complement wrap, e.g. int32 300 "
        "-> int8 44, int8 -3 -> uint8 253); -> bool is `x != 0` (NaN -> True); bool -> number "
        "gives 0 or 1; integer -> float rounds to nearest even (|x| <= 2**24 for float16/bfloat16 "
        "targets). float64 and int64 values must not pass through float32. Results are bit-exact. "
        "memory_format is None (preserve_format): the result keeps self's strides when self is "
        "dense and non-overlapping (as `torch.empty_like(self, dtype=...)` does), else is "
        "row-major; the result's strides are checked. non_blocking has no effect."
    )
    solution = SOLUTION
    negatives = (
        Negative("converts_via_float32", "routes every element through float32, losing large "
                 "int64 values and float64 precision and breaking integer wrap-around",
                 NEGATIVE_VIA_FP32),
        Negative("assumes_row_major_self", "ignores self's strides and reads it as contiguous",
                 NEGATIVE_ROW_MAJOR),
    )
    tolerances = EXACT  # every covered conversion is exact or correctly rounded
    # v2: the result's strides are checked (preserve_format), as PyTorch gives them

    def cases(self) -> Sequence[Case]:
        # case dtype = self's dtype; "to" = the target dtype (None: keep self's)
        cs: list[Case] = [
            case("_to_copy", "float32", (63, 145), to="bfloat16", cpu=True),
            case("_to_copy", "float16", (33, 65), to="float32", layout="transposed", cpu=True),
            case("_to_copy", "float32", (7, 17, 31), to="uint8", layout="strided", cpu=True),
            case("_to_copy", "int64", (5, 7, 11, 13), to=None, layout="sliced", cpu=True),
            case("_to_copy", "int32", (2065,), to="bool", cpu=True),
            case("_to_copy_out", "int8", (49, 63), to="uint8", cpu=True),
            case("_to_copy_out", "float64", (2, 6, 9, 11), to="float32",
                 layout="channels_last", cpu=True),
            case("_to_copy", "bfloat16", (), to="float32", cpu=True),
            case("_to_copy", "float32", (0, 7), to="float16", cpu=True),
        ]
        for i, (dst, src) in enumerate(PAIRS):
            entry = ("_to_copy", "_to_copy_out")[i % 2]
            cs += [
                case(entry, src, (1024, 1024), to=dst),
                case(entry, src, (511, 257), to=dst, layout="transposed"),
                case(entry, src, (16, 7, 57, 32, 29), to=dst, layout="permuted"),
                case(entry, src, (20, 320, 15), to=dst, layout="strided"),
                case(entry, src, (2, 3, 4, 5, 6), to=dst, layout="sliced"),
            ]
        for dt in DTYPES:
            cs.append(case("_to_copy", dt, (1000, 33), to=None, layout="transposed"))
        cs += [
            case("_to_copy", "float32", (16, 64, 33, 31), to="float16", layout="channels_last"),
            case("_to_copy_out", "float16", (), to="float32"),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(2 if small else 8):
            dst, src = rng.choice(DTYPES), rng.choice(DTYPES)
            while not covered(dst, src, small):
                dst, src = rng.choice(DTYPES), rng.choice(DTYPES)
            rank = rng.choice([1, 2, 3])
            shape = [rng.randrange(1, 9 if small else 40) for _ in range(rank)]
            shape[-1] = rng.randrange(2, 200 if small else 3000)
            entry = rng.choice(["_to_copy", "_to_copy_out"])
            to = None if dst == src and entry == "_to_copy" and rng.random() < 0.5 else dst
            out.append(case(entry, src, shape, to=to, cpu=small,
                            layout=rng.choice(["contiguous", "transposed", "strided", "sliced"])))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("_to_copy", "float32", (8192, 8192), to="bfloat16"),
            case("_to_copy", "bfloat16", (8192, 8192), to="float32"),
            case("_to_copy", "float32", (8192, 8192), to=None, layout="transposed"),
            case("_to_copy_out", "float16", (8192, 8192), to="float32"),
        ]

    @staticmethod
    def _to(c: Case) -> str:
        return c.get("to") or c.dtype

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = make_values(c.shape, c.dtype, self._to(c), gen, c.get("layout", "contiguous"),
                        cpu=c.cpu)
        if c.entry == "_to_copy_out":
            out = torch.empty(c.shape, dtype=dtype_from_name(self._to(c)))
            return Call(c.entry, (x,), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        to = c.get("to")
        return Call(c.entry, (x,), {} if to is None else {"dtype": dtype_from_name(to)})

    @staticmethod
    def _target(call: Call) -> torch.dtype:
        if call.entry == "_to_copy_out":
            out: torch.Tensor = call.kwargs["out"]
            return out.dtype
        dtype: torch.dtype = call.kwargs.get("dtype") or call.args[0].dtype
        return dtype

    def reference(self, call: Call) -> tuple[Expected, ...]:
        dt = self._target(call)
        x = call.args[0]
        if call.entry == "_to_copy_out":
            return (Expected(convert(x, dt), dt),)
        # preserve_format: PyTorch's rule is empty_like's (self's strides when dense and
        # non-overlapping, else row-major or channels_last as suggested by self's strides)
        strides = tuple(torch.empty_like(x, dtype=dt).stride())
        return (Expected(convert(x, dt), dt, strides=strides),)

    def baseline(self, call: Call) -> object:
        if call.entry == "_to_copy_out":
            return torch.ops.aten._to_copy.out(call.args[0], out=call.kwargs["out"])
        return torch.ops.aten._to_copy(call.args[0], **call.kwargs)

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        return Cost(flops=0.0, bytes=float(n * (itemsize(c.dtype) + itemsize(self._to(c)))),
                    dtype=c.dtype)
