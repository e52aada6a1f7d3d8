"""Shared machinery of the reduction problems (sum, mean, amin, argmax); registers nothing.

Two parts: harness-side helpers (dim normalization, result shapes, sizes) used by the problem
classes, and ``REDUCE_SOURCE``, the Triton code that sum, mean and amin embed in their
(self-contained) reference solutions: a strided reduction over any set of dims.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from operators.inputs import randint, randn, sprinkle_specials, uniform, with_layout
from operators.spec import Case


def reduced_dims(ndim: int, dim: int | Sequence[int] | None) -> list[int]:
    """The sorted, non-negative reduced dims; None or an empty list mean every dim."""
    if dim is None:
        return list(range(ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return list(range(ndim))
    if ndim == 0:
        return []
    return sorted({d % ndim for d in dims})


def out_shape(shape: Sequence[int], dims: Sequence[int], keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if d in dims else s for d, s in enumerate(shape))
    return tuple(s for d, s in enumerate(shape) if d not in dims)


def numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def make_input(c: Case, gen: torch.Generator) -> torch.Tensor:
    """The reduced tensor of a case: normal values (``std``), or ``positive`` uniform ones in
    [0, 1) (the worst case for accumulation order), ``specials`` (inf, -inf, nan sprinkled in),
    small integers, or random bools; in the case's ``layout``."""
    layout = c.get("layout", "contiguous")
    if c.dtype == "bool":
        return randint(c.shape, "int64", gen, low=0, high=2, layout=layout).to(torch.bool)
    if not c.torch_dtype.is_floating_point:
        return randint(c.shape, c.dtype, gen, low=-100, high=100, layout=layout)
    if c.get("positive"):
        return uniform(c.shape, c.dtype, gen, low=0.0, high=1.0, layout=layout)
    x = randn(c.shape, c.dtype, gen, std=c.get("std", 1.0), layout=layout)
    if c.get("specials"):
        x = with_layout(sprinkle_specials(x.contiguous(), gen, c.get("specials")), layout)
    return x


