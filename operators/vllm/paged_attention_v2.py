"""vllm::paged_attention_v2 — ``vllm._custom_ops.paged_attention_v2(out, exp_sum, max_logits,
tmp_out, query, key_cache, value_cache, num_kv_heads, scale, block_tables, seq_lens, block_size,
max_seq_len, alibi_slopes, kv_cache_dtype, k_scale, v_scale, tp_rank, blocksparse_local_blocks,
blocksparse_vert_stride, blocksparse_block_size, blocksparse_head_sliding_step)`` (vLLM 0.13.0):
the same decode attention as v1, split over 512-token partitions of the context and reduced.

``exp_sum``, ``max_logits`` (float32 ``[num_seqs, num_heads, max_num_partitions]``) and
``tmp_out`` (``[num_seqs, num_heads, max_num_partitions, head_size]``, the query's dtype) are
scratch vLLM's kernels fill and read: the call declares them writable and poisons them, and
neither compares nor keeps them (``max_num_partitions = ceil(max_seq_len / 512)``).
"""

from __future__ import annotations

from collections.abc import Sequence

from operators.registry import register
from operators.spec import Case, EntryPoint, Kind, Negative
from operators.vllm._paged_attention import (
    DESCRIPTION,
    PARTITION_SIZE,
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
def _paged_attention_v2_kernel(exp_sums_ptr, max_logits_ptr, tmp_ptr, q_ptr, kc_ptr, vc_ptr,
                               table_ptr, lens_ptr, alibi_ptr, ks_ptr, vs_ptr, num_heads,
                               max_parts, group, head_size, block_size, scale,
                               s_q, s_block, s_head, s_table,
                               PARTITION: tl.constexpr, X: tl.constexpr,
                               HAS_ALIBI: tl.constexpr, FP8: tl.constexpr,
                               BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    # One program per (sequence, query head, partition of PARTITION tokens).
    s = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    part = tl.program_id(2)
    kv_head = h // group
    seq_len = tl.load(lens_ptr + s)
    start = part * PARTITION
    end = tl.minimum(start + PARTITION, seq_len)
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
                        table_ptr + s * s_table, seq_len, start, end, block_size, head_size,
                        scale, slope, k_scale, v_scale, s_block, X=X, HAS_ALIBI=HAS_ALIBI,
                        BLOCK_N=BLOCK_N, BLOCK_D=BLOCK_D)
    # Partitions past the sequence are written too but never read.
    idx = (s * num_heads + h) * max_parts + part
    tl.store(exp_sums_ptr + idx, l)
    tl.store(max_logits_ptr + idx, m)
    o = acc / tl.maximum(l, 1e-30)
    tl.store(tmp_ptr + idx * head_size + d, o.to(tmp_ptr.dtype.element_ty), mask=dmask)


@triton.jit
def _paged_attention_v2_reduce(out_ptr, exp_sums_ptr, max_logits_ptr, tmp_ptr, lens_ptr,
                               num_heads, max_parts, head_size, PARTITION: tl.constexpr,
                               BLOCK_P: tl.constexpr, BLOCK_D: tl.constexpr):
    # One program per (sequence, head): rescale each partition by exp(max_p - max) and merge.
    s = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    seq_len = tl.load(lens_ptr + s)
    n_parts = (seq_len + PARTITION - 1) // PARTITION
    p = tl.arange(0, BLOCK_P)
    pmask = p < n_parts
    base = (s * num_heads + h) * max_parts
    mx = tl.load(max_logits_ptr + base + p, mask=pmask, other=float("-inf"))
    w = tl.load(exp_sums_ptr + base + p, mask=pmask, other=0.0)
    w = tl.where(pmask, w * tl.exp(mx - tl.max(mx, axis=0)), 0.0)
    d = tl.arange(0, BLOCK_D)
    dmask = d < head_size
    tmp = tl.load(tmp_ptr + (base + p)[:, None] * head_size + d[None, :],
                  mask=pmask[:, None] & dmask[None, :], other=0.0).to(tl.float32)
    o = tl.sum(w[:, None] * tmp, axis=0) / tl.sum(w, axis=0)
    tl.store(out_ptr + (s * num_heads + h) * head_size + d, o.to(out_ptr.dtype.element_ty),
             mask=dmask)


def paged_attention_v2(out, exp_sum, max_logits, tmp_out, query, key_cache, value_cache,
                       num_kv_heads, scale, block_tables, seq_lens, block_size, max_seq_len,
                       alibi_slopes, kv_cache_dtype, k_scale, v_scale, tp_rank=0,
                       blocksparse_local_blocks=0, blocksparse_vert_stride=0,
                       blocksparse_block_size=64, blocksparse_head_sliding_step=0):
    num_seqs, num_heads, head_size = query.shape
    if num_seqs == 0:
        return None
    max_parts = tmp_out.shape[2]
    has_alibi = alibi_slopes is not None
    block_d = triton.next_power_of_2(head_size)
    _paged_attention_v2_kernel[(num_seqs, num_heads, max_parts)](
        exp_sum, max_logits, tmp_out, query, key_cache, value_cache, block_tables, seq_lens,
        alibi_slopes if has_alibi else seq_lens, k_scale, v_scale, num_heads, max_parts,
        num_heads // num_kv_heads, head_size, block_size, scale,
        query.stride(0), key_cache.stride(0), key_cache.stride(1), block_tables.stride(0),
        PARTITION=512, X=key_cache.shape[4], HAS_ALIBI=has_alibi,
        FP8=kv_cache_dtype != "auto", BLOCK_N=64, BLOCK_D=block_d, num_warps=4)
    _paged_attention_v2_reduce[(num_seqs, num_heads)](
        out, exp_sum, max_logits, tmp_out, seq_lens, num_heads, max_parts, head_size,
        PARTITION=512, BLOCK_P=triton.next_power_of_2(max_parts), BLOCK_D=block_d, num_warps=4)
    return None
'''

# Merges partitions without rescaling them to the global maximum: right for one partition.
NEGATIVE_NO_RESCALE = SOLUTION.replace("w = tl.where(pmask, w * tl.exp(mx - tl.max(mx, axis=0)), 0.0)",
                                       "w = tl.where(pmask, w, 0.0)")

# Drops the ALiBi bias: right whenever alibi_slopes is None.
NEGATIVE_NO_ALIBI = SOLUTION.replace("HAS_ALIBI=has_alibi,", "HAS_ALIBI=False,")


@register("vllm::paged_attention_v2", version=1, kind=Kind.COMPUTE)
class PagedAttentionV2(PagedAttentionSpec):
    v2 = True
    entry_points = (
        EntryPoint(
            "paged_attention_v2",
            "paged_attention_v2(out: Tensor, exp_sum: Tensor, max_logits: Tensor, tmp_out: "
            "Tensor, query: Tensor, key_cache: Tensor, value_cache: Tensor, num_kv_heads: int, "
            "scale: float, block_tables: Tensor, seq_lens: Tensor, block_size: int, "
            "max_seq_len: int, alibi_slopes: Tensor | None, kv_cache_dtype: str, k_scale: Tensor, "
            "v_scale: Tensor, tp_rank: int = 0, blocksparse_local_blocks: int = 0, "
            "blocksparse_vert_stride: int = 0, blocksparse_block_size: int = 64, "
            "blocksparse_head_sliding_step: int = 0) -> None",
            "Decode attention over paged KV caches, split into 512-token partitions (scratch in "
            "exp_sum, max_logits, tmp_out) and reduced into out.",
        ),
    )
    description = DESCRIPTION.format(
        name="paged_attention_v2",
        extra=(f"vLLM splits each context into partitions of {PARTITION_SIZE} tokens and merges "
               "them; `exp_sum` and `max_logits` (float32 `[num_seqs, num_heads, "
               "max_num_partitions]`) and `tmp_out` (`[num_seqs, num_heads, max_num_partitions, "
               "head_size]`, the query's dtype), all contiguous with `max_num_partitions = "
               f"ceil(max_seq_len / {PARTITION_SIZE})`, are scratch for that: use them as you "
               "like (or not); their contents are not checked. "),
        scratch=" (the scratch buffers excepted)")
    solution = SOLUTION
    negatives = (
        Negative("no_rescale", "merges partitions weighted by their raw exp sums, without "
                 "rescaling to the global max logit (right only for one partition)",
                 NEGATIVE_NO_RESCALE),
        Negative("no_alibi", "never adds the ALiBi bias (right whenever alibi_slopes is None)",
                 NEGATIVE_NO_ALIBI),
    )

    def cases(self) -> Sequence[Case]:
        e = "paged_attention_v2"
        return [
            pa_case(e, 2, 2, 1, 32, "float16", max_len=40, cpu=True),
            pa_case(e, 2, 2, 1, 32, "bfloat16", kv="fp8", bs=8, max_len=30, k_scale="half",
                    cpu=True),
            pa_case(e, 2, 2, 2, 32, "float32", bs=16, max_len=70, alibi=True, cpu=True),
            pa_case(e, 1, 1, 1, 32, "float16", bs=32, max_len=530, layout="qkv", qstd=4.0,
                    cpu=True),
            pa_case(e, 0, 4, 2, 64, "bfloat16", max_len=1, cpu=True),
            *public_cases(e, long=8192),
            pa_case(e, 2, 32, 8, 128, "bfloat16", max_len=16384),
        ]

    def benchmark_cases(self) -> Sequence[Case]:
        e = "paged_attention_v2"
        return [
            pa_case(e, 16, 32, 8, 128, "bfloat16", max_len=16384),           # long contexts
            pa_case(e, 16, 32, 8, 128, "bfloat16", kv="fp8", max_len=16384, k_scale="half"),
            pa_case(e, 8, 64, 8, 128, "float16", bs=32, max_len=32768),      # Llama-3 70B
        ]
