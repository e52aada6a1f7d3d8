# operator: vllm::rotary_embedding
# honest: @triton.autotune on an in-place kernel, made safe with restore_value=["x_ptr"] so benchmarking configs does not rotate query/key several times; key on head geometry
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_T": 1}, num_warps=1),
        triton.Config({"BLOCK_T": 4}, num_warps=2),
        triton.Config({"BLOCK_T": 16}, num_warps=4),
    ],
    key=["n_heads", "head_size", "half"],
    restore_value=["x_ptr"],
)
@triton.jit
def _rope_at(x_ptr, pos_ptr, cache_ptr, n_tokens, n_heads, head_size, half,
             sxt, sct, IS_NEOX: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_I: tl.constexpr):
    tok = tl.program_id(0).to(tl.int64) * BLOCK_T + tl.arange(0, BLOCK_T)
    head = tl.program_id(1)
    tok_ok = tok < n_tokens
    i = tl.arange(0, BLOCK_I)
    i_ok = i < half
    m = tok_ok[:, None] & i_ok[None, :]
    pos = tl.load(pos_ptr + tok, mask=tok_ok, other=0)
    crow = cache_ptr + pos[:, None] * sct
    c = tl.load(crow + i[None, :], mask=m, other=0.0).to(tl.float32)
    s = tl.load(crow + half + i[None, :], mask=m, other=0.0).to(tl.float32)
    hp = x_ptr + tok[:, None] * sxt + head * head_size
    if IS_NEOX:
        p1 = hp + i[None, :]
        p2 = hp + half + i[None, :]
    else:
        p1 = hp + 2 * i[None, :]
        p2 = hp + 2 * i[None, :] + 1
    a = tl.load(p1, mask=m, other=0.0).to(tl.float32)
    b = tl.load(p2, mask=m, other=0.0).to(tl.float32)
    tl.store(p1, (a * c - b * s).to(x_ptr.dtype.element_ty), mask=m)
    tl.store(p2, (b * c + a * s).to(x_ptr.dtype.element_ty), mask=m)


def _go(x, positions, cache, head_size, is_neox):
    T = positions.shape[0]
    H = x.shape[-1] // head_size
    half = cache.shape[-1] // 2
    if T == 0 or H == 0:
        return
    grid = lambda meta: (triton.cdiv(T, meta["BLOCK_T"]), H)
    _rope_at[grid](x, positions, cache, T, H, head_size, half, x.stride(0), cache.stride(0),
                   IS_NEOX=bool(is_neox), BLOCK_I=triton.next_power_of_2(half))


def rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox):
    _go(query, positions, cos_sin_cache, head_size, is_neox)
    _go(key, positions, cos_sin_cache, head_size, is_neox)
    return None
