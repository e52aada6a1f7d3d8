# operator: aten::softmax
# honest: two kernels: an online pass writes per-row max and sum into float32 scratch from torch.empty, then a 2-D-grid kernel normalises column blocks
import torch
import triton
import triton.language as tl


@triton.jit
def _row_base(r, n1, n2, n3, s0, s1, s2, s3):
    i3 = r % n3
    r = r // n3
    i2 = r % n2
    r = r // n2
    i1 = r % n1
    i0 = r // n1
    return i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3


@triton.jit
def _stats_kernel(x_ptr, m_ptr, s_ptr, n_rows, L, n1, n2, n3, xs0, xs1, xs2, xs3, xsl,
                  OUT_DTYPE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_L: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = rows < n_rows
    base = _row_base(rows, n1, n2, n3, xs0, xs1, xs2, xs3)
    cols = tl.arange(0, BLOCK_L)
    m = tl.full([BLOCK_R], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK_R], tl.float32)
    for start in range(0, L, BLOCK_L):
        c = (start + cols).to(tl.int64)
        msk = rmask[:, None] & (c < L)[None, :]
        x = tl.load(x_ptr + base[:, None] + c[None, :] * xsl, mask=msk, other=-float("inf"))
        x = x.to(OUT_DTYPE).to(tl.float32)
        new_m = tl.maximum(m, tl.max(x, axis=1))
        safe_m = tl.where(new_m == -float("inf"), 0.0, new_m)
        s = s * tl.exp(m - safe_m) + tl.sum(tl.exp(x - safe_m[:, None]), axis=1)
        m = new_m
    tl.store(m_ptr + rows, m, mask=rmask)
    tl.store(s_ptr + rows, s, mask=rmask)


@triton.jit
def _normalize_kernel(x_ptr, o_ptr, m_ptr, s_ptr, n_rows, L, n1, n2, n3,
                      xs0, xs1, xs2, xs3, xsl, os0, os1, os2, os3, osl,
                      BLOCK_R: tl.constexpr, BLOCK_L: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tl.program_id(1).to(tl.int64) * BLOCK_L + tl.arange(0, BLOCK_L)
    rmask = rows < n_rows
    msk = rmask[:, None] & (c < L)[None, :]
    xb = _row_base(rows, n1, n2, n3, xs0, xs1, xs2, xs3)
    ob = _row_base(rows, n1, n2, n3, os0, os1, os2, os3)
    m = tl.load(m_ptr + rows, mask=rmask, other=0.0)
    s = tl.load(s_ptr + rows, mask=rmask, other=1.0)
    x = tl.load(x_ptr + xb[:, None] + c[None, :] * xsl, mask=msk, other=0.0)
    x = x.to(o_ptr.dtype.element_ty).to(tl.float32)
    y = tl.exp(x - m[:, None]) / s[:, None]
    tl.store(o_ptr + ob[:, None] + c[None, :] * osl, y.to(o_ptr.dtype.element_ty), mask=msk)


_TL = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}


def _softmax(x, dim, out):
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
    row_max = torch.empty((n_rows,), dtype=torch.float32, device=x.device)
    row_sum = torch.empty((n_rows,), dtype=torch.float32, device=x.device)
    BL = min(1024, triton.next_power_of_2(L))
    BR = max(1, min(16, 2048 // BL))
    _stats_kernel[(triton.cdiv(n_rows, BR),)](x, row_max, row_sum, n_rows, L, *sizes[1:], *xs,
                                               x.stride(dim), OUT_DTYPE=_TL[out.dtype],
                                               BLOCK_R=BR, BLOCK_L=BL)
    BL2 = min(256, triton.next_power_of_2(L))
    BR2 = max(1, min(32, 2048 // BL2))
    grid = (triton.cdiv(n_rows, BR2), triton.cdiv(L, BL2))
    _normalize_kernel[grid](x, out, row_max, row_sum, n_rows, L, *sizes[1:], *xs, x.stride(dim),
                            *os_, out.stride(dim), BLOCK_R=BR2, BLOCK_L=BL2)
    return out


def softmax_int(self, dim, dtype=None):
    out = torch.empty(self.shape, dtype=self.dtype if dtype is None else dtype, device=self.device)
    return _softmax(self, dim, out)


def softmax_int_out(self, dim, dtype=None, *, out):
    return _softmax(self, dim, out)
