"""aten::index — advanced indexing ``self[indices]`` with a list of optional integer index
tensors (overloads Tensor, Tensor_out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.aten._indexing import (
    ADV_CORE,
    esize,
    make_indices,
    numel,
    result_shape,
    with_specials,
)
from operators.inputs import bounded, randint, randn, with_layout
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

SOLUTION = ADV_CORE + r'''

def index_Tensor(self, indices):
    plan = _plan(self, indices)
    out = torch.empty(plan[0], dtype=self.dtype, device=self.device)
    _run(self, out, plan, list(out.stride()), 0)
    return out


def index_Tensor_out(self, indices, *, out):
    plan = _plan(self, indices)
    _run(self, out, plan, list(out.stride()), 0)
    return out
'''

# Places the broadcast index dims where the first indexed dim was even when the indexed dims
# are not adjacent (PyTorch moves them to the front then): right whenever they are adjacent or
# the first index is on dim 0.
NEGATIVE_ADJACENCY = SOLUTION.replace("first = adv[0] if adjacent else 0", "first = adv[0]")

# Forgets that negative indices count from the end: right for non-negative indices only.
NEGATIVE_NO_WRAP = SOLUTION.replace("s_off += tl.where(j < 0, j + z0, j) * d0",
                                    "s_off += j * d0")

_FLOATS = ("float16", "bfloat16", "float32")


@register("aten::index", version=2, kind=Kind.COMPUTE)
class Index(OperatorSpec):
    entry_points = (
        EntryPoint("index_Tensor", "index_Tensor(self: Tensor, indices: list[Tensor | None]) -> Tensor",
                   "self[indices] with PyTorch's advanced-indexing semantics; None entries are "
                   "full slices."),
        EntryPoint("index_Tensor_out",
                   "index_Tensor_out(self: Tensor, indices: list[Tensor | None], *, out: Tensor) "
                   "-> Tensor",
                   "Writes self[indices] into out (already of the result shape and self's dtype) "
                   "and returns out."),
    )
    description = (
        "Advanced (integer-array) indexing, following PyTorch's `aten::index.Tensor(self, "
        "indices)`, i.e. `self[idx0, idx1, ...]` where `indices` is a list (possibly shorter than "
        "self.dim(); missing trailing entries are full slices) whose entries are None (a full "
        "slice `:` of that dim) or an integer index tensor (int64, sometimes int32) into that "
        "dim. At least one and at most three entries are tensors. The index tensors broadcast "
        "against each other to a shape B (0-d index tensors included); negative indices count "
        "from the end of their dim (i + size). Result shape: if the indexed dims are adjacent "
        "(no None between two index tensors), B's dims replace them in place, e.g. x of shape "
        "(A, D, E, F) with indices [None, i, j] (i, j broadcasting to B) gives (A, *B, F); if "
        "they are not adjacent, B's dims come first followed by all non-indexed dims in order, "
        "e.g. [i, None, j] on (A, D, E) gives (*B, D). Elements are copied exactly (nan, inf "
        "included). self may be non-contiguous (transposed or strided), have up to 5 dims, any "
        "dtype (float16, bfloat16, float32, int32); index tensors may be non-contiguous; the "
        "result may have zero elements. Indices are always in range."
    )
    solution = SOLUTION
    negatives = (
        Negative("non_adjacent_in_place", "keeps the broadcast index dims at the first indexed "
                 "dim even when the indexed dims are separated by a slice (PyTorch moves them to "
                 "the front)", NEGATIVE_ADJACENCY),
        Negative("no_negative_wrap", "uses negative indices as raw offsets instead of counting "
                 "from the end of the dim", NEGATIVE_NO_WRAP),
    )
    # A gather copies elements: the result must be bit-exact (NaN positions match).
    tolerances = {dt: Tolerance(0.0, 0.0) for dt in _FLOATS}

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("index_Tensor", "float32", (7, 17, 31), idx=(None, (5,), None), cpu=True),
            case("index_Tensor", "float16", (63, 145), idx=((20,),), neg=False, cpu=True),
            case("index_Tensor", "bfloat16", (5, 7, 11, 13), idx=((3, 1), None, (1, 4)),
                 cpu=True),
            case("index_Tensor", "float32", (5, 7, 11, 13), idx=(None, (2, 3), (2, 3)),
                 layout="transposed", idx_layout="transposed", cpu=True),
            case("index_Tensor", "int32", (33, 65), idx=((), (9,)), cpu=True),
            case("index_Tensor", "float32", (20, 40), idx=(None, (6,)), itype="int32",
                 layout="strided", specials=True, cpu=True),
            case("index_Tensor", "float32", (6, 9, 5), idx=(None, (4, 1), None), neg=False,
                 cpu=True),
            case("index_Tensor_out", "float32", (9, 10, 12), idx=(None, None, (7,)), cpu=True),
            case("index_Tensor_out", "bfloat16", (4, 6, 8), idx=((3,), (3,), (3,)), cpu=True),
            case("index_Tensor", "float16", (3, 5, 6, 7), idx=(None, (2, 4), None, (4,)),
                 cpu=True),
            case("index_Tensor", "float32", (7, 31), idx=((0,),), cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case("index_Tensor", dt, (1024, 1024), idx=((4097,),), specials=True),
                case("index_Tensor", dt, (511, 257), idx=(None, (300,))),
                case("index_Tensor", dt, (16, 7, 57, 32, 29), idx=(None, (3, 1), None, (1, 5)),
                     layout="transposed"),
                case("index_Tensor", dt, (20, 320, 15), idx=((49, 1), (1, 63)),
                     idx_layout="transposed"),
                case("index_Tensor", dt, (145, 63, 7), idx=(None, None, (2, 3, 4)),
                     layout="strided"),
                case("index_Tensor_out", dt, (2, 3, 4, 5, 6), idx=((7,), None, (7,), None, (7,))),
            ]
        cs += [
            case("index_Tensor", "int32", (2065, 33), idx=((529,), None), itype="int32"),
            case("index_Tensor", "float32", (128, 64, 60), idx=((128, 1, 1), (1, 64, 1), (60,))),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        top = 12 if small else 90
        out = []
        for dt in (rng.choice(_FLOATS), rng.choice(_FLOATS), "int32"):
            rank = rng.choice([2, 3, 4])
            shape = [rng.randrange(1, top) for _ in range(rank)]
            n_idx = rng.randrange(1, min(rank, 3) + 1)
            dims = sorted(rng.sample(range(rank), n_idx))
            bshape = [rng.randrange(1, 6 if small else 40) for _ in range(rng.choice([0, 1, 2]))]
            spec: list[object] = [None] * (max(dims) + 1)
            for d in dims:
                # each index tensor takes B's shape or broadcasts along one of B's dims
                s = list(bshape)
                if s and rng.random() < 0.4:
                    s[rng.randrange(len(s))] = 1
                spec[d] = tuple(s)
            # bound the input and the result (kept dims times the broadcast index shape)
            def size_of(s: list[int], sp: tuple[object, ...] = tuple(spec)) -> int:
                return max(numel(s), numel(result_shape(s, sp)))

            shape = bounded(shape, size_of=size_of)
            out.append(case(rng.choice(["index_Tensor", "index_Tensor_out"]), dt, shape,
                            idx=tuple(spec), layout=rng.choice(["contiguous", "transposed",
                                                                 "strided"]),
                            itype=rng.choice(["int64", "int64", "int32"]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            # 64-128 MB of traffic each: rows, columns, and a 2-D broadcast grid of rows
            case("index_Tensor", "float32", (8192, 2048), idx=((8192,),)),
            case("index_Tensor", "bfloat16", (4096, 8192), idx=(None, (4096,))),
            case("index_Tensor", "float16", (64, 256, 1024), idx=((64, 1), (1, 256))),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        if c.dtype == "int32":
            x = randint(c.shape, c.dtype, gen, low=-1000, high=1000, layout=layout)
        else:
            x = randn(c.shape, c.dtype, gen)
            if c.get("specials"):
                x = with_specials(x, gen)
            x = with_layout(x, layout)
        indices = make_indices(c["idx"], c.shape, gen, neg=c.get("neg", True), unique=False,
                               itype=c.get("itype", "int64"),
                               idx_layout=c.get("idx_layout", "contiguous"))
        if c.entry == "index_Tensor_out":
            out = torch.empty(result_shape(c.shape, c["idx"]), dtype=x.dtype)
            return Call(c.entry, (x, indices), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, (x, indices))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, indices = call.args[0], call.args[1]
        if not x.dtype.is_floating_point:
            return (Expected(torch.ops.aten.index.Tensor(x, indices), x.dtype),)
        return (Expected(torch.ops.aten.index.Tensor(x.double(), indices), x.dtype),)

    def baseline(self, call: Call) -> object:
        x, indices = call.args[0], call.args[1]
        if call.entry == "index_Tensor_out":
            return torch.ops.aten.index.Tensor_out(x, indices, out=call.kwargs["out"])
        return torch.ops.aten.index.Tensor(x, indices)

    def cost(self, c: Case) -> Cost:
        n_out = numel(result_shape(c.shape, c["idx"]))
        n_idx = sum(numel(s) for s in c["idx"] if s is not None)
        size = esize(c.torch_dtype)
        itemsize = 4 if c.get("itype") == "int32" else 8
        # each result element read once from self and written once, plus the index tensors
        return Cost(flops=0.0, bytes=float(2 * n_out * size + n_idx * itemsize), dtype=c.dtype)

