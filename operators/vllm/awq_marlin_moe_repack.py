"""vllm::awq_marlin_moe_repack — ``vllm._custom_ops.awq_marlin_moe_repack(b_q_weight, perm,
size_k, size_n, num_bits, is_a_8bit=False)`` of vLLM 0.13.0: every expert's AWQ-packed weight
repacked into Marlin's layout; returns a new ``[E, K/16, N*num_bits/2]`` int32 tensor.

``b_q_weight [E, K, N*num_bits/32]`` int32, packed along N in AWQ's interleaved order (4-bit:
nibble ``t`` of word ``j`` holds column ``8j + (0, 2, 4, 6, 1, 3, 5, 7)[t]``; 8-bit: byte ``t``
holds column ``4j + (0, 2, 1, 3)[t]``). ``perm`` is accepted and ignored (vLLM passes an empty
``[E, 0]`` tensor; ``awq_marlin_repack`` takes none). Per expert the result is
``marlin_weights(Q_e)``: see :mod:`operators.vllm._marlin`. Errors: see
:mod:`operators.vllm._repack`.
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

def awq_marlin_moe_repack(b_q_weight, perm, size_k, size_n, num_bits, is_a_8bit=False):
    no_perm = torch.empty((b_q_weight.shape[0], 0), dtype=torch.int32, device=b_q_weight.device)
    return _launch(b_q_weight, no_perm, size_k, size_n, num_bits, is_a_8bit, True)
'''

# Reads 8-bit AWQ words in plain byte order (AWQ interleaves bytes 0, 2, 1, 3): right for 4-bit.
NEGATIVE_AWQ8_PLAIN = SOLUTION.replace("slot = c // 2 + (PACK // 2) * (c % 2)",
                                       "slot = c if BITS == 8 else c // 2 + (PACK // 2) * (c % 2)")

# Always lays out 16x16 tiles for 16-bit activations: right only when is_a_8bit is False.
NEGATIVE_NO_A8 = SOLUTION.replace(
    "return _launch(b_q_weight, no_perm, size_k, size_n, num_bits, is_a_8bit, True)",
    "return _launch(b_q_weight, no_perm, size_k, size_n, num_bits, False, True)")


@register("vllm::awq_marlin_moe_repack", version=1, kind=Kind.COMPUTE)
class AwqMarlinMoeRepack(MoeRepack):
    entry = "awq_marlin_moe_repack"
    awq = True
    entry_points = (
        EntryPoint(
            "awq_marlin_moe_repack",
            "awq_marlin_moe_repack(b_q_weight: Tensor, perm: Tensor, size_k: int, size_n: int, "
            "num_bits: int, is_a_8bit: bool = False) -> Tensor",
            "Returns every expert's AWQ weight repacked into Marlin's layout "
            "([E, K/16, N*num_bits/2] int32).",
        ),
    )
    description = (
        "vLLM 0.13's `awq_marlin_moe_repack(b_q_weight, perm, size_k, size_n, num_bits, "
        "is_a_8bit=False)`: for each of the E experts, repack an AWQ-packed weight into "
        "Marlin's layout and return a new int32 tensor `[E, K/16, N*num_bits/2]` (K = "
        "size_k, N = size_n; num_bits 4 or 8; K % 16 == 0 (K % 32 == 0 when is_a_8bit), "
        "N % 64 == 0). `b_q_weight` is int32 `[E, K, N*num_bits/32]`, packed along N in AWQ's "
        "interleaved order: for 4-bit, nibble t (bits 4t..4t+3) of word `[e, k, j]` holds "
        "column `8j + (0, 2, 4, 6, 1, 3, 5, 7)[t]`; for 8-bit, byte t holds column "
        "`4j + (0, 2, 1, 3)[t]` (treat words as unsigned bit patterns). `perm` (vLLM passes "
        "an empty `[E, 0]` int32 tensor) is ignored. Lay out each expert's `[K, N]` codes "
        "Q_e as follows.\n"
        + _marlin_text.WEIGHT_LAYOUT + "\nDo not modify the inputs."
    )
    solution = SOLUTION
    negatives = (
        Negative("awq8_plain_order", "reads 8-bit AWQ words in plain byte order (AWQ stores "
                 "columns 0, 2, 1, 3)", NEGATIVE_AWQ8_PLAIN),
        Negative("ignores_a8", "always lays out 16x16 tiles (ignores is_a_8bit)",
                 NEGATIVE_NO_A8),
    )
    cpu_cases = (
        (2, 64, 64, 4, False, False), (3, 32, 128, 8, False, False),
        (1, 64, 64, 4, False, True), (2, 96, 64, 4, False, False), (2, 32, 64, 8, False, True),
    )
    full_cases = (
        (64, 1408, 2048, 4, False, False), (8, 4096, 1792, 4, False, False),
        (60, 2048, 1408, 8, False, False), (8, 1024, 2816, 4, False, False),
        (64, 2048, 1024, 4, False, True), (16, 1536, 512, 8, False, True),
    )
    bench = (
        (8, 4096, 28672, 4, False, False), (8, 14336, 4096, 4, False, False),
        (64, 2048, 2816, 4, False, False), (8, 4096, 14336, 8, False, False),
    )

    def pack_source(self, codes: torch.Tensor, bits: int) -> torch.Tensor:
        return _packing.pack_cols(codes, bits, _packing.awq_layout(bits))

    def unpack_source(self, words: torch.Tensor, bits: int) -> torch.Tensor:
        return _packing.unpack_cols(words, bits, _packing.awq_layout(bits))
