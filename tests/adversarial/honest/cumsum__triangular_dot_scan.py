# operator: aten::cumsum
# honest: float chunks are scanned as a matrix product with an upper-triangular ones matrix built in-kernel (tl.dot, ieee precision); integer results take a tl.cumsum path in int64
import torch
import triton
import triton.language as tl


@triton.jit
def _tri_scan(x_ptr, o_ptr, n_rows, L, n1, n2, n3, xs0, xs1, xs2, xs3, xsl,
              os0, os1, os2, os3, osl, IS_INT: tl.constexpr, BR: tl.constexpr, BL: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BR + tl.arange(0, BR)
    rok = r < n_rows
    w = r
    k3 = w % n3
    w = w // n3
    k2 = w % n2
    w = w // n2
    k1 = w % n1
    k0 = w // n1
    xb = k0 * xs0 + k1 * xs1 + k2 * xs2 + k3 * xs3
    ob = k0 * os0 + k1 * os1 + k2 * os2 + k3 * os3
    i = tl.arange(0, BL)
    # tri[k, j] = 1 when k <= j, so (x @ tri)[:, j] = sum_{k <= j} x[:, k]
    tri = tl.where(i[:, None] <= i[None, :], 1.0, 0.0).to(tl.float32)
    if IS_INT:
        carry = tl.zeros([BR], dtype=tl.int64)
    else:
        carry = tl.zeros([BR], dtype=tl.float32)
    for s in range(0, L, BL):
        c = (s + i).to(tl.int64)
        m = rok[:, None] & (c < L)[None, :]
        v = tl.load(x_ptr + xb[:, None] + c[None, :] * xsl, mask=m, other=0)
        v = v.to(o_ptr.dtype.element_ty)
        if IS_INT:
            v = v.to(tl.int64)
            y = tl.cumsum(v, axis=1) + carry[:, None]
        else:
            v = v.to(tl.float32)
            y = tl.dot(v, tri, input_precision="ieee") + carry[:, None]
        tl.store(o_ptr + ob[:, None] + c[None, :] * osl, y.to(o_ptr.dtype.element_ty), mask=m)
        carry = carry + tl.sum(v, axis=1)


def _cumsum(x, dim, out):
    if x.dim() == 0:
        x, out = x.view(1), out.view(1)
    if x.numel() == 0:
        return out
    dim = dim % x.dim()
    rest = [d for d in range(x.dim()) if d != dim]
    fill = 4 - len(rest)
    n = [1] * fill + [x.shape[d] for d in rest]
    xs = [0] * fill + [x.stride(d) for d in rest]
    os_ = [0] * fill + [out.stride(d) for d in rest]
    L = x.shape[dim]
    rows = x.numel() // L
    BL = 64
    BR = 16
    _tri_scan[(triton.cdiv(rows, BR),)](x, out, rows, L, *n[1:], *xs, x.stride(dim), *os_,
                                        out.stride(dim), IS_INT=not out.dtype.is_floating_point,
                                        BR=BR, BL=BL)
    return out


def cumsum(self, dim, *, dtype=None):
    if dtype is None:
        dtype = self.dtype if self.dtype.is_floating_point else torch.int64
    return _cumsum(self, dim, torch.empty(self.shape, dtype=dtype, device=self.device))


def cumsum_out(self, dim, *, dtype=None, out):
    return _cumsum(self, dim, out)
