"""aten::embedding — rows of ``weight`` looked up by ``indices`` (forward only; overload
default)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.inputs import randint, randn, sprinkle_specials
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


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    # padding_idx, scale_grad_by_freq and sparse only change the backward pass.
    out = torch.empty(list(indices.shape) + [weight.shape[1]], dtype=weight.dtype,
                      device=weight.device)
    i_strides = list(indices.stride()) + [0]
    s_strides = [0] * indices.dim() + [weight.stride(1)]
    return _take(weight, indices, out, i_strides, s_strides, weight.stride(0))
'''

# Zeroes the rows looked up at padding_idx, as if it masked them (nn.Embedding only initializes
# that row to zeros and skips its gradient): right when padding_idx is -1 or never looked up.
NEGATIVE_ZEROES_PADDING = SOLUTION.replace(
    "                 BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):\n",
    "                 BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, PAD: tl.constexpr = -1):\n",
).replace(
    "    val = tl.load(src_ptr + s_off + idx * s_dim, mask=mask)\n",
    "    val = tl.load(src_ptr + s_off + idx * s_dim, mask=mask)\n"
    "    val = tl.where(idx == PAD, tl.zeros_like(val), val)\n",
).replace(
    "                       BLOCK_R=block_r, BLOCK_C=block_c,\n",
    "                       BLOCK_R=block_r, BLOCK_C=block_c, PAD=PADDING[0],\n",
).replace(
    "    # padding_idx, scale_grad_by_freq and sparse only change the backward pass.\n",
    "    PADDING[0] = padding_idx\n",
).replace("TILE = 4096\n", "TILE = 4096\nPADDING = [-1]\n")

# Assumes a contiguous weight (row stride = embedding dim): right for the usual contiguous table,
# wrong for a transposed or strided one.
NEGATIVE_CONTIGUOUS_WEIGHT = SOLUTION.replace(
    "    return _take(weight, indices, out, i_strides, s_strides, weight.stride(0))",
    "    s_strides = [0] * indices.dim() + [1]\n"
    "    return _take(weight, indices, out, i_strides, s_strides, weight.shape[1])")

_FLOATS = ("float16", "bfloat16", "float32")


@register("aten::embedding", version=1, kind=Kind.COMPUTE)
class Embedding(OperatorSpec):
    entry_points = (
        EntryPoint("embedding", "embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1, "
                   "scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor",
                   "weight[indices]: for each index, its row of weight; the result has shape "
                   "indices.shape + (weight.size(1),)."),
    )
    description = (
        "Embedding lookup, the forward pass of PyTorch's `torch.embedding(weight, indices, "
        "padding_idx, scale_grad_by_freq, sparse)` (what `torch.nn.functional.embedding` "
        "calls): `weight` is a (V, D) table and `out[i..., :] = weight[indices[i...], :]`, so "
        "the result has shape `indices.shape + (D,)` and weight's dtype (float16, bfloat16 or "
        "float32). `indices` is int64 or int32 with values in [0, V), 0-d to 4-d, possibly "
        "repeated, possibly empty, and may be non-contiguous; weight may be non-contiguous too "
        "(transposed or strided rows). `padding_idx`, `scale_grad_by_freq` and `sparse` only "
        "affect the backward pass: the forward values do not depend on them (a row at "
        "padding_idx is returned as stored, not zeroed). Values are copied bit-exact (NaN and "
        "inf included)."
    )
    solution = SOLUTION
    negatives = (
        Negative("zeroes_padding_rows", "returns zeros for indices equal to padding_idx; the "
                 "forward pass returns the stored row", NEGATIVE_ZEROES_PADDING),
        Negative("assumes_contiguous_weight", "indexes weight with contiguous strides (row "
                 "stride = D), wrong for a transposed or strided table",
                 NEGATIVE_CONTIGUOUS_WEIGHT),
    )
    # Pure data movement: every element is copied, so bit-exact (NaN positions must match).
    tolerances = {dt: Tolerance(0.0, 0.0) for dt in _FLOATS}

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("embedding", "float32", (10, 16), indices=(7,), cpu=True),
            case("embedding", "float16", (50, 33), indices=(4, 9), padding_idx=0, cpu=True),
            case("embedding", "bfloat16", (100, 64), indices=(3, 5, 7), index_dtype="int32",
                 layout="transposed", cpu=True),
            case("embedding", "float32", (30, 20), indices=(), layout="strided", padding_idx=3,
                 cpu=True),
            case("embedding", "float32", (25, 8), indices=(0,), cpu=True),
            case("embedding", "float32", (40, 31), indices=(2, 3, 4, 5), padding_idx=7,
                 scale_grad_by_freq=True, sparse=True, index_layout="transposed", cpu=True),
            case("embedding", "float32", (64, 24), indices=(49,), specials=True, cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case("embedding", dt, (32000, 512), indices=(8, 512)),
                case("embedding", dt, (1000, 4096), indices=(2065,), layout="transposed",
                     padding_idx=0),
                case("embedding", dt, (50000, 129), indices=(7, 17, 31), index_dtype="int32"),
                case("embedding", dt, (4097, 1000), indices=(63, 145), layout="strided",
                     index_layout="transposed", padding_idx=4096),
                case("embedding", dt, (1, 7), indices=(511,)),
            ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in _FLOATS:
            if small and dt != "float32":
                continue
            v = rng.randrange(1, 60 if small else 5000)
            d = rng.randrange(1, 40 if small else 1100)
            rank = rng.choice([0, 1, 2, 3])
            indices = tuple(rng.randrange(1, 6 if small else 40) for _ in range(rank))
            out.append(case("embedding", dt, (v, d), indices=indices,
                            padding_idx=rng.choice([-1, 0, v - 1]),
                            index_dtype=rng.choice(["int32", "int64"]),
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            index_layout=rng.choice(["contiguous", "transposed"]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            # 16384 token rows of a 64 MB bf16 table: 128 MB written, up to 128 MB read
            case("embedding", "bfloat16", (8192, 4096), indices=(16384,)),
            # 64 MB written from a 64 MB float32 table
            case("embedding", "float32", (8192, 2048), indices=(4, 2048)),
            case("embedding", "float16", (8192, 4096), indices=(8, 1024), index_dtype="int32"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        v, _ = c.shape
        w = randn(c.shape, c.dtype, gen, layout=c.get("layout", "contiguous"))
        if c.get("specials"):
            w = sprinkle_specials(w, gen, fraction=0.05)
        idx = randint(c["indices"], c.get("index_dtype", "int64"), gen, low=0, high=v,
                      layout=c.get("index_layout", "contiguous"))
        pad = c.get("padding_idx", -1)
        if 0 <= pad < v and idx.numel() > 0:
            # look padding_idx up for sure: its row must come back as stored
            # (a transposed idx is idx.mT of a contiguous tensor: view that storage flat)
            base = idx if idx.is_contiguous() else idx.mT
            base.view(-1)[::5] = pad
        return Call(c.entry, (w, idx, pad, bool(c.get("scale_grad_by_freq", False)),
                              bool(c.get("sparse", False))))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        w, idx = call.args[0], call.args[1]
        return (Expected(w[idx.to(torch.int64)], w.dtype),)

    def baseline(self, call: Call) -> object:
        return torch.embedding(*call.args)

    def cost(self, c: Case) -> Cost:
        n = 1
        for d in c["indices"]:
            n *= d
        d = c.shape[1]
        elem = torch.empty((), dtype=dtype_from_name(c.dtype)).element_size()
        idx_size = 4 if c.get("index_dtype") == "int32" else 8
        return Cost(flops=0.0, bytes=float(2 * elem * n * d + idx_size * n), dtype=c.dtype)
