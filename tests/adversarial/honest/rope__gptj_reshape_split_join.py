# operator: vllm::rotary_embedding
# honest: GPT-J pairs loaded as one contiguous vector then tl.reshape'd to [pairs, 2] and tl.split / tl.join'ed; NeoX halves loaded separately; heads vectorised as a 2-D tile
import torch
import triton
import triton.language as tl


@triton.jit
def _rope_tile(x_ptr, pos_ptr, cache_ptr, n_heads, head_size, half, sx_t, s_pos, s_c0, s_c1,
               IS_NEOX: tl.constexpr, BH: tl.constexpr, HALF_P2: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    hb = tl.program_id(1) * BH + tl.arange(0, BH)
    hok = hb < n_heads
    p = tl.load(pos_ptr + t * s_pos)
    i = tl.arange(0, HALF_P2)
    iok = i < half
    cos = tl.load(cache_ptr + p * s_c0 + i * s_c1, mask=iok, other=0.0).to(tl.float32)
    sin = tl.load(cache_ptr + p * s_c0 + (half + i) * s_c1, mask=iok, other=0.0).to(tl.float32)
    head_base = x_ptr + t * sx_t + hb.to(tl.int64)[:, None] * head_size
    if IS_NEOX:
        m = hok[:, None] & iok[None, :]
        x1 = tl.load(head_base + i[None, :], mask=m, other=0.0).to(tl.float32)
        x2 = tl.load(head_base + half + i[None, :], mask=m, other=0.0).to(tl.float32)
        tl.store(head_base + i[None, :], (x1 * cos[None, :] - x2 * sin[None, :]).to(x_ptr.dtype.element_ty), mask=m)
        tl.store(head_base + half + i[None, :], (x2 * cos[None, :] + x1 * sin[None, :]).to(x_ptr.dtype.element_ty), mask=m)
    else:
        j = tl.arange(0, 2 * HALF_P2)  # interleaved: element j belongs to pair j // 2
        m = hok[:, None] & (j < 2 * half)[None, :]
        v = tl.load(head_base + j[None, :], mask=m, other=0.0).to(tl.float32)
        x1, x2 = tl.split(tl.reshape(v, [BH, HALF_P2, 2]))
        o1 = x1 * cos[None, :] - x2 * sin[None, :]
        o2 = x2 * cos[None, :] + x1 * sin[None, :]
        o = tl.reshape(tl.join(o1, o2), [BH, 2 * HALF_P2])
        tl.store(head_base + j[None, :], o.to(x_ptr.dtype.element_ty), mask=m)


def _rotate(x, positions, cache, head_size, is_neox):
    n_tokens = positions.shape[0]
    n_heads = x.shape[1] // head_size
    half = cache.shape[1] // 2
    if n_tokens == 0 or n_heads == 0 or half == 0:
        return
    HALF_P2 = triton.next_power_of_2(half)
    BH = max(1, min(triton.next_power_of_2(n_heads), 1024 // HALF_P2))
    _rope_tile[(n_tokens, triton.cdiv(n_heads, BH))](
        x, positions, cache, n_heads, head_size, half, x.stride(0), positions.stride(0),
        cache.stride(0), cache.stride(1), IS_NEOX=is_neox, BH=BH, HALF_P2=HALF_P2)


def rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox):
    _rotate(query, positions, cos_sin_cache, head_size, bool(is_neox))
    if key is not None:
        _rotate(key, positions, cos_sin_cache, head_size, bool(is_neox))
