# operator: vllm::rms_norm
# honest: @triton.autotune (key: hidden size) over chunk widths and warps, one row per program, tl.range loops, 1/sqrt instead of rsqrt
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 128}, num_warps=1),
        triton.Config({"BLOCK": 512}, num_warps=4),
        triton.Config({"BLOCK": 2048}, num_warps=8),
    ],
    key=["H"],
)
@triton.jit
def _rmsnorm_row(o_ptr, x_ptr, w_ptr, H, inner, sx_outer, sx_inner, so_outer, so_inner, eps,
                 BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + (row // inner) * sx_outer + (row % inner) * sx_inner
    o_row = o_ptr + (row // inner) * so_outer + (row % inner) * so_inner
    ss = tl.zeros([BLOCK], dtype=tl.float32)
    for off in tl.range(0, H, BLOCK):
        c = off + tl.arange(0, BLOCK)
        v = tl.load(x_row + c, mask=c < H, other=0.0).to(tl.float32)
        ss += v * v
    inv = 1.0 / tl.sqrt(tl.sum(ss, axis=0) / H + eps)
    for off in tl.range(0, H, BLOCK):
        c = off + tl.arange(0, BLOCK)
        ok = c < H
        v = tl.load(x_row + c, mask=ok, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=ok, other=0.0).to(tl.float32)
        tl.store(o_row + c, (v * inv * w).to(o_ptr.dtype.element_ty), mask=ok)


def _lead(t):
    nd = t.dim()
    if nd == 3:
        return t.stride(0), t.stride(1), t.shape[1]
    if nd == 2:
        return 0, t.stride(0), t.shape[0]
    return 0, 0, 1


def rms_norm(out, input, weight, epsilon):
    H = input.shape[-1]
    rows = input.numel() // H if H > 0 else 0
    if rows == 0:
        return None
    a, b, inner = _lead(input)
    c, d, _ = _lead(out)
    _rmsnorm_row[(rows,)](out, input, weight, H, inner, a, b, c, d, epsilon)
    return None
