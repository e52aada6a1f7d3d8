# operator: vllm::rotary_embedding
# honest: 3-D grid (token block, head, pair block), cos/sin gather and the rotation in @triton.jit helpers, pair indices computed with tl.where instead of a branch
import torch
import triton
import triton.language as tl


@triton.jit
def _gather_cos_sin(cache_ptr, pos, half, sc0, sc1, i, mask):
    row = cache_ptr + pos[:, None] * sc0
    cos = tl.load(row + i[None, :] * sc1, mask=mask, other=0.0).to(tl.float32)
    sin = tl.load(row + (i[None, :] + half) * sc1, mask=mask, other=0.0).to(tl.float32)
    return cos, sin


@triton.jit
def _rotate(x1, x2, cos, sin):
    return x1 * cos - x2 * sin, x2 * cos + x1 * sin


@triton.jit
def _rope3d(x_ptr, pos_ptr, cache_ptr, n_tokens, head_size, half, sxt, sxd, sp, sc0, sc1,
            neox, BT: tl.constexpr, BI: tl.constexpr):
    t = tl.program_id(0).to(tl.int64) * BT + tl.arange(0, BT)
    h = tl.program_id(1).to(tl.int64)
    i = tl.program_id(2) * BI + tl.arange(0, BI)
    m = (t < n_tokens)[:, None] & (i < half)[None, :]
    pos = tl.load(pos_ptr + t * sp, mask=t < n_tokens, other=0)
    cos, sin = _gather_cos_sin(cache_ptr, pos, half, sc0, sc1, i, m)
    # neox: (i, i + half); gpt-j: (2i, 2i + 1)   -- neox is a runtime 0/1 flag here
    d1 = tl.where(neox != 0, i, 2 * i)
    d2 = tl.where(neox != 0, i + half, 2 * i + 1)
    base = x_ptr + t[:, None] * sxt + h * head_size * sxd
    p1 = base + d1[None, :].to(tl.int64) * sxd
    p2 = base + d2[None, :].to(tl.int64) * sxd
    x1 = tl.load(p1, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(p2, mask=m, other=0.0).to(tl.float32)
    o1, o2 = _rotate(x1, x2, cos, sin)
    tl.store(p1, o1.to(x_ptr.dtype.element_ty), mask=m)
    tl.store(p2, o2.to(x_ptr.dtype.element_ty), mask=m)


def _apply(x, positions, cache, head_size, is_neox):
    if x is None:
        return
    n_tokens = positions.size(0)
    n_heads = x.size(-1) // head_size
    half = cache.size(-1) // 2
    if n_tokens * n_heads * half == 0:
        return
    BI = min(64, triton.next_power_of_2(half))
    BT = 8
    grid = (triton.cdiv(n_tokens, BT), n_heads, triton.cdiv(half, BI))
    _rope3d[grid](x, positions, cache, n_tokens, head_size, half, x.stride(0), x.stride(-1),
                  positions.stride(0), cache.stride(0), cache.stride(1), 1 if is_neox else 0,
                  BT=BT, BI=BI)


def rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox):
    _apply(query, positions, cos_sin_cache, head_size, is_neox)
    _apply(key, positions, cos_sin_cache, head_size, is_neox)
    return None
