"""vllm::ggml_moe_a8 — ``vllm._custom_ops.ggml_moe_a8(X, W, sorted_token_ids, expert_ids,
num_tokens_post_padded, quant_type, row, top_k, tokens)`` (vLLM 0.13.0): the prefill-path MoE
GEMM (MMQ) over GGML expert weights, driven by ``moe_align_block_size``'s layout.

``X`` ``[tokens, K]`` contiguous float16/bfloat16/float32; ``W`` a contiguous uint8 expert stack
``[E, row, K / QK * BYTES]``; ``sorted_token_ids`` int32 holds flat pair ids
``token * top_k + slot`` grouped by expert in blocks of 4 (``ggml_moe_get_block_size`` is 4 for
every type on CUDA), each expert's run padded with the sentinel ``tokens * top_k``;
``expert_ids`` int32 gives each block's expert (-1 past the used blocks);
``num_tokens_post_padded`` [1] int32 the used length. Returns a new ``[tokens * top_k, row]``
tensor of X's dtype (vLLM's kernel writes X's dtype; its fake registration says float16): block
``b`` with ``4 b <= num_tokens_post_padded`` and expert ``e >= 0`` writes, for each id in it
below the sentinel, ``Y[id] = Q8_1(X[id // top_k]) . W[e]`` with MMQ arithmetic (reference and
bound: :mod:`operators.vllm._ggml_a8`). Every pair appears once, so every row is written.
Scope: types 2, 3, 6, 7, 8, 10-14; at most 256 experts (vLLM skips expert ids above 255).
Bad input: vLLM 0.13 checks nothing; the PyTorch baseline raises ``RuntimeError`` for an
unknown type.
"""

from __future__ import annotations

import torch

from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Expected, Kind, Negative
from operators.vllm import _ggml as G
from operators.vllm import _ggml_triton as T
from operators.vllm._ggml_a8 import activations, weights
from operators.vllm._ggml_moe import (
    MOE_BLOCK,
    MoeA8Spec,
    align,
    moe_expected,
    pairs_from_sorted,
    routing,
    torch_moe,
)
from operators.vllm._ggml_text import FORMATS, q8_1_text
from operators.vllm._ggml_triton import patched
from operators.vllm._vllm_ops import vllm_ops

SOLUTION = T.HEADER + T.DECODE + T.QUANT_Q8_1 + T.GEMM + r'''

@triton.jit
def _moe_mmq_kernel(xq_ptr, w_ptr, ids_ptr, eids_ptr, post_ptr, y_ptr, N, K, RB, top_k, numel,
                    expert_bytes, QT: tl.constexpr, ALIGN: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # One aligned block of ALIGN sorted positions (one expert) per program, in a BLOCK_M tile.
    b = tl.program_id(0)
    if b * ALIGN >= tl.load(post_ptr):
        return
    expert = tl.load(eids_ptr + b)
    if expert < 0:
        return
    r = tl.arange(0, BLOCK_M)
    ids = tl.load(ids_ptr + b * ALIGN + r, mask=r < ALIGN, other=numel)
    valid = ids < numel
    a_rows = tl.where(valid, ids // top_k, -1)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = _ggml_tile(xq_ptr, w_ptr, expert.to(tl.int64) * expert_bytes, a_rows,
                     tl.where(rn < N, rn, 0), K, RB, QT, BLOCK_M, BLOCK_N, BLOCK_K)
    ptrs = y_ptr + tl.where(valid, ids, 0)[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(ptrs, acc.to(y_ptr.dtype.element_ty), mask=valid[:, None] & (rn < N)[None, :])


def ggml_moe_a8(X, W, sorted_token_ids, expert_ids, num_tokens_post_padded, quant_type, row,
                top_k, tokens):
    K = X.shape[1]
    y = torch.empty((tokens * top_k, row), dtype=X.dtype, device=X.device)
    nblocks = sorted_token_ids.shape[0] // 4
    if tokens * top_k == 0 or row == 0 or nblocks == 0:
        return y
    xq = _quantize_q8_1(X[:tokens])
    grid = (nblocks, triton.cdiv(row, 64))
    _moe_mmq_kernel[grid](xq, W, sorted_token_ids, expert_ids, num_tokens_post_padded, y, row,
                          K, W.shape[-1], top_k, tokens * top_k, W.shape[1] * W.shape[2],
                          QT=quant_type, ALIGN=4, BLOCK_M=16, BLOCK_N=64, BLOCK_K=128)
    return y
'''

NEGATIVE_HALF_EVEN = patched(SOLUTION, *T.HALF_EVEN)
NEGATIVE_D_NOT_FP16 = patched(SOLUTION, *T.D_NOT_FP16)
# Takes each block's expert from the first block of its group of four, as if the layout were
# aligned to 16 (the fused-MoE Triton kernel's tile): right where experts' runs align to 16.
NEGATIVE_ALIGN_16 = patched(SOLUTION, "expert = tl.load(eids_ptr + b)",
                            "expert = tl.load(eids_ptr + b // 4 * 4)")

