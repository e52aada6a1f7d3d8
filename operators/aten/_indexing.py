"""Shared machinery of the advanced-indexing problems (aten::index, aten::index_put_,
aten::_index_put_impl_). Registers nothing (the registry skips ``_`` modules).

``ADV_CORE`` is the Triton source both solutions start from: it lays out PyTorch's advanced
indexing (the index tensors broadcast together to a shape B; B's dims replace the indexed dims in
place when the indexed dims are adjacent, else they go first) and moves data between ``self`` and
the indexing result with one kernel. The spec-side helpers build index lists from case params.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from operators.inputs import broadcast_shapes, randint, with_layout

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
    b = tuple(broadcast_shapes(*[tuple(full[d]) for d in adv]))
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


__all__ = ["ADV_CORE", "esize", "int_values", "make_index", "make_indices", "numel",
           "result_shape", "with_specials"]
