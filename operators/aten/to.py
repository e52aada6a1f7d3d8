"""aten::to — ``Tensor.to(dtype)``: a copy of ``self`` converted to another dtype (overloads
dtype, dtype_layout, other)."""

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
    Tier,
    case,
    dtype_from_name,
)

SOLUTION = COPY_SOURCE + r'''

def _to(self, dtype, copy, memory_format):
    if dtype is None:
        dtype = self.dtype
    if dtype == self.dtype and not copy and memory_format is None:
        return self  # nothing to change: PyTorch returns self itself
    if memory_format is None:  # preserve_format: keep self's strides when self is dense
        out = torch.empty_like(self, dtype=dtype)
    else:
        out = torch.empty_like(self, dtype=dtype, memory_format=memory_format)
    return _copy(out, self)


def to_dtype(self, dtype, non_blocking=False, copy=False, *, memory_format=None):
    return _to(self, dtype, copy, memory_format)


def to_dtype_layout(self, *, dtype=None, layout=None, device=None, pin_memory=None,
                    non_blocking=False, copy=False, memory_format=None):
    return _to(self, dtype, copy, memory_format)


def to_other(self, other, non_blocking=False, copy=False, *, memory_format=None):
    return _to(self, other.dtype, copy, memory_format)
'''

# Converts through float32: right for float16/bfloat16/float32 data, wrong for int64 beyond
# 2**24, float64 precision and integer narrowing (which must wrap).
NEGATIVE_VIA_FP32 = SOLUTION.replace(
    "x.to(dst_ptr.dtype.element_ty), mask=mask)",
    "x.to(tl.float32).to(dst_ptr.dtype.element_ty), mask=mask)")

# Allocates the result like self, dtype included: right only when the dtype does not change.
NEGATIVE_KEEPS_DTYPE = SOLUTION.replace(
    "out = torch.empty_like(self, dtype=dtype)", "out = torch.empty_like(self)")

_ENTRIES = ("to_dtype", "to_dtype_layout", "to_other")


