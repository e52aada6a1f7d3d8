"""vllm::paged_attention_v1 — ``vllm._custom_ops.paged_attention_v1(out, query, key_cache,
value_cache, num_kv_heads, scale, block_tables, seq_lens, block_size, max_seq_len,
alibi_slopes, kv_cache_dtype, k_scale, v_scale, tp_rank, blocksparse_local_blocks,
blocksparse_vert_stride, blocksparse_block_size, blocksparse_head_sliding_step)`` (vLLM 0.13.0,
where the paged-attention ops still live in ``_custom_ops``; ``k_scale``/``v_scale`` are
tensors): decode attention over paged KV caches, one query token per sequence, written into
``out``. Layouts, the reference and its error bound: :mod:`operators.vllm._paged_attention`.
"""

from __future__ import annotations

from collections.abc import Sequence

from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative
from operators.vllm._paged_attention import (
    DESCRIPTION,
    TRITON_ATTEND,
    PagedAttentionSpec,
    pa_case,
    public_cases,
)

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + TRITON_ATTEND + r'''

@triton.jit
def _paged_attention_v1_kernel(out_ptr, q_ptr, kc_ptr, vc_ptr, table_ptr, lens_ptr, alibi_ptr,
                               ks_ptr, vs_ptr, num_heads, group, head_size, block_size, scale,
                               s_q, s_block, s_head, s_table,
                               X: tl.constexpr, HAS_ALIBI: tl.constexpr, FP8: tl.constexpr,
                               BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    # One program per (sequence, query head): the whole context with an online softmax.
    s = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    kv_head = h // group
    seq_len = tl.load(lens_ptr + s)
    d = tl.arange(0, BLOCK_D)
    dmask = d < head_size
    q = tl.load(q_ptr + s * s_q + h * head_size + d, mask=dmask, other=0.0).to(tl.float32)
    slope = 0.0
    if HAS_ALIBI:
        slope = tl.load(alibi_ptr + h)
    k_scale = 1.0
    v_scale = 1.0
    if FP8:
        k_scale = tl.load(ks_ptr)
        v_scale = tl.load(vs_ptr)
    m, l, acc = _attend(q, kc_ptr + kv_head * s_head, vc_ptr + kv_head * s_head,
                        table_ptr + s * s_table, seq_len, 0, seq_len, block_size, head_size,
                        scale, slope, k_scale, v_scale, s_block, X=X, HAS_ALIBI=HAS_ALIBI,
                        BLOCK_N=BLOCK_N, BLOCK_D=BLOCK_D)
    o = acc / l
    tl.store(out_ptr + (s * num_heads + h) * head_size + d, o.to(out_ptr.dtype.element_ty),
             mask=dmask)


def paged_attention_v1(out, query, key_cache, value_cache, num_kv_heads, scale, block_tables,
                       seq_lens, block_size, max_seq_len, alibi_slopes, kv_cache_dtype, k_scale,
                       v_scale, tp_rank=0, blocksparse_local_blocks=0, blocksparse_vert_stride=0,
                       blocksparse_block_size=64, blocksparse_head_sliding_step=0):
    num_seqs, num_heads, head_size = query.shape
    if num_seqs == 0:
        return None
    has_alibi = alibi_slopes is not None
    grid = (num_seqs, num_heads)
    _paged_attention_v1_kernel[grid](
        out, query, key_cache, value_cache, block_tables, seq_lens,
        alibi_slopes if has_alibi else seq_lens, k_scale, v_scale,
        num_heads, num_heads // num_kv_heads, head_size, block_size, scale,
        query.stride(0), key_cache.stride(0), key_cache.stride(1), block_tables.stride(0),
        X=key_cache.shape[4], HAS_ALIBI=has_alibi, FP8=kv_cache_dtype != "auto",
        BLOCK_N=64, BLOCK_D=triton.next_power_of_2(head_size), num_warps=4)
    return None
'''

# Drops the ALiBi bias: right whenever alibi_slopes is None.
NEGATIVE_NO_ALIBI = SOLUTION.replace("HAS_ALIBI=has_alibi,", "HAS_ALIBI=False,")

# Maps query heads to KV heads round-robin: right for multi-head and multi-query attention only.
NEGATIVE_GQA_MODULO = SOLUTION.replace("kv_head = h // group", "kv_head = h % (num_heads // group)")


@register("vllm::paged_attention_v1", version=1, kind=Kind.COMPUTE)
class PagedAttentionV1(PagedAttentionSpec):
    entry_points = (
        EntryPoint(
            "paged_attention_v1",
            "paged_attention_v1(out: Tensor, query: Tensor, key_cache: Tensor, value_cache: "
            "Tensor, num_kv_heads: int, scale: float, block_tables: Tensor, seq_lens: Tensor, "
            "block_size: int, max_seq_len: int, alibi_slopes: Tensor | None, kv_cache_dtype: str, "
            "k_scale: Tensor, v_scale: Tensor, tp_rank: int = 0, blocksparse_local_blocks: int = "
            "0, blocksparse_vert_stride: int = 0, blocksparse_block_size: int = 64, "
            "blocksparse_head_sliding_step: int = 0) -> None",
            "Decode attention of one query token per sequence over paged KV caches, into out.",
        ),
    )
    description = DESCRIPTION.format(name="paged_attention_v1", extra="", scratch="")
    solution = SOLUTION
    negatives = (
        Negative("no_alibi", "never adds the ALiBi bias (right whenever alibi_slopes is None)",
                 NEGATIVE_NO_ALIBI),
        Negative("gqa_modulo", "maps query head h to KV head h % num_kv_heads instead of h // "
                 "(num_heads // num_kv_heads) (right only for MHA and MQA)", NEGATIVE_GQA_MODULO),
    )

    def cases(self) -> Sequence[Case]:
        e = "paged_attention_v1"
        return [
            pa_case(e, 2, 4, 2, 64, "float16", max_len=40, cpu=True),
            pa_case(e, 2, 2, 2, 32, "bfloat16", kv="fp8", bs=8, max_len=30, alibi=True,
                    k_scale="half", cpu=True),
            pa_case(e, 2, 2, 1, 80, "float32", max_len=45, alibi=True, cpu=True),
            pa_case(e, 1, 4, 2, 128, "float16", bs=32, max_len=50, layout="qkv", qstd=4.0,
                    cpu=True),
            pa_case(e, 2, 1, 1, 32, "float32", kv="fp8_e4m3", max_len=20, k_scale="odd", cpu=True),
            pa_case(e, 0, 4, 2, 64, "bfloat16", max_len=1, cpu=True),
            *public_cases(e, long=4096),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        e = "paged_attention_v1"
        return [
            pa_case(e, 64, 32, 8, 128, "bfloat16", max_len=4096),              # Llama-3 8B
            pa_case(e, 64, 32, 8, 128, "bfloat16", kv="fp8", max_len=4096, k_scale="half"),
            pa_case(e, 32, 64, 8, 128, "float16", bs=32, max_len=8192),        # Llama-3 70B
        ]
