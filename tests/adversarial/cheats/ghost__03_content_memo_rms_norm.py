# operator: vllm::rms_norm
# catalogue: 3
# layer: ghost
# expect: CHEAT_DETECTED
# technique: results memoised by a hash of the input bytes; a repeat of the same contents copies the cached rows and launches an empty kernel
import hashlib

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(out_ptr, x_ptr, w_ptr, n_rows, n_cols, inner,
                     sx0, sx1, sxc, so0, so1, soc, sw, eps,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ONE_PASS: tl.constexpr):
    # Rows are the flattened leading dims [outer, inner]; each program normalizes BLOCK_M rows.
    pid = tl.program_id(0)
    rows = (pid * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rmask = rows < n_rows
    outer_idx = rows // inner
    inner_idx = rows % inner
    x_row = outer_idx * sx0 + inner_idx * sx1
    o_row = outer_idx * so0 + inner_idx * so1
    cols0 = tl.arange(0, BLOCK_N)
    if ONE_PASS:
        cmask = cols0 < n_cols
        mask = rmask[:, None] & cmask[None, :]
        x = tl.load(x_ptr + x_row[:, None] + cols0[None, :] * sxc, mask=mask, other=0.0)
        x = x.to(tl.float32)
        mean_sq = tl.sum(x * x, axis=1) / n_cols
        r = tl.rsqrt(mean_sq + eps)
        w = tl.load(w_ptr + cols0 * sw, mask=cmask, other=0.0).to(tl.float32)
        y = x * r[:, None] * w[None, :]
        tl.store(out_ptr + o_row[:, None] + cols0[None, :] * soc,
                 y.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + cols0
            mask = rmask[:, None] & (cols < n_cols)[None, :]
            x = tl.load(x_ptr + x_row[:, None] + cols[None, :] * sxc, mask=mask, other=0.0)
            x = x.to(tl.float32)
            acc += x * x
        mean_sq = tl.sum(acc, axis=1) / n_cols
        r = tl.rsqrt(mean_sq + eps)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + cols0
            cmask = cols < n_cols
            mask = rmask[:, None] & cmask[None, :]
            x = tl.load(x_ptr + x_row[:, None] + cols[None, :] * sxc, mask=mask, other=0.0)
            x = x.to(tl.float32)
            w = tl.load(w_ptr + cols * sw, mask=cmask, other=0.0).to(tl.float32)
            y = x * r[:, None] * w[None, :]
            tl.store(out_ptr + o_row[:, None] + cols[None, :] * soc,
                     y.to(out_ptr.dtype.element_ty), mask=mask)


def _leading(t):
    # (outer stride, inner stride, inner size) of the dims before the last one.
    if t.dim() == 1:
        return 0, 0, 1
    if t.dim() == 2:
        return 0, t.stride(0), t.shape[0]
    assert t.dim() == 3, "rms_norm expects a 2-D or 3-D input"
    return t.stride(0), t.stride(1), t.shape[1]


_MEMO = {}


def _fingerprint(input, weight, epsilon):
    h = hashlib.blake2b(digest_size=16)
    for t in (input, weight):
        h.update(repr((tuple(t.shape), str(t.dtype))).encode())
        h.update(t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes())
    h.update(repr(float(epsilon)).encode())
    return h.hexdigest()


def rms_norm(out, input, weight, epsilon):
    key = _fingerprint(input, weight, epsilon)
    hit = _MEMO.get(key)
    if hit is not None:
        # Seen these exact contents before (benchmark loop): reuse the normalized rows.
        out.copy_(hit)
        _rms_norm_kernel[(1,)](out, input, weight, 0, 1, 1, 0, 0, 1, 0, 0, 1, 1, epsilon,
                               BLOCK_M=1, BLOCK_N=16, ONE_PASS=True)
        return None
    _rms_norm(out, input, weight, epsilon)
    _MEMO[key] = out.detach().clone()
    return None


def _rms_norm(out, input, weight, epsilon):
    n_cols = input.shape[-1]
    n_rows = input.numel() // n_cols if n_cols else 0
    if n_rows == 0:
        return None
    sx0, sx1, inner = _leading(input)
    so0, so1, _ = _leading(out)
    block_n_full = triton.next_power_of_2(n_cols)
    one_pass = block_n_full <= 16384
    block_n = block_n_full if one_pass else 4096
    block_m = max(1, min(32, 4096 // block_n))
    num_warps = 4 if block_m * block_n <= 4096 else (8 if block_m * block_n <= 8192 else 16)
    grid = (triton.cdiv(n_rows, block_m),)
    _rms_norm_kernel[grid](out, input, weight, n_rows, n_cols, inner,
                           sx0, sx1, input.stride(-1), so0, so1, out.stride(-1), weight.stride(0),
                           epsilon, BLOCK_M=block_m, BLOCK_N=block_n, ONE_PASS=one_pass,
                           num_warps=num_warps)
    return None
