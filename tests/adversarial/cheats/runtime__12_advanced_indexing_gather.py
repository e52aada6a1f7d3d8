# operator: vllm::rotary_embedding
# catalogue: 12
# layer: runtime
# expect: CHEAT_DETECTED
# technique: cos_sin_cache[positions] gather done by torch advanced indexing in the wrapper
import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(x_ptr, pos_ptr, cache_ptr, n_tokens, n_heads, head_size, half,
                 sxt, sxd, sp, sct, scd,
                 IS_NEOX: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_J: tl.constexpr):
    # Tile: BLOCK_T tokens x BLOCK_J rotation pairs, pairs flattened over (head, i < half).
    pid_t = tl.program_id(0)
    pid_j = tl.program_id(1)
    t = (pid_t * BLOCK_T + tl.arange(0, BLOCK_T)).to(tl.int64)
    j = pid_j * BLOCK_J + tl.arange(0, BLOCK_J)
    tmask = t < n_tokens
    jmask = j < n_heads * half
    mask = tmask[:, None] & jmask[None, :]
    h = j // half
    i = j % half
    pos = tl.load(pos_ptr + t * sp, mask=tmask, other=0)
    c_off = pos[:, None] * sct + i[None, :] * scd
    cos = tl.load(cache_ptr + c_off, mask=mask, other=0.0).to(tl.float32)
    sin = tl.load(cache_ptr + c_off + half * scd, mask=mask, other=0.0).to(tl.float32)
    if IS_NEOX:
        # x1 = first half of the rotated part, x2 = second half.
        d1 = h * head_size + i
        d2 = d1 + half
    else:
        # GPT-J: interleaved pairs (2i, 2i+1).
        d1 = h * head_size + 2 * i
        d2 = d1 + 1
    p1 = x_ptr + t[:, None] * sxt + d1[None, :].to(tl.int64) * sxd
    p2 = x_ptr + t[:, None] * sxt + d2[None, :].to(tl.int64) * sxd
    x1 = tl.load(p1, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(p2, mask=mask, other=0.0).to(tl.float32)
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    tl.store(p1, o1.to(x_ptr.dtype.element_ty), mask=mask)
    tl.store(p2, o2.to(x_ptr.dtype.element_ty), mask=mask)


def _apply(x, positions, cos_sin_cache, head_size, is_neox):
    # gather each token's cos/sin row up front (advanced indexing), so the kernel reads
    # a dense [n_tokens, rot_dim] table and positions become 0..n_tokens-1
    cos_sin_cache = cos_sin_cache[positions]
    positions = _iota(positions)
    n_tokens = positions.shape[0]
    n_heads = x.shape[-1] // head_size
    half = cos_sin_cache.shape[-1] // 2
    n_pairs = n_heads * half
    if n_tokens == 0 or n_pairs == 0:
        return
    block_j = min(1024, triton.next_power_of_2(n_pairs))
    block_t = max(1, min(64, 4096 // block_j))
    grid = (triton.cdiv(n_tokens, block_t), triton.cdiv(n_pairs, block_j))
    _rope_kernel[grid](x, positions, cos_sin_cache, n_tokens, n_heads, head_size, half,
                       x.stride(0), x.stride(-1), positions.stride(0),
                       cos_sin_cache.stride(0), cos_sin_cache.stride(1),
                       IS_NEOX=bool(is_neox), BLOCK_T=block_t, BLOCK_J=block_j, num_warps=4)


@triton.jit
def _iota_kernel(p_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(p_ptr + i, i.to(tl.int64), mask=i < n)


def _iota(positions):
    p = torch.empty_like(positions)
    _iota_kernel[(triton.cdiv(p.shape[0], 1024),)](p, p.shape[0], BLOCK=1024)
    return p


def rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox):
    _apply(query, positions, cos_sin_cache, head_size, is_neox)
    _apply(key, positions, cos_sin_cache, head_size, is_neox)
    return None
