"""aten::scatter — a copy of ``self`` with ``src`` (or a value) written, added or multiplied at the
positions ``index`` names along ``dim`` (overloads src, value, reduce)."""

from __future__ import annotations

import random
import warnings
from collections.abc import Sequence

import torch

from operators.inputs import randint, randn, sprinkle_specials, uniform, with_layout
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
BLOCK = 1024


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, s1, s2, s3, s4,
                 a0, a1, a2, a3, a4, d0, d1, d2, d3, d4, BLOCK: tl.constexpr):
    offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = offs < n
    rem = offs
    i4 = rem % s4
    rem = rem // s4
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    v = tl.load(src_ptr + i0 * a0 + i1 * a1 + i2 * a2 + i3 * a3 + i4 * a4, mask=mask)
    tl.store(dst_ptr + i0 * d0 + i1 * d1 + i2 * d2 + i3 * d3 + i4 * d4,
             v.to(dst_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _scatter_kernel(out_ptr, out_bits_ptr, dummy_ptr, idx_ptr, src_ptr, value, n,
                    s1, s2, s3, s4,
                    x0, x1, x2, x3, x4,
                    r0, r1, r2, r3, r4,
                    o0, o1, o2, o3, o4, o_dim,
                    MODE: tl.constexpr, HAS_SRC: tl.constexpr, BLOCK: tl.constexpr):
    # One lane per element of index: out[..., index[p], ...] (dim replaced) receives src[p]
    # (or value). MODE 0 stores, 1 adds (float32 atomics), 2 multiplies (a compare-and-swap
    # loop on the float32 bits, as there is no atomic multiply).
    offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = offs < n
    rem = offs
    i4 = rem % s4
    rem = rem // s4
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    idx = tl.load(idx_ptr + i0 * x0 + i1 * x1 + i2 * x2 + i3 * x3 + i4 * x4, mask=mask,
                  other=0).to(tl.int64)
    o_off = i0 * o0 + i1 * o1 + i2 * o2 + i3 * o3 + i4 * o4 + idx * o_dim
    if HAS_SRC:
        v = tl.load(src_ptr + i0 * r0 + i1 * r1 + i2 * r2 + i3 * r3 + i4 * r4, mask=mask)
    else:
        v = tl.full([BLOCK], value, out_ptr.dtype.element_ty)
    if MODE == 0:
        tl.store(out_ptr + o_off, v.to(out_ptr.dtype.element_ty), mask=mask)
    elif MODE == 1:
        tl.atomic_add(out_ptr + o_off, v.to(tl.float32), mask=mask)
    else:
        v = v.to(tl.float32)
        cur = tl.load(out_ptr + o_off, mask=mask, other=1.0)
        pending = mask
        while tl.max(pending.to(tl.int32), axis=0) > 0:
            # lanes already done swap 0 for 0 in a dummy word: a no-op
            expect = tl.where(pending, cur.to(tl.int32, bitcast=True), 0)
            new = tl.where(pending, (cur * v).to(tl.int32, bitcast=True), 0)
            ptrs = tl.where(pending, out_bits_ptr + o_off, dummy_ptr)
            seen = tl.atomic_cas(ptrs, expect, new)
            pending = pending & (seen != expect)
            cur = seen.to(tl.float32, bitcast=True)


def _pad(values, fill):
    values = list(values)
    if len(values) > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dims supported")
    return [fill] * (MAX_DIMS - len(values)) + values


def _copy(src, dst):
    n = dst.numel()
    if n == 0:
        return
    sizes = _pad(dst.shape, 1)
    _copy_kernel[(triton.cdiv(n, BLOCK),)](src, dst, n, *sizes[1:], *_pad(src.stride(), 0),
                                           *_pad(dst.stride(), 0), BLOCK=BLOCK)


def _scatter(self, dim, index, src, value, reduce):
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    nd = max(self.dim(), 1)
    dim = dim % nd
    # Reductions accumulate in a float32 workspace (out itself for float32 self), rounded once.
    wide = reduce is not None and self.dtype != torch.float32
    ws = torch.empty(self.shape, dtype=torch.float32, device=self.device) if wide else out
    _copy(self, ws)
    n = index.numel()
    if n > 0:
        ws_strides = list(ws.stride()) or [0]
        o_dim = ws_strides[dim]
        o_strides = [0 if d == dim else s for d, s in enumerate(ws_strides)]
        i_strides = list(index.stride()) or [0]
        s_strides = (list(src.stride()) or [0]) if src is not None else [0] * len(i_strides)
        sizes = _pad(list(index.shape) or [1], 1)
        mode = 0 if reduce is None else (1 if reduce == "add" else 2)
        if mode == 2:
            bits = ws.view(torch.int32)
            dummy = torch.zeros(1, dtype=torch.int32, device=self.device)
        else:
            bits, dummy = ws, ws
        _scatter_kernel[(triton.cdiv(n, BLOCK),)](
            ws, bits, dummy, index, src if src is not None else ws,
            value if value is not None else 0, n, *sizes[1:],
            *_pad(i_strides, 0), *_pad(s_strides, 0), *_pad(o_strides, 0), o_dim,
            MODE=mode, HAS_SRC=src is not None, BLOCK=BLOCK)
    if wide:
        _copy(ws, out)
    return out


def scatter_src(self, dim, index, src):
    return _scatter(self, dim, index, src, None, None)


def scatter_value(self, dim, index, value):
    if isinstance(value, bool):
        value = int(value)  # passed as an int kernel argument, cast to self's dtype there
    return _scatter(self, dim, index, None, value, None)


def scatter_reduce(self, dim, index, src, *, reduce):
    if reduce not in ("add", "multiply"):
        raise ValueError(f"reduce must be 'add' or 'multiply', got {reduce!r}")
    return _scatter(self, dim, index, src, None, reduce)
'''

# Adds with a plain load, add and store instead of an atomic: right while no two index entries
# name the same output element (src/value cases), wrong for reductions with duplicates.
NEGATIVE_NON_ATOMIC_ADD = SOLUTION.replace(
    "        tl.atomic_add(out_ptr + o_off, v.to(tl.float32), mask=mask)\n",
    "        acc = tl.load(out_ptr + o_off, mask=mask, other=0.0)\n"
    "        tl.store(out_ptr + o_off, acc + v.to(tl.float32), mask=mask)\n")

# Starts from an uninitialized result instead of a copy of self: right only where the scatter
# writes every element (a full permutation along dim).
NEGATIVE_NO_SELF_COPY = SOLUTION.replace("    _copy(self, ws)\n", "")

_FLOATS = ("float16", "bfloat16", "float32")


def _unique_index(shape: Sequence[int], dim: int, size: int, gen: torch.Generator
                  ) -> torch.Tensor:
    """An int64 index of ``shape`` whose entries are distinct along ``dim`` (needs
    ``shape[dim] <= size``): for each line a random affine permutation of [0, size), cut to
    ``shape[dim]``. PyTorch leaves the result of duplicate indices without a reduction
    unspecified (which write wins is up to the implementation), so src/value cases use these."""
    nd = len(shape)
    if nd == 0:
        return torch.zeros((), dtype=torch.int64)
    dim = dim % nd
    k = shape[dim]
    others = [s for i, s in enumerate(shape) if i != dim]
    lines = 1
    for s in others:
        lines *= s
    # a multiplier coprime to size makes c -> (a * c + b) % size a permutation
    a = 1
    for cand in torch.randint(1, max(size, 2), (16,), generator=gen).tolist():
        if _gcd(cand, size) == 1:
            a = cand
            break
    b = torch.randint(0, max(size, 1), (lines, 1), generator=gen)
    c = torch.arange(k).view(1, k)
    idx = (a * c + b) % max(size, 1)
    return idx.view(*others, k).movedim(-1, dim).contiguous()


def _gcd(x: int, y: int) -> int:
    while y:
        x, y = y, x % y
    return x


@register("aten::scatter", version=1, kind=Kind.COMPUTE)
class Scatter(OperatorSpec):
    entry_points = (
        EntryPoint("scatter_src", "scatter_src(self: Tensor, dim: int, index: Tensor, "
                   "src: Tensor) -> Tensor",
                   "A copy of self with src[p] written at the position index[p] names along dim."),
        EntryPoint("scatter_value", "scatter_value(self: Tensor, dim: int, index: Tensor, "
                   "value: Scalar) -> Tensor",
                   "A copy of self with value written at every position index names along dim."),
        EntryPoint("scatter_reduce", "scatter_reduce(self: Tensor, dim: int, index: Tensor, "
                   "src: Tensor, *, reduce: str) -> Tensor",
                   "A copy of self with src[p] added (reduce='add') or multiplied "
                   "(reduce='multiply') into the position index[p] names along dim."),
    )
    description = (
        "Out-of-place scatter, following PyTorch's `torch.scatter(self, dim, index, src)`, "
        "`torch.scatter(self, dim, index, value)` and `torch.scatter(self, dim, index, src, "
        "reduce=...)` (ATen's scatter.reduce, not `torch.scatter_reduce`). The result starts as "
        "a copy of self (same shape and dtype; self itself is not modified), then for every "
        "position p of index, for a 3-D tensor with dim=0: `out[index[i][j][k]][j][k] = "
        "src[i][j][k]` (or `= value`, a Python number cast to self's dtype), and with reduce "
        "'add' `+=`, with 'multiply' `*=` (likewise for any rank up to 5 and any dim, negative "
        "dims counting from the end). index is int64 with the same number of dims as self, "
        "values in [0, self.size(dim)), `index.size(d) <= src.size(d)` for every d and "
        "`index.size(d) <= self.size(d)` for d != dim: only the first index.size(d) entries of "
        "src along each dim are used. Tensors may be non-contiguous (transposed, strided). "
        "Without a reduction, indices never repeat along dim here (PyTorch leaves which write "
        "wins unspecified). With a reduction, they repeat: every contribution must land "
        "(atomics or an equivalent), in any order; reductions take float16, bfloat16 and "
        "float32 and should accumulate in float32 and round once. src/value scatters also take "
        "integer and bool tensors and copy values bit-exact. An empty index returns a copy of "
        "self; a 0-d self takes a 0-d index and src."
    )
    solution = SOLUTION
    negatives = (
        Negative("non_atomic_add", "adds with load/add/store instead of an atomic, losing "
                 "contributions of repeated indices", NEGATIVE_NON_ATOMIC_ADD),
        Negative("no_copy_of_self", "never copies self into the result, so elements no index "
                 "names are garbage", NEGATIVE_NO_SELF_COPY),
    )
    # src/value: bit-exact copies (see tolerance()). Reductions, relative to the conditioning in
    # reference() (|self| + sum |src| for add, (1 + count) |out| for multiply): float32 order
    # differences cost a few u of that; half outputs one rounding of the float32 result. The
    # cases' values are exact-friendly (quarters for add, powers of two for multiply), so any
    # order of exact float32 accumulation gives the exact answer.
    tolerances = {
        "float16": Tolerance.ulps("float16", 2),
        "bfloat16": Tolerance.ulps("bfloat16", 2),
        "float32": Tolerance.ulps("float32", 16),
    }

    def tolerance(self, c: Case, dtype: torch.dtype) -> Tolerance:
        if c.entry != "scatter_reduce":
            return Tolerance(0.0, 0.0)  # pure data movement: bit-exact, NaN positions included
        return super().tolerance(c, dtype)

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            case("scatter_src", "float32", (20, 30), dim=1, index=(20, 10), src=(20, 12),
                 cpu=True),
            case("scatter_src", "float16", (7, 17, 31), dim=0, index=(5, 17, 31),
                 src=(6, 17, 31), layout="transposed", cpu=True),
            case("scatter_src", "bfloat16", (33, 65), dim=-1, index=(30, 65), src=(30, 65),
                 index_layout="transposed", cpu=True),
            # a full permutation along dim: every element of the result is written
            case("scatter_src", "float32", (16, 24), dim=0, index=(16, 24), src=(16, 24),
                 cpu=True),
            case("scatter_src", "int32", (49, 63), dim=1, index=(49, 20), src=(50, 40),
                 src_layout="strided", cpu=True),
            case("scatter_src", "float32", (300,), dim=0, index=(100,), src=(150,),
                 specials=True, cpu=True),
            case("scatter_src", "float32", (), dim=0, index=(), src=(), cpu=True),
            case("scatter_src", "float32", (4, 6), dim=1, index=(4, 0), src=(4, 6), cpu=True),
            case("scatter_value", "float32", (40, 50), dim=0, index=(10, 50), value=2.5,
                 cpu=True),
            case("scatter_value", "int32", (9, 8, 7), dim=-2, index=(9, 3, 7), value=-7,
                 layout="strided", cpu=True),
            case("scatter_reduce", "float32", (30, 20), dim=1, index=(30, 40), src=(30, 40),
                 reduce="add", cpu=True),
            case("scatter_reduce", "bfloat16", (10, 33), dim=0, index=(40, 33), src=(40, 33),
                 reduce="add", index_layout="transposed", cpu=True),
            case("scatter_reduce", "float16", (20, 10), dim=1, index=(20, 12), src=(20, 12),
                 reduce="multiply", cpu=True),
            case("scatter_reduce", "float32", (12, 9), dim=0, index=(20, 9), src=(20, 9),
                 reduce="multiply", layout="transposed", cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case("scatter_src", dt, (1024, 4097), dim=1, index=(1024, 2065),
                     src=(1024, 2065)),
                case("scatter_src", dt, (4096, 1024), dim=0, index=(3000, 1000),
                     src=(3001, 1024), layout="transposed", index_layout="transposed"),
                case("scatter_src", dt, (16, 7, 57, 32, 29), dim=2, index=(16, 7, 50, 32, 29),
                     src=(16, 7, 50, 32, 29), src_layout="strided"),
                case("scatter_value", dt, (511, 257), dim=-1, index=(511, 100), value=-111.999),
                case("scatter_reduce", dt, (1000, 1000), dim=0, index=(4000, 1000),
                     src=(4000, 1000), reduce="add"),
                case("scatter_reduce", dt, (63, 145), dim=1, index=(63, 600), src=(63, 600),
                     reduce="add", layout="transposed"),
                case("scatter_reduce", dt, (2, 3, 4, 5, 6), dim=-1, index=(2, 3, 4, 5, 8),
                     src=(2, 3, 4, 5, 8), reduce="multiply"),
                case("scatter_reduce", dt, (500, 700), dim=0, index=(1000, 700),
                     src=(1000, 700), reduce="multiply", index_layout="transposed"),
            ]
        cs += [
            case("scatter_src", "int64", (100003,), dim=0, index=(50000,), src=(50000,)),
            case("scatter_value", "bool", (300, 200), dim=1, index=(300, 50), value=True),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for entry in ("scatter_src", "scatter_value", "scatter_reduce"):
            dt = rng.choice(["float32"] if small else [*_FLOATS, "int32"])
            if entry == "scatter_reduce" and dt == "int32":
                dt = "float32"
            rank = rng.choice([1, 2, 3])
            shape = [rng.randrange(1, 10 if small else 200) for _ in range(rank)]
            dim = rng.randrange(-rank, rank)
            index = [rng.randrange(1, s + 1) for s in shape]
            reduce = rng.choice(["add", "multiply"]) if entry == "scatter_reduce" else None
            if reduce is None:
                index[dim] = rng.randrange(1, shape[dim] + 1)  # unique along dim
            else:
                # repeats; few per element for multiply, whose exact powers of two must not
                # overflow float16
                index[dim] = rng.randrange(1, (3 if reduce == "multiply" else 8) * shape[dim] + 1)
            src = [i + rng.randrange(0, 3) for i in index]
            params: dict[str, object] = {
                "dim": dim, "index": tuple(index),
                "layout": rng.choice(["contiguous", "transposed", "strided"]),
                "index_layout": rng.choice(["contiguous", "transposed"]),
            }
            if entry == "scatter_value":
                params["value"] = rng.choice([0.5, -3.0, 100.001])
            else:
                params["src"] = tuple(src)
            if reduce is not None:
                params["reduce"] = reduce
            out.append(case(entry, dt, tuple(shape), cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            # a permutation of each row: 64 MB read, 128 MB of index, 64 MB src, 64 MB written
            case("scatter_src", "float32", (4096, 4096), dim=1, index=(4096, 4096),
                 src=(4096, 4096)),
            # scatter-add of 16M rows' worth of contributions with repeats (float32 atomics)
            case("scatter_reduce", "float32", (4096, 4096), dim=0, index=(4096, 4096),
                 src=(4096, 4096), reduce="add"),
            # bf16 accumulated in a float32 workspace
            case("scatter_reduce", "bfloat16", (2048, 4096), dim=0, index=(4096, 4096),
                 src=(4096, 4096), reduce="add"),
            case("scatter_value", "float16", (8192, 4096), dim=1, index=(8192, 1024), value=1.0),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dt, dim, reduce = c.dtype, c["dim"], c.get("reduce")
        layout = c.get("layout", "contiguous")
        size = c.shape[dim] if c.shape else 1
        ishape = tuple(c["index"])
        if reduce is None:
            idx = _unique_index(ishape, dim, size, gen)
        else:
            idx = randint(ishape, "int64", gen, low=0, high=size)
        idx = with_layout(idx, c.get("index_layout", "contiguous"))
        src_layout = c.get("src_layout", "contiguous")
        src: torch.Tensor | None
        if reduce == "add":
            # quarters: every partial sum is exact in float16, bfloat16 (|x| < 64) and float32
            x = with_layout(randint(c.shape, "int32", gen, low=-32, high=33).to(
                dtype_from_name(dt)) / 4, layout)
            src = with_layout(randint(c["src"], "int32", gen, low=-4, high=5).to(
                dtype_from_name(dt)) / 4, src_layout)
        elif reduce == "multiply":
            # |self| in [0.5, 2) times powers of two: every product is exact (no denormals)
            mag = uniform(c.shape, dt, gen, low=0.5, high=2.0)
            sign = randint(c.shape, "int32", gen, low=0, high=2) * 2 - 1
            x = with_layout(mag * sign.to(mag.dtype), layout)
            pw = randint(c["src"], "int32", gen, low=-1, high=2)
            sgn = randint(c["src"], "int32", gen, low=0, high=2) * 2 - 1
            src = with_layout((torch.pow(2.0, pw.double()) * sgn).to(dtype_from_name(dt)),
                              src_layout)
        else:
            x = self._values(c.shape, dt, gen, layout)
            src = self._values(c["src"], dt, gen, src_layout) if "src" in dict(c.params) \
                else None
            if c.get("specials") and src is not None:
                src = sprinkle_specials(src, gen, fraction=0.05)
        if c.entry == "scatter_value":
            return Call(c.entry, (x, dim, idx, c["value"]))
        if c.entry == "scatter_reduce":
            return Call(c.entry, (x, dim, idx, src), {"reduce": reduce})
        return Call(c.entry, (x, dim, idx, src))

    @staticmethod
    def _values(shape: Sequence[int], dt: str, gen: torch.Generator, layout: str
                ) -> torch.Tensor:
        if dt == "bool":
            return randint(shape, "int32", gen, low=0, high=2, layout=layout) == 1
        if dt in ("int32", "int64"):
            return randint(shape, dt, gen, low=-1000, high=1000, layout=layout)
        return randn(shape, dt, gen, layout=layout)

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, dim, idx = call.args[0], call.args[1], call.args[2]
        if call.entry == "scatter_value":
            return (Expected(torch.scatter(x, dim, idx, call.args[3]), x.dtype),)
        src = call.args[3]
        if call.entry == "scatter_src":
            return (Expected(torch.scatter(x, dim, idx, src), x.dtype),)
        x64, s64 = x.double(), src.double()
        sub = s64[tuple(slice(0, n) for n in idx.shape)]  # the src entries index uses
        if call.kwargs["reduce"] == "add":
            value = torch.scatter_add(x64, dim, idx, sub)
            scale = torch.scatter_add(x64.abs(), dim, idx, sub.abs())
        else:
            value = torch.scatter_reduce(x64, dim, idx, sub, "prod")
            count = torch.scatter_add(torch.ones_like(x64), dim, idx, torch.ones_like(sub))
            scale = value.abs() * count
        return (Expected(value, x.dtype, scale),)

    def baseline(self, call: Call) -> object:
        x, dim, idx, other = call.args
        if call.entry == "scatter_reduce":
            with warnings.catch_warnings():  # torch deprecates reduce= in favour of
                warnings.simplefilter("ignore")  # scatter_reduce, but it is this overload
                return torch.scatter(x, dim, idx, other, reduce=call.kwargs["reduce"])
        return torch.scatter(x, dim, idx, other)

    def cost(self, c: Case) -> Cost:
        n_self = n_idx = 1
        for d in c.shape:
            n_self *= d
        for d in c["index"]:
            n_idx *= d
        elem = torch.empty((), dtype=dtype_from_name(c.dtype)).element_size()
        src_bytes = 0 if c.entry == "scatter_value" else elem * n_idx
        flops = float(n_idx) if c.entry == "scatter_reduce" else 0.0
        return Cost(flops=flops, bytes=float(2 * elem * n_self + 8 * n_idx + src_bytes),
                    dtype=c.dtype)
