# operator: aten::softmax
# honest: 2-D grid (dims before `dim` x blocks of dims after it), exp2((x - max) * log2(e)) instead of exp, reductions in small @triton.jit helpers
import math

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _decompose2(idx, n1, s0, s1):
    return (idx // n1) * s0 + (idx % n1) * s1


@triton.jit
def _decompose3(idx, n1, n2, s0, s1, s2):
    i2 = idx % n2
    idx = idx // n2
    return (idx // n1) * s0 + (idx % n1) * s1 + i2 * s2


@triton.jit
def _max_over_l(x_ptr, base, L, sl, mask_i, BLOCK_I: tl.constexpr, BLOCK_L: tl.constexpr,
                OUT_TY: tl.constexpr):
    m = tl.full([BLOCK_I], float("-inf"), tl.float32)
    for k in range(0, L, BLOCK_L):
        l = k + tl.arange(0, BLOCK_L).to(tl.int64)
        msk = mask_i[:, None] & (l < L)[None, :]
        v = tl.load(x_ptr + base[:, None] + l[None, :] * sl, mask=msk, other=float("-inf"))
        m = tl.maximum(m, tl.max(v.to(OUT_TY).to(tl.float32), axis=1))
    return m


@triton.jit
def _sum_exp2(x_ptr, base, L, sl, mask_i, m, scale, BLOCK_I: tl.constexpr,
              BLOCK_L: tl.constexpr, OUT_TY: tl.constexpr):
    s = tl.zeros([BLOCK_I], tl.float32)
    for k in range(0, L, BLOCK_L):
        l = k + tl.arange(0, BLOCK_L).to(tl.int64)
        msk = mask_i[:, None] & (l < L)[None, :]
        v = tl.load(x_ptr + base[:, None] + l[None, :] * sl, mask=msk, other=float("-inf"))
        v = v.to(OUT_TY).to(tl.float32)
        s += tl.sum(tl.exp2((v - m[:, None]) * scale), axis=1)
    return s


@triton.jit
def _softmax_oi(x_ptr, o_ptr, L, n_inner, scale,
                on1, xo0, xo1, oo0, oo1,
                in1, in2, xi0, xi1, xi2, oi0, oi1, oi2, xsl, osl,
                BLOCK_I: tl.constexpr, BLOCK_L: tl.constexpr):
    outer = tl.program_id(0).to(tl.int64)
    inner = tl.program_id(1).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)
    mask_i = inner < n_inner
    xbase = _decompose2(outer, on1, xo0, xo1) + _decompose3(inner, in1, in2, xi0, xi1, xi2)
    obase = _decompose2(outer, on1, oo0, oo1) + _decompose3(inner, in1, in2, oi0, oi1, oi2)
    OUT_TY = o_ptr.dtype.element_ty
    m = _max_over_l(x_ptr, xbase, L, xsl, mask_i, BLOCK_I, BLOCK_L, OUT_TY)
    m = tl.where(mask_i, m, 0.0)
    # subtract the max first, then scale: (x - m) is exact-ish, x * log2(e) would not be
    s = _sum_exp2(x_ptr, xbase, L, xsl, mask_i, m, scale, BLOCK_I, BLOCK_L, OUT_TY)
    r = 1.0 / s
    for k in range(0, L, BLOCK_L):
        l = k + tl.arange(0, BLOCK_L).to(tl.int64)
        msk = mask_i[:, None] & (l < L)[None, :]
        v = tl.load(x_ptr + xbase[:, None] + l[None, :] * xsl, mask=msk, other=0.0)
        v = v.to(OUT_TY).to(tl.float32)
        y = tl.exp2((v - m[:, None]) * scale) * r[:, None]
        tl.store(o_ptr + obase[:, None] + l[None, :] * osl, y.to(OUT_TY), mask=msk)


def _split(t, dims, n):
    sizes = [t.shape[d] for d in dims]
    strides = [t.stride(d) for d in dims]
    pad = n - len(dims)
    return [1] * pad + sizes, [0] * pad + strides


def _softmax(x, dim, out):
    if x.dim() == 0:
        x, out = x.view(1), out.view(1)
    nd = x.dim()
    if nd > 5:
        raise ValueError("at most 5 dims")
    dim = dim % nd
    if x.numel() == 0:
        return out
    before = list(range(dim))
    after = list(range(dim + 1, nd))
    # up to 2 dims before and 3 after, or shift extra "before" dims into the inner group
    while len(before) > 2:
        after.insert(0, before.pop())
    osz, xo = _split(x, before, 2)
    _, oo = _split(out, before, 2)
    isz, xi = _split(x, after, 3)
    _, oi = _split(out, after, 3)
    L = x.shape[dim]
    n_outer = math.prod(osz)
    n_inner = math.prod(isz)
    BLOCK_L = min(512, triton.next_power_of_2(L))
    BLOCK_I = max(1, min(triton.next_power_of_2(n_inner), 2048 // BLOCK_L, 64))
    grid = (n_outer, triton.cdiv(n_inner, BLOCK_I))
    _softmax_oi[grid](x, out, L, n_inner, LOG2E, osz[1], xo[0], xo[1], oo[0], oo[1],
                      isz[1], isz[2], xi[0], xi[1], xi[2], oi[0], oi[1], oi[2],
                      x.stride(dim), out.stride(dim), BLOCK_I=BLOCK_I, BLOCK_L=BLOCK_L)
    return out


def softmax_int(self, dim, dtype=None):
    out = torch.empty(self.shape, dtype=dtype if dtype is not None else self.dtype,
                      device=self.device)
    return _softmax(self, dim, out)


def softmax_int_out(self, dim, dtype=None, *, out):
    return _softmax(self, dim, out)
