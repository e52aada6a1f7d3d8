# operator: aten::cumsum
# honest: @triton.autotune chooses the chunk width (key: scan length and stride), the carry is kept as a [BLOCK_R, 1] tensor and updated from the last scanned column via tl.where
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_L": 64, "BLOCK_R": 16}, num_warps=2),
        triton.Config({"BLOCK_L": 256, "BLOCK_R": 8}, num_warps=4),
        triton.Config({"BLOCK_L": 1024, "BLOCK_R": 2}, num_warps=4),
    ],
    key=["L", "xsl"],
)
@triton.jit
def _cumsum_at(x_ptr, o_ptr, n_rows, L, n1, n2, n3, xs0, xs1, xs2, xs3, xsl,
               os0, os1, os2, os3, osl, INT: tl.constexpr,
               BLOCK_L: tl.constexpr, BLOCK_R: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    r_ok = r < n_rows
    u = r
    j3 = u % n3
    u = u // n3
    j2 = u % n2
    u = u // n2
    j1 = u % n1
    j0 = u // n1
    xb = (j0 * xs0 + j1 * xs1 + j2 * xs2 + j3 * xs3)[:, None]
    ob = (j0 * os0 + j1 * os1 + j2 * os2 + j3 * os3)[:, None]
    col = tl.arange(0, BLOCK_L)[None, :].to(tl.int64)
    if INT:
        carry = tl.zeros([BLOCK_R, 1], dtype=tl.int64)
    else:
        carry = tl.zeros([BLOCK_R, 1], dtype=tl.float32)
    for start in range(0, L, BLOCK_L):
        cc = start + col
        msk = r_ok[:, None] & (cc < L)
        v = tl.load(x_ptr + xb + cc * xsl, mask=msk, other=0).to(o_ptr.dtype.element_ty)
        v = v.to(carry.dtype)
        run = tl.cumsum(v, axis=1) + carry
        tl.store(o_ptr + ob + cc * osl, run.to(o_ptr.dtype.element_ty), mask=msk)
        last = tl.sum(tl.where(col == BLOCK_L - 1, run, 0), axis=1)
        carry = tl.reshape(last, [BLOCK_R, 1])


def _do(x, dim, out):
    if x.dim() == 0:
        x, out = x.reshape(1), out.reshape(1)
    if x.numel() == 0:
        return out
    dim = dim % x.dim()
    rest = [d for d in range(x.dim()) if d != dim]
    fill = 4 - len(rest)
    n = [1] * fill + [x.shape[d] for d in rest]
    xs = [0] * fill + [x.stride(d) for d in rest]
    os_ = [0] * fill + [out.stride(d) for d in rest]
    L = x.shape[dim]
    n_rows = x.numel() // L
    grid = lambda meta: (triton.cdiv(n_rows, meta["BLOCK_R"]),)
    _cumsum_at[grid](x, out, n_rows, L, n[1], n[2], n[3], *xs, x.stride(dim), *os_,
                     out.stride(dim), INT=not out.dtype.is_floating_point)
    return out


def cumsum(self, dim, *, dtype=None):
    res_dtype = dtype if dtype is not None else (
        self.dtype if self.dtype.is_floating_point else torch.int64)
    return _do(self, dim, torch.empty(self.shape, dtype=res_dtype, device=self.device))


def cumsum_out(self, dim, *, dtype=None, out):
    return _do(self, dim, out)
