"""vllm::gptq_marlin_moe_repack — ``vllm._custom_ops.gptq_marlin_moe_repack(b_q_weight, perm,
size_k, size_n, num_bits, is_a_8bit=False)`` of vLLM 0.13.0: every expert's GPTQ-packed weight
repacked into Marlin's layout; returns a new ``[E, K/16, N*num_bits/2]`` int32 tensor.

``b_q_weight [E, K*num_bits/32, N]`` int32, packed along K (value ``i`` of a word at bits
``i*num_bits``); ``perm [E, K]`` int32 (act order: expert ``e``'s rows are taken in the order
``perm[e]`` before repacking, as vLLM passes ``argsort(g_idx)``) or ``[E, 0]`` (no act order).
Per expert the result is ``marlin_weights(Q[perm[e]])``: see
:mod:`operators.vllm._marlin` (16x16 tiles, or 32x16 with ``is_a_8bit``, the 1024-entry run
permutation, then packing). Errors: see :mod:`operators.vllm._repack`. Act order together with
``is_a_8bit`` is not covered (vLLM's own tests skip it).
"""

from __future__ import annotations

import torch

from operators.registry import register
from operators.spec import EntryPoint, Kind, Negative
from operators.vllm import _marlin_text, _packing
from operators.vllm._repack import KERNEL_SOURCE, MoeRepack

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + _marlin_text.PERM_SOURCE + KERNEL_SOURCE + r'''

def gptq_marlin_moe_repack(b_q_weight, perm, size_k, size_n, num_bits, is_a_8bit=False):
    return _launch(b_q_weight, perm, size_k, size_n, num_bits, is_a_8bit, False)
'''

# Repacks the rows in their stored order: right only without act order.
NEGATIVE_NO_PERM = SOLUTION.replace("has_perm = perm.numel() > 0", "has_perm = False")

# Always lays out 16x16 tiles for 16-bit activations: right only when is_a_8bit is False.
NEGATIVE_NO_A8 = SOLUTION.replace(
    "return _launch(b_q_weight, perm, size_k, size_n, num_bits, is_a_8bit, False)",
    "return _launch(b_q_weight, perm, size_k, size_n, num_bits, False, False)")


@register("vllm::gptq_marlin_moe_repack", version=1, kind=Kind.COMPUTE)
class GptqMarlinMoeRepack(MoeRepack):
    entry = "gptq_marlin_moe_repack"
    awq = False
    entry_points = (
        EntryPoint(
            "gptq_marlin_moe_repack",
            "gptq_marlin_moe_repack(b_q_weight: Tensor, perm: Tensor, size_k: int, size_n: int, "
            "num_bits: int, is_a_8bit: bool = False) -> Tensor",
            "Returns every expert's GPTQ weight repacked into Marlin's layout "
            "([E, K/16, N*num_bits/2] int32).",
        ),
    )
    description = (
        "vLLM 0.13's `gptq_marlin_moe_repack(b_q_weight, perm, size_k, size_n, num_bits, "
        "is_a_8bit=False)`: for each of the E experts, repack a GPTQ-packed weight into "
        "Marlin's layout and return a new int32 tensor `[E, K/16, N*num_bits/2]` (K = "
        "size_k, N = size_n; num_bits 4 or 8; K % 16 == 0 (K % 32 == 0 when is_a_8bit), "
        "N % 64 == 0). `b_q_weight` is int32 `[E, K*num_bits/32, N]`, packed along K: word "
        "row j of expert e holds the codes `Q_e[j*P + t, n]` at bits `t*num_bits ..` (P = 32 / "
        "num_bits; treat words as unsigned bit patterns). `perm` is int32 `[E, K]` (act order: "
        "first reorder expert e's code rows, `Q_e' = Q_e[perm[e]]`) or `[E, 0]` (no "
        "reordering). Then lay out each `Q_e'` as follows.\n"
        + _marlin_text.WEIGHT_LAYOUT + "\nDo not modify the inputs."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_perm", "repacks the rows in their stored order (ignores the act-order "
                 "perm)", NEGATIVE_NO_PERM),
        Negative("ignores_a8", "always lays out 16x16 tiles (ignores is_a_8bit)",
                 NEGATIVE_NO_A8),
    )
    cpu_cases = (
        (2, 64, 64, 4, True, False), (3, 32, 128, 8, False, False), (1, 64, 64, 4, False, True),
        (2, 128, 64, 8, True, False), (2, 32, 64, 8, False, True),
    )
    full_cases = (
        (64, 1408, 2048, 4, True, False), (8, 4096, 1792, 4, False, False),
        (60, 2048, 1408, 8, False, False), (8, 1024, 2816, 4, True, False),
        (64, 2048, 1024, 4, False, True), (16, 1536, 512, 8, False, True),
    )
    bench = (
        (8, 4096, 28672, 4, False, False), (8, 14336, 4096, 4, True, False),
        (64, 2048, 2816, 4, True, False), (8, 4096, 14336, 8, False, False),
    )

    def pack_source(self, codes: torch.Tensor, bits: int) -> torch.Tensor:
        return _packing.pack_rows(codes, bits)

    def unpack_source(self, words: torch.Tensor, bits: int) -> torch.Tensor:
        return _packing.unpack_rows(words, bits)
