"""aten::sort — values sorted along one dim and the int64 indices they came from, NaN sorting
as the largest value (overloads default, stable, values)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import torch

from operators.aten._reduce import itemsize, numel
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

MAX_DIMS = 5          # the sorted dim plus up to four others
CHUNK = 32            # rows are first sorted in chunks of this many keys, by ranking in registers
RANK_TILE = 16384     # comparisons per program of the ranking step
MERGE_BLOCK = 4096    # positions per program of a merge pass
# A row is sorted as packed int64 keys: (order-preserving 32-bit key << 32) | index. The keys
# are unique, so sorting them is a stable sort and ranks need no tie rule. Padding is larger
# than every real key and unique too: (0x7FFFFFFF << 32) | (2^31 + position).


@triton.jit
def _keys(x, cols, valid, KIND: tl.constexpr, INF: tl.constexpr, DESC: tl.constexpr):
    # An int32 key whose signed order is PyTorch's order, from the bits alone (no float
    # compares: subnormals keep their order under any flush-to-zero mode).
    if KIND == 1:       # float32
        bits = x.to(tl.int32, bitcast=True)
        mag = bits & 0x7FFFFFFF
    elif KIND == 2:     # float16 / bfloat16 (INF is the bit pattern of +inf)
        bits = x.to(tl.int16, bitcast=True).to(tl.int32)
        mag = bits & 0x7FFF
    if KIND == 0:       # integers
        k = x.to(tl.int32)
    else:
        k = tl.where(bits < 0, -mag, mag)          # sign-magnitude: -0.0 and 0.0 both 0
        k = tl.where(mag > INF, INF + 1, k)        # every nan: above inf, all equal
    if DESC:
        k = -1 - k                                 # reverses the order, no overflow
    packed = (k.to(tl.int64) << 32) | cols
    return tl.where(valid, packed, 9223372034707292160 + cols)


@triton.jit
def _rank_kernel(x_ptr, w_ptr, v_ptr, i_ptr, n_seg, chunks, L, Lpad,
                 s1, s2, s3,
                 xs0, xs1, xs2, xs3, xsl,
                 vs0, vs1, vs2, vs3, vsl,
                 is0, is1, is2, is3, isl,
                 KIND: tl.constexpr, INF: tl.constexpr, DESC: tl.constexpr,
                 DIRECT: tl.constexpr,
                 BLOCK_S: tl.constexpr, B: tl.constexpr):
    # Sorts BLOCK_S segments (B keys of one row each): a key's place is the number of keys of
    # its segment below it.
    seg = (tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)).to(tl.int64)
    seg_mask = seg < n_seg
    rows = seg // chunks
    start = (seg - rows * chunks) * B
    cols = start[:, None] + tl.arange(0, B).to(tl.int64)[None, :]
    rem = rows
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    x_row = (i0 * xs0 + i1 * xs1 + i2 * xs2 + i3 * xs3)[:, None]
    valid = seg_mask[:, None] & (cols < L)
    x = tl.load(x_ptr + x_row + cols * xsl, mask=valid, other=0)
    k = _keys(x, cols, valid, KIND, INF, DESC)
    rank = tl.sum((k[:, None, :] < k[:, :, None]).to(tl.int32), axis=2)
    dest = start[:, None] + rank
    if DIRECT:
        # the whole row is one segment: straight into values / indices
        v_row = (i0 * vs0 + i1 * vs1 + i2 * vs2 + i3 * vs3)[:, None]
        i_row = (i0 * is0 + i1 * is1 + i2 * is2 + i3 * is3)[:, None]
        tl.store(v_ptr + v_row + dest * vsl, x, mask=valid)
        tl.store(i_ptr + i_row + dest * isl, cols, mask=valid)
    else:
        # one sorted run of a long row, padding included, into the workspace
        tl.store(w_ptr + rows[:, None] * Lpad + dest, k, mask=seg_mask[:, None])


@triton.jit
def _merge_kernel(w_in, w_out, x_ptr, v_ptr, i_ptr, total, L, Lpad, R, steps,
                  s1, s2, s3,
                  xs0, xs1, xs2, xs3, xsl,
                  vs0, vs1, vs2, vs3, vsl,
                  is0, is1, is2, is3, isl,
                  FINAL: tl.constexpr, BLOCK: tl.constexpr):
    # Merges sorted runs of length R pairwise: an element's new place is its place in its own
    # run plus the number of keys below it in the partner run (a binary search).
    flat = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    m = flat < total
    row = flat // Lpad
    pos = flat - row * Lpad
    base = w_in + row * Lpad
    key = tl.load(base + pos, mask=m, other=0)
    run = pos // R
    local = pos - run * R
    first = (run % 2) == 0
    other = tl.where(first, run * R + R, run * R - R)
    other_len = tl.maximum(tl.minimum(other + R, Lpad) - other, 0)
    lo = tl.zeros([BLOCK], dtype=tl.int64)
    hi = tl.where(m, other_len, 0)
    for _ in range(0, steps):
        active = lo < hi
        mid = (lo + hi) // 2
        v = tl.load(base + other + mid, mask=active, other=0)
        right = active & (v < key)
        lo = tl.where(right, mid + 1, lo)
        hi = tl.where(active & ~right, mid, hi)
    dest = (run // 2) * (2 * R) + local + lo
    if FINAL:
        rem = row
        i3 = rem % s3
        rem = rem // s3
        i2 = rem % s2
        rem = rem // s2
        i1 = rem % s1
        i0 = rem // s1
        keep = m & (dest < L)      # padding sorts to the end of the row
        idx = key - ((key >> 32) << 32)   # the low 32 bits: the position in the row
        vals = tl.load(x_ptr + (i0 * xs0 + i1 * xs1 + i2 * xs2 + i3 * xs3) + idx * xsl,
                       mask=keep, other=0)
        tl.store(v_ptr + (i0 * vs0 + i1 * vs1 + i2 * vs2 + i3 * vs3) + dest * vsl, vals,
                 mask=keep)
        tl.store(i_ptr + (i0 * is0 + i1 * is1 + i2 * is2 + i3 * is3) + dest * isl, idx,
                 mask=keep)
    else:
        tl.store(w_out + row * Lpad + dest, key, mask=m)


def _sort(self, dim, descending, values, indices):
    if self.dim() == 0:   # sorts as a 1-element row, written through 1-d views
        _sort(self.reshape(1), 0, descending, values.reshape(1), indices.reshape(1))
        return values, indices
    nd = self.dim()
    if nd > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dims supported")
    dim = dim % nd
    if self.numel() == 0:
        return values, indices
    L = self.shape[dim]
    n_rows = self.numel() // L
    others = [i for i in range(nd) if i != dim]
    pad = MAX_DIMS - 1 - len(others)
    sizes = [1] * pad + [self.shape[i] for i in others]

    def strides(t):
        return [0] * pad + [t.stride(i) for i in others] + [t.stride(dim)]

    meta = [*sizes[1:], *strides(self), *strides(values), *strides(indices)]
    if self.dtype == torch.float32:
        kind, inf = 1, 0x7F800000
    elif self.dtype == torch.float16:
        kind, inf = 2, 0x7C00
    elif self.dtype == torch.bfloat16:
        kind, inf = 2, 0x7F80
    else:
        kind, inf = 0, 0
    b = min(triton.next_power_of_2(L), CHUNK)
    chunks = triton.cdiv(L, b)
    n_seg = n_rows * chunks
    block_s = max(1, min(triton.next_power_of_2(n_seg), RANK_TILE // (b * b)))
    grid = (triton.cdiv(n_seg, block_s),)
    if chunks == 1:
        _rank_kernel[grid](
            self, indices, values, indices, n_seg, 1, L, b, *meta,
            KIND=kind, INF=inf, DESC=bool(descending), DIRECT=True, BLOCK_S=block_s, B=b,
            num_warps=8)
        return values, indices
    # Long rows: sorted runs of CHUNK keys, then runs merged pairwise until one is left.
    Lpad = chunks * CHUNK
    w_a = torch.empty((n_rows, Lpad), dtype=torch.int64, device=self.device)
    w_b = torch.empty((n_rows, Lpad), dtype=torch.int64, device=self.device)
    _rank_kernel[grid](
        self, w_a, values, indices, n_seg, chunks, L, Lpad, *meta,
        KIND=kind, INF=inf, DESC=bool(descending), DIRECT=False, BLOCK_S=block_s, B=b,
        num_warps=8)
    total = n_rows * Lpad
    R = CHUNK
    while R < Lpad:
        _merge_kernel[(triton.cdiv(total, MERGE_BLOCK),)](
            w_a, w_b, self, values, indices, total, L, Lpad, R, R.bit_length(), *meta,
            FINAL=2 * R >= Lpad, BLOCK=MERGE_BLOCK, num_warps=8)
        w_a, w_b = w_b, w_a
        R *= 2
    return values, indices


def sort(self, dim=-1, descending=False):
    values = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    indices = torch.empty(self.shape, dtype=torch.int64, device=self.device)
    return _sort(self, dim, descending, values, indices)


def sort_stable(self, *, stable, dim=-1, descending=False):
    # always stable (allowed for stable=False / None too)
    return sort(self, dim, descending)


def sort_values(self, dim=-1, descending=False, *, values, indices):
    return _sort(self, dim, descending, values, indices)
'''

# The classic radix-sort key (negative floats: all bits but the sign flipped) puts -0.0 below
# 0.0: equal zeros then no longer keep their input order.
NEGATIVE_SIGNED_ZERO = SOLUTION.replace("k = tl.where(bits < 0, -mag, mag)",
                                        "k = tl.where(bits < 0, -mag - 1, mag)")

# Treats the sorted dim as the contiguous one (stride 1) in self, values and indices: right
# for contiguous last-dim sorts only.
NEGATIVE_UNIT_STRIDE = SOLUTION.replace("[t.stride(i) for i in others] + [t.stride(dim)]",
                                        "[t.stride(i) for i in others] + [1]")
assert NEGATIVE_SIGNED_ZERO != SOLUTION and NEGATIVE_UNIT_STRIDE != SOLUTION

_FLOATS = ("float16", "bfloat16", "float32")
_TIE_LEVELS = (float("-inf"), -2.5, -0.0, 0.0, 1.0, 3.75, float("inf"), float("nan"))

_SIXTEEN_BIT = ("float16", "bfloat16")
# Distinct non-NaN values of a 16-bit float dtype, with margin: float16 has 63 490, bfloat16
# 65 282 (with -0.0 dropped); a row of distinct keys can be no longer.
UNIQUE_16BIT_MAX = 60_000


def _unique_pool(dtype: torch.dtype, n: int, gen: torch.Generator) -> torch.Tensor:
    """n distinct values of dtype (distinct as PyTorch compares them: one zero, at most one nan),
    spread over the whole range (bit patterns drawn uniformly: tiny, huge, subnormal, inf)."""
    if dtype in (torch.float16, torch.bfloat16, torch.int16):
        bits = torch.arange(-32768, 32768, dtype=torch.int16)
        pool = bits.view(dtype) if dtype.is_floating_point else bits
    elif dtype == torch.float32:
        bits = torch.randint(-2**31, 2**31, (2 * n + 64,), generator=gen, dtype=torch.int64)
        pool = torch.unique(bits.to(torch.int32).view(torch.float32))
    else:
        pool = torch.unique(torch.randint(-2**31, 2**31, (2 * n + 64,), generator=gen,
                                          dtype=torch.int64).to(dtype))
    if dtype.is_floating_point:
        # drop nans and -0.0 (0.0 stays); put one nan back
        keep = ~torch.isnan(pool) & ~((pool == 0) & torch.signbit(pool))
        pool = torch.cat([pool[keep], torch.tensor([float("nan")], dtype=dtype)])
    if pool.numel() < n:
        raise ValueError(f"cannot draw {n} distinct {dtype} values")
    return pool[torch.randperm(pool.numel(), generator=gen)[:n]]


@register("aten::sort", version=2, kind=Kind.COMPUTE)
class Sort(OperatorSpec):
    entry_points = (
        EntryPoint("sort",
                   "sort(self: Tensor, dim: int = -1, descending: bool = False) "
                   "-> tuple[Tensor, Tensor]",
                   "(values, indices): self sorted along dim, and the int64 positions along dim "
                   "the values came from."),
        EntryPoint("sort_stable",
                   "sort_stable(self: Tensor, *, stable: bool | None, dim: int = -1, "
                   "descending: bool = False) -> tuple[Tensor, Tensor]",
                   "As sort; with stable=True equal elements keep their input order."),
        EntryPoint("sort_values",
                   "sort_values(self: Tensor, dim: int = -1, descending: bool = False, *, "
                   "values: Tensor, indices: Tensor) -> tuple[Tensor, Tensor]",
                   "Writes sort(self, dim, descending) into values (self's dtype) and indices "
                   "(int64), both already of self's shape, and returns (values, indices)."),
    )
    description = (
        "Sorting along one dim, following PyTorch's `torch.sort`: returns `(values, indices)` "
        "where values is self sorted along `dim` (may be negative) in ascending order (descending "
        "when `descending=True`) and indices (int64) gives, for each output position, the "
        "position along dim of that element in self. Comparison is PyTorch's: nan is larger than "
        "every number including inf (last in ascending, first in descending order) and all nans "
        "are equal; -0.0 and 0.0 are equal. With `stable=True` (sort_stable) equal elements keep "
        "their input order (also when descending) and the indices are checked exactly; the "
        "other overloads' cases have distinct keys in every row, so their indices are unique. "
        "self is float16, bfloat16, float32, int32 or int16, may be non-contiguous (transposed "
        "or strided) with up to 5 dims, and rows may be long (~40k elements) or very short; a "
        "0-d self sorts to itself with index 0."
    )
    solution = SOLUTION
    negatives = (
        Negative("signed_zero_order", "orders -0.0 before 0.0 (raw IEEE bits), so a stable sort "
                 "moves equal zeros out of input order", NEGATIVE_SIGNED_ZERO),
        Negative("assumes_unit_stride_dim", "treats the sorted dim as contiguous; wrong for "
                 "dim != last and non-contiguous layouts", NEGATIVE_UNIT_STRIDE),
    )
    # Values are a permutation of the inputs: exact for every dtype. Indices are int64: exact.
    tolerances = {
        "float16": Tolerance(0.0),
        "bfloat16": Tolerance(0.0),
        "float32": Tolerance(0.0),
    }

    # Cases: ``keys="unique"`` draws distinct values for every row, so any correct sort, stable
    # or not, gives the same indices (the harness compares indices exactly, and PyTorch's
    # default sort promises no order among equal keys); ``keys="ties"`` draws from a few levels
    # (with ±0.0 and nan among them) and is used with stable=True only, where the order of
    # equal keys is defined.
    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("sort", "float32", (1, 2), dim=-1, cpu=True),
            case("sort", "float32", (), dim=0, cpu=True),
            case("sort_stable", "float32", (31, 145), dim=-1, stable=True, keys="ties",
                 cpu=True),
            case("sort_stable", "float16", (7, 17, 31), dim=0, stable=True, descending=True,
                 keys="ties", cpu=True),
            case("sort", "bfloat16", (33, 65), dim=1, descending=True, layout="transposed",
                 cpu=True),
            case("sort", "int32", (49, 63), dim=0, cpu=True),
            case("sort_stable", "int16", (20, 40), dim=-1, stable=True, keys="ties",
                 layout="strided", cpu=True),
            case("sort_values", "float32", (5, 7, 11, 13), dim=2, descending=True, cpu=True),
            case("sort_stable", "float32", (1, 2100), dim=-1, stable=False, cpu=True),
        ]
        for dt in (*_FLOATS, "int32", "int16"):
            cs += [
                case("sort", dt, (1, 2), dim=0),
                case("sort", dt, (4096, 256), dim=-1),
                case("sort", dt, (4096, 256), dim=0, descending=True),
                case("sort", dt, (200, 40999, 3), dim=1),
                case("sort", dt, (200, 40999, 3), dim=0, descending=True),
                case("sort", dt, (200, 40999, 3), dim=-1),
                case("sort_stable", dt, (4096, 256), dim=-1, stable=True, keys="ties"),
                case("sort_stable", dt, (200, 40999, 3), dim=1, stable=True, keys="ties",
                     descending=True),
                case("sort_stable", dt, (511, 257), dim=0, stable=True, keys="ties",
                     layout="transposed"),
                case("sort_values", dt, (16, 7, 57, 32, 29), dim=2, layout="strided"),
                case("sort_values", dt, (2, 3, 4, 5, 6), dim=-1, descending=True),
            ]
        cs += [
            case("sort", "float32", (1, 131072), dim=-1, descending=True),
            case("sort_stable", "float32", (3, 100003), dim=1, stable=True, keys="ties"),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in (*_FLOATS, "int32"):
            rank = rng.choice([1, 2, 3])
            cap = {1: 2000, 2: 40, 3: 10}[rank] if small else {1: 300_000, 2: 3000, 3: 200}[rank]
            shape = [rng.randrange(2, cap + 1) for _ in range(rank)]
            dim = rng.randrange(-rank, rank)
            params: dict[str, object] = {
                "dim": dim, "descending": rng.random() < 0.5,
                "layout": rng.choice(["contiguous", "transposed", "strided"]),
            }
            if rng.random() < 0.5:
                out.append(case("sort_stable", dt, tuple(shape), stable=True, keys="ties",
                                cpu=small, **params))
            else:
                # distinct keys along dim: a 16-bit dtype has fewer than 65536 of them
                if dt in _SIXTEEN_BIT:
                    shape[dim] = min(shape[dim], UNIQUE_16BIT_MAX)
                out.append(case(rng.choice(["sort", "sort_values"]), dt, tuple(shape),
                                cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        # 64-100 MB of keys read, values and int64 indices written.
        return [
            case("sort", "float32", (8192, 2048), dim=-1),
            case("sort", "float32", (200, 40999, 3), dim=1),
            case("sort", "bfloat16", (32768, 1024), dim=-1, descending=True),
            case("sort_stable", "float32", (64, 262144), dim=-1, stable=True, keys="ties"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dt = c.torch_dtype
        layout = c.get("layout", "contiguous")
        shape = c.shape
        if c.get("keys") == "ties":
            if dt.is_floating_point:
                levels = torch.tensor(_TIE_LEVELS, dtype=torch.float64).to(dt)
            else:
                levels = torch.arange(-3, 4, dtype=torch.int64).to(dt)
            pick = torch.randint(0, levels.numel(), shape, generator=gen)
            x = levels[pick]
        elif not shape:
            x = _unique_pool(dt, 1, gen).reshape(())
        else:
            # distinct values in every row: one pool of L values, a random order per row
            d = c["dim"] % len(shape)
            length = shape[d]
            pool = _unique_pool(dt, length, gen)
            order = torch.rand(shape, generator=gen).argsort(dim=d)
            x = pool[order]
        x = with_layout(x, layout)
        dim, desc = c["dim"], c.get("descending", False)
        if c.entry == "sort_stable":
            return Call(c.entry, (x,), {"stable": c["stable"], "dim": dim, "descending": desc},
                        outputs=(Out.ret(0), Out.ret(1)))
        if c.entry == "sort_values":
            kwargs = {"values": torch.empty(x.shape, dtype=x.dtype),
                      "indices": torch.empty(x.shape, dtype=torch.int64)}
            return Call(c.entry, (x, dim, desc), kwargs,
                        outputs=(Out.arg("values"), Out.arg("indices")),
                        mutable=frozenset({"values", "indices"}),
                        out_buffers=frozenset({"values", "indices"}))
        return Call(c.entry, (x, dim, desc), outputs=(Out.ret(0), Out.ret(1)))

    @staticmethod
    def _operands(call: Call) -> tuple[torch.Tensor, int, bool]:
        if call.entry == "sort_stable":
            return call.args[0], call.kwargs["dim"], call.kwargs["descending"]
        return call.args[0], call.args[1], call.args[2]

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, dim, desc = self._operands(call)
        # Stable CPU sort: the order every case here defines (ties only where stable=True).
        values, indices = torch.sort(x, dim=dim, descending=desc, stable=True)
        v = values.double() if x.dtype.is_floating_point else values
        return (Expected(v, x.dtype), Expected(indices, torch.int64))

    def baseline(self, call: Call) -> object:
        x, dim, desc = self._operands(call)
        if call.entry == "sort_stable":
            return torch.sort(x, stable=call.kwargs["stable"], dim=dim, descending=desc)
        if call.entry == "sort_values":
            return torch.sort(x, dim, desc, out=(call.kwargs["values"], call.kwargs["indices"]))
        return torch.sort(x, dim, desc)

    def cost(self, c: Case) -> Cost:
        n = numel(c.shape)
        length = c.shape[c["dim"] % len(c.shape)] if c.shape else 1
        size = itemsize(c.torch_dtype)
        # comparisons of an n log2 L sort; keys read once, values and indices written once
        return Cost(flops=float(n * max(1.0, math.log2(max(length, 2)))),
                    bytes=float(n * (2 * size + 8)),
                    dtype=c.dtype if c.torch_dtype.is_floating_point else "float32")
