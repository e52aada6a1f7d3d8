"""aten::copy_ — ``self[...] = src`` in place, broadcasting src and converting its dtype
(overload default)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._copying import (
    COPY_SOURCE,
    EXACT,
    arrange,
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
)

SOLUTION = COPY_SOURCE + r'''

def copy_(self, src, non_blocking=False):
    # src broadcasts to self's shape (expand gives the repeated dims stride 0); the kernel
    # converts to self's dtype on the way.
    return _copy(self, src.expand(self.shape))
'''

# Converts through float32: right for float16/bfloat16/float32 data, wrong for float64 and for
# integers beyond 2**24 (and for integer narrowing, which must wrap).
NEGATIVE_VIA_FP32 = SOLUTION.replace(
    "x.to(dst_ptr.dtype.element_ty), mask=mask)",
    "x.to(tl.float32).to(dst_ptr.dtype.element_ty), mask=mask)")

# Writes self as if it were contiguous: right for contiguous self, wrong for a transposed self
# or a slice of a bigger tensor.
NEGATIVE_CONTIGUOUS_SELF = SOLUTION.replace(
    "dims = _plan(dst.shape, src_strides, dst.stride())",
    "dims = _plan(dst.shape, src_strides, torch.empty(dst.shape).stride())")


@register("aten::copy_", version=2, kind=Kind.COMPUTE)
class CopyInplace(OperatorSpec):
    entry_points = (
        EntryPoint("copy_", "copy_(self: Tensor, src: Tensor, non_blocking: bool = False) -> "
                   "Tensor",
                   "Writes src (broadcast to self's shape, converted to self's dtype) into self "
                   "in place and returns self."),
    )
    description = (
        "In-place copy with broadcasting and dtype conversion, following PyTorch's "
        "`self.copy_(src)`: every element of `self` (any strides: contiguous, transposed, or a "
        "slice of a bigger tensor with gaps) becomes the corresponding element of `src` "
        "broadcast to `self`'s shape, converted to `self`'s dtype; returns `self`. Dtypes: "
        "float16, bfloat16, float32, float64, int8, uint8, int16, int32, int64, bool, in any "
        "combination. Conversions follow PyTorch (C casts): float narrowing rounds to nearest "
        "even, overflowing to +-inf and keeping subnormals; float -> integer truncates toward "
        "zero (only values inside the target's range are given); integer -> integer keeps the "
        "low bits (two's-complement wrap, e.g. int32 300 -> int8 44, int8 -3 -> uint8 253); "
        "-> bool is `x != 0` (NaN -> True); bool -> number gives 0 or 1; integer -> float "
        "rounds to nearest even (|x| <= 2**24 for float16/bfloat16 targets). float64 and int64 "
        "values must not pass through float32. Results are bit-exact. `non_blocking` has no "
        "effect on the values."
    )
    solution = SOLUTION
    negatives = (
        Negative("converts_via_float32", "routes every element through float32, losing float64 "
                 "precision and large int64 values and breaking integer wrap-around",
                 NEGATIVE_VIA_FP32),
        Negative("assumes_contiguous_self", "writes self as if it were contiguous; wrong for a "
                 "transposed self or a slice", NEGATIVE_CONTIGUOUS_SELF),
    )
    tolerances = EXACT  # every covered conversion is exact or correctly rounded
    # v2: a float64 -> float32 broadcast case no longer has a constant output

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            # (self dtype, shape; src dtype, src shape)
            case("copy_", "float16", (63, 145), src="float32", src_shape=(63, 145), cpu=True),
            case("copy_", "bfloat16", (7, 17, 31), src="float32", src_shape=(17, 31),
                 self_layout="transposed", cpu=True),
            case("copy_", "int32", (33, 65), src="float16", src_shape=(33, 65),
                 layout="transposed", cpu=True),
            case("copy_", "float64", (5, 7, 11, 13), src="int64", src_shape=(5, 1, 11, 13),
                 self_layout="sliced", cpu=True),
            case("copy_", "int8", (49, 63), src="int32", src_shape=(49, 63), layout="strided",
                 cpu=True),
            case("copy_", "bool", (2065,), src="float32", src_shape=(2065,), cpu=True),
            case("copy_", "float32", (24, 50), src="bool", src_shape=(24, 1), cpu=True),
            case("copy_", "float32", (40, 30), src="float32", src_shape=(1, 30),
                 self_layout="strided", cpu=True),
            case("copy_", "float32", (0, 30), src="float16", src_shape=(0, 30), cpu=True),
        ]
        pairs = [
            ("float16", "float32"), ("bfloat16", "float32"), ("float32", "float16"),
            ("float32", "bfloat16"), ("float16", "bfloat16"), ("bfloat16", "float16"),
            ("float64", "float32"), ("float32", "float64"), ("float32", "float32"),
            ("int32", "float32"), ("int64", "bfloat16"), ("uint8", "float32"),
            ("int8", "float16"), ("bool", "float16"), ("bool", "int32"),
            ("float32", "int32"), ("float16", "int64"), ("bfloat16", "int16"),
            ("float32", "uint8"), ("float32", "bool"), ("int8", "int32"), ("uint8", "int8"),
            ("int32", "int64"), ("int64", "int32"), ("int16", "uint8"), ("int64", "bool"),
            ("float64", "int64"), ("int64", "float64"),
        ]
        for dst, src in pairs:
            cs += [
                case("copy_", dst, (1024, 1024), src=src, src_shape=(1024, 1024)),
                case("copy_", dst, (511, 257), src=src, src_shape=(511, 257),
                     layout="transposed"),
                case("copy_", dst, (16, 7, 57, 32), src=src, src_shape=(7, 1, 32),
                     self_layout="permuted"),
                case("copy_", dst, (20, 320, 15), src=src, src_shape=(20, 320, 15),
                     layout="strided", self_layout="sliced"),
            ]
        cs += [
            case("copy_", "float16", (), src="float32", src_shape=()),
            case("copy_", "int32", (40, 30), src="float32", src_shape=()),
            case("copy_", "float32", (3, 4097), src="float64", src_shape=(1, 4097)),
            case("copy_", "bfloat16", (16, 64, 33, 31), src="float32",
                 src_shape=(16, 64, 33, 31), self_layout="channels_last"),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        names = ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32",
                 "int64", "bool")
        out = []
        for _ in range(2 if small else 8):
            dst, src = rng.choice(names), rng.choice(names)
            while not covered(dst, src, small):
                dst, src = rng.choice(names), rng.choice(names)
            rank = rng.choice([1, 2, 3])
            shape = [rng.randrange(1, 9 if small else 40) for _ in range(rank)]
            shape[-1] = rng.randrange(2, 200 if small else 3000)
            src_shape = [d if rng.random() < 0.7 else 1 for d in shape][rng.randrange(rank):]
            out.append(case("copy_", dst, shape, src=src, src_shape=src_shape,
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            self_layout=rng.choice(["contiguous", "transposed", "sliced"]),
                            cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("copy_", "bfloat16", (8192, 8192), src="float32", src_shape=(8192, 8192)),
            case("copy_", "float32", (8192, 8192), src="float16", src_shape=(8192, 8192)),
            case("copy_", "float16", (8192, 8192), src="float16", src_shape=(8192, 8192),
                 self_layout="transposed"),
            case("copy_", "float32", (16384, 4096), src="float32", src_shape=(4096,)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        src = make_values(c["src_shape"], c["src"], c.dtype, gen, c.get("layout", "contiguous"),
                          cpu=c.cpu)
        # self's values are never read (the harness poisons it); only its layout matters
        target = arrange(torch.zeros(c.shape, dtype=c.torch_dtype),
                         c.get("self_layout", "contiguous"))
        return Call(c.entry, (target, src), outputs=(Out.arg(0),), mutable=frozenset({0}),
                    out_buffers=frozenset({0}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        target, src = call.args[0], call.args[1]
        value = convert(src, target.dtype).expand(target.shape).contiguous()
        return (Expected(value, target.dtype),)

    def baseline(self, call: Call) -> object:
        return call.args[0].copy_(call.args[1])

    def cost(self, c: Case) -> Cost:
        read = numel(c["src_shape"]) * itemsize(c["src"])
        return Cost(flops=0.0, bytes=float(read + numel(c.shape) * itemsize(c.dtype)),
                    dtype=c.dtype)
