"""vllm::ggml_dequantize — ``vllm._custom_ops.ggml_dequantize(W, quant_type, m, n, dtype)``
(vLLM 0.13.0): the first ``m * n`` values of the GGML-packed blocks in ``W``, dequantized into a
new ``[m, n]`` tensor of ``dtype`` (float16 when None).

Semantics pinned to vLLM 0.13.0 (``csrc/quantization/gguf/gguf_kernel.cu``, ``dequantize.cuh``):
``W`` is read as one flat run of blocks (``m * n`` values, ``n`` a multiple of the block size
here); the block layouts are in :mod:`operators.vllm._ggml`. vLLM computes each value in fp16
arithmetic (``__hmul``/``__hsub``: up to three fp16 roundings of ``d * sc * q - dmin * m``)
and converts that to ``dtype``, so the tolerance is relative to the conditioning
``|a q| + |b|`` of each value: 4 fp16 units plus the output dtype's own rounding — exact
float32 arithmetic passes too. Scope: the 10 classic and K-quant types (ids 2, 3, 6, 7, 8,
10-14); the IQ types are out of scope. Bad input: vLLM 0.13 checks nothing here (an unknown
``quant_type`` calls a null dequantizer; a partial K-quant block is left unwritten); the PyTorch
baseline raises ``RuntimeError`` for an unknown type.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.registry import register
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    OperatorSpec,
    Tier,
    Tolerance,
    case,
    dtype_from_name,
    unit_roundoff,
)
from operators.vllm import _ggml as G
from operators.vllm import _ggml_triton as T
from operators.vllm._ggml_a8 import weights
from operators.vllm._ggml_text import FORMATS
from operators.vllm._ggml_triton import patched
from operators.vllm._vllm_ops import library, vllm_ops

SOLUTION = T.HEADER + T.DECODE + r'''

@triton.jit
def _dequant_kernel(w_ptr, o_ptr, total, QT: tl.constexpr, BLOCK: tl.constexpr):
    k = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = k < total
    v = _ggml_decode(w_ptr, 0, tl.where(mask, k, 0), QT)
    tl.store(o_ptr + k, v.to(o_ptr.dtype.element_ty), mask=mask)


def ggml_dequantize(W, quant_type, m, n, dtype=None):
    out = torch.empty((m, n), dtype=torch.float16 if dtype is None else dtype, device=W.device)
    total = m * n
    if total > 0:
        _dequant_kernel[(triton.cdiv(total, 1024),)](W, out, total, QT=quant_type, BLOCK=1024)
    return out
'''


# Q4/Q5 values j and j + 16 share byte j (low, high nibble); this reads them as if packed pairwise
# (value j in byte j // 2, even j low): right for Q8_0 and the K-quants only.
NEGATIVE_NIBBLES = patched(patched(SOLUTION, "byte = _u8(blk + QS + j % 16)",
                                   "byte = _u8(blk + QS + j // 2)"),
                           "q = tl.where(j < 16, byte & 15, byte >> 4)",
                           "q = tl.where(j % 2 == 0, byte & 15, byte >> 4)")
# Reads every Q4_K/Q5_K sub-block's scale and min as the low 6 bits of bytes i and i + 4 (the rule
# for sub-blocks 0-3 only).
NEGATIVE_K_SCALES = patched(patched(SOLUTION, "sc = tl.where(i < 4, b0 & 63, (b1 & 15) | ((b2 >> 6) << 4))",
                                    "sc = b0 & 63"),
                            "m = tl.where(i < 4, b1 & 63, (b1 >> 4) | ((b0 >> 6) << 4))",
                            "m = b1 & 63")
# Ignores dtype: always float16 (vLLM before the dtype argument).
NEGATIVE_FP16_ONLY = patched(SOLUTION, "dtype=torch.float16 if dtype is None else dtype",
                             "dtype=torch.float16")

# vLLM's fp16 arithmetic: up to three fp16 roundings of d * sc * q - dmin * m, with slack.
HALF_OPS = 4 * unit_roundoff(torch.float16)
_TYPES = tuple(G.TYPES)
_OUT = ("none", "bfloat16", "float32", "float16")  # "none": dtype=None (float16)
_SHAPES = ((1, 4096), (37, 4096), (256, 11008), (96, 14336))


def _case(qtype: int, out: str, m: int, n: int, *, cpu: bool = False) -> Case:
    dt = "float16" if out == "none" else out
    return case("ggml_dequantize", dt, (m, n), quant_type=G.name(qtype),
                pass_dtype=out != "none", cpu=cpu)


@register("vllm::ggml_dequantize", version=1, kind=Kind.COMPUTE)
class GgmlDequantize(OperatorSpec):
    entry_points = (
        EntryPoint(
            "ggml_dequantize",
            "ggml_dequantize(W: Tensor, quant_type: int, m: int, n: int, "
            "dtype: torch.dtype | None = None) -> Tensor",
            "Returns a new [m, n] tensor of dtype (float16 if None): the first m * n values "
            "of the GGML blocks in W, dequantized.",
        ),
    )
    description = (
        "GGML (GGUF) weight dequantization as vLLM 0.13's `vllm._custom_ops.ggml_dequantize(W, "
        "quant_type, m, n, dtype)`: W is a contiguous uint8 tensor of packed blocks (a weight "
        "matrix is [rows, row_bytes]); read it as ONE flat run of blocks and dequantize its first "
        "m * n values, in order, into a NEW contiguous [m, n] tensor of `dtype` (float16 when "
        "dtype is None; float16, bfloat16 or float32), on W's device, and return it. n is a "
        "multiple of the type's block size. W must not be modified.\n" + FORMATS + "\n"
        "Accuracy: vLLM computes each value in fp16 arithmetic and then converts; results are "
        "compared relative to |d*sc*q| + |dmin*m| (the sizes of a value's two terms) with 4 fp16 "
        "units of roundoff plus the output dtype's rounding, so computing in float32 and "
        "rounding once is fine."
    )
    solution = SOLUTION
    negatives = (
        Negative("nibbles_pairwise", "reads Q4/Q5 nibbles as consecutive pairs (value j in byte "
                 "j // 2) instead of values j and j + 16 sharing byte j", NEGATIVE_NIBBLES),
        Negative("k_scales_low_only", "decodes all eight Q4_K/Q5_K 6-bit scales and mins with the "
                 "rule of sub-blocks 0-3", NEGATIVE_K_SCALES),
        Negative("ignores_dtype", "always returns float16, ignoring dtype", NEGATIVE_FP16_ONLY),
    )
    tolerances = {
        "float16": Tolerance(rtol=HALF_OPS, atol=2.0 ** -22),
        "bfloat16": Tolerance(rtol=HALF_OPS + unit_roundoff(torch.bfloat16), atol=2.0 ** -22),
        "float32": Tolerance(rtol=HALF_OPS + unit_roundoff(torch.float32), atol=2.0 ** -22),
    }

    def cases(self) -> Sequence[Case]:
        cs = []
        for i, qt in enumerate(_TYPES):
            qk = G.block_elems(qt)
            cs.append(_case(qt, _OUT[i % 4], 3, 2 * qk if qk == 32 else qk, cpu=True))
        for i, qt in enumerate(_TYPES):
            for j, (m, n) in enumerate(_SHAPES):
                cs.append(_case(qt, _OUT[(i + j) % 4], m, n))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(3 if small else 6):
            qt = rng.choice(_TYPES)
            qk = G.block_elems(qt)
            m = rng.randrange(1, 6 if small else 300)
            n = qk * rng.randrange(1, 3 if small else (64 if qk == 32 else 40))
            out.append(_case(qt, rng.choice(_OUT), m, n, cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case(G.Q4_K, "none", 28672, 8192),
            _case(G.Q8_0, "bfloat16", 8192, 28672),
            _case(G.Q6_K, "float16", 32000, 4096),
            _case(G.Q2_K, "float32", 14336, 4096),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        qt = G.NAMES[c["quant_type"]]
        m, n = c.shape
        w = weights((m, n), qt, gen)
        dtype = c.torch_dtype if c["pass_dtype"] else None
        return Call(c.entry, (w, qt, m, n, dtype))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        w, qt, m, n, dtype = call.args
        dec = G.unpack(w.reshape(m, -1), qt, n)
        return (Expected(dec.values(), dtype or torch.float16, dec.abs_terms()),)

    def baseline(self, call: Call) -> object:
        w, qt, m, n, dtype = call.args
        ops = vllm_ops(w)
        if ops is not None:
            return ops.ggml_dequantize(w, qt, m, n, dtype)
        G.check_type(qt)
        return G.unpack(w.reshape(m, -1), qt, n).values().to(dtype or torch.float16)

    def baseline_library(self) -> str:
        return library()

    def cost(self, c: Case) -> Cost:
        m, n = c.shape
        qt = G.NAMES[c["quant_type"]]
        out = dtype_from_name(c.dtype).itemsize
        return Cost(flops=2.0 * m * n, bytes=float(m * G.row_bytes(qt, n) + m * n * out),
                    dtype=c.dtype)
