"""aten::rot90 — ``self`` rotated by ``k`` quarter turns in the plane of ``dims``, from the
first dim towards the second (overloads default, out)."""

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

def _rotated_shape(self, k, dims):
    shape = list(self.shape)
    nd = len(shape)
    a, b = dims[0] % nd, dims[1] % nd
    if k % 2 == 1:
        shape[a], shape[b] = shape[b], shape[a]
    return shape


def _rot90(self, k, dims, out):
    # The rotation is a strided view of self over out's index space: out[j] = self[i] with
    #   k=1: i_a = j_b,           i_b = n_b - 1 - j_a   (flip b, then swap a and b)
    #   k=2: i_a = n_a - 1 - j_a, i_b = n_b - 1 - j_b   (flip both)
    #   k=3: i_a = n_a - 1 - j_b, i_b = j_a             (flip a, then swap a and b)
    # i.e. negative strides from a base offset, which the copy kernel reads directly.
    nd = self.dim()
    a, b = dims[0] % nd, dims[1] % nd
    k = k % 4
    st = list(self.stride())
    sa, sb = st[a], st[b]
    na, nb = self.shape[a], self.shape[b]
    base = 0
    if k == 1:
        st[a], st[b] = -sb, sa
        base = (nb - 1) * sb
    elif k == 2:
        st[a], st[b] = -sa, -sb
        base = (na - 1) * sa + (nb - 1) * sb
    elif k == 3:
        st[a], st[b] = sb, -sa
        base = (na - 1) * sa
    return _copy(out, self, st, base)


def rot90(self, k=1, dims=(0, 1)):
    out = torch.empty(_rotated_shape(self, k, dims), dtype=self.dtype, device=self.device)
    return _rot90(self, k, dims, out)


def rot90_out(self, k=1, dims=(0, 1), *, out):
    return _rot90(self, k, dims, out)
