"""aten::cat — tensors joined along an existing dim, sizes along it may differ (overloads
default, out)."""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence

import torch

from operators.aten._copying import (
    COPY_SOURCE,
    EXACT,
    convert,
    itemsize,
    make_values,
    numel,
)
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
    dtype_from_name,
)

SOLUTION = COPY_SOURCE + r'''

def _result_dtype(tensors):
    # torch.promote_types over the inputs' dtypes, via result_type on empty stand-ins (a
    # dimensioned stand-in for dimensioned tensors, so no input counts as a "scalar")
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        holder = torch.empty((0,) if t.dim() else (), dtype=dtype, device=t.device)
        dtype = torch.result_type(holder, t)
    return dtype


def _legacy_empty(t):
    # PyTorch skips 1-D tensors of shape (0,) whatever the other tensors' shapes
    return t.dim() == 1 and t.shape[0] == 0


def _cat_into(tensors, dim, out):
    # one copy launch per input, into its slice of out along dim (converting to out's dtype)
    offset = 0
    for t in tensors:
        if _legacy_empty(t):
            continue
        size = t.shape[dim]
        if t.numel() > 0:
            _copy(out.narrow(dim, offset, size), t)
        offset += size
    return out


def _dim(tensors, dim):
    for t in tensors:
        if not _legacy_empty(t):
            return dim % t.dim()
    return 0


def cat(tensors, dim=0):
    dtype = _result_dtype(tensors)
    d = _dim(tensors, dim)
    kept = [t for t in tensors if not _legacy_empty(t)]
    if not kept:
        return torch.empty((0,), dtype=dtype, device=tensors[0].device)
    shape = list(kept[0].shape)
    shape[d] = sum(t.shape[d] for t in kept)
    out = torch.empty(shape, dtype=dtype, device=kept[0].device)
    return _cat_into(tensors, d, out)


def cat_out(tensors, dim=0, *, out):
    return _cat_into(tensors, _dim(tensors, dim), out)
'''

# Gives the result the first tensor's dtype instead of promoting over all of them.
NEGATIVE_NO_PROMOTION = SOLUTION.replace("    dtype = _result_dtype(tensors)\n",
                                         "    dtype = tensors[0].dtype\n")

# Reads every input as if it were contiguous: right for contiguous inputs only.
NEGATIVE_ROW_MAJOR = SOLUTION.replace(
    "    if src_strides is None:\n        src_strides = src.stride()\n",
    "    if src_strides is None:\n        src_strides = torch.empty(src.shape).stride()\n")

_FLOATS = ("float16", "bfloat16", "float32")


