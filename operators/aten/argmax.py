"""aten::argmax — the index of the first maximum along one dim or over the flattened tensor,
NaN counting as the maximum (overloads default, out)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import ClassVar

import torch

from operators.aten._reduce import itemsize, make_input, numel, out_shape, reduced_dims
from operators.inputs import with_layout
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

SOLUTION = r'''
import torch
import triton
import triton.language as tl

MAX_KEPT = 4
MAX_RED = 4
TILE = 4096        # elements per program and step
TARGET = 1024      # programs worth splitting a reduction for


@triton.jit
def _argmax_kernel(x_ptr, idx_ptr, val_out_ptr, idx_out_ptr, n_out, n_red, per_split,
                   split_stride,
                   k1, k2, k3, xk0, xk1, xk2, xk3, ok0, ok1, ok2, ok3,
                   r1, r2, r3, xr0, xr1, xr2, xr3,
                   IN_IDX: tl.constexpr, WRITE_VAL: tl.constexpr, ACC: tl.constexpr,
                   LOW: tl.constexpr, FLOAT: tl.constexpr, BLOCK_O: tl.constexpr, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0)
    sid = tl.program_id(1).to(tl.int64)
    o = (pid * BLOCK_O + tl.arange(0, BLOCK_O)).to(tl.int64)
    o_mask = o < n_out
    rem = o
    i3 = rem % k3
    rem = rem // k3
    i2 = rem % k2
    rem = rem // k2
    i1 = rem % k1
    i0 = rem // k1
    x_base = i0 * xk0 + i1 * xk1 + i2 * xk2 + i3 * xk3
    o_off = i0 * ok0 + i1 * ok1 + i2 * ok2 + i3 * ok3 + sid * split_stride
    # Per lane: the best (value, index) seen so far; index -1 means none yet.
    best_v = tl.full([BLOCK_O, BLOCK_R], LOW, ACC)
    best_i = tl.full([BLOCK_O, BLOCK_R], -1, tl.int64)
    r_lo = sid * per_split
    r_hi = tl.minimum(r_lo + per_split, n_red)
    for start in range(r_lo, r_hi, BLOCK_R):
        r = start + tl.arange(0, BLOCK_R).to(tl.int64)
        # Its own name: a loop-carried `rem` may not change shape ([BLOCK_O] -> [BLOCK_R]).
        rr = r
        j3 = rr % r3
        rr = rr // r3
        j2 = rr % r2
        rr = rr // r2
        j1 = rr % r1
        j0 = rr // r1
        r_off = j0 * xr0 + j1 * xr1 + j2 * xr2 + j3 * xr3
        mask = o_mask[:, None] & (r < r_hi)[None, :]
        offs = x_base[:, None] + r_off[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0).to(ACC)
        if IN_IDX:   # reducing partials: their indices come with them
            i = tl.load(idx_ptr + offs, mask=mask, other=-1)
        else:
            i = tl.where(mask, r[None, :], -1)
        x_nan = x != x
        b_nan = best_v != best_v
        better = (i >= 0) & ((best_i < 0) | (x > best_v) | (x_nan & ~b_nan) |
                             (((x == best_v) | (x_nan & b_nan)) & (i < best_i)))
        best_v = tl.where(better, x, best_v)
        best_i = tl.where(better, i, best_i)
    # Across lanes: nan beats everything; among the winners, the smallest index.
    valid = best_i >= 0
    is_nan = best_v != best_v
    any_nan = tl.max((valid & is_nan).to(tl.int32), axis=1) > 0
    vmax = tl.max(tl.where(valid & ~is_nan, best_v, LOW), axis=1)
    cand = valid & tl.where(any_nan[:, None], is_nan, best_v == vmax[:, None])
    idx = tl.min(tl.where(cand, best_i, 9223372036854775807), axis=1)
    tl.store(idx_out_ptr + o_off, idx, mask=o_mask)
    if WRITE_VAL:
        if FLOAT:
            vmax = tl.where(any_nan, float("nan"), vmax)
        tl.store(val_out_ptr + o_off, vmax, mask=o_mask)


def _merge(dims):
    """Merges neighbours [size, *strides] that address memory as one dim (outer = inner*size)."""
    merged = []
    for d in dims:
        if merged:
            prev = merged[-1]
            if all(prev[i] == d[i] * d[0] for i in range(1, len(d))):
                merged[-1] = [prev[0] * d[0]] + d[1:]
                continue
        merged.append(list(d))
    return merged


def _argmax(x, dim, keepdim, out):
    nd = x.dim()
    if dim is None:
        red = list(range(nd))   # the flattened tensor, in row-major order
    else:
        red = [dim % nd] if nd else []
    n_out = out.numel()
    kept = [d for d in range(nd) if d not in red]
    ks = []
    for j, d in enumerate(kept):
        if x.shape[d] != 1:
            ks.append([x.shape[d], x.stride(d), out.stride(d if keepdim else j)])
    rs = [[x.shape[d], x.stride(d)] for d in red if x.shape[d] != 1]
    ks, rs = _merge(ks), _merge(rs)   # merging keeps the reduced dims' row-major order
    if len(ks) > MAX_KEPT or len(rs) > MAX_RED:
        raise ValueError("too many non-mergeable dims")
    n_red = 1
    for s in rs:
        n_red *= s[0]
    if n_out == 0:
        return out
    ks = [[1, 0, 0]] * (MAX_KEPT - len(ks)) + ks
    rs = [[1, 0]] * (MAX_RED - len(rs)) + rs
    if x.dtype.is_floating_point:
        acc_t, acc_tl, low = torch.float32, tl.float32, float("-inf")
    else:
        acc_t, acc_tl, low = torch.int64, tl.int64, -2 ** 63
    inner = min([s[1] for s in rs if s[0] > 1] or [2 ** 62]) < \
        min([s[1] for s in ks if s[0] > 1] or [2 ** 62])
    if inner:
        block_r = min(triton.next_power_of_2(n_red), 1024)
        block_o = max(1, min(triton.next_power_of_2(n_out), TILE // block_r))
    else:
        block_o = min(triton.next_power_of_2(n_out), 64)
        block_r = max(1, min(triton.next_power_of_2(n_red), TILE // block_o))
    n_prog = triton.cdiv(n_out, block_o)
    splits = 1
    if n_prog < TARGET // 4 and n_red > 2 * block_r:
        splits = min(triton.cdiv(n_red, block_r), max(1, TARGET // n_prog))
        per = triton.cdiv(triton.cdiv(n_red, splits), block_r) * block_r
        splits = triton.cdiv(n_red, per)
    k_sizes = [s[0] for s in ks]
    k_xs = [s[1] for s in ks]
    r_sizes = [s[0] for s in rs]
    r_xs = [s[1] for s in rs]
    warps = 8 if block_o * block_r >= 2048 else 4
    if splits == 1:
        _argmax_kernel[(n_prog, 1)](
            x, x, out, out, n_out, n_red, n_red, 0, *k_sizes[1:], *k_xs,
            *[s[2] for s in ks], *r_sizes[1:], *r_xs,
            IN_IDX=False, WRITE_VAL=False, ACC=acc_tl, LOW=low, FLOAT=acc_t.is_floating_point,
            BLOCK_O=block_o, BLOCK_R=block_r, num_warps=warps)
        return out
    # Pass 1: the best (value, index) of each split; pass 2 picks among them.
    part_v = torch.empty((n_out, splits), dtype=acc_t, device=x.device)
    part_i = torch.empty((n_out, splits), dtype=torch.int64, device=x.device)
    p_strides = [0] * MAX_KEPT
    step = splits
    for i in range(MAX_KEPT - 1, -1, -1):
        p_strides[i] = step
        step *= k_sizes[i]
    _argmax_kernel[(n_prog, splits)](
        x, x, part_v, part_i, n_out, n_red, per, 1, *k_sizes[1:], *k_xs, *p_strides,
        *r_sizes[1:], *r_xs,
        IN_IDX=False, WRITE_VAL=True, ACC=acc_tl, LOW=low, FLOAT=acc_t.is_floating_point,
        BLOCK_O=block_o, BLOCK_R=block_r, num_warps=warps)
    block_r2 = min(triton.next_power_of_2(splits), 1024)
    block_o2 = max(1, min(triton.next_power_of_2(n_out), TILE // block_r2))
    _argmax_kernel[(triton.cdiv(n_out, block_o2), 1)](
        part_v, part_i, out, out, n_out, splits, splits, 0, *k_sizes[1:], *p_strides,
        *[s[2] for s in ks], 1, 1, splits, 0, 0, 0, 1,
        IN_IDX=True, WRITE_VAL=False, ACC=acc_tl, LOW=low, FLOAT=acc_t.is_floating_point,
        BLOCK_O=block_o2, BLOCK_R=block_r2, num_warps=4)
    return out


def _out_shape(x, dim, keepdim):
    if dim is None:
        return [1] * x.dim() if keepdim else []
    if x.dim() == 0:
        return []
    d = dim % x.dim()
    if keepdim:
        return [1 if i == d else s for i, s in enumerate(x.shape)]
    return [s for i, s in enumerate(x.shape) if i != d]


def argmax(self, dim=None, keepdim=False):
    out = torch.empty(_out_shape(self, dim, keepdim), dtype=torch.int64, device=self.device)
    return _argmax(self, dim, keepdim, out)


def argmax_out(self, dim=None, keepdim=False, *, out):
    return _argmax(self, dim, keepdim, out)
'''

# Breaks ties across lanes towards the last index instead of the first.
NEGATIVE_LAST_TIE = SOLUTION.replace(
    "idx = tl.min(tl.where(cand, best_i, 9223372036854775807), axis=1)",
    "idx = tl.max(tl.where(cand, best_i, -1), axis=1)")

# Ignores nan when combining lanes (a max that skips nan): wrong whenever a row holds a nan.
NEGATIVE_NAN_BLIND = SOLUTION.replace(
    "cand = valid & tl.where(any_nan[:, None], is_nan, best_v == vmax[:, None])",
    "cand = valid & (best_v == vmax[:, None])")
assert NEGATIVE_LAST_TIE != SOLUTION and NEGATIVE_NAN_BLIND != SOLUTION

_FLOATS = ("float16", "bfloat16", "float32")
_ENTRIES = ("argmax", "argmax_out")


@register("aten::argmax", version=1, kind=Kind.COMPUTE)
class Argmax(OperatorSpec):
    entry_points = (
        EntryPoint("argmax",
                   "argmax(self: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor",
                   "int64 indices of the maximum along dim, or the flat index of the maximum of "
                   "the whole tensor when dim is None."),
        EntryPoint("argmax_out",
                   "argmax_out(self: Tensor, dim: int | None = None, keepdim: bool = False, *, "
                   "out: Tensor) -> Tensor",
                   "Writes argmax(self, dim, keepdim) into out (int64, already of the result "
                   "shape) and returns out."),
    )
    description = (
        "Index of the maximum, following PyTorch's `torch.argmax(self, dim, keepdim)`: along "
        "`dim` (may be negative) each output is the position of the largest element of its "
        "slice; with `dim=None` the output is the flat (row-major, logical) index of the "
        "largest element of the whole tensor, as a 0-d tensor (all dims of size 1 with "
        "keepdim=True). `keepdim=True` keeps the reduced dim with size 1. Ties go to the FIRST "
        "(smallest) index; nan counts as larger than every number, so a slice holding a nan "
        "gives the index of its first nan; -inf and inf order as usual. The result is int64 and "
        "exact. self is float16, bfloat16, float32, int32 or int16 (never empty along the "
        "reduction); a 0-d self gives 0. Inputs may be non-contiguous (transposed or strided), "
        "have up to 5 dims and be large (tens of millions of elements, possibly all reduced "
        "into one index)."
    )
    solution = SOLUTION
    negatives = (
        Negative("last_index_on_ties", "returns the last instead of the first index among "
                 "equal maxima found by different lanes", NEGATIVE_LAST_TIE),
        Negative("nan_blind", "skips nan when combining lanes, so a slice with a nan may give the "
                 "index of its largest number", NEGATIVE_NAN_BLIND),
    )
    # Outputs are int64 indices: compared exactly (no float tolerance applies).
    tolerances: ClassVar[Mapping[str, Tolerance]] = {}

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("argmax", "float32", (1, 2), dim=-1, cpu=True),
            case("argmax", "float32", (3000,), dim=None, ties=3, cpu=True),  # split, ties
            case("argmax", "float16", (), dim=None, cpu=True),
            case("argmax", "float16", (63, 145), dim=-1, specials=0.01, cpu=True),
            case("argmax", "bfloat16", (7, 17, 31), dim=0, keepdim=True, ties=4, cpu=True),
            case("argmax", "float32", (33, 65), dim=0, layout="transposed", cpu=True),
            case("argmax", "int32", (49, 63), dim=1, cpu=True),
            case("argmax", "float32", (5, 7, 11, 13), dim=None, keepdim=True, layout="strided",
                 cpu=True),
            case("argmax_out", "int16", (20, 40), dim=-2, ties=2, cpu=True),
        ]
        for dt in (*_FLOATS, "int32"):
            cs += [
                case("argmax", dt, (1, 2), dim=0),
                case("argmax", dt, (4096, 256), dim=-1),
                case("argmax", dt, (4096, 256), dim=0, keepdim=True),
                case("argmax", dt, (200, 40999, 3), dim=1),
                case("argmax", dt, (200, 40999, 3), dim=None),
                case("argmax", dt, (200, 40999, 3), dim=-1, ties=2),
                case("argmax", dt, (511, 257), dim=1, layout="transposed"),
                case("argmax", dt, (16, 7, 57, 32, 29), dim=-3, layout="strided"),
                case("argmax_out", dt, (2, 3, 4, 5, 6), dim=None, keepdim=True),
            ]
        for dt in _FLOATS:
            cs += [
                case("argmax", dt, (4096, 256), dim=1, specials=0.001),
                case("argmax", dt, (200, 40999, 3), dim=1, specials=0.00001),
                case("argmax", dt, (4096, 256), dim=0, ties=1),   # all equal: index 0
                case("argmax_out", dt, (2065,), dim=0, std=1e3),
            ]
        cs += [
            case("argmax", "int16", (4096, 256), dim=-1),
            case("argmax_out", "int16", (511, 257), dim=0, layout="transposed"),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in (*_FLOATS, "int32"):
            rank = rng.choice([1, 2, 3, 4])
            cap = {1: 3000, 2: 60, 3: 14, 4: 7}[rank] if small else \
                {1: 3_000_000, 2: 3000, 3: 200, 4: 40}[rank]
            shape = tuple(rng.randrange(2, cap + 1) for _ in range(rank))  # ties need >1
            dim = None if rng.random() < 0.25 else rng.randrange(-rank, rank)
            params: dict[str, object] = {
                "dim": dim, "keepdim": rng.random() < 0.5,
                "layout": rng.choice(["contiguous", "transposed", "strided"]),
            }
            if dt != "int32":
                choice = rng.choice(["ties", "specials", "plain"])
                if choice == "ties":
                    params["ties"] = rng.choice([2, 5, 50])
                elif choice == "specials":
                    params["specials"] = 0.01 if small else 0.0001
            out.append(case(rng.choice(_ENTRIES), dt, shape, cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # 64-100 MB read each: memory-bound, far from launch-bound on an H200.
        return [
            case("argmax", "float32", (4096, 4096), dim=None),
            case("argmax", "float32", (200, 40999, 3), dim=1),
            case("argmax", "bfloat16", (8192, 4096), dim=-1),
            case("argmax", "float16", (4096, 8192), dim=0),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        ties = c.get("ties")
        if ties is not None:
            # values from a handful of levels, so maxima repeat within a slice
            v = torch.randint(0, ties, c.shape, generator=gen, dtype=torch.int64)
            x = with_layout(v.to(c.torch_dtype), c.get("layout", "contiguous"))
        else:
            x = make_input(c, gen)
        args: tuple[object, ...] = (x, c["dim"], c.get("keepdim", False))
        if c.entry == "argmax_out":
            dims = reduced_dims(x.dim(), c["dim"])
            shape = out_shape(x.shape, dims, c.get("keepdim", False))
            out = torch.empty(shape, dtype=torch.int64)
            return Call(c.entry, args, {"out": out}, outputs=(Out.arg("out"),),
                        mutable=frozenset({"out"}), out_buffers=frozenset({"out"}))
        return Call(c.entry, args)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, dim, keepdim = call.args
        xr = x.double() if x.dtype.is_floating_point else x.to(torch.int64)
        # CPU argmax returns the first maximum and treats nan as the maximum (documented).
        return (Expected(torch.argmax(xr, dim, keepdim), torch.int64),)

    def baseline(self, call: Call) -> object:
        x, dim, keepdim = call.args
        if call.entry == "argmax_out":
            return torch.argmax(x, dim, keepdim, out=call.kwargs["out"])
        return torch.argmax(x, dim, keepdim)

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        n_out = numel(out_shape(c.shape, reduced_dims(len(c.shape), c["dim"]), False))
        return Cost(flops=float(n), bytes=float(n * itemsize(c.torch_dtype) + n_out * 8),
                    dtype=c.dtype if c.torch_dtype.is_floating_point else "float32")
