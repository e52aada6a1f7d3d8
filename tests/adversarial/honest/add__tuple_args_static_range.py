# operator: aten::add
# honest: shapes and strides passed as tuple kernel arguments and unrolled with tl.static_range; rank is a constexpr, so no padding to a fixed rank
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _add_nd(a_ptr, b_ptr, out_ptr, n, alpha, shape, a_st, b_st, o_st,
            NDIM: tl.constexpr, IS_FLOAT: tl.constexpr, BLOCK: tl.constexpr):
    lin = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = lin < n
    rem = lin
    a_off = tl.zeros([BLOCK], dtype=tl.int64)
    b_off = tl.zeros([BLOCK], dtype=tl.int64)
    o_off = tl.zeros([BLOCK], dtype=tl.int64)
    # the tuples come innermost dim first
    for d in tl.static_range(NDIM):
        i = rem % shape[d]
        rem = rem // shape[d]
        a_off += i * a_st[d]
        b_off += i * b_st[d]
        o_off += i * o_st[d]
    a = tl.load(a_ptr + a_off, mask=mask)
    b = tl.load(b_ptr + b_off, mask=mask)
    if IS_FLOAT:
        y = a.to(tl.float32) + b.to(tl.float32) * alpha
    else:
        y = a + b * alpha
    tl.store(out_ptr + o_off, y.to(out_ptr.dtype.element_ty), mask=mask)


def _go(a, b, out, alpha):
    n = math.prod(out.shape)
    if n == 0:
        return out
    shape = tuple(out.shape)[::-1]  # innermost first: the kernel indexes by its loop counter
    if len(shape) == 0:  # 0-d: a one-element 1-d problem
        shape, a_st, b_st, o_st = (1,), (0,), (0,), (0,)
    else:
        a_st, b_st, o_st = (tuple(a.stride())[::-1], tuple(b.stride())[::-1],
                            tuple(out.stride())[::-1])
    BLOCK = 1024
    _add_nd[(triton.cdiv(n, BLOCK),)](a, b, out, n, alpha, shape, a_st, b_st, o_st,
                                      NDIM=len(shape), IS_FLOAT=out.dtype.is_floating_point,
                                      BLOCK=BLOCK)
    return out


def add_Tensor(self, other, *, alpha=1):
    shape = torch.broadcast_shapes(self.shape, other.shape)
    out = torch.empty(shape, dtype=self.dtype, device=self.device)
    return _go(self.expand(shape), other.expand(shape), out, alpha)


def add_Scalar(self, other, alpha=1):
    # a one-element buffer holding `other`, viewed with stride 0 over self's shape
    b = torch.full((1,), other, dtype=self.dtype, device=self.device)
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    b = b.view(()).expand(self.shape)
    return _go(self, b, out, alpha)


def add_out(self, other, *, alpha=1, out):
    shape = out.shape
    return _go(self.expand(shape), other.expand(shape), out, alpha)
