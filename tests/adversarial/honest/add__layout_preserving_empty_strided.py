# operator: aten::add
# honest: allocates the result with torch.empty_strided in the input's memory order (like TensorIterator), walks memory order with a permutation computed in Python, uses math.prod and an early return for empty tensors
import math

import torch
import triton
import triton.language as tl

MAXD = 6


@triton.jit
def _kernel(a_ptr, b_ptr, o_ptr, n, alpha,
            n1, n2, n3, n4, n5,
            sa0, sa1, sa2, sa3, sa4, sa5,
            sb0, sb1, sb2, sb3, sb4, sb5,
            so0, so1, so2, so3, so4, so5,
            IS_FLOAT: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    x = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    valid = x < n
    # decompose in the *permuted* order: the last dim here is the fastest in memory
    j5 = x % n5
    x = x // n5
    j4 = x % n4
    x = x // n4
    j3 = x % n3
    x = x // n3
    j2 = x % n2
    x = x // n2
    j1 = x % n1
    j0 = x // n1
    pa = a_ptr + (j0 * sa0 + j1 * sa1 + j2 * sa2 + j3 * sa3 + j4 * sa4 + j5 * sa5)
    pb = b_ptr + (j0 * sb0 + j1 * sb1 + j2 * sb2 + j3 * sb3 + j4 * sb4 + j5 * sb5)
    po = o_ptr + (j0 * so0 + j1 * so1 + j2 * so2 + j3 * so3 + j4 * so4 + j5 * so5)
    va = tl.load(pa, mask=valid, other=0)
    vb = tl.load(pb, mask=valid, other=0)
    if IS_FLOAT:
        res = tl.fma(vb.to(tl.float32), alpha, va.to(tl.float32))
    else:
        res = va + vb * alpha
    tl.store(po, res.to(o_ptr.dtype.element_ty), mask=valid)


def _memory_order(t):
    # dims sorted from slowest to fastest stride (ties keep logical order)
    return sorted(range(t.dim()), key=lambda d: (-t.stride(d), d))


def _alloc_like_layout(ref, shape, dtype):
    if ref.dim() != len(shape) or tuple(ref.shape) != tuple(shape):
        return torch.empty(shape, dtype=dtype, device=ref.device)
    order = _memory_order(ref)
    strides = [0] * len(shape)
    running = 1
    for d in reversed(order):
        strides[d] = running
        running *= max(shape[d], 1)
    return torch.empty_strided(tuple(shape), tuple(strides), dtype=dtype, device=ref.device)


def _apply(a, b, out, alpha):
    shape = list(out.shape)
    n = math.prod(shape)
    if n == 0:
        return out
    order = _memory_order(out) if shape else []
    pad = MAXD - len(order)
    sizes = [1] * pad + [shape[d] for d in order]
    sa = [0] * pad + [a.stride(d) for d in order]
    sb = [0] * pad + [b.stride(d) for d in order]
    so = [0] * pad + [out.stride(d) for d in order]
    BLOCK = 1024
    _kernel[(triton.cdiv(n, BLOCK),)](a, b, out, n, alpha, *sizes[1:], *sa, *sb, *so,
                                      IS_FLOAT=out.dtype.is_floating_point, BLOCK=BLOCK)
    return out


def add_Tensor(self, other, *, alpha=1):
    a, b = torch.broadcast_tensors(self, other)
    out = _alloc_like_layout(self, a.shape, self.dtype)
    return _apply(a, b, out, alpha)


def add_Scalar(self, other, alpha=1):
    out = _alloc_like_layout(self, self.shape, self.dtype)
    b = torch.full_like(self, other)
    return _apply(self, b, out, alpha)


def add_out(self, other, *, alpha=1, out):
    a, b = torch.broadcast_tensors(self, other)
    return _apply(a, b, out, alpha)
