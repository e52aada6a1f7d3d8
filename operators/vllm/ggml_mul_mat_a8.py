"""vllm::ggml_mul_mat_a8 — ``vllm._custom_ops.ggml_mul_mat_a8(W, X, quant_type, row)``
(vLLM 0.13.0): the batched GEMM (MMQ) of activation rows with a GGML-quantized weight.

``W`` uint8 ``[row, K / QK * BYTES]`` (block layouts in :mod:`operators.vllm._ggml`), ``X``
``[batch, K]`` contiguous float16/bfloat16/float32; returns a new ``[batch, row]`` tensor of X's
dtype: ``Y[b, n] = sum_k Q8_1(X)[b, k] * W[n, k]``. vLLM uses it for more rows than
``ggml_mul_mat_vec_a8`` takes (prefill); its MMQ tiles apply the offsets of Q4_0, Q4_1, Q5_1,
Q4_K and Q5_K to the fp16 block sum of the activations (see :mod:`operators.vllm._ggml_a8`,
which holds the reference and its error bound). Scope: types 2, 3, 6, 7, 8, 10-14 (vLLM has no
MMQ kernel for the IQ types). Bad input: vLLM 0.13 checks nothing (an unsupported
``quant_type`` returns the uninitialized output); the PyTorch baseline raises ``RuntimeError``.
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

def ggml_mul_mat_a8(W, X, quant_type, row):
    return _ggml_dense(W, X, quant_type, row, 16 if X.shape[0] <= 16 else 64)
'''

NEGATIVE_HALF_EVEN = patched(SOLUTION, *T.HALF_EVEN)
# Loops over whole BLOCK_K tiles only: drops the last K % 128 values.
NEGATIVE_K_TAIL = patched(SOLUTION, "for k0 in range(0, K, BLOCK_K):",
                          "for k0 in range(0, K - BLOCK_K + 1, BLOCK_K):")
# Q2_K: takes the scale from the high nibble of its byte and the min from the low one.
NEGATIVE_Q2K_NIBBLES = patched(
    SOLUTION, "return (d * (sc & 15).to(tl.float32)) * q.to(tl.float32) - dmin * (sc >> 4).to(tl.float32)",
    "return (d * (sc >> 4).to(tl.float32)) * q.to(tl.float32) - dmin * (sc & 15).to(tl.float32)")

@register("vllm::ggml_mul_mat_a8", version=2, kind=Kind.COMPUTE)
class GgmlMulMatA8(DenseA8Spec):
    MMQ = True
    ENTRY = "ggml_mul_mat_a8"
    # (type, dtype, batch, N, K, variant): classic types with K not a multiple of 128, each
    # variant; ties on a type without a sum-offset form.
    CPU = ((G.Q4_0, "float16", 7, 24, 96, "normal"), (G.Q2_K, "bfloat16", 5, 16, 256, "normal"),
           (G.Q3_K, "float32", 4, 20, 256, "ties"), (G.Q5_0, "float32", 8, 12, 160, "grid"),
           (G.Q4_1, "float16", 3, 16, 64, "small"))
    FULL = ((33, 512, 4096), (128, 256, 14336), (300, 128, 11008), (17, 1000, 4096))
    BENCH = ((G.Q4_K, "bfloat16", 512, 14336, 4096), (G.Q8_0, "float16", 1024, 4096, 11008),
             (G.Q6_K, "bfloat16", 256, 28672, 8192))
    HIDDEN_M = (7, 600)
    entry_points = (
        EntryPoint(
            "ggml_mul_mat_a8",
            "ggml_mul_mat_a8(W: Tensor, X: Tensor, quant_type: int, row: int) -> Tensor",
            "Returns a new [X.shape[0], row] tensor of X's dtype: Q8_1(X) @ dequant(W).T.",
        ),
    )
    description = (
        "GGML quantized matrix multiplication as vLLM 0.13's `vllm._custom_ops.ggml_mul_mat_a8(W, "
        "X, quant_type, row)` (MMQ, the prefill path): W is a contiguous uint8 "
        "[row, K / QK * BYTES] GGML weight of `row` output rows; X a contiguous [batch, K] "
        "float16/bfloat16/float32 activation. Return a NEW [batch, row] tensor of X's dtype on "
        "X's device with Y[b, n] = sum_k Q8_1(X)[b, k] * w[n, k]. Do not modify W or X.\n"
        + FORMATS + "\n" + q8_1_text(mmq=True)
    )
    solution = SOLUTION
    negatives = (
        Negative("rounds_half_even", "rounds activation codes half to even (torch.round) instead "
                 "of away from zero (roundf)", NEGATIVE_HALF_EVEN),
        Negative("k_tail", "drops the last K % 128 values (whole K tiles only)", NEGATIVE_K_TAIL),
        Negative("q2k_nibbles", "swaps Q2_K's 4-bit scale and min within their byte",
                 NEGATIVE_Q2K_NIBBLES),
    )