@register("aten::cat", version=2, kind=Kind.COMPUTE)
class Cat(OperatorSpec):
    entry_points = (
        EntryPoint("cat", "cat(tensors: list[Tensor], dim: int = 0) -> Tensor",
                   "The tensors joined along dim, in order."),
        EntryPoint("cat_out", "cat_out(tensors: list[Tensor], dim: int = 0, *, out: Tensor) -> "
                   "Tensor",
                   "Writes cat(tensors, dim) into out (already of the joined shape and the "
                   "result dtype) and returns out."),
    )
    description = (
        "Concatenation, following PyTorch's `torch.cat(tensors, dim)`: the tensors (a list, 1 to 5 "
        "dims, all of the same rank) must match in every dim but `dim` (negative counts from the "
        "end); the result stacks them along `dim` in list order, so its size there is the sum of "
        "theirs, which may differ from tensor to tensor and may be 0. As in PyTorch, 1-D tensors "
        "of shape (0,) are skipped whatever the others' rank (they still take part in dtype "
        "promotion). The result dtype is PyTorch's type promotion over all the inputs' dtypes "
        "(float16 with float32 gives float32, int32 with int64 gives int64, bool with int32 gives "
        "int32); values are converted exactly. Inputs may be non-contiguous (transposed, strided "
        "slices). Dtypes: float16, bfloat16, float32, int32, int64, bool. `cat_out` writes into a "
        "given `out`."
    )
    solution = SOLUTION
    negatives = (
        Negative("no_dtype_promotion", "gives the result the first tensor's dtype instead of "
                 "promoting over all inputs", NEGATIVE_NO_PROMOTION),
        Negative("assumes_contiguous_inputs", "reads every input as contiguous row-major, "
                 "ignoring its strides", NEGATIVE_ROW_MAJOR),
    )
    tolerances = EXACT  # pure data movement; the covered promotions are exact widenings

    def cases(self) -> Sequence[Case]:
        # shape: the inputs' common shape (its size at dim is ignored); sizes: each input's
        # size along dim; dtypes: per-input dtypes when they differ; legacy_at: where a 1-D
        # (0,) tensor is inserted; layout applies to every other input (the others contiguous).
        cs: list[Case] = [
            case("cat", "float32", (63, 0), dim=1, sizes=(5, 17, 1), cpu=True),
            case("cat", "float16", (0, 31), dim=0, sizes=(7, 2, 13), layout="transposed",
                 cpu=True),
            case("cat", "bfloat16", (3, 0, 29), dim=-2, sizes=(11, 4), layout="strided",
                 cpu=True),
            case("cat", "int32", (0, 12), dim=0, sizes=(9, 0, 6), legacy_at=1, cpu=True),
            case("cat", "float16", (17, 0), dim=-1, sizes=(23, 8),
                 dtypes=("float16", "float32"), cpu=True),
            case("cat_out", "float32", (5, 6, 0), dim=2, sizes=(3, 40, 1, 2),
                 layout="transposed", cpu=True),
            case("cat", "bool", (0,), dim=0, sizes=(100, 1, 37), cpu=True),
            case("cat", "int64", (0, 3), dim=1, sizes=(0, 0), legacy_at=0, cpu=True),
        ]
        for dt in (*_FLOATS, "int32", "int64", "bool"):
            cs += [
                case("cat", dt, (0, 1024), dim=0, sizes=(1024, 1, 511, 2065)),
                case("cat", dt, (257, 0), dim=1, sizes=(63, 145, 7), layout="transposed"),
                case("cat", dt, (16, 7, 0, 32), dim=2, sizes=(57, 1, 5), layout="strided"),
                case("cat_out", dt, (2, 0, 4, 5, 129), dim=-4, sizes=(3, 1, 9), legacy_at=2),
                case("cat", dt, (33, 0), dim=1, sizes=(tuple(range(1, 40)))),
            ]
        cs += [
            case("cat", "bfloat16", (64, 0), dim=1, sizes=(100, 3),
                 dtypes=("bfloat16", "float32")),
            case("cat_out", "int32", (0, 77), dim=0, sizes=(50, 60),
                 dtypes=("int32", "int64")),
            case("cat", "bool", (9, 0), dim=1, sizes=(5, 6), dtypes=("bool", "int32")),
            case("cat", "float32", (0, 50), dim=0, sizes=(7, 9), legacy_at=1,
                 legacy_dtype="float64"),
            case("cat", "float32", (0,), dim=0, sizes=(0, 0), legacy_at=0),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(2 if small else 6):
            rank = rng.choice([1, 2, 3, 4])
            shape = [rng.randrange(1, 7 if small else 30) for _ in range(rank)]
            shape[-1] = rng.randrange(2, 60 if small else 1000)
            dim = rng.randrange(-rank, rank)
            shape[dim] = 0
            sizes = tuple(rng.randrange(0, 9 if small else 200)
                          for _ in range(rng.randrange(1, 6)))
            # bound the result: the concatenated length times the other dims
            total = max(1, sum(sizes))
            def size_of(s: list[int], d: int = dim % rank, n: int = total) -> int:
                return n * numel([x for j, x in enumerate(s) if j != d])

            shape = bounded(shape, keep=(dim,), size_of=size_of)
            params: dict[str, object] = {"dim": dim, "sizes": sizes,
                                         "layout": rng.choice(["contiguous", "transposed",
                                                               "strided"])}
            if rng.random() < 0.3:
                params["legacy_at"] = rng.randrange(len(sizes) + 1)
            out.append(case(rng.choice(["cat", "cat_out"]),
                            rng.choice((*_FLOATS, "int32", "bool")), shape, cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("cat", "float32", (0, 8192), dim=0, sizes=(4096, 2048, 2048)),
            case("cat", "bfloat16", (8192, 0), dim=1, sizes=(4096, 1024, 3072)),
            case("cat", "float16", (32, 0, 128), dim=1, sizes=tuple([1024] * 8)),
        ]

    @staticmethod
    def _inputs_meta(c: Case) -> list[tuple[tuple[int, ...], str, str]]:
        """(shape, dtype, layout) of each input, in order."""
        dim = c["dim"] % len(c.shape)
        dtypes = c.get("dtypes")
        metas = []
        for i, s in enumerate(c["sizes"]):
            shape = list(c.shape)
            shape[dim] = s
            dt = dtypes[i % len(dtypes)] if dtypes else c.dtype
            lay = c.get("layout", "contiguous") if i % 2 == 0 else "contiguous"
            metas.append((tuple(shape), dt, lay))
        legacy = c.get("legacy_at")
        if legacy is not None:
            metas.insert(legacy, ((0,), c.get("legacy_dtype", c.dtype), "contiguous"))
        return metas

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        tensors = [make_values(shape, dt, None, gen, lay)
                   for shape, dt, lay in self._inputs_meta(c)]
        if c.entry == "cat_out":
            ref = torch.cat(tensors, c["dim"])
            out = torch.empty(ref.shape, dtype=ref.dtype)
            return Call(c.entry, (tensors, c["dim"]), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, (tensors, c["dim"]))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        tensors, dim = call.args
        dtype = functools.reduce(torch.promote_types, [t.dtype for t in tensors])
        value = torch.cat([convert(t, dtype) for t in tensors], dim)
        return (Expected(value, dtype),)

    def baseline(self, call: Call) -> object:
        tensors, dim = call.args
        if call.entry == "cat_out":
            return torch.cat(tensors, dim, out=call.kwargs["out"])
        return torch.cat(tensors, dim)

    def cost(self, c: Case) -> Cost:
        moved = 0
        out_dtype = functools.reduce(torch.promote_types,
                                     [dtype_from_name(dt) for _, dt, _ in self._inputs_meta(c)])
        for shape, dt, _ in self._inputs_meta(c):
            moved += numel(shape) * (itemsize(dt) + itemsize(out_dtype))
        return Cost(flops=0.0, bytes=float(moved), dtype=c.dtype)
