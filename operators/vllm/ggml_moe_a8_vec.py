"""vllm::ggml_moe_a8_vec — ``vllm._custom_ops.ggml_moe_a8_vec(X, W, topk_ids, top_k,
quant_type, row, tokens)`` (vLLM 0.13.0): the decode-path MoE GEMV over GGML expert weights.

``X`` ``[tokens, K]`` contiguous float16/bfloat16/float32; ``W`` a contiguous uint8 expert stack
``[E, row, K / QK * BYTES]``; ``topk_ids`` int32, read flat: pair ``z`` in
``0 .. tokens * top_k - 1`` uses expert ``topk_ids.view(-1)[z]`` and activation row
``z // top_k``. Returns a new ``[tokens * top_k, row]`` tensor of X's dtype (vLLM allocates it
with ``torch.zeros``; every row is written): ``Y[z] = Q8_1(X[z // top_k]) . W[expert(z)]``,
with MMVQ arithmetic (reference and bound: :mod:`operators.vllm._ggml_a8`). vLLM calls it twice
per MoE layer: ``top_k`` experts per token on the hidden states, then ``top_k = 1`` and
``tokens = num_tokens * top_k`` on the activated rows (``topk_ids`` still ``[num_tokens,
top_k]``). Scope: types 2, 3, 6, 7, 8, 10-14. Bad input: vLLM 0.13 checks nothing (expert ids
must lie in ``[0, E)``); the PyTorch baseline raises ``RuntimeError`` for an unknown type.
"""

from __future__ import annotations

import torch

from operators.registry import register
from operators.spec import Call, Case, EntryPoint, Expected, Kind, Negative
from operators.vllm import _ggml as G
from operators.vllm import _ggml_triton as T
from operators.vllm._ggml_a8 import activations, weights
from operators.vllm._ggml_moe import MoeA8Spec, moe_expected, routing, torch_moe
from operators.vllm._ggml_text import FORMATS, q8_1_text
from operators.vllm._ggml_triton import patched
from operators.vllm._vllm_ops import vllm_ops

SOLUTION = T.HEADER + T.DECODE + T.QUANT_Q8_1 + T.GEMM + r'''

@triton.jit
def _moe_vec_kernel(xq_ptr, w_ptr, ids_ptr, y_ptr, N, K, RB, top_k, expert_bytes,
                    QT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr):
    # One routed pair z per program (its row alone in a BLOCK_M tile), BLOCK_N outputs.
    z = tl.program_id(0)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    token = z // top_k
    expert = tl.load(ids_ptr + z).to(tl.int64)
    a_rows = tl.where(tl.arange(0, BLOCK_M) == 0, token, -1)
    acc = _ggml_tile(xq_ptr, w_ptr, expert * expert_bytes, a_rows, tl.where(rn < N, rn, 0),
                     K, RB, QT, BLOCK_M, BLOCK_N, BLOCK_K)
    out = tl.sum(acc, axis=0)  # only row 0 is nonzero
    tl.store(y_ptr + z.to(tl.int64) * N + rn, out.to(y_ptr.dtype.element_ty), mask=rn < N)


def ggml_moe_a8_vec(X, W, topk_ids, top_k, quant_type, row, tokens):
    K = X.shape[1]
    y = torch.zeros((tokens * top_k, row), dtype=X.dtype, device=X.device)
    if tokens * top_k == 0 or row == 0:
        return y
    xq = _quantize_q8_1(X[:tokens])
    ids = topk_ids.reshape(-1)
    grid = (tokens * top_k, triton.cdiv(row, 64))
    _moe_vec_kernel[grid](xq, W, ids, y, row, K, W.shape[-1], top_k, W.shape[1] * W.shape[2],
                          QT=quant_type, BLOCK_M=16, BLOCK_N=64, BLOCK_K=128)
    return y
'''

NEGATIVE_HALF_EVEN = patched(SOLUTION, *T.HALF_EVEN)
# Writes pair z to output row slot * tokens + token (slot-major): right for top_k = 1 or one token.
NEGATIVE_SLOT_MAJOR_OUT = patched(
    SOLUTION, "tl.store(y_ptr + z.to(tl.int64) * N + rn,",
    "tl.store(y_ptr + ((z % top_k) * (tl.num_programs(0) // top_k) + token).to(tl.int64) * N + rn,")
# Reads topk_ids as [top_k, tokens] (slot-major): right for top_k = 1 or one token only.
NEGATIVE_SLOT_MAJOR = patched(SOLUTION, "expert = tl.load(ids_ptr + z).to(tl.int64)",
                              "expert = tl.load(ids_ptr + (z % top_k) * (tl.num_programs(0) // "
                              "top_k) + z // top_k).to(tl.int64)")

