"""aten::index_select — the slices of ``self`` along ``dim`` picked by a 1-D ``index`` (overloads
default, out)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import torch

from operators.inputs import bounded, randint, randn, sprinkle_specials
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


def _out_shape(self, dim, index):
    if self.dim() == 0:
        return []
    shape = list(self.shape)
    shape[dim % self.dim()] = index.numel()
    return shape


def _index_select(self, dim, index, out):
    nd = max(self.dim(), 1)
    dim = dim % nd
    i_stride = index.stride(0) if index.dim() == 1 else 0
    i_strides = [i_stride if d == dim else 0 for d in range(nd)]
    s_strides = [0 if d == dim else self.stride(d) for d in range(self.dim())] or [0]
    s_dim = self.stride(dim) if self.dim() > 0 else 0
    return _take(self, index, out, i_strides, s_strides, s_dim)


def index_select(self, dim, index):
    out = torch.empty(_out_shape(self, dim, index), dtype=self.dtype, device=self.device)
    return _index_select(self, dim, index, out)


def index_select_out(self, dim, index, *, out):
    return _index_select(self, dim, index, out)
'''

# Sizes the column grid with a floor division: right when the last dim fills whole blocks (a
# power of two, or one element), wrong otherwise (the partial last block is never written).
NEGATIVE_FLOOR_GRID = SOLUTION.replace(
    "    grid = (triton.cdiv(n_rows, block_r), triton.cdiv(C, block_c))\n",
    "    grid = (triton.cdiv(n_rows, block_r), C // block_c)\n")

# Assumes self is contiguous (row-major strides from its shape): right for contiguous self, wrong
# for transposed or strided self.
NEGATIVE_CONTIGUOUS_SELF = SOLUTION.replace(
    "    s_dim = self.stride(dim) if self.dim() > 0 else 0\n",
    "    s_dim = self.stride(dim) if self.dim() > 0 else 0\n"
    "    packed = [1] * self.dim()\n"
    "    for d in range(self.dim() - 2, -1, -1):\n"
    "        packed[d] = packed[d + 1] * self.shape[d + 1]\n"
    "    s_strides = [0 if d == dim else packed[d] for d in range(self.dim())] or [0]\n"
    "    s_dim = packed[dim] if self.dim() > 0 else 0\n")

_FLOATS = ("float16", "bfloat16", "float32")


@register("aten::index_select", version=2, kind=Kind.COMPUTE)
class IndexSelect(OperatorSpec):
    entry_points = (
        EntryPoint("index_select", "index_select(self: Tensor, dim: int, index: Tensor) -> Tensor",
                   "The entries of self whose position along dim is in index, in index's order."),
        EntryPoint("index_select_out",
                   "index_select_out(self: Tensor, dim: int, index: Tensor, *, out: Tensor) "
                   "-> Tensor",
                   "Writes index_select(self, dim, index) into out (already of the result shape "
                   "and self's dtype) and returns out."),
    )
    description = (
        "Selection along one dim, following PyTorch's `torch.index_select(self, dim, index)`: "
        "the result has self's shape except that dim has `index.numel()` entries, and "
        "`out[..., i, ...] = self[..., index[i], ...]` along `dim`. `index` is a 1-D (or 0-d, "
        "one element) tensor of int64 or int32 with values in [0, self.size(dim)), in any "
        "order and possibly repeated; it may be non-contiguous (strided). `dim` may be "
        "negative; a 0-d self is selected from as if 1-D (dim 0). self has up to 5 dims, any "
        "dtype (float16, bfloat16, float32, int32, bool, ...), may be non-contiguous "
        "(transposed or strided), and the result has self's dtype. Values are copied bit-exact "
        "(NaN and inf included)."
    )
    solution = SOLUTION
    negatives = (
        Negative("floor_column_grid", "launches C // BLOCK_C column blocks, leaving the "
                 "partial last block unwritten", NEGATIVE_FLOOR_GRID),
        Negative("assumes_contiguous_self", "computes self's strides from its shape, wrong for "
                 "transposed or strided self", NEGATIVE_CONTIGUOUS_SELF),
    )
    # Pure data movement: every element is copied, so bit-exact (NaN positions must match).
    tolerances = {dt: Tolerance(0.0, 0.0) for dt in _FLOATS}

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("index_select", "float32", (63, 145), dim=0, n=49, cpu=True),
            case("index_select", "float16", (7, 17, 31), dim=1, n=40, layout="transposed",
                 cpu=True),
            case("index_select", "bfloat16", (33, 65), dim=-1, n=17, index_dtype="int32",
                 cpu=True),
            case("index_select", "float32", (20, 40), dim=1, n=25, layout="strided",
                 index_layout="strided", cpu=True),
            case("index_select_out", "float32", (5, 7, 11, 13), dim=2, n=9, cpu=True),
            case("index_select", "int32", (49, 63), dim=0, n=100, cpu=True),
            case("index_select", "bool", (30, 20), dim=1, n=7, cpu=True),
            case("index_select", "float32", (300,), dim=0, n=145, specials=True, cpu=True),
            case("index_select", "float32", (), dim=0, n=1, cpu=True),
            case("index_select", "float32", (4, 6), dim=0, n=1, index_0d=True, cpu=True),
            case("index_select", "float32", (4, 6), dim=1, n=0, cpu=True),
        ]
        for dt in (*_FLOATS, "int32"):
            cs += [
                case("index_select", dt, (4096, 1024), dim=0, n=2065),
                case("index_select", dt, (1024, 4097), dim=1, n=3000, layout="transposed"),
                case("index_select", dt, (16, 7, 57, 32, 29), dim=2, n=100),
                case("index_select_out", dt, (2, 3, 4, 5, 6), dim=-1, n=11, index_dtype="int32",
                     index_layout="strided"),
                case("index_select", dt, (511, 257), dim=-2, n=529, layout="strided"),
                case("index_select", dt, (100003,), dim=0, n=50000),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in (*_FLOATS, "int32"):
            if small and dt in ("float16", "bfloat16"):
                continue
            rank = rng.choice([1, 2, 3])
            shape = [rng.randrange(1, 12 if small else 300) for _ in range(rank)]
            entry = rng.choice(["index_select", "index_select_out"])
            dim, n = rng.randrange(-rank, rank), rng.randrange(1, 40 if small else 900)
            # bound the input and the result (shape with n rows along dim)
            def size_of(s: list[int], d: int = dim, k: int = n) -> int:
                return math.prod(s) // s[d] * max(s[d], k)

            shape = bounded(shape, size_of=size_of)
            out.append(case(entry, dt, shape, dim=dim, n=n,
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            index_dtype=rng.choice(["int32", "int64"]),
                            index_layout=rng.choice(["contiguous", "strided"]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            # rows of a table: 128 MB read (repeats included), 128 MB written
            case("index_select", "float32", (8192, 4096), dim=0, n=8192),
            case("index_select", "bfloat16", (8192, 4096), dim=0, n=16384),
            # columns: 64 MB read, 64 MB written, strided gathers within each row
            case("index_select", "float32", (4096, 4096), dim=1, n=4096),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        dt = c.dtype
        if dt == "bool":
            x = randint(c.shape, "int32", gen, low=0, high=2, layout=layout) == 1
        elif dt == "int32":
            x = randint(c.shape, dt, gen, low=-1000, high=1000, layout=layout)
        else:
            x = randn(c.shape, dt, gen, layout=layout)
        if c.get("specials"):
            x = sprinkle_specials(x, gen, fraction=0.05)
        size = c.shape[c["dim"]] if c.shape else 1
        idx = randint((c["n"],), c.get("index_dtype", "int64"), gen, low=0, high=size,
                      layout=c.get("index_layout", "contiguous"))
        if c.get("index_0d"):
            idx = idx.reshape(())
        if c.entry == "index_select_out":
            shape = list(c.shape)
            if shape:
                shape[c["dim"]] = c["n"]
            out = torch.empty(shape, dtype=x.dtype)
            return Call(c.entry, (x, c["dim"], idx), {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, (x, c["dim"], idx))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, dim, idx = call.args
        return (Expected(torch.index_select(x, dim, idx.to(torch.int64)), x.dtype),)

    def baseline(self, call: Call) -> object:
        x, dim, idx = call.args
        if call.entry == "index_select_out":
            return torch.index_select(x, dim, idx, out=call.kwargs["out"])
        return torch.index_select(x, dim, idx)

    def cost(self, c: Case) -> Cost:
        n = 1
        for d in c.shape:
            n *= d
        size = c.shape[c["dim"]] if c.shape else 1
        moved = n // size * c["n"] if size else 0
        elem = torch.empty((), dtype=dtype_from_name(c.dtype)).element_size()
        idx_size = 4 if c.get("index_dtype") == "int32" else 8
        return Cost(flops=0.0, bytes=float(2 * elem * moved + idx_size * c["n"]), dtype=c.dtype)

