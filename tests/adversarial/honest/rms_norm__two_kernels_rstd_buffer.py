# operator: vllm::rms_norm
# honest: kernel 1 stores each row's 1/rms into a float32 torch.empty buffer, kernel 2 (2-D grid over rows x column blocks) applies it and the weight into out
import torch
import triton
import triton.language as tl


@triton.jit
def _rstd_kernel(x_ptr, r_ptr, n_rows, n_cols, inner, sx0, sx1, eps,
                 BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    rok = rows < n_rows
    base = (rows // inner) * sx0 + (rows % inner) * sx1
    acc = tl.zeros([BLOCK_R], dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK_C):
        c = c0 + tl.arange(0, BLOCK_C)
        m = rok[:, None] & (c < n_cols)[None, :]
        x = tl.load(x_ptr + base[:, None] + c[None, :], mask=m, other=0.0).to(tl.float32)
        acc += tl.sum(x * x, axis=1)
    tl.store(r_ptr + rows, tl.math.rsqrt(acc / n_cols + eps), mask=rok)


@triton.jit
def _apply_kernel(x_ptr, w_ptr, r_ptr, o_ptr, n_rows, n_cols, inner, sx0, sx1, so0, so1,
                  BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    rok = rows < n_rows
    cok = cols < n_cols
    m = rok[:, None] & cok[None, :]
    xb = (rows // inner) * sx0 + (rows % inner) * sx1
    ob = (rows // inner) * so0 + (rows % inner) * so1
    r = tl.load(r_ptr + rows, mask=rok, other=0.0)
    w = tl.load(w_ptr + cols, mask=cok, other=0.0).to(tl.float32)
    x = tl.load(x_ptr + xb[:, None] + cols[None, :], mask=m, other=0.0).to(tl.float32)
    tl.store(o_ptr + ob[:, None] + cols[None, :], (x * r[:, None] * w[None, :]).to(o_ptr.dtype.element_ty),
             mask=m)


def _strides(t):
    # (outer stride, inner stride, inner count) of the leading dims; last dim is contiguous
    if t.dim() == 2:
        return 0, t.stride(0), t.shape[0]
    if t.dim() == 1:
        return 0, 0, 1
    return t.stride(0), t.stride(1), t.shape[1]


def rms_norm(out, input, weight, epsilon):
    n_cols = input.shape[-1]
    if input.numel() == 0:
        return None
    n_rows = input.numel() // n_cols
    sx0, sx1, inner = _strides(input)
    so0, so1, _ = _strides(out)
    rstd = torch.empty((n_rows,), dtype=torch.float32, device=input.device)
    BC = min(1024, triton.next_power_of_2(n_cols))
    BR = max(1, min(16, 4096 // BC))
    _rstd_kernel[(triton.cdiv(n_rows, BR),)](input, rstd, n_rows, n_cols, inner, sx0, sx1,
                                             epsilon, BLOCK_R=BR, BLOCK_C=BC)
    BC2 = min(256, triton.next_power_of_2(n_cols))
    BR2 = max(1, min(32, 4096 // BC2))
    _apply_kernel[(triton.cdiv(n_rows, BR2), triton.cdiv(n_cols, BC2))](
        input, weight, rstd, out, n_rows, n_cols, inner, sx0, sx1, so0, so1,
        BLOCK_R=BR2, BLOCK_C=BC2)
    return None
