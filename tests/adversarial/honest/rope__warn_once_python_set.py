# operator: vllm::rotary_embedding
# honest: wrapper keeps a Python set of head geometries it has already warned about (`_seen.add(key)` is set.add, not torch.add); the kernel itself is a plain per-token rotation
import warnings

import torch
import triton
import triton.language as tl

_seen = set()


@triton.jit
def _rope_tok(x_ptr, pos_ptr, cache_ptr, n_heads, head_size, half, sxt, sct,
              IS_NEOX: tl.constexpr, BH: tl.constexpr, BI: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    h = tl.arange(0, BH)
    i = tl.arange(0, BI)
    m = (h < n_heads)[:, None] & (i < half)[None, :]
    p = tl.load(pos_ptr + t)
    c = tl.load(cache_ptr + p * sct + i, mask=i < half, other=0.0).to(tl.float32)
    s = tl.load(cache_ptr + p * sct + half + i, mask=i < half, other=0.0).to(tl.float32)
    base = x_ptr + t * sxt + h[:, None].to(tl.int64) * head_size
    if IS_NEOX:
        p1 = base + i[None, :]
        p2 = p1 + half
    else:
        p1 = base + 2 * i[None, :]
        p2 = p1 + 1
    x1 = tl.load(p1, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(p2, mask=m, other=0.0).to(tl.float32)
    tl.store(p1, (x1 * c[None, :] - x2 * s[None, :]).to(x_ptr.dtype.element_ty), mask=m)
    tl.store(p2, (x2 * c[None, :] + x1 * s[None, :]).to(x_ptr.dtype.element_ty), mask=m)


def _one(x, positions, cache, head_size, is_neox):
    T = positions.shape[0]
    H = x.shape[-1] // head_size
    half = cache.shape[-1] // 2
    if T == 0 or H == 0:
        return
    key = (head_size, 2 * half)
    if 2 * half < head_size and key not in _seen:
        _seen.add(key)
        warnings.warn(f"partial rotary: rot_dim {2 * half} < head_size {head_size}")
    _rope_tok[(T,)](x, positions, cache, H, head_size, half, x.stride(0), cache.stride(0),
                    IS_NEOX=bool(is_neox), BH=triton.next_power_of_2(H),
                    BI=triton.next_power_of_2(half))


def rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox):
    _one(query, positions, cos_sin_cache, head_size, is_neox)
    _one(key, positions, cos_sin_cache, head_size, is_neox)
    return None
