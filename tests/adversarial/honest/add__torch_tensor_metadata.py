# operator: aten::add
# honest: ships shape and strides to the kernel as small int64 device tensors built with torch.tensor (metadata only, no arithmetic in torch), loaded with tl.load inside a tl.static_range loop
import torch
import triton
import triton.language as tl


@triton.jit
def _add_meta(a_ptr, b_ptr, o_ptr, meta_ptr, n, alpha, NDIM: tl.constexpr,
              IS_FLOAT: tl.constexpr, BLOCK: tl.constexpr):
    lin = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = lin < n
    rem = lin
    ao = tl.zeros([BLOCK], tl.int64)
    bo = tl.zeros([BLOCK], tl.int64)
    oo = tl.zeros([BLOCK], tl.int64)
    for k in tl.static_range(NDIM):
        d = NDIM - 1 - k
        size = tl.load(meta_ptr + d)
        i = rem % size
        rem = rem // size
        ao += i * tl.load(meta_ptr + NDIM + d)
        bo += i * tl.load(meta_ptr + 2 * NDIM + d)
        oo += i * tl.load(meta_ptr + 3 * NDIM + d)
    a = tl.load(a_ptr + ao, mask=ok)
    b = tl.load(b_ptr + bo, mask=ok)
    if IS_FLOAT:
        y = a.to(tl.float32) + alpha * b.to(tl.float32)
    else:
        y = a + alpha * b
    tl.store(o_ptr + oo, y.to(o_ptr.dtype.element_ty), mask=ok)


def _launch(a, b, out, alpha):
    n = out.numel()
    if n == 0:
        return out
    if out.dim() == 0:
        shape, sa, sb, so = [1], [0], [0], [0]
    else:
        shape, sa, sb, so = list(out.shape), list(a.stride()), list(b.stride()), list(out.stride())
    meta = torch.tensor(shape + sa + sb + so, dtype=torch.int64, device=out.device)
    BLOCK = 1024
    _add_meta[(triton.cdiv(n, BLOCK),)](a, b, out, meta, n, alpha, NDIM=len(shape),
                                        IS_FLOAT=out.dtype.is_floating_point, BLOCK=BLOCK)
    return out


def add_Tensor(self, other, *, alpha=1):
    a, b = torch.broadcast_tensors(self, other)
    return _launch(a, b, torch.empty(a.shape, dtype=a.dtype, device=a.device), alpha)


def add_Scalar(self, other, alpha=1):
    b = torch.full(self.shape, other, dtype=self.dtype, device=self.device)
    return _launch(self, b, torch.empty(self.shape, dtype=self.dtype, device=self.device), alpha)


def add_out(self, other, *, alpha=1, out):
    a, b = torch.broadcast_tensors(self, other)
    return _launch(a, b, out, alpha)