@register("aten::to", version=2, kind=Kind.COMPUTE)
class To(OperatorSpec):
    entry_points = (
        EntryPoint("to_dtype",
                   "to_dtype(self: Tensor, dtype: ScalarType, non_blocking: bool = False, "
                   "copy: bool = False, *, memory_format: MemoryFormat | None = None) -> Tensor",
                   "self converted to dtype (a torch.dtype), as `self.to(dtype)`."),
        EntryPoint("to_dtype_layout",
                   "to_dtype_layout(self: Tensor, *, dtype: ScalarType | None = None, "
                   "layout: Layout | None = None, device: Device | None = None, "
                   "pin_memory: bool | None = None, non_blocking: bool = False, "
                   "copy: bool = False, memory_format: MemoryFormat | None = None) -> Tensor",
                   "The keyword form `self.to(dtype=..., copy=...)`; layout, device and "
                   "pin_memory are None (this device, strided)."),
        EntryPoint("to_other",
                   "to_other(self: Tensor, other: Tensor, non_blocking: bool = False, "
                   "copy: bool = False, *, memory_format: MemoryFormat | None = None) -> Tensor",
                   "self converted to other's dtype (other is on the same device), as "
                   "`self.to(other)`."),
    )
    description = (
        "Dtype conversion, following PyTorch's `Tensor.to(dtype)`: a tensor with `self`'s shape "
        "and values converted to `dtype` (for `to_other`, `other.dtype`). When nothing changes "
        "(same dtype, `copy=False`, no memory_format) PyTorch returns `self` itself; every case "
        "here either changes the dtype or passes `copy=True`, which demands a new tensor (never a "
        "view of self). `self` has 0 to 5 dims, possibly zero elements, and any strides "
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
        Negative("keeps_self_dtype", "allocates the result with self's dtype, so only copies "
                 "that keep the dtype are right", NEGATIVE_KEEPS_DTYPE),
    )
    tolerances = EXACT  # every covered conversion is exact or correctly rounded
    # v2: the result's strides are checked (preserve_format), as PyTorch gives them

    def cases(self) -> Sequence[Case]:
        # case dtype = self's dtype; "to" = the target dtype
        cs: list[Case] = [
            case("to_dtype", "float32", (63, 145), to="float16", cpu=True),
            case("to_dtype", "bfloat16", (33, 65), to="float32", layout="transposed", cpu=True),
            case("to_dtype", "float16", (7, 17, 31), to="int32", layout="strided", cpu=True),
            case("to_dtype", "int32", (49, 63), to="int8", cpu=True),
            case("to_dtype", "int64", (5, 7, 11, 13), to="int64", copy=True, layout="sliced",
                 cpu=True),
            case("to_dtype_layout", "float32", (2065,), to="bool", cpu=True),
            case("to_dtype_layout", "bool", (24, 50), to="float32", layout="transposed",
                 cpu=True),
            case("to_other", "float32", (2, 6, 9, 11), to="bfloat16", layout="channels_last",
                 cpu=True),
            case("to_dtype", "float32", (), to="float64", cpu=True),
            case("to_dtype", "float16", (0, 7), to="float32", cpu=True),
        ]
        for i, (dst, src) in enumerate(PAIRS):
            entry = _ENTRIES[i % 3]
            cs += [
                case(entry, src, (1024, 1024), to=dst),
                case(entry, src, (511, 257), to=dst, layout="transposed"),
                case(entry, src, (16, 7, 57, 32, 29), to=dst, layout="permuted"),
                case(entry, src, (20, 320, 15), to=dst, layout="strided"),
                case(entry, src, (2, 3, 4, 5, 6), to=dst, layout="sliced"),
            ]
        for dt in DTYPES:
            cs.append(case(_ENTRIES[len(cs) % 3], dt, (1000, 33), to=dt, copy=True,
                           layout="transposed"))
        cs += [
            case("to_dtype", "float32", (16, 64, 33, 31), to="float16", layout="channels_last"),
            case("to_other", "bfloat16", (), to="float32"),
            case("to_dtype_layout", "int32", (4097,), to="float64"),
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
            params: dict[str, object] = {"to": dst}
            if dst == src:
                params["copy"] = True
            params["layout"] = rng.choice(["contiguous", "transposed", "strided", "sliced"])
            out.append(case(rng.choice(_ENTRIES), src, shape, cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("to_dtype", "float32", (8192, 8192), to="bfloat16"),
            case("to_dtype", "bfloat16", (8192, 8192), to="float32"),
            case("to_dtype", "float16", (8192, 8192), to="float32", layout="transposed"),
            case("to_dtype", "float32", (8192, 8192), to="int32"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = make_values(c.shape, c.dtype, c["to"], gen, c.get("layout", "contiguous"),
                        cpu=c.cpu)
        dtype = dtype_from_name(c["to"])
        copy = bool(c.get("copy", False))
        if c.entry == "to_other":
            other = torch.zeros((3,), dtype=dtype)
            return Call(c.entry, (x, other), {"copy": copy} if copy else {})
        if c.entry == "to_dtype_layout":
            return Call(c.entry, (x,), {"dtype": dtype, "copy": copy})
        return Call(c.entry, (x, dtype, False, copy) if copy else (x, dtype))

    @staticmethod
    def _target(call: Call) -> torch.dtype:
        if call.entry == "to_other":
            other: torch.Tensor = call.args[1]
            return other.dtype
        dtype: torch.dtype = (call.kwargs["dtype"] if call.entry == "to_dtype_layout"
                              else call.args[1])
        return dtype

    def reference(self, call: Call) -> tuple[Expected, ...]:
        dt = self._target(call)
        x = call.args[0]
        # preserve_format: PyTorch's rule is empty_like's (self's strides when dense and
        # non-overlapping, else row-major or channels_last as suggested by self's strides)
        strides = tuple(torch.empty_like(x, dtype=dt).stride())
        return (Expected(convert(x, dt), dt, strides=strides),)

    def baseline(self, call: Call) -> object:
        x = call.args[0]
        if call.entry == "to_other":
            return x.to(call.args[1], copy=bool(call.kwargs.get("copy", False)))
        if call.entry == "to_dtype_layout":
            return x.to(dtype=call.kwargs["dtype"], copy=call.kwargs["copy"])
        return x.to(*call.args[1:])

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        return Cost(flops=0.0, bytes=float(n * (itemsize(c.dtype) + itemsize(c["to"]))),
                    dtype=c.dtype)