'''

# Takes |k|: right for k >= 0 (and k = -2, -4), rotates the wrong way for k = -1 and -3.
NEGATIVE_ABS_K = SOLUTION.replace("    k = k % 4\n", "    k = abs(k) % 4\n")

# Swaps the two dims for a quarter turn but forgets the flip: a transpose, not a rotation.
NEGATIVE_NO_FLIP = SOLUTION.replace(
    "        st[a], st[b] = -sb, sa\n        base = (nb - 1) * sb\n",
    "        st[a], st[b] = sb, sa\n")

_DTYPES = ("float16", "bfloat16", "float32", "int32", "bool")


@register("aten::rot90", version=2, kind=Kind.COMPUTE)
class Rot90(OperatorSpec):
    entry_points = (
        EntryPoint("rot90", "rot90(self: Tensor, k: int = 1, dims: list[int] = (0, 1)) -> Tensor",
                   "self rotated by k quarter turns in the plane of dims (two distinct dims, "
                   "possibly negative), from dims[0] towards dims[1]."),
        EntryPoint("rot90_out",
                   "rot90_out(self: Tensor, k: int = 1, dims: list[int] = (0, 1), *, "
                   "out: Tensor) -> Tensor",
                   "Writes rot90(self, k, dims) into out (already of the rotated shape, self's "
                   "dtype) and returns out."),
    )
    description = (
        "Rotation by 90 degrees, following PyTorch's `torch.rot90(self, k, dims)`: `k` is any "
        "integer (taken modulo 4, so -1 is 3 and 5 is 1); `dims` are two distinct dims "
        "(negative ones count from the end) of a tensor of 2 to 5 dims. With a = dims[0], "
        "b = dims[1], n_a and n_b their sizes: k = 1 is `self.flip(b).transpose(a, b)` (result "
        "dims a and b have sizes n_b and n_a, `out[..j_a..j_b..] = self[..j_b..n_b-1-j_a..]`), "
        "k = 2 is `self.flip(a, b)`, k = 3 is `self.flip(a).transpose(a, b)`, k = 0 a copy. The "
        "result is a new tensor with self's dtype (float16, bfloat16, float32, int32, bool); "
        "values are moved bit-exactly. Inputs may be non-contiguous (transposed or strided) "
        "and have zero-size dims."
    )
    solution = SOLUTION
    negatives = (
        Negative("abs_k", "uses |k| mod 4, rotating the wrong way for negative odd k",
                 NEGATIVE_ABS_K),
        Negative("transpose_without_flip", "for k = 1 swaps the two dims without reversing "
                 "one, a transpose instead of a rotation", NEGATIVE_NO_FLIP),
    )
    tolerances = EXACT  # pure data movement

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("rot90", "float32", (63, 145), k=1, dims=(0, 1), cpu=True),
            case("rot90", "float16", (33, 65), k=-1, dims=(0, 1), layout="transposed",
                 cpu=True),
            case("rot90", "bfloat16", (7, 17, 31), k=2, dims=(2, 0), cpu=True),
            case("rot90", "int32", (5, 7, 11, 13), k=3, dims=(-1, 1), layout="strided",
                 cpu=True),
            case("rot90", "float32", (49, 63), k=0, dims=(1, 0), cpu=True),
            case("rot90_out", "float32", (7, 17, 31), k=5, dims=(-3, -1), cpu=True),
            case("rot90", "bool", (24, 50), k=-3, dims=(1, 0), cpu=True),
            case("rot90", "float32", (0, 9), k=1, dims=(0, 1), cpu=True),
        ]
        dims_pairs = ((0, 1), (1, 0), (-1, -2), (0, 2), (1, 3), (-1, 0))
        for dt in _DTYPES:
            for k in range(-3, 6):
                dims = dims_pairs[(k + 3) % len(dims_pairs)]
                shape = (16, 7, 57, 32) if max(abs(d) for d in dims) >= 3 else (511, 257, 3)
                cs.append(case("rot90" if k % 2 else "rot90_out", dt, shape, k=k, dims=dims,
                               layout=("contiguous", "transposed", "strided")[k % 3]))
            cs += [
                case("rot90", dt, (1024, 1024), k=1, dims=(0, 1)),
                case("rot90", dt, (2, 3, 4, 5, 129), k=3, dims=(4, 1), layout="transposed"),
                case("rot90_out", dt, (4097, 3), k=-1, dims=(1, 0)),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(2 if small else 8):
            rank = rng.choice([2, 3, 4])
            shape = [rng.randrange(1, 9 if small else 40) for _ in range(rank)]
            shape[-1] = rng.randrange(2, 200 if small else 3000)
            shape = bounded(shape)
            a = rng.randrange(-rank, rank)
            b = rng.choice([d for d in range(-rank, rank) if d % rank != a % rank])
            out.append(case(rng.choice(["rot90", "rot90_out"]), rng.choice(_DTYPES), shape,
                            k=rng.randrange(-3, 6), dims=(a, b),
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("rot90", "float32", (8192, 8192), k=1, dims=(0, 1)),
            case("rot90", "bfloat16", (8192, 8192), k=2, dims=(0, 1)),
            case("rot90", "float16", (64, 256, 56, 56), k=-1, dims=(2, 3)),
        ]

    @staticmethod
    def _rotated(x: torch.Tensor, k: int, dims: tuple[int, int]) -> torch.Tensor:
        return torch.rot90(x, k, list(dims))

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        x = make_values(c.shape, c.dtype, None, gen, c.get("layout", "contiguous"))
        k, dims = c["k"], list(c["dims"])
        if c.entry == "rot90_out":
            out = torch.empty(self._rotated(x, k, c["dims"]).shape, dtype=x.dtype)
            return Call(c.entry, (x, k, dims), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, (x, k, dims))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, k, dims = call.args
        return (Expected(convert(self._rotated(x, k, dims), x.dtype), x.dtype),)

    def baseline(self, call: Call) -> object:
        x, k, dims = call.args
        if call.entry == "rot90_out":
            return torch.ops.aten.rot90.out(x, k, dims, out=call.kwargs["out"])
        return torch.rot90(x, k, dims)

    def cost(self, c: Case) -> Cost:
        return Cost(flops=0.0, bytes=float(2 * numel(c.shape) * itemsize(c.dtype)),
                    dtype=c.dtype)
