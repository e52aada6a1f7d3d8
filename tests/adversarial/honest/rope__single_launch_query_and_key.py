# operator: vllm::rotary_embedding
# honest: one launch rotates query and key together: grid (tokens, q_heads + kv_heads), each program picks its tensor and strides with a scalar branch on the head index
import torch
import triton
import triton.language as tl


@triton.jit
def _rope_qk(q_ptr, k_ptr, pos_ptr, cache_ptr, n_q_heads, head_size, half,
             sq_t, sk_t, s_cache, IS_NEOX: tl.constexpr, BLOCK: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    if h < n_q_heads:
        base = q_ptr + t * sq_t + h.to(tl.int64) * head_size
    else:
        base = k_ptr + t * sk_t + (h - n_q_heads).to(tl.int64) * head_size
    i = tl.arange(0, BLOCK)
    ok = i < half
    p = tl.load(pos_ptr + t)
    cos = tl.load(cache_ptr + p * s_cache + i, mask=ok, other=0.0).to(tl.float32)
    sin = tl.load(cache_ptr + p * s_cache + half + i, mask=ok, other=0.0).to(tl.float32)
    if IS_NEOX:
        i1 = i
        i2 = i + half
    else:
        i1 = 2 * i
        i2 = 2 * i + 1
    x1 = tl.load(base + i1, mask=ok, other=0.0).to(tl.float32)
    x2 = tl.load(base + i2, mask=ok, other=0.0).to(tl.float32)
    tl.store(base + i1, (x1 * cos - x2 * sin).to(base.dtype.element_ty), mask=ok)
    tl.store(base + i2, (x2 * cos + x1 * sin).to(base.dtype.element_ty), mask=ok)


def rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox):
    n_tokens = positions.numel()
    half = cos_sin_cache.shape[1] // 2
    n_q = query.shape[-1] // head_size
    n_k = key.shape[-1] // head_size if key is not None else 0
    if n_tokens == 0 or half == 0:
        return None
    k = key if key is not None else query
    _rope_qk[(n_tokens, n_q + n_k)](query, k, positions, cos_sin_cache, n_q, head_size, half,
                                    query.stride(0), k.stride(0), cos_sin_cache.stride(0),
                                    IS_NEOX=bool(is_neox), BLOCK=triton.next_power_of_2(half))
    return None
