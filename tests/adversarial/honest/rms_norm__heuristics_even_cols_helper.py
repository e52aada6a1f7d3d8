# operator: vllm::rms_norm
# honest: @triton.heuristics picks BLOCK_N and an EVEN_N flag that drops column masks; sum of squares and the scaling live in @triton.jit helpers; honours weight's stride
import torch
import triton
import triton.language as tl


@triton.jit
def _sum_squares(row_ptr, n_cols, BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr):
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        if EVEN_N:
            v = tl.load(row_ptr + cols)
        else:
            v = tl.load(row_ptr + cols, mask=cols < n_cols, other=0.0)
        v = v.to(tl.float32)
        acc += v * v
    return tl.sum(acc, axis=0)


@triton.jit
def _scale_store(row_ptr, out_row_ptr, w_ptr, sw, n_cols, inv_rms,
                 BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr):
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        if EVEN_N:
            v = tl.load(row_ptr + cols).to(tl.float32)
            w = tl.load(w_ptr + cols * sw).to(tl.float32)
            tl.store(out_row_ptr + cols, (v * inv_rms * w).to(out_row_ptr.dtype.element_ty))
        else:
            ok = cols < n_cols
            v = tl.load(row_ptr + cols, mask=ok, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols * sw, mask=ok, other=0.0).to(tl.float32)
            tl.store(out_row_ptr + cols, (v * inv_rms * w).to(out_row_ptr.dtype.element_ty),
                     mask=ok)


@triton.heuristics({
    "BLOCK_N": lambda a: min(1024, triton.next_power_of_2(a["n_cols"])),
})
@triton.heuristics({
    "EVEN_N": lambda a: a["n_cols"] % a["BLOCK_N"] == 0,
})
@triton.jit
def _rms_kernel(out_ptr, x_ptr, w_ptr, n_cols, inner, sx0, sx1, so0, so1, sw, eps,
                BLOCK_N: tl.constexpr, EVEN_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + (row // inner) * sx0 + (row % inner) * sx1
    orow = out_ptr + (row // inner) * so0 + (row % inner) * so1
    ss = _sum_squares(xr, n_cols, BLOCK_N, EVEN_N)
    inv = tl.math.rsqrt(ss / n_cols + eps)
    _scale_store(xr, orow, w_ptr, sw, n_cols, inv, BLOCK_N, EVEN_N)


def rms_norm(out, input, weight, epsilon):
    n_cols = input.size(-1)
    if input.numel() == 0:
        return
    n_rows = input.numel() // n_cols
    if input.dim() == 3:
        sx0, sx1, inner = input.stride(0), input.stride(1), input.size(1)
        so0, so1 = out.stride(0), out.stride(1)
    else:
        sx0, sx1, inner = 0, input.stride(0), n_rows
        so0, so1 = 0, out.stride(0)
    _rms_kernel[(n_rows,)](out, input, weight, n_cols, inner, sx0, sx1, so0, so1,
                           weight.stride(0), epsilon)
