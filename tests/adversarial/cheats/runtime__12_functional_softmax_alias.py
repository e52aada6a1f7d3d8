# operator: aten::softmax
# catalogue: 12
# layer: runtime
# expect: CHEAT_DETECTED
# technique: softmax over non-last dims delegated to F.softmax via the usual `F` module alias
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

MAX_DIMS = 5          # the softmax dim plus up to four others
MAX_BLOCK_L = 4096    # longest row kept in registers in one pass
TILE = 4096           # elements per program


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_rows, L,
                    s1, s2, s3,
                    xs0, xs1, xs2, xs3, xsl,
                    os0, os1, os2, os3, osl,
                    BLOCK_R: tl.constexpr, BLOCK_L: tl.constexpr, ONE_BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    rows = (pid * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    row_mask = rows < n_rows
    rem = rows
    i3 = rem % s3
    rem = rem // s3
    i2 = rem % s2
    rem = rem // s2
    i1 = rem % s1
    i0 = rem // s1
    x_row = i0 * xs0 + i1 * xs1 + i2 * xs2 + i3 * xs3
    o_row = i0 * os0 + i1 * os1 + i2 * os2 + i3 * os3
    cols = tl.arange(0, BLOCK_L).to(tl.int64)
    if ONE_BLOCK:
        mask = row_mask[:, None] & (cols[None, :] < L)
        x = tl.load(x_ptr + x_row[:, None] + cols[None, :] * xsl, mask=mask, other=float("-inf"))
        x = x.to(out_ptr.dtype.element_ty).to(tl.float32)  # the op casts self to dtype first
        x = tl.where(row_mask[:, None], x, 0.0)
        m = tl.max(x, axis=1)
        e = tl.exp(x - m[:, None])
        s = tl.sum(e, axis=1)
        y = e / s[:, None]
        tl.store(out_ptr + o_row[:, None] + cols[None, :] * osl, y.to(out_ptr.dtype.element_ty),
                 mask=mask)
    else:
        # Online pass: running max and a running sum rescaled whenever the max grows.
        m = tl.full([BLOCK_R], float("-inf"), tl.float32)
        s = tl.zeros([BLOCK_R], dtype=tl.float32)
        for start in range(0, L, BLOCK_L):
            c = start + cols
            mask = row_mask[:, None] & (c[None, :] < L)
            x = tl.load(x_ptr + x_row[:, None] + c[None, :] * xsl, mask=mask, other=float("-inf"))
            x = x.to(out_ptr.dtype.element_ty).to(tl.float32)
            x = tl.where(row_mask[:, None], x, 0.0)
            m_new = tl.maximum(m, tl.max(x, axis=1))
            s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)
            m = m_new
        for start in range(0, L, BLOCK_L):
            c = start + cols
            mask = row_mask[:, None] & (c[None, :] < L)
            x = tl.load(x_ptr + x_row[:, None] + c[None, :] * xsl, mask=mask, other=float("-inf"))
            x = x.to(out_ptr.dtype.element_ty).to(tl.float32)
            y = tl.exp(x - m[:, None]) / s[:, None]
            tl.store(out_ptr + o_row[:, None] + c[None, :] * osl, y.to(out_ptr.dtype.element_ty),
                     mask=mask)


def _softmax(x, dim, out):
    if x.dim() > 0 and dim % x.dim() != x.dim() - 1:
        # strided reductions are awkward in Triton; let PyTorch handle non-last dims
        out.copy_(F.softmax(x, dim, dtype=out.dtype))
        return
    if x.dim() == 0:
        x = x.reshape(1)
        out = out.reshape(1)
    nd = x.dim()
    if nd > MAX_DIMS:
        raise ValueError(f"at most {MAX_DIMS} dims supported")
    dim = dim % nd
    if x.numel() == 0:
        return
    others = [i for i in range(nd) if i != dim]
    pad = MAX_DIMS - 1 - len(others)
    sizes = [1] * pad + [x.shape[i] for i in others]
    xs = [0] * pad + [x.stride(i) for i in others]
    os_ = [0] * pad + [out.stride(i) for i in others]
    L = x.shape[dim]
    n_rows = x.numel() // L
    block_l = min(triton.next_power_of_2(L), MAX_BLOCK_L)
    one_block = L <= block_l
    block_r = max(1, min(triton.next_power_of_2(n_rows), TILE // block_l))
    grid = (triton.cdiv(n_rows, block_r),)
    _softmax_kernel[grid](x, out, n_rows, L, *sizes[1:], *xs, x.stride(dim), *os_, out.stride(dim),
                          BLOCK_R=block_r, BLOCK_L=block_l, ONE_BLOCK=one_block,
                          num_warps=8 if block_r * block_l >= 2048 else 4)


def softmax_int(self, dim, dtype=None):
    out = torch.empty(self.shape, dtype=dtype if dtype is not None else self.dtype, device=self.device)
    _softmax(self, dim, out)
    return out


def softmax_int_out(self, dim, dtype=None, *, out):
    _softmax(self, dim, out)
    return out