@register("vllm::ggml_moe_a8_vec", version=1, kind=Kind.COMPUTE)
class GgmlMoeA8Vec(MoeA8Spec):
    ENTRY = "ggml_moe_a8_vec"
    CPU = ((G.Q8_0, "float16", 3, 2, 4, 24, 256, "ties", False),
           (G.Q4_K, "bfloat16", 2, 3, 5, 16, 256, "normal", False),
           (G.Q5_0, "float32", 2, 2, 3, 20, 128, "normal", True),
           (G.Q6_K, "float32", 1, 2, 4, 40, 256, "small", False))
    FULL = ((1, 8, 64, 1408, 2048, False), (7, 2, 8, 512, 4096, False),
            (16, 4, 60, 256, 2048, True), (33, 6, 64, 128, 1024, False))
    BENCH = ((G.Q4_K, "bfloat16", 4, 2, 8, 28672, 4096, False),  # Mixtral-8x7B up/gate
             (G.Q6_K, "float16", 8, 1, 8, 4096, 14336, True),  # ... and down
             (G.Q8_0, "bfloat16", 16, 4, 64, 2816, 2048, False))
    HIDDEN_TOKENS = 40
    HIDDEN_EXPERTS = 64
    entry_points = (
        EntryPoint(
            "ggml_moe_a8_vec",
            "ggml_moe_a8_vec(X: Tensor, W: Tensor, topk_ids: Tensor, top_k: int, quant_type: int, "
            "row: int, tokens: int) -> Tensor",
            "Returns a new [tokens * top_k, row] tensor of X's dtype: row z is "
            "Q8_1(X[z // top_k]) @ dequant(W[topk_ids.view(-1)[z]]).T.",
        ),
    )
    description = (
        "MoE matrix-vector products over GGML expert weights as vLLM 0.13's `vllm._custom_ops."
        "ggml_moe_a8_vec(X, W, topk_ids, top_k, quant_type, row, tokens)` (the decode path): "
        "X is a contiguous [tokens, K] float16/bfloat16/float32 activation, W a contiguous uint8 "
        "expert stack [E, row, K / QK * BYTES], topk_ids a contiguous int32 tensor read FLAT: "
        "routed pair z (0 <= z < tokens * top_k) uses expert topk_ids.view(-1)[z] and "
        "activation row z // top_k (vLLM's second call passes top_k = 1, tokens = "
        "num_tokens * top_k and the same [num_tokens, top_k] topk_ids). Return a NEW "
        "[tokens * top_k, row] tensor of X's dtype with Y[z, n] = sum_k Q8_1(X)[z // top_k, k] * "
        "w[expert(z), n, k]. Do not modify the inputs.\n" + FORMATS + "\n" + q8_1_text(mmq=False)
    )
    solution = SOLUTION
    negatives = (
        Negative("rounds_half_even", "rounds activation codes half to even (torch.round) instead "
                 "of away from zero (roundf)", NEGATIVE_HALF_EVEN),
        Negative("slot_major_output", "writes pair (token, slot) to output row slot * tokens + "
                 "token", NEGATIVE_SLOT_MAJOR_OUT),
        Negative("slot_major_ids", "reads topk_ids as [top_k, tokens]", NEGATIVE_SLOT_MAJOR),
    )

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        qt = G.NAMES[c["quant_type"]]
        tokens, top_k, experts, n, k = c.shape
        ids = routing(tokens, top_k, experts, gen, c["routing"])
        w = weights((experts, n, k), qt, gen)
        if c["second_layer"]:  # X holds one row per routed pair
            x = activations(tokens * top_k, k, c.torch_dtype, gen, c["x"])
            return Call(c.entry, (x, w, ids, 1, qt, n, tokens * top_k))
        x = activations(tokens, k, c.torch_dtype, gen, c["x"])
        return Call(c.entry, (x, w, ids, top_k, qt, n, tokens))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, w, ids, top_k, qt, _, tokens = call.args
        return (moe_expected(x[:tokens], w, ids.reshape(-1)[:tokens * top_k], top_k, qt,
                             mmq=False),)

    def baseline(self, call: Call) -> object:
        x, w, ids, top_k, qt, row, tokens = call.args
        ops = vllm_ops(x)
        if ops is not None:
            return ops.ggml_moe_a8_vec(x, w, ids, top_k, qt, row, tokens)
        return torch_moe(x[:tokens], w, ids.reshape(-1)[:tokens * top_k].long(), top_k, qt, row)

    def routing_bytes(self, pairs: int, experts: int) -> float:
        return 4.0 * pairs  # int32 topk_ids
