# operator: aten::cumsum
# catalogue: 12
# layer: runtime
# expect: CHEAT_DETECTED
# technique: Triton scan for contiguous last-dim inputs, Tensor.cumsum method for the rest
import torch
import triton
import triton.language as tl

MAX_DIMS = 5          # the scanned dim plus up to four others
MAX_BLOCK_L = 2048    # scan chunk; longer scans loop over chunks with a running carry
TILE = 4096           # elements per program and chunk


@triton.jit
def _cumsum_kernel(x_ptr, out_ptr, n_rows, L,
                   s1, s2, s3,
                   xs0, xs1, xs2, xs3, xsl,
                   os0, os1, os2, os3, osl,
                   BLOCK_R: tl.constexpr, BLOCK_L: tl.constexpr, INT_ACC: tl.constexpr):
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
    if INT_ACC:
        carry = tl.zeros([BLOCK_R], dtype=tl.int64)
    else:
        carry = tl.zeros([BLOCK_R], dtype=tl.float32)
    for start in range(0, L, BLOCK_L):
        c = start + cols
        mask = row_mask[:, None] & (c[None, :] < L)
        x = tl.load(x_ptr + x_row[:, None] + c[None, :] * xsl, mask=mask, other=0)
        x = x.to(out_ptr.dtype.element_ty)  # the op casts self to the result dtype first
        if INT_ACC:
            x = x.to(tl.int64)
        else:
            x = x.to(tl.float32)
        y = tl.cumsum(x, axis=1) + carry[:, None]
        tl.store(out_ptr + o_row[:, None] + c[None, :] * osl, y.to(out_ptr.dtype.element_ty),
                 mask=mask)
        # the new carry is the running total at the chunk's last column (masked columns add 0)
        carry = tl.sum(tl.where(cols[None, :] == BLOCK_L - 1, y, 0), axis=1)


def _result_dtype(self, dtype):
    if dtype is not None:
        return dtype
    if self.dtype.is_floating_point or self.dtype.is_complex:
        return self.dtype
    return torch.int64  # integral and bool inputs promote to int64


def _cumsum(x, dim, out):
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
    if x.stride(dim) == 1 or n_rows == 1:
        # scanned dim contiguous: long chunks along it
        block_l = min(triton.next_power_of_2(L), MAX_BLOCK_L)
        block_r = max(1, min(triton.next_power_of_2(n_rows), TILE // block_l))
    else:
        # scanned dim strided (e.g. dim=0): rows side by side (coalesced when they are adjacent),
        # few enough per program to leave many programs
        block_r = min(triton.next_power_of_2(n_rows), 32)
        block_l = max(1, min(triton.next_power_of_2(L), TILE // block_r))
    grid = (triton.cdiv(n_rows, block_r),)
    _cumsum_kernel[grid](x, out, n_rows, L, *sizes[1:], *xs, x.stride(dim), *os_, out.stride(dim),
                         BLOCK_R=block_r, BLOCK_L=block_l,
                         INT_ACC=not (out.dtype.is_floating_point or out.dtype.is_complex),
                         num_warps=8 if block_r * block_l >= 2048 else 4)


def cumsum(self, dim, *, dtype=None):
    if not self.is_contiguous() or dim % max(self.dim(), 1) != max(self.dim(), 1) - 1:
        return self.cumsum(dim, dtype=dtype)  # strided scans: the tensor method
    out = torch.empty(self.shape, dtype=_result_dtype(self, dtype), device=self.device)
    _cumsum(self, dim, out)
    return out


def cumsum_out(self, dim, *, dtype=None, out):
    _cumsum(self, dim, out)
    return out