@register("vllm::ggml_moe_a8", version=1, kind=Kind.COMPUTE)
class GgmlMoeA8(MoeA8Spec):
    ENTRY = "ggml_moe_a8"
    # The Q4_K case routes 16 tokens to both of 2 experts: runs of 16, aligned to 16.
    CPU = ((G.Q8_0, "float16", 3, 2, 4, 24, 256, "ties", False),
           (G.Q4_K, "float32", 16, 2, 2, 16, 256, "normal", False),
           (G.Q5_1, "bfloat16", 4, 2, 3, 20, 128, "normal", True),
           (G.Q3_K, "float32", 5, 3, 6, 12, 256, "small", False))
    FULL = ((65, 2, 8, 512, 4096, False), (128, 8, 64, 128, 2048, False),
            (100, 4, 60, 96, 2048, True), (300, 8, 256, 64, 1024, False))
    BENCH = ((G.Q4_K, "bfloat16", 512, 2, 8, 28672, 4096, False),  # Mixtral-8x7B up/gate
             (G.Q6_K, "float16", 256, 2, 8, 4096, 14336, True),  # ... and down
             (G.Q8_0, "bfloat16", 512, 8, 64, 2816, 2048, False))
    HIDDEN_TOKENS = 300
    HIDDEN_EXPERTS = 256
    entry_points = (
        EntryPoint(
            "ggml_moe_a8",
            "ggml_moe_a8(X: Tensor, W: Tensor, sorted_token_ids: Tensor, expert_ids: Tensor, "
            "num_tokens_post_padded: Tensor, quant_type: int, row: int, top_k: int, "
            "tokens: int) -> Tensor",
            "Returns a new [tokens * top_k, row] tensor of X's dtype: row id is "
            "Q8_1(X[id // top_k]) @ dequant(W[e]).T for the expert e of id's aligned block.",
        ),
    )
    description = (
        "MoE matrix multiplication over GGML expert weights as vLLM 0.13's `vllm._custom_ops."
        "ggml_moe_a8(X, W, sorted_token_ids, expert_ids, num_tokens_post_padded, quant_type, "
        "row, top_k, tokens)` (the prefill path, after moe_align_block_size with block size 4): "
        "X is a contiguous [tokens, K] float16/bfloat16/float32 activation, W a contiguous uint8 "
        "expert stack [E, row, K / QK * BYTES] (E <= 256). sorted_token_ids (int32) lists flat "
        "pair ids id = token * top_k + slot grouped by expert in aligned blocks of 4 positions; "
        "each expert's run is padded with the sentinel tokens * top_k; its length is at least "
        "num_tokens_post_padded[0] (int32 [1]) and beyond that is padding. expert_ids (int32) "
        "gives the expert of block b = positions 4b .. 4b+3 (-1 for unused blocks past "
        "num_tokens_post_padded). The order of ids inside an expert's run is arbitrary. Return "
        "a NEW [tokens * top_k, row] tensor of X's dtype: for every id < tokens * top_k at a "
        "position p < num_tokens_post_padded[0], Y[id, n] = sum_k Q8_1(X)[id // top_k, k] * "
        "w[expert_ids[p // 4], n, k]; every pair id occurs exactly once. vLLM's second call "
        "passes top_k = 1 and tokens = num_tokens * top_k with the same layout. Do not modify the "
        "inputs.\n" + FORMATS + "\n" + q8_1_text(mmq=True)
    )
    solution = SOLUTION
    negatives = (
        Negative("rounds_half_even", "rounds activation codes half to even (torch.round) instead "
                 "of away from zero (roundf)", NEGATIVE_HALF_EVEN),
        Negative("d_not_fp16", "keeps each activation block's scale d in float32 instead of the "
                 "fp16 vLLM stores", NEGATIVE_D_NOT_FP16),
        Negative("align_16", "reads the experts as if the layout were aligned to blocks of 16",
                 NEGATIVE_ALIGN_16),
    )

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        qt = G.NAMES[c["quant_type"]]
        tokens, top_k, experts, n, k = c.shape
        ids = routing(tokens, top_k, experts, gen, c["routing"])
        w = weights((experts, n, k), qt, gen)
        sorted_ids, expert_ids, post = align(ids, experts, MOE_BLOCK, gen)
        if c["second_layer"]:  # X holds one row per routed pair; ids index it directly
            tokens, top_k = tokens * top_k, 1
        x = activations(tokens, k, c.torch_dtype, gen, c["x"])
        return Call(c.entry, (x, w, sorted_ids, expert_ids, post, qt, n, top_k, tokens))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, w, sorted_ids, expert_ids, post, qt, _, top_k, tokens = call.args
        pairs = pairs_from_sorted(sorted_ids, expert_ids, int(post[0]), MOE_BLOCK, tokens * top_k)
        return (moe_expected(x[:tokens], w, pairs, top_k, qt, mmq=True),)

    def baseline(self, call: Call) -> object:
        x, w, sorted_ids, expert_ids, post, qt, row, top_k, tokens = call.args
        ops = vllm_ops(x)
        if ops is not None:
            return ops.ggml_moe_a8(x, w, sorted_ids, expert_ids, post, qt, row,
                                   top_k, tokens)
        pairs = pairs_from_sorted(sorted_ids, expert_ids, int(post[0]), MOE_BLOCK, tokens * top_k)
        return torch_moe(x[:tokens], w, pairs, top_k, qt, row)

    def routing_bytes(self, pairs: int, experts: int) -> float:
        padded = pairs + experts * (MOE_BLOCK - 1)  # int32 sorted ids, block experts, the count
        return 4.0 * (padded + (padded + MOE_BLOCK - 1) // MOE_BLOCK + 1)