# The Triton part. A reduction is planned on the host from shapes and strides only: size-1 dims
# are dropped, neighbouring dims that address memory as one are merged, the kept dims (up to 4)
# index the outputs and the reduced dims (up to 4) index the terms. Each program reduces a
# [BLOCK_O outputs x BLOCK_R terms] tile per step, laid out so that the dim of smallest stride
# runs along the tile's contiguous axis. When there are too few outputs to fill the device, the
# reduction is split: each (output block, split) program writes a partial in the accumulator
# dtype, and a second launch of the same kernel reduces the partials.
REDUCE_SOURCE = r'''
MAX_KEPT = 4
MAX_RED = 4
TILE = 4096        # elements per program and step
TARGET = 1024      # programs worth splitting a reduction for


@triton.jit
def _reduce_kernel(x_ptr, out_ptr, n_out, n_red, per_split, split_stride, divisor,
                   k1, k2, k3, xk0, xk1, xk2, xk3, ok0, ok1, ok2, ok3,
                   r1, r2, r3, xr0, xr1, xr2, xr3,
                   IS_MIN: tl.constexpr, ACC: tl.constexpr, IDENT: tl.constexpr,
                   FLOAT: tl.constexpr, DIV: tl.constexpr,
                   BLOCK_O: tl.constexpr, BLOCK_R: tl.constexpr):
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
    acc = tl.full([BLOCK_O, BLOCK_R], IDENT, ACC)
    nan = tl.zeros([BLOCK_O, BLOCK_R], dtype=tl.int1)
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
        x = tl.load(x_ptr + x_base[:, None] + r_off[None, :], mask=mask, other=0).to(ACC)
        if IS_MIN:
            x = tl.where(mask, x, IDENT)
            nan = nan | (x != x)   # NaN propagates: tracked apart from the (NaN-blind) minimum
            acc = tl.minimum(acc, x)
        else:
            acc += x
    if IS_MIN:
        res = tl.min(acc, axis=1)
        if FLOAT:
            has_nan = tl.max(nan.to(tl.int32), axis=1) > 0
            res = tl.where(has_nan, float("nan"), res)
    else:
        res = tl.sum(acc, axis=1)
    if DIV:
        res = res / divisor
    tl.store(out_ptr + o_off, res.to(out_ptr.dtype.element_ty), mask=o_mask)


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


def _reduced_dims(x, dim):
    nd = x.dim()
    if dim is None:
        return list(range(nd))
    dims = [dim] if isinstance(dim, int) else list(dim)
    if len(dims) == 0:
        return list(range(nd))
    if nd == 0:
        return []
    return sorted(set(d % nd for d in dims))


def _out_shape(x, red, keepdim):
    if keepdim:
        return [1 if d in red else x.shape[d] for d in range(x.dim())]
    return [x.shape[d] for d in range(x.dim()) if d not in red]


def _acc_dtype(dtype):
    if dtype == torch.float64:
        return torch.float64, tl.float64
    if dtype.is_floating_point:
        return torch.float32, tl.float32
    return torch.int64, tl.int64


def _reduce(x, red, out, keepdim, is_min, divide):
    """out[kept] = reduction of x over the dims in red (sum, or NaN-propagating min); the
    sum is divided by the number of terms when divide (mean)."""
    n_out = out.numel()
    if n_out == 0:
        return out
    nd = x.dim()
    kept = [d for d in range(nd) if d not in red]
    ks = []
    for j, d in enumerate(kept):
        if x.shape[d] != 1:
            ks.append([x.shape[d], x.stride(d), out.stride(d if keepdim else j)])
    rs = [[x.shape[d], x.stride(d)] for d in red if x.shape[d] != 1]
    ks, rs = _merge(ks), _merge(rs)
    if len(ks) > MAX_KEPT or len(rs) > MAX_RED:
        raise ValueError("too many non-mergeable dims")
    n_red = 1
    for s in rs:
        n_red *= s[0]
    ks = [[1, 0, 0]] * (MAX_KEPT - len(ks)) + ks
    rs = [[1, 0]] * (MAX_RED - len(rs)) + rs
    acc_t, acc_tl = _acc_dtype(out.dtype)
    is_float = acc_t.is_floating_point
    if is_min:
        ident = float("inf") if acc_t.is_floating_point else 2 ** 63 - 1
    else:
        ident = 0
    # Tile: the terms along the tile's contiguous axis when the smallest stride is a reduced dim.
    inner = min([s[1] for s in rs if s[0] > 1] or [2 ** 62]) < \
        min([s[1] for s in ks if s[0] > 1] or [2 ** 62])
    if inner:
        block_r = min(triton.next_power_of_2(max(n_red, 1)), 1024)
        block_o = max(1, min(triton.next_power_of_2(n_out), TILE // block_r))
    else:
        block_o = min(triton.next_power_of_2(n_out), 64)
        block_r = max(1, min(triton.next_power_of_2(max(n_red, 1)), TILE // block_o))
    n_prog = triton.cdiv(n_out, block_o)
    splits = 1
    if n_prog < TARGET // 4 and n_red > 2 * block_r:
        splits = min(triton.cdiv(n_red, block_r), max(1, TARGET // n_prog))
        # each split a whole number of steps; the last split takes the tail
        per = triton.cdiv(triton.cdiv(n_red, splits), block_r) * block_r
        splits = triton.cdiv(n_red, per)
    k_sizes = [s[0] for s in ks]
    k_xs = [s[1] for s in ks]
    r_sizes = [s[0] for s in rs]
    r_xs = [s[1] for s in rs]
    warps = 8 if block_o * block_r >= 2048 else 4
    if splits == 1:
        _reduce_kernel[(n_prog, 1)](
            x, out, n_out, n_red, max(n_red, 1), 0, float(n_red), *k_sizes[1:], *k_xs,
            *[s[2] for s in ks], *r_sizes[1:], *r_xs,
            IS_MIN=is_min, ACC=acc_tl, IDENT=ident, FLOAT=is_float, DIV=divide,
            BLOCK_O=block_o, BLOCK_R=block_r, num_warps=warps)
        return out
    # Pass 1: partials[o, s] in the accumulator dtype; pass 2 reduces them into out.
    part = torch.empty((n_out, splits), dtype=acc_t, device=x.device)
    p_strides = [0] * MAX_KEPT
    step = splits
    for i in range(MAX_KEPT - 1, -1, -1):
        p_strides[i] = step
        step *= k_sizes[i]
    _reduce_kernel[(n_prog, splits)](
        x, part, n_out, n_red, per, 1, 1.0, *k_sizes[1:], *k_xs, *p_strides,
        *r_sizes[1:], *r_xs,
        IS_MIN=is_min, ACC=acc_tl, IDENT=ident, FLOAT=is_float, DIV=False,
        BLOCK_O=block_o, BLOCK_R=block_r, num_warps=warps)
    block_r2 = min(triton.next_power_of_2(splits), 1024)
    block_o2 = max(1, min(triton.next_power_of_2(n_out), TILE // block_r2))
    _reduce_kernel[(triton.cdiv(n_out, block_o2), 1)](
        part, out, n_out, splits, splits, 0, float(n_red), *k_sizes[1:], *p_strides,
        *[s[2] for s in ks], 1, 1, splits, 0, 0, 0, 1,
        IS_MIN=is_min, ACC=acc_tl, IDENT=ident, FLOAT=is_float, DIV=divide,
        BLOCK_O=block_o2, BLOCK_R=block_r2, num_warps=4)
    return out
'''
