"""Shared machinery of the advanced-indexing problems (aten::index, aten::index_put_,
aten::_index_put_impl_). Registers nothing (the registry skips ``_`` modules).

``ADV_CORE`` is the Triton source both solutions start from: it lays out PyTorch's advanced
indexing (the index tensors broadcast together to a shape B; B's dims replace the indexed dims in
place when the indexed dims are adjacent, else they go first) and moves data between ``self`` and
the indexing result with one kernel. The spec-side helpers build index lists from case params.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.inputs import randint, randn, with_layout
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

ADV_CORE = r'''
import math

import torch
import triton
import triton.language as tl

MAX_DIMS = 6   # dims of the indexing result: self's kept dims plus the broadcast index dims
MAX_IDX = 3    # index tensors (non-None entries of indices)
BLOCK = 1024


@triton.jit
def _adv_kernel(self_ptr, other_ptr, i0_ptr, i1_ptr, i2_ptr, n,
                s1, s2, s3, s4, s5,
                p0, p1, p2, p3, p4, p5,
                q0, q1, q2, q3, q4, q5,
                a0, a1, a2, a3, a4, a5,
                b0, b1, b2, b3, b4, b5,
                c0, c1, c2, c3, c4, c5,
                d0, d1, d2, z0, z1, z2,
                NUM_IDX: tl.constexpr, MODE: tl.constexpr, BLOCK: tl.constexpr):
    # One program per BLOCK elements of the indexing result r. p*: self's strides along the
    # result dims (0 on the broadcast index dims); q*: the other tensor's strides (the output
    # for a gather, the broadcast values for a put); a*/b*/c*: each index tensor's strides along
    # the result dims; d*: self's stride of each indexed dim; z*: its size (negative indices wrap).
    # MODE 0: other[r] = self[at(r)]; 1: self[at(r)] = other[r]; 2: self[at(r)] += other[r].
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
    s_off = x0 * p0 + x1 * p1 + x2 * p2 + x3 * p3 + x4 * p4 + x5 * p5
    o_off = x0 * q0 + x1 * q1 + x2 * q2 + x3 * q3 + x4 * q4 + x5 * q5
    j = tl.load(i0_ptr + (x0 * a0 + x1 * a1 + x2 * a2 + x3 * a3 + x4 * a4 + x5 * a5),
                mask=mask, other=0).to(tl.int64)
    s_off += tl.where(j < 0, j + z0, j) * d0
    if NUM_IDX > 1:
        j = tl.load(i1_ptr + (x0 * b0 + x1 * b1 + x2 * b2 + x3 * b3 + x4 * b4 + x5 * b5),
                    mask=mask, other=0).to(tl.int64)
        s_off += tl.where(j < 0, j + z1, j) * d1
    if NUM_IDX > 2:
        j = tl.load(i2_ptr + (x0 * c0 + x1 * c1 + x2 * c2 + x3 * c3 + x4 * c4 + x5 * c5),
                    mask=mask, other=0).to(tl.int64)
        s_off += tl.where(j < 0, j + z2, j) * d2
    if MODE == 0:
        v = tl.load(self_ptr + s_off, mask=mask)
        tl.store(other_ptr + o_off, v, mask=mask)
    elif MODE == 1:
        v = tl.load(other_ptr + o_off, mask=mask)
        tl.store(self_ptr + s_off, v.to(self_ptr.dtype.element_ty), mask=mask)
    else:
        v = tl.load(other_ptr + o_off, mask=mask).to(self_ptr.dtype.element_ty)
        tl.atomic_add(self_ptr + s_off, v, mask=mask, sem="relaxed")


def _pad(values, fill):
    values = list(values)
    return [fill] * (MAX_DIMS - len(values)) + values


def _plan(self, indices):
    """The indexing result's shape and, per result dim, self's stride and each index tensor's
    stride; plus the index tensors broadcast to B, and the strides/sizes of the indexed dims."""
    nd = self.dim()
    idx = list(indices) + [None] * (nd - len(indices))
    adv = [d for d in range(nd) if idx[d] is not None]
    if not adv or len(adv) > MAX_IDX:
        raise ValueError(f"1 to {MAX_IDX} index tensors supported")
    bshape = list(torch.broadcast_shapes(*[idx[d].shape for d in adv]))
    ex = [idx[d].expand(bshape) for d in adv]
    kept = [d for d in range(nd) if idx[d] is None]
    adjacent = adv == list(range(adv[0], adv[-1] + 1))
    first = adv[0] if adjacent else 0  # non-adjacent index dims go first
    dims = ([("s", d) for d in kept if d < first] + [("b", k) for k in range(len(bshape))]
            + [("s", d) for d in kept if d >= first])
    if len(dims) > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} result dims supported")
    shape = [self.shape[d] if t == "s" else bshape[d] for t, d in dims]
    self_strides = [self.stride(d) if t == "s" else 0 for t, d in dims]
    idx_strides = [[0 if t == "s" else e.stride(d) for t, d in dims] for e in ex]
    return (shape, self_strides, idx_strides, ex, [self.stride(d) for d in adv],
            [self.shape[d] for d in adv])


def _run(self, other, plan, other_strides, mode):
    shape, self_strides, idx_strides, ex, dstr, dsize = plan
    n = math.prod(shape)
    if n == 0:
        return
    ptrs = list(ex)
    ist = [_pad(s, 0) for s in idx_strides]
    dstr, dsize = list(dstr), list(dsize)
    while len(ptrs) < MAX_IDX:  # unused slots: never read (NUM_IDX is a constexpr)
        ptrs.append(ex[0])
        ist.append([0] * MAX_DIMS)
        dstr.append(0)
        dsize.append(1)
    grid = (triton.cdiv(n, BLOCK),)
    _adv_kernel[grid](self, other, *ptrs, n, *_pad(shape, 1)[1:], *_pad(self_strides, 0),
                      *_pad(other_strides, 0), *ist[0], *ist[1], *ist[2], *dstr, *dsize,
                      NUM_IDX=len(ex), MODE=mode, BLOCK=BLOCK)
'''


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


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def esize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def make_index(shape: Sequence[int], size: int, gen: torch.Generator, *, neg: bool,
               unique: bool, itype: str = "int64", layout: str = "contiguous") -> torch.Tensor:
    """An index tensor of ``shape`` into a dim of ``size``: uniform with replacement, or distinct
    values (a random permutation) when ``unique``; negative spellings mixed in when ``neg``."""
    n = numel(shape)
    if unique:
        if n > size:
            raise ValueError(f"{n} unique indices into a dim of {size}")
        vals = torch.randperm(size, generator=gen)[:n]
    else:
        vals = torch.randint(0, max(size, 1), (n,), generator=gen) if size else \
            torch.zeros(n, dtype=torch.int64)
    if neg and n:
        flip = torch.rand(n, generator=gen) < 0.5
        vals = torch.where(flip, vals - size, vals)
    return with_layout(vals.reshape(tuple(shape)).to(getattr(torch, itype)), layout)


def make_indices(spec: Sequence[Any], self_shape: Sequence[int], gen: torch.Generator, *,
                 neg: bool, unique: bool, itype: str = "int64",
                 idx_layout: str = "contiguous") -> list[torch.Tensor | None]:
    """The ``indices`` list of a case: ``spec`` holds None (a full slice) or an index tensor's
    shape per dim of self."""
    out: list[torch.Tensor | None] = []
    for d, s in enumerate(spec):
        if s is None:
            out.append(None)
        else:
            out.append(make_index(s, self_shape[d], gen, neg=neg, unique=unique, itype=itype,
                                  layout=idx_layout))
    return out


def result_shape(self_shape: Sequence[int], spec: Sequence[Any]) -> tuple[int, ...]:
    """Shape of ``self[indices]`` for an index spec (see :func:`make_indices`)."""
    nd = len(self_shape)
    full = list(spec) + [None] * (nd - len(spec))
    adv = [d for d in range(nd) if full[d] is not None]
    b = tuple(torch.broadcast_shapes(*[tuple(full[d]) for d in adv]))
    kept = [d for d in range(nd) if full[d] is None]
    first = adv[0] if adv == list(range(adv[0], adv[-1] + 1)) else 0
    return (tuple(self_shape[d] for d in kept if d < first) + b
            + tuple(self_shape[d] for d in kept if d >= first))


def int_values(shape: Sequence[int], dtype: str, gen: torch.Generator, *, lim: int = 4,
               layout: str = "contiguous") -> torch.Tensor:
    """Small integers (exactly representable in every float dtype), as ``dtype``."""
    return randint(shape, dtype, gen, low=-lim, high=lim + 1, layout=layout)


def with_specials(t: torch.Tensor, gen: torch.Generator, fraction: float = 0.01) -> torch.Tensor:
    """A contiguous copy of float tensor ``t`` with inf, -inf and nan at distinct random places.

    Unlike ``inputs.sprinkle_specials`` the places never repeat: assigning through a repeated
    index makes the winner nondeterministic on big tensors, and the reference must not be."""
    out = t.contiguous().clone()
    if out.numel() == 0:
        return out
    n = max(1, int(out.numel() * fraction))
    pos = torch.randperm(out.numel(), generator=gen)[:n]
    vals = torch.tensor([float("inf"), float("-inf"), float("nan")], dtype=out.dtype)
    out.view(-1)[pos] = vals[torch.arange(n) % 3]
    return out


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


__all__ = ["ADV_CORE", "PUT_CORE", "PUT_DESCRIPTION", "IndexPutBase", "esize", "int_values",
           "make_index", "make_indices", "numel", "put_entry_points", "put_negatives",
           "result_shape", "with_specials"]
