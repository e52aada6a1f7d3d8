# operator: vllm::rms_norm
# honest: flattens leading dims with .view(-1, hidden) whenever the strides allow it (padded rows included), falling back to explicit 3-D strides otherwise; one-pass block in registers
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_rows(x_ptr, w_ptr, o_ptr, n_rows, H, inner, sxa, sxb, soa, sob, eps,
              BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr):
    r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    r64 = r.to(tl.int64)
    h = tl.arange(0, BLOCK_H)
    hm = h < H
    m = (r < n_rows)[:, None] & hm[None, :]
    x = tl.load(x_ptr + ((r64 // inner) * sxa + (r64 % inner) * sxb)[:, None] + h[None, :],
                mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + h, mask=hm, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=1) / H
    y = x * tl.math.rsqrt(ms + eps)[:, None] * w[None, :]
    tl.store(o_ptr + ((r64 // inner) * soa + (r64 % inner) * sob)[:, None] + h[None, :],
             y.to(o_ptr.dtype.element_ty), mask=m)


@triton.jit
def _rms_rows_looped(x_ptr, w_ptr, o_ptr, n_rows, H, inner, sxa, sxb, soa, sob, eps,
                     BLOCK_H: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    xr = x_ptr + (r // inner) * sxa + (r % inner) * sxb
    orow = o_ptr + (r // inner) * soa + (r % inner) * sob
    acc = tl.zeros([BLOCK_H], tl.float32)
    for k in range(0, H, BLOCK_H):
        h = k + tl.arange(0, BLOCK_H)
        v = tl.load(xr + h, mask=h < H, other=0.0).to(tl.float32)
        acc += v * v
    inv = tl.math.rsqrt(tl.sum(acc, axis=0) / H + eps)
    for k in range(0, H, BLOCK_H):
        h = k + tl.arange(0, BLOCK_H)
        v = tl.load(xr + h, mask=h < H, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + h, mask=h < H, other=0.0).to(tl.float32)
        tl.store(orow + h, (v * inv * w).to(o_ptr.dtype.element_ty), mask=h < H)


def _rows_view(t):
    """(tensor, outer stride, inner stride, inner count) with rows flattened when possible."""
    H = t.shape[-1]
    if t.dim() == 3 and t.stride(0) == t.shape[1] * t.stride(1):
        t = t.view(-1, H)  # legal: the two leading dims collapse with one stride
    if t.dim() == 2:
        return t, 0, t.stride(0), t.shape[0]
    if t.dim() == 1:
        return t.view(1, H), 0, 0, 1
    return t, t.stride(0), t.stride(1), t.shape[1]


def rms_norm(out, input, weight, epsilon):
    H = input.shape[-1]
    if input.numel() == 0 or H == 0:
        return None
    n_rows = input.numel() // H
    xv, sxa, sxb, inner = _rows_view(input)
    ov, soa, sob, inner_o = _rows_view(out)
    if inner_o != inner:  # the two views grouped rows differently: use 3-D strides for both
        xv, ov = input, out
        sxa, sxb, inner = input.stride(0), input.stride(1), input.shape[1]
        soa, sob = out.stride(0), out.stride(1)
    BLOCK_H = triton.next_power_of_2(H)
    if BLOCK_H <= 8192:
        BLOCK_M = max(1, min(16, 2048 // BLOCK_H))
        _rms_rows[(triton.cdiv(n_rows, BLOCK_M),)](xv, weight, ov, n_rows, H, inner, sxa, sxb,
                                                   soa, sob, epsilon, BLOCK_M=BLOCK_M,
                                                   BLOCK_H=BLOCK_H)
    else:
        _rms_rows_looped[(n_rows,)](xv, weight, ov, n_rows, H, inner, sxa, sxb, soa, sob,
                                    epsilon, BLOCK_H=4096)
    return None
