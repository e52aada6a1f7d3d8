"""aten::gather — ``out[i][j][k] = self[index[i][j][k]][j][k]`` along ``dim`` (overloads default,
out)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.inputs import randint, randn, sprinkle_specials, with_layout
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

MAX_DIMS = 5
TILE = 4096


@triton.jit
def _take_kernel(src_ptr, idx_ptr, out_ptr, n_rows, C, r1, r2, r3,
                 is0, is1, is2, is3, isc,
                 ss0, ss1, ss2, ss3, ssc,
                 os0, os1, os2, os3, osc, s_dim,
                 BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # out[r, c] = src[base(r, c) + index[ioff(r, c)] * s_dim]: the output is viewed as rows (its
    # leading dims, up to four) by columns (its last dim); each operand has its own strides per
    # output dim (the index's are 0 where it does not vary, src's are 0 at the indexed dim).
    rows = (tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    cols = (tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)).to(tl.int64)
    rem = rows
    i3 = rem % r3
    rem = rem // r3
    i2 = rem % r2
    rem = rem // r2
    i1 = rem % r1
    i0 = rem // r1
    mask = (rows < n_rows)[:, None] & (cols < C)[None, :]
    i_off = (i0 * is0 + i1 * is1 + i2 * is2 + i3 * is3)[:, None] + cols[None, :] * isc
    s_off = (i0 * ss0 + i1 * ss1 + i2 * ss2 + i3 * ss3)[:, None] + cols[None, :] * ssc
    o_off = (i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3)[:, None] + cols[None, :] * osc
    idx = tl.load(idx_ptr + i_off, mask=mask, other=0).to(tl.int64)
    val = tl.load(src_ptr + s_off + idx * s_dim, mask=mask)
    tl.store(out_ptr + o_off, val, mask=mask)


def _take(src, index, out, i_strides, s_strides, s_dim):
    """Launch over out's dims (0-d counts as (1,)); strides are given per out dim."""
    shape = list(out.shape) or [1]
    o_strides = list(out.stride()) or [1]
    i_strides = list(i_strides) or [0]
    s_strides = list(s_strides) or [0]
    if len(shape) > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dims supported")
    if out.numel() == 0:
        return out
    pad = MAX_DIMS - len(shape)
    sizes = [1] * pad + shape
    i_strides = [0] * pad + i_strides
    s_strides = [0] * pad + s_strides
    o_strides = [0] * pad + o_strides
    C = sizes[-1]
    n_rows = out.numel() // C
    block_c = min(triton.next_power_of_2(C), 1024)
    block_r = max(1, min(triton.next_power_of_2(n_rows), TILE // block_c))
    grid = (triton.cdiv(n_rows, block_r), triton.cdiv(C, block_c))
    _take_kernel[grid](src, index, out, n_rows, C, sizes[1], sizes[2], sizes[3],
                       *i_strides, *s_strides, *o_strides, s_dim,
                       BLOCK_R=block_r, BLOCK_C=block_c,
                       num_warps=8 if block_r * block_c >= 4096 else 4)
    return out


def _gather(self, dim, index, out):
    nd = max(self.dim(), 1)
    dim = dim % nd
    i_strides = list(index.stride())
    s_strides = [0 if d == dim else self.stride(d) for d in range(self.dim())]
    s_dim = self.stride(dim) if self.dim() > 0 else 0
    return _take(self, index, out, i_strides, s_strides, s_dim)


def gather(self, dim, index, *, sparse_grad=False):
    out = torch.empty(index.shape, dtype=self.dtype, device=self.device)
    return _gather(self, dim, index, out)


def gather_out(self, dim, index, *, sparse_grad=False, out):
    return _gather(self, dim, index, out)
'''

# Reads index with the output's (contiguous) strides: right for a contiguous index, wrong for a
# transposed one or a window of a larger tensor.
NEGATIVE_CONTIGUOUS_INDEX = SOLUTION.replace(
    "    i_strides = list(index.stride())\n", "    i_strides = list(out.stride())\n")

# Addresses self as if it had index's shape (contiguous strides of index.shape): right when index
# and self have the same shape and self is contiguous, wrong when index is smaller than self.
NEGATIVE_INDEX_SHAPED_SELF = SOLUTION.replace(
    "    s_dim = self.stride(dim) if self.dim() > 0 else 0\n",
    "    packed = [1] * index.dim()\n"
    "    for d in range(index.dim() - 2, -1, -1):\n"
    "        packed[d] = packed[d + 1] * index.shape[d + 1]\n"
    "    s_strides = [0 if d == dim else packed[d] for d in range(index.dim())]\n"
    "    s_dim = packed[dim] if index.dim() > 0 else 0\n")

_FLOATS = ("float16", "bfloat16", "float32")


@register("aten::gather", version=1, kind=Kind.COMPUTE)
class Gather(OperatorSpec):
    entry_points = (
        EntryPoint("gather", "gather(self: Tensor, dim: int, index: Tensor, *, sparse_grad: bool "
                   "= False) -> Tensor",
                   "Picks, for each position of index, the entry of self along dim that index "
                   "names; the result has index's shape."),
        EntryPoint("gather_out", "gather_out(self: Tensor, dim: int, index: Tensor, *, "
                   "sparse_grad: bool = False, out: Tensor) -> Tensor",
                   "Writes gather(self, dim, index) into out (already of index's shape and "
                   "self's dtype) and returns out."),
    )
    description = (
        "Gather along one dim, following PyTorch's `torch.gather(self, dim, index)`: the result "
        "has index's shape and self's dtype, and for a 3-D self with dim=1, `out[i][j][k] = "
        "self[i][index[i][j][k]][k]` (likewise for every rank up to 5 and every dim, negative "
        "dims counting from the end). `index` is int64 with the same number of dims as self, "
        "`index.size(d) <= self.size(d)` for every d != dim (it may be smaller than self), and "
        "values in [0, self.size(dim)). Either tensor may be non-contiguous: self transposed or "
        "strided, index transposed or a window of a larger tensor (padded rows, storage offset). "
        "A 0-d self "
        "and 0-d index give a 0-d result; an empty index gives an empty result. `sparse_grad` "
        "only matters for autograd and does not change the result. Values are copied bit-exact "
        "(NaN and inf included); self may also be an integer or bool tensor."
    )
    solution = SOLUTION
    negatives = (
        Negative("assumes_contiguous_index", "reads index with the output's contiguous strides, "
                 "wrong for a transposed or windowed index", NEGATIVE_CONTIGUOUS_INDEX),
        Negative("index_shaped_self", "addresses self as if it had index's shape, wrong when "
                 "index is smaller than self", NEGATIVE_INDEX_SHAPED_SELF),
    )
    # Pure data movement: every element is copied, so bit-exact (NaN positions must match).
    tolerances = {dt: Tolerance(0.0, 0.0) for dt in _FLOATS}

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("gather", "float32", (63, 145), dim=1, index=(63, 20), cpu=True),
            case("gather", "float16", (7, 17, 31), dim=0, index=(5, 17, 31), layout="transposed",
                 cpu=True),
            case("gather", "bfloat16", (33, 65), dim=-1, index=(30, 65), cpu=True),
            # not in the cpu tier: a window's gaps are uninitialized after the copy to the
            # device, and a negative that reads them would index out of bounds (a segfault
            # under the interpreter rather than a wrong answer)
            case("gather", "float32", (40, 50), dim=1, index=(40, 8), index_layout="window"),
            case("gather", "float32", (24, 30), dim=0, index=(40, 20), index_layout="transposed",
                 layout="strided", cpu=True),
            case("gather_out", "int64", (5, 7, 11, 13), dim=2, index=(5, 6, 9, 13), cpu=True),
            case("gather", "int32", (49, 63), dim=0, index=(49, 63), cpu=True),
            case("gather", "float32", (300,), dim=0, index=(500,), specials=True, cpu=True),
            case("gather", "float32", (), dim=0, index=(), cpu=True),
            case("gather", "float32", (4, 6), dim=1, index=(4, 0), cpu=True),
        ]
        for dt in (*_FLOATS, "int32"):
            cs += [
                case("gather", dt, (1024, 4097), dim=1, index=(1024, 2065)),
                case("gather", dt, (4096, 1024), dim=0, index=(3000, 1024), layout="transposed"),
                case("gather", dt, (16, 7, 57, 32, 29), dim=2, index=(16, 7, 100, 32, 29),
                     index_layout="window"),
                case("gather_out", dt, (2, 3, 4, 5, 6), dim=-1, index=(2, 3, 4, 5, 11),
                     index_layout="transposed"),
                case("gather", dt, (511, 257), dim=-2, index=(529, 200), layout="strided"),
                case("gather", dt, (100003,), dim=0, index=(50000,)),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in (*_FLOATS, "int32"):
            if small and dt in ("float16", "bfloat16"):
                continue
            rank = rng.choice([1, 2, 3])
            shape = tuple(rng.randrange(1, 12 if small else 300) for _ in range(rank))
            dim = rng.randrange(-rank, rank)
            index = [rng.randrange(1, s + 1) for s in shape]
            index[dim] = rng.randrange(1, 30 if small else 600)
            out.append(case(rng.choice(["gather", "gather_out"]), dt, shape, dim=dim,
                            index=tuple(index),
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            index_layout=rng.choice(["contiguous", "transposed", "window"]),
                            cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            # 64 MB of self read through 128 MB of int64 index, 64 MB written
            case("gather", "float32", (4096, 4096), dim=1, index=(4096, 4096)),
            # whole-column picks from a bf16 table: 32 MB gathered, 128 MB of index, 32 MB out
            case("gather", "bfloat16", (4096, 4096), dim=0, index=(4096, 4096)),
            case("gather", "float16", (8, 1024, 2048), dim=1, index=(8, 512, 2048)),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        dt = c.dtype
        if dt in ("int32", "int64"):
            x = randint(c.shape, dt, gen, low=-1000, high=1000, layout=layout)
        else:
            x = randn(c.shape, dt, gen, layout=layout)
        if c.get("specials"):
            x = sprinkle_specials(x, gen, fraction=0.05)
        size = c.shape[c["dim"]] if c.shape else 1
        ishape = tuple(c["index"])
        il = c.get("index_layout", "contiguous")
        if il == "window":
            # a window of a larger index tensor: padded rows and a storage offset (stride-0
            # expanded indexes are left out: the harness cannot copy such inputs to a device)
            big = randint((*ishape[:-1], ishape[-1] + 3), "int64", gen, low=0, high=size)
            idx = big[..., 2:ishape[-1] + 2]
        else:
            idx = with_layout(randint(ishape, "int64", gen, low=0, high=max(size, 1)), il)
        if c.entry == "gather_out":
            out = torch.empty(ishape, dtype=x.dtype)
            return Call(c.entry, (x, c["dim"], idx), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, (x, c["dim"], idx))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, dim, idx = call.args
        return (Expected(torch.gather(x, dim, idx), x.dtype),)

    def baseline(self, call: Call) -> object:
        x, dim, idx = call.args
        if call.entry == "gather_out":
            return torch.gather(x, dim, idx, out=call.kwargs["out"])
        return torch.gather(x, dim, idx)

    def cost(self, c: Case) -> Cost:
        n = 1
        for d in c["index"]:
            n *= d
        elem = torch.empty((), dtype=dtype_from_name(c.dtype)).element_size()
        # each output element reads one index and one self element and is written once
        return Cost(flops=0.0, bytes=float(2 * elem * n + 8 * n), dtype=c.dtype)
