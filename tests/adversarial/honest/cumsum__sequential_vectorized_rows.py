# operator: aten::cumsum
# honest: no tl.cumsum: each program owns a vector of rows and walks the scanned dim one element at a time, keeping the running sum in registers (float64 for float results: a float32 running sum over tens of thousands of elements drifts past the float32 tolerance; int64 for integer results)
import torch
import triton
import triton.language as tl


@triton.jit
def _seq_scan(x_ptr, o_ptr, n_rows, L, n1, n2, n3,
              xs0, xs1, xs2, xs3, xsl, os0, os1, os2, os3, osl,
              IS_INT: tl.constexpr, BLOCK_R: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    ok = r < n_rows
    t = r
    i3 = t % n3
    t = t // n3
    i2 = t % n2
    t = t // n2
    i1 = t % n1
    i0 = t // n1
    xp = x_ptr + i0 * xs0 + i1 * xs1 + i2 * xs2 + i3 * xs3
    op = o_ptr + i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3
    if IS_INT:
        acc = tl.zeros([BLOCK_R], dtype=tl.int64)
    else:
        acc = tl.zeros([BLOCK_R], dtype=tl.float64)
    for l in tl.range(0, L):
        v = tl.load(xp + l * xsl, mask=ok, other=0).to(o_ptr.dtype.element_ty)
        acc += v.to(acc.dtype)  # rounded to the result dtype first, as torch does
        tl.store(op + l * osl, acc.to(o_ptr.dtype.element_ty), mask=ok)


def _cumsum(x, dim, out):
    if x.dim() == 0:
        x, out = x.view(1), out.view(1)
    nd = x.dim()
    dim = dim % nd
    if x.numel() == 0:
        return out
    others = [d for d in range(nd) if d != dim]
    pad = 4 - len(others)
    sizes = [1] * pad + [x.shape[d] for d in others]
    xs = [0] * pad + [x.stride(d) for d in others]
    os_ = [0] * pad + [out.stride(d) for d in others]
    L = x.shape[dim]
    n_rows = x.numel() // L
    BLOCK_R = min(256, triton.next_power_of_2(n_rows))
    _seq_scan[(triton.cdiv(n_rows, BLOCK_R),)](
        x, out, n_rows, L, *sizes[1:], *xs, x.stride(dim), *os_, out.stride(dim),
        IS_INT=not out.dtype.is_floating_point, BLOCK_R=BLOCK_R)
    return out


def cumsum(self, dim, *, dtype=None):
    if dtype is None:
        dtype = self.dtype if self.dtype.is_floating_point else torch.int64
    return _cumsum(self, dim, torch.empty_like(self, dtype=dtype,
                                               memory_format=torch.contiguous_format))


def cumsum_out(self, dim, *, dtype=None, out):
    return _cumsum(self, dim, out)
