# operator: vllm::rms_norm
# honest: sum-of-squares scratch cached per row count in a module dict and reused across calls; tl.atomic_add partial sums (order varies on GPU, within tolerance), and the normalize kernel zeroes every slot it consumed, so repeated calls stay right
import torch
import triton
import triton.language as tl

# Sum-of-squares scratch cached per (rows, device): created zeroed, and the normalize kernel
# zeroes every slot it consumed, so each call starts from zeros without a memset launch.
_SCRATCH = {}


@triton.jit
def _sumsq_kernel(x_ptr, acc_ptr, n_rows, n_cols, inner, sx0, sx1, sxc,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rmask = rows < n_rows
    x_row = (rows // inner) * sx0 + (rows % inner) * sx1
    mask = rmask[:, None] & (cols < n_cols)[None, :]
    x = tl.load(x_ptr + x_row[:, None] + cols[None, :] * sxc, mask=mask, other=0.0).to(tl.float32)
    tl.atomic_add(acc_ptr + rows, tl.sum(x * x, axis=1), mask=rmask)


@triton.jit
def _normalize_kernel(out_ptr, x_ptr, w_ptr, acc_ptr, n_rows, n_cols, inner,
                      sx0, sx1, sxc, so0, so1, soc, sw, eps,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # One program owns BLOCK_M whole rows (loops over columns), so it alone reads and then
    # clears their scratch slots.
    pid = tl.program_id(0)
    rows = (pid * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rmask = rows < n_rows
    x_row = (rows // inner) * sx0 + (rows % inner) * sx1
    o_row = (rows // inner) * so0 + (rows % inner) * so1
    ss = tl.load(acc_ptr + rows, mask=rmask, other=1.0)
    r = tl.rsqrt(ss / n_cols + eps)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        cmask = cols < n_cols
        mask = rmask[:, None] & cmask[None, :]
        x = tl.load(x_ptr + x_row[:, None] + cols[None, :] * sxc, mask=mask, other=0.0)
        w = tl.load(w_ptr + cols * sw, mask=cmask, other=0.0).to(tl.float32)
        y = x.to(tl.float32) * r[:, None] * w[None, :]
        tl.store(out_ptr + o_row[:, None] + cols[None, :] * soc, y.to(out_ptr.dtype.element_ty),
                 mask=mask)
    tl.store(acc_ptr + rows, tl.zeros([BLOCK_M], dtype=tl.float32), mask=rmask)


def _leading(t):
    if t.dim() == 1:
        return 0, 0, 1
    if t.dim() == 2:
        return 0, t.stride(0), t.shape[0]
    assert t.dim() == 3, "rms_norm expects a 2-D or 3-D input"
    return t.stride(0), t.stride(1), t.shape[1]


def _scratch(n_rows, device):
    key = (n_rows, str(device))
    buf = _SCRATCH.get(key)
    if buf is None:
        buf = torch.zeros(n_rows, dtype=torch.float32, device=device)
        _SCRATCH[key] = buf
    return buf


def rms_norm(out, input, weight, epsilon):
    n_cols = input.shape[-1]
    n_rows = input.numel() // n_cols if n_cols else 0
    if n_rows == 0:
        return None
    sx0, sx1, inner = _leading(input)
    so0, so1, _ = _leading(out)
    acc = _scratch(n_rows, input.device)
    BLOCK_N = min(triton.next_power_of_2(n_cols), 1024)
    BLOCK_M = max(1, min(16, 4096 // BLOCK_N))
    _sumsq_kernel[(triton.cdiv(n_rows, BLOCK_M), triton.cdiv(n_cols, BLOCK_N))](
        input, acc, n_rows, n_cols, inner, sx0, sx1, input.stride(-1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    _normalize_kernel[(triton.cdiv(n_rows, BLOCK_M),)](
        out, input, weight, acc, n_rows, n_cols, inner,
        sx0, sx1, input.stride(-1), so0, so1, out.stride(-1), weight.stride(0), epsilon,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return None
