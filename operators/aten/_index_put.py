"""The index_put_ family (aten::index_put_, aten::_index_put_impl_), on the advanced-indexing
machinery of :mod:`operators.aten._indexing`. Registers nothing.

``PUT_CORE`` is ``ADV_CORE`` plus the writing side (a strided widen/narrow copy and a bool-mask
path); :class:`IndexPutBase` the spec both problems share.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.aten._indexing import (
    ADV_CORE,
    esize,
    int_values,
    make_indices,
    numel,
    result_shape,
    with_specials,
)
from operators.inputs import randn, with_layout
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Negative,
    OperatorSpec,
    Out,
    Tier,
    Tolerance,
    case,
)

# The index_put_ family: ADV_CORE plus a strided widen/narrow copy (half-precision accumulation
# goes through a float32 scratch so each element is rounded once) and a bool-mask path that
# numbers the True elements with a block-wise scan instead of materialising nonzero().
PUT_CORE = ADV_CORE + r"""

MASK_BLOCK = 128   # mask elements per program of the mask kernels
ROW_BLOCK = 32     # trailing (post-mask) elements per inner step


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, s1, s2, s3, s4, s5, t0, t1, t2, t3, t4, t5,
                 BLOCK: tl.constexpr):
    # dst and src share strides t*; the value is converted to dst's dtype.
    pid = tl.program_id(0)
    r = (pid * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = r < n
    rem = r
    x5 = rem % s5
    rem = rem // s5
    x4 = rem % s4
    rem = rem // s4
    x3 = rem % s3
    rem = rem // s3
    x2 = rem % s2
    rem = rem // s2
    x1 = rem % s1
    x0 = rem // s1
    off = x0 * t0 + x1 * t1 + x2 * t2 + x3 * t3 + x4 * t4 + x5 * t5
    v = tl.load(src_ptr + off, mask=mask)
    tl.store(dst_ptr + off, v.to(dst_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _mask_count_kernel(mask_ptr, counts_ptr, M, ms1, ms2, mk0, mk1, mk2,
                       BLOCK_M: tl.constexpr):
    pid = tl.program_id(0)
    m = (pid * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    u2 = m % ms2
    u1 = (m // ms2) % ms1
    u0 = m // (ms2 * ms1)
    mv = tl.load(mask_ptr + u0 * mk0 + u1 * mk1 + u2 * mk2, mask=m < M, other=0)
    tl.store(counts_ptr + pid, tl.sum((mv != 0).to(tl.int64), axis=0))


@triton.jit
def _exclusive_scan_kernel(counts_ptr, nb, BLOCK: tl.constexpr):
    # One program: counts -> exclusive prefix sums, in place, chunk by chunk with a carry.
    carry = tl.zeros([1], dtype=tl.int64)
    cols = tl.arange(0, BLOCK)
    for start in range(0, nb, BLOCK):
        c = start + cols
        x = tl.load(counts_ptr + c, mask=c < nb, other=0)
        y = tl.cumsum(x, axis=0) - x + carry
        tl.store(counts_ptr + c, y, mask=c < nb)
        carry += tl.sum(x, axis=0)


@triton.jit
def _mask_put_kernel(self_ptr, values_ptr, mask_ptr, offs_ptr, M, R,
                     ms1, ms2, mk0, mk1, mk2, sm0, sm1, sm2,
                     ps, pv, vk, r1, sr0, sr1, vr0, vr1,
                     ACC: tl.constexpr, UPCAST: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_R: tl.constexpr):
    # Program (i, p): mask elements [i*BLOCK_M, (i+1)*BLOCK_M) for leading index p. The k-th
    # True element (row-major over the mask) takes row k of the values.
    pid_m = tl.program_id(0)
    pid_p = tl.program_id(1).to(tl.int64)
    m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    mm = m < M
    u2 = m % ms2
    u1 = (m // ms2) % ms1
    u0 = m // (ms2 * ms1)
    mv = (tl.load(mask_ptr + u0 * mk0 + u1 * mk1 + u2 * mk2, mask=mm, other=0) != 0)
    mv = mv & mm
    hit = mv.to(tl.int64)
    k = tl.load(offs_ptr + pid_m) + tl.cumsum(hit, axis=0) - hit
    s_base = pid_p * ps + u0 * sm0 + u1 * sm1 + u2 * sm2
    v_base = pid_p * pv + k * vk
    for start in range(0, R, BLOCK_R):
        r = (start + tl.arange(0, BLOCK_R)).to(tl.int64)
        e1 = r % r1
        e0 = r // r1
        w = mv[:, None] & (r < R)[None, :]
        s_off = s_base[:, None] + (e0 * sr0 + e1 * sr1)[None, :]
        v = tl.load(values_ptr + v_base[:, None] + (e0 * vr0 + e1 * vr1)[None, :], mask=w)
        if ACC:
            cur = tl.load(self_ptr + s_off, mask=w)
            if UPCAST:  # half precision: add in float32, round once
                v = v.to(tl.float32) + cur.to(tl.float32)
            else:
                v = v + cur
        tl.store(self_ptr + s_off, v.to(self_ptr.dtype.element_ty), mask=w)


def _bcast_strides(t, shape):
    # t's strides when broadcast (right-aligned) to shape; size-1 and missing dims read stride 0
    lead = len(shape) - t.dim()
    return [0 if d < lead or t.shape[d - lead] == 1 else t.stride(d - lead)
            for d in range(len(shape))]


def _mask_put(self, indices, values, acc):
    lead = 0
    while indices[lead] is None:
        lead += 1
    mask = indices[lead]
    if any(i is not None for k, i in enumerate(indices) if k != lead):
        raise ValueError("a bool mask mixed with other index tensors is not supported")
    md = mask.dim()
    post = list(range(lead + md, self.dim()))
    if lead > 1 or md > 3 or len(post) > 2:
        raise ValueError("mask layout not supported")
    M = mask.numel()
    R = math.prod(self.shape[d] for d in post)
    P = self.shape[0] if lead else 1
    if M == 0 or R == 0 or P == 0:
        return
    msz = [1] * (3 - md) + list(mask.shape)
    mk = [0] * (3 - md) + list(mask.stride())
    sm = [0] * (3 - md) + [self.stride(d) for d in range(lead, lead + md)]
    psz = [1] * (2 - len(post)) + [self.shape[d] for d in post]
    sr = [0] * (2 - len(post)) + [self.stride(d) for d in post]
    # values broadcast against (leading?, count, post...): count's size is only known on device
    vshape = [P] * lead + [-1] + [self.shape[d] for d in post]
    vs = _bcast_strides(values, [1 if s == -1 else s for s in vshape])
    lead_v = len(vshape) - values.dim()
    kdim = lead
    vk = values.stride(kdim - lead_v) if kdim >= lead_v and values.shape[kdim - lead_v] != 1 else 0
    pv = vs[0] if lead else 0
    vr = [0] * (2 - len(post)) + vs[lead + 1:]
    nb = triton.cdiv(M, MASK_BLOCK)
    offs = torch.empty(nb, dtype=torch.int64, device=self.device)
    _mask_count_kernel[(nb,)](mask, offs, M, msz[1], msz[2], *mk, BLOCK_M=MASK_BLOCK)
    _exclusive_scan_kernel[(1,)](offs, nb, BLOCK=1024)
    _mask_put_kernel[(nb, P)](self, values, mask, offs, M, R, msz[1], msz[2], *mk, *sm,
                              self.stride(0) if lead else 0, pv, vk, psz[1], *sr, *vr,
                              ACC=acc, UPCAST=self.dtype in (torch.float16, torch.bfloat16),
                              BLOCK_M=MASK_BLOCK, BLOCK_R=ROW_BLOCK)


def _strided_copy(src, dst):
    n = src.numel()
    if n == 0:
        return
    _copy_kernel[(triton.cdiv(n, BLOCK),)](src, dst, n, *_pad(src.shape, 1)[1:],
                                           *_pad(src.stride(), 0), BLOCK=BLOCK)


def _index_put(self, indices, values, accumulate):
    acc = bool(accumulate)
    indices = list(indices) + [None] * (self.dim() - len(indices))
    if any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices):
        _mask_put(self, indices, values, acc)
        return self
    plan = _plan(self, indices)
    if math.prod(plan[0]) == 0:
        return self
    vals = values.expand(plan[0])
    vstrides = list(vals.stride())
    if not acc:
        _run(self, vals, plan, vstrides, 1)
    elif self.dtype in (torch.float16, torch.bfloat16):
        # accumulate in a float32 copy of self (same strides), then round once into self
        wide = torch.empty_strided(self.shape, self.stride(), dtype=torch.float32,
                                   device=self.device)
        _strided_copy(self, wide)
        _run(wide, vals, plan, vstrides, 2)
        _strided_copy(wide, self)
    else:
        _run(self, vals, plan, vstrides, 2)
    return self
"""



_FLOATS = ("float16", "bfloat16", "float32")

PUT_DESCRIPTION = (
    "In-place advanced-index assignment, following PyTorch's `aten::{op}`: `self[indices] = "
    "values`, or `self[indices] += values` when `accumulate` is True; returns `self`. `indices` "
    "is a list (possibly shorter than self.dim(); missing trailing entries are full slices) of "
    "None (a full slice of that dim) or index tensors. Integer index tensors (int64) index their "
    "dim, broadcast against each other to a shape B (0-d included), and negative indices count "
    "from the end (i + size); the indexed result `self[indices]` has B's dims in place of the "
    "indexed dims when those are adjacent (no None between two index tensors), else B's dims "
    "first followed by the non-indexed dims. A bool mask entry (the only tensor in the list, "
    "possibly after one leading None) selects the True positions of the dims it covers, in "
    "row-major order, as one dim of size count(True). `values` has self's dtype and broadcasts "
    "to the shape of `self[indices]`; it may be non-contiguous. With accumulate=False the "
    "indexed positions are distinct (PyTorch leaves repeated positions unspecified). With "
    "accumulate=True positions may repeat and every value is added (`index_add`-like); for "
    "float16/bfloat16 accumulate in float32 and round each element once (order is free). "
    "self may be non-contiguous (transposed or strided); dtypes float16, bfloat16, float32, "
    "int32. Indices are always in range."
)


class IndexPutBase(OperatorSpec):
    """aten::index_put_ and aten::_index_put_impl_ (registered by their own modules)."""

    OP = ""             # the operator (and entry point) name
    UNSAFE = False      # whether the entry point takes _index_put_impl_'s `unsafe` flag

    tolerances = {dt: Tolerance.ulps(dt, 2) for dt in _FLOATS}
    # Relative to (terms at the position) x (sum of their magnitudes): recursive summation of k
    # terms in any order errs by at most (k - 1) u of the magnitude sum (PyTorch's CPU kernel
    # adds in self's dtype, GPU atomics in any order); a float32 accumulation rounded once errs
    # by u. Assignments and exact-friendly (small integer) accumulations must be exact: scale 0.

    def cases(self) -> Sequence[Case]:
        e = self.OP
        cs: list[Case] = [
            case(e, "float32", (7, 17, 31), idx=(None, (5,), None), acc=False, cpu=True),
            case(e, "float16", (63, 145), idx=((40,),), acc=True, cpu=True),
            case(e, "bfloat16", (5, 7, 11), idx=((3, 1), None, (1, 4)), acc=False, vals="row",
                 cpu=True),
            case(e, "float32", (33, 65), idx=(None, (40,)), acc=True, exact=True,
                 layout="transposed", cpu=True),
            case(e, "float32", (20, 40, 3), mask=(0, (20, 40)), acc=False, cpu=True),
            case(e, "bfloat16", (6, 9, 5), mask=(1, (9, 5)), acc=True, cpu=True),
            case(e, "int32", (33, 65), idx=((9,),), acc=False, cpu=True),
            case(e, "float16", (50, 7), idx=((30,),), acc=True, vals="scalar", exact=True,
                 cpu=True),
            case(e, "float32", (20, 40), idx=((2, 3), (2, 3)), acc=False, layout="strided",
                 specials=True, cpu=True),
            case(e, "float32", (10, 12), mask=(0, (10, 12)), acc=False, vals="scalar", cpu=True),
        ]
        for dt in _FLOATS:
            cs += [
                case(e, dt, (1024, 1024), idx=((4097,),), acc=True),
                case(e, dt, (1024, 1024), idx=((1000,),), acc=False, specials=True),
                case(e, dt, (511, 257), idx=(None, (300,)), acc=True, exact=True),
                case(e, dt, (16, 7, 57, 32, 29), idx=(None, (3, 1), None, (1, 5)), acc=False,
                     layout="transposed"),
                case(e, dt, (20, 320, 15), idx=((49, 1), (1, 63)), acc=True, vals="row"),
                case(e, dt, (145, 63, 7), mask=(1, (63, 7)), acc=False),
                case(e, dt, (2065, 33), mask=(0, (2065,)), acc=True, layout="strided"),
                case(e, dt, (49, 63), mask=(0, (49, 63)), acc=False, vals="scalar"),
            ]
        cs += [
            case(e, "int32", (2065, 33), idx=((529,), None), acc=True),
            case(e, "int32", (30, 40, 5), mask=(0, (30, 40)), acc=True),
            case(e, "float32", (64, 32, 60), idx=((64, 1, 1), (1, 32, 1), (60,)), acc=False),
        ]
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        top = 12 if small else 90
        out = []
        for dt in (rng.choice(_FLOATS), rng.choice(_FLOATS)):
            rank = rng.choice([2, 3])
            shape = [rng.randrange(4, top) for _ in range(rank)]
            d = rng.randrange(rank)
            acc = rng.random() < 0.5
            n = rng.randrange(1, shape[d] + 1)  # unique indices need n <= size
            spec: list[object] = [None] * d + [(n,)]
            out.append(case(self.OP, dt, shape, idx=tuple(spec), acc=acc,
                            layout=rng.choice(["contiguous", "transposed", "strided"]),
                            vals=rng.choice(["full", "full", "row"]), cpu=small))
        dt = rng.choice(_FLOATS)
        shape = [rng.randrange(2, top) for _ in range(3)]
        lead = rng.choice([0, 1])
        out.append(case(self.OP, dt, shape, mask=(lead, tuple(shape[lead:lead + 2])),
                        acc=rng.random() < 0.5, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        e = self.OP
        return [
            # 64-100 MB of traffic each: row scatter, row scatter-add with repeats (half
            # precision through the float32 scratch), and a bool-mask fill of a large tensor
            case(e, "float32", (8192, 1024), idx=((8192,),), acc=False),
            case(e, "bfloat16", (4096, 2048), idx=((8192,),), acc=True),
            case(e, "float32", (8192, 2048), mask=(0, (8192, 2048)), acc=False, vals="scalar"),
        ]

    # ---- inputs ----------------------------------------------------------------------------
    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        layout = c.get("layout", "contiguous")
        acc = bool(c["acc"])
        exact = c.get("exact", False)
        if c.dtype == "int32" or exact:
            x = int_values(c.shape, c.dtype, gen, layout=layout)
        else:
            x = with_layout(randn(c.shape, c.dtype, gen), layout)
        mask_spec = c.get("mask")
        if mask_spec is not None:
            lead, mshape = mask_spec
            mask = torch.rand(tuple(mshape), generator=gen) < 0.5
            indices: list[torch.Tensor | None] = [None] * lead + [mask]
            full = tuple(c.shape[:lead]) + (int(mask.sum()),) + tuple(c.shape[lead + len(mshape):])
        else:
            # accumulate=False needs distinct positions: with repeats PyTorch does not say which
            # value wins (and its CUDA kernel is nondeterministic); accumulate=True draws with
            # replacement so positions repeat.
            indices = make_indices(c["idx"], c.shape, gen, neg=c.get("neg", True),
                                   unique=not acc)
            full = result_shape(c.shape, c["idx"])
        vals = c.get("vals", "full")
        vshape = () if vals == "scalar" else full[-1:] if vals == "row" else full
        if c.dtype == "int32" or exact:
            v = int_values(vshape, c.dtype, gen)
        else:
            v = randn(vshape, c.dtype, gen)
            if c.get("specials"):
                v = with_specials(v, gen, 0.05)
        args: tuple[Any, ...] = (x, indices, v, acc)
        if self.UNSAFE:
            args = args + (False,)
        return Call(c.entry, args, outputs=(Out.arg(0),), mutable=frozenset({0}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, indices, v, acc = call.args[:4]
        if not x.dtype.is_floating_point:
            value = torch.ops.aten.index_put_(x.clone(), indices, v, acc)
            return (Expected(value, x.dtype),)
        x64, v64 = x.double(), v.double()
        value = torch.ops.aten.index_put_(x64.clone(), indices, v64, acc)
        exact = bool(torch.equal(x64, x64.round())) and bool(torch.equal(v64, v64.round())) \
            and bool((x64.abs() <= 4).all()) and bool((v64.abs() <= 4).all())
        if not acc or exact:
            return (Expected(value, x.dtype, torch.zeros_like(value)),)
        mags = torch.ops.aten.index_put_(x64.abs(), indices, v64.abs(), True)
        terms = torch.ops.aten.index_put_(torch.ones_like(x64), indices,
                                          torch.ones((), dtype=torch.float64), True)
        return (Expected(value, x.dtype, terms * mags),)

    def baseline(self, call: Call) -> object:
        if self.UNSAFE:
            return torch.ops.aten._index_put_impl_(*call.args)
        return torch.ops.aten.index_put_(*call.args)

    def cost(self, c: Case) -> Cost:
        size = esize(c.torch_dtype)
        mask_spec = c.get("mask")
        if mask_spec is not None:
            n_mask = numel(mask_spec[1])
            # a random mask selects about half its positions
            n = numel(c.shape) // 2
            idx_bytes = n_mask
        else:
            n = numel(result_shape(c.shape, c["idx"]))
            idx_bytes = 8 * sum(numel(s) for s in c["idx"] if s is not None)
        vals = c.get("vals", "full")
        v_bytes = 0 if vals == "scalar" else n * size
        # each indexed position written once (read too when accumulating), values read once
        pos = n * size * (2 if c["acc"] else 1)
        return Cost(flops=float(n if c["acc"] else 0), bytes=float(pos + v_bytes + idx_bytes),
                    dtype=c.dtype)


def put_entry_points(op: str, unsafe: bool) -> tuple[EntryPoint, ...]:
    extra = ", unsafe: bool = False" if unsafe else ""
    return (EntryPoint(op, f"{op}(self: Tensor, indices: list[Tensor | None], values: Tensor, "
                       f"accumulate: bool = False{extra}) -> Tensor",
                       "Writes (or, when accumulate, adds) values into self[indices] in place and "
                       "returns self." + (" unsafe (skip index checks) does not change the "
                                          "result." if unsafe else "")),)


def put_negatives(solution: str) -> tuple[Negative, ...]:
    no_acc = solution.replace("acc = bool(accumulate)", "acc = False")
    no_carry = solution.replace("k = tl.load(offs_ptr + pid_m) + tl.cumsum(hit, axis=0) - hit",
                                "k = tl.cumsum(hit, axis=0) - hit")
    assert no_acc != solution and no_carry != solution
    return (
        Negative("ignores_accumulate", "always assigns, even when accumulate=True asks to add "
                 "(and to add every repeat)", no_acc),
        Negative("mask_count_restarts_per_block", "numbers the True elements of a bool mask "
                 "within each block only, forgetting the Trues of earlier blocks: right for "
                 "masks of at most one block", no_carry),
    )


__all__ = ["PUT_CORE", "PUT_DESCRIPTION", "IndexPutBase", "put_entry_points", "put_negatives"]
