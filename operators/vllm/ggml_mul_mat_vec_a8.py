"""vllm::ggml_mul_mat_vec_a8 — ``vllm._custom_ops.ggml_mul_mat_vec_a8(W, X, quant_type, row)``
(vLLM 0.13.0): the decode GEMV (MMVQ) of a few activation rows with a GGML-quantized weight.

``W`` uint8 ``[row, K / QK * BYTES]`` (block layouts in :mod:`operators.vllm._ggml`), ``X``
``[vecs, K]`` contiguous float16/bfloat16/float32; returns a new ``[vecs, row]`` tensor of X's
dtype: ``Y[v, n] = sum_k Q8_1(X)[v, k] * W[n, k]``. vLLM first quantizes X to Q8_1 (32-value
blocks, ``roundf``, fp16 ``d`` and sum) and takes integer dot products, scaled per block; the
float64 reference and its per-element error bound are in :mod:`operators.vllm._ggml_a8`. vLLM
calls it for up to 16 rows (``mmvq_safe``), but the kernel takes any number. Scope: types 2, 3,
6, 7, 8, 10-14 (the IQ types are out of scope). Bad input: vLLM 0.13 checks nothing (an
unsupported ``quant_type`` returns the uninitialized output; K must be a multiple of the block
size); the PyTorch baseline raises ``RuntimeError`` for an unknown type.
"""

from __future__ import annotations

from operators.registry import register
from operators.spec import EntryPoint, Kind, Negative
from operators.vllm import _ggml as G
from operators.vllm import _ggml_triton as T
from operators.vllm._ggml_dense import DenseA8Spec
from operators.vllm._ggml_text import FORMATS, q8_1_text
from operators.vllm._ggml_triton import patched

SOLUTION = T.HEADER + T.DECODE + T.QUANT_Q8_1 + T.GEMM + T.DENSE + r'''

def ggml_mul_mat_vec_a8(W, X, quant_type, row):
    return _ggml_dense(W, X, quant_type, row, 16)
'''

# Rounds activation codes half to even (torch.round / rint) instead of C's roundf.
NEGATIVE_HALF_EVEN = patched(SOLUTION, *T.HALF_EVEN)
# Skips the Q8_1 activation quantization: multiplies the raw activations.
NEGATIVE_NO_Q8_1 = patched(SOLUTION, *T.NO_Q8_1)
# Takes the 5th bit of Q5 values 16-31 from qh bits 0-15 (the bit of the low-nibble twin).
NEGATIVE_Q5_HIGH_BIT = patched(SOLUTION, "q = q | (((_u8(blk + QH + j // 8) >> (j % 8)) & 1) << 4)",
                               "q = q | (((_u8(blk + QH + (j % 16) // 8) >> (j % 8)) & 1) << 4)")

@register("vllm::ggml_mul_mat_vec_a8", version=2, kind=Kind.COMPUTE)
class GgmlMulMatVecA8(DenseA8Spec):
    MMQ = False
    ENTRY = "ggml_mul_mat_vec_a8"
    # The cpu tier: a few types (the decoder of every type runs in ggml_dequantize's cpu tier),
    # each input variant, every dtype; ties go to types without a sum-offset form (see
    # _ggml_a8), whose bound has no slack there. (type, dtype, vecs, N, K, variant)
    CPU = ((G.Q8_0, "float16", 1, 24, 256, "ties"), (G.Q5_1, "float32", 3, 40, 256, "normal"),
           (G.Q4_0, "bfloat16", 2, 32, 256, "grid"), (G.Q4_K, "float32", 2, 17, 256, "normal"),
           (G.Q6_K, "float16", 1, 64, 256, "small"), (G.Q3_K, "bfloat16", 3, 8, 256, "ties"))
    FULL = ((1, 4096, 4096), (4, 1024, 14336), (8, 515, 11008), (2, 4097, 4096))
    BENCH = ((G.Q8_0, "bfloat16", 1, 28672, 8192), (G.Q6_K, "float16", 1, 128256, 4096),
             (G.Q4_K, "bfloat16", 4, 28672, 8192), (G.Q4_0, "float16", 2, 8192, 28672))
    HIDDEN_M = (1, 17)
    entry_points = (
        EntryPoint(
            "ggml_mul_mat_vec_a8",
            "ggml_mul_mat_vec_a8(W: Tensor, X: Tensor, quant_type: int, row: int) -> Tensor",
            "Returns a new [X.shape[0], row] tensor of X's dtype: Q8_1(X) @ dequant(W).T.",
        ),
    )
    description = (
        "GGML quantized matrix-vector product as vLLM 0.13's `vllm._custom_ops."
        "ggml_mul_mat_vec_a8(W, X, quant_type, row)` (MMVQ, the decode path): W is a contiguous "
        "uint8 [row, K / QK * BYTES] GGML weight of `row` output rows; X a contiguous [vecs, K] "
        "float16/bfloat16/float32 activation (vecs small: 1-16 in vLLM, any here). Return a NEW "
        "[vecs, row] tensor of X's dtype on X's device with Y[v, n] = sum_k Q8_1(X)[v, k] * "
        "w[n, k]. Do not modify W or X.\n" + FORMATS + "\n" + q8_1_text(mmq=False)
    )
    solution = SOLUTION
    negatives = (
        Negative("rounds_half_even", "rounds activation codes half to even (torch.round) instead "
                 "of away from zero (roundf)", NEGATIVE_HALF_EVEN),
        Negative("no_q8_1", "multiplies the raw activations, skipping vLLM's Q8_1 quantization",
                 NEGATIVE_NO_Q8_1),
        Negative("q5_high_bit", "takes the 5th bit of Q5 values 16-31 from qh bit j - 16",
                 NEGATIVE_Q5_HIGH_BIT),
    )
