"""vllm::awq_gemm — ``vllm._custom_ops.awq_gemm(input, qweight, scales, qzeros, split_k_iters)``
of vLLM 0.13.0: float16 activations times an AWQ 4-bit weight, returned as a new tensor.

Signature (0.13.0 ``_custom_ops.py``, the CUDA op ``torch.ops._C.awq_gemm``; note the scales come
before the zero points): ``input [M, K] float16``, ``qweight [K, N/8] int32``,
``scales [K/G, N] float16``, ``qzeros [K/G, N/8] int32``, ``split_k_iters: int`` -> ``[M, N]``
float16. Nothing is written in place.

Layout: column ``n`` of row ``k`` is the 4-bit code in word ``qweight[k, n // 8]`` at nibble
``AWQ_SLOT[n % 8]`` with ``AWQ_SLOT = (0, 4, 1, 5, 2, 6, 3, 7)`` (the packer stores columns
``0, 2, 4, 6, 1, 3, 5, 7`` in nibbles 0..7); zero points are packed the same way per group.
``W[k, n] = (code - zero[k // G, n]) * scales[k // G, n]`` with ``G = K // scales.size(0)``.

vLLM 0.13's host checks, raised as ``ValueError`` (``std::invalid_argument``): "OC is not
multiple of cta_N = 64" (N % 64), "OC is not multiple of pack_num = 8", "Group size should be a
multiple of 32", "OC is not multiple of Group size" (N % G). The CUDA kernel also needs
K % 32 == 0. It does not check the scale or zero tensors' shapes: a scale tensor whose rows do
not divide K, or of the wrong width, is undefined behaviour there (the Triton variant behind
``VLLM_USE_TRITON_AWQ`` asserts instead); the PyTorch baseline raises ``ValueError`` for it.
``split_k_iters`` (vLLM passes 8) only splits the K loop; the result does not depend on it.
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
    Tier,
    case,
)
from operators.vllm import _gemm, _packing, _quant

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _awq_gemm_kernel(a_ptr, qw_ptr, s_ptr, z_ptr, c_ptr, M, N, K, group_size,
                     s_am, s_ak, s_qk, s_sg, s_zg, s_cm,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = rm < M
    n_mask = rn < N
    # AWQ stores columns 0,2,4,6,1,3,5,7 in nibbles 0..7: column c sits in nibble c//2 + 4*(c%2).
    c8 = rn % 8
    shift = (c8 // 2 + 4 * (c8 % 2)) * 4
    word = rn // 8
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        k_mask = rk < K
        a = tl.load(a_ptr + rm[:, None].to(tl.int64) * s_am + rk[None, :] * s_ak,
                    mask=m_mask[:, None] & k_mask[None, :], other=0.0)
        wmask = k_mask[:, None] & n_mask[None, :]
        qw = tl.load(qw_ptr + rk[:, None].to(tl.int64) * s_qk + word[None, :], mask=wmask, other=0)
        q = (qw >> shift[None, :]) & 0xF
        g = rk // group_size
        zw = tl.load(z_ptr + g[:, None] * s_zg + word[None, :], mask=wmask, other=0)
        z = (zw >> shift[None, :]) & 0xF
        s = tl.load(s_ptr + g[:, None] * s_sg + rn[None, :], mask=wmask, other=0.0)
        w = ((q - z).to(tl.float32) * s.to(tl.float32)).to(tl.float16)
        acc += tl.dot(a, w)
    tl.store(c_ptr + rm[:, None].to(tl.int64) * s_cm + rn[None, :], acc.to(tl.float16),
             mask=m_mask[:, None] & n_mask[None, :])


def awq_gemm(input, qweight, scales, qzeros, split_k_iters):
    M, K = input.shape
    N = qweight.shape[1] * 8
    group_size = K // scales.shape[0]
    out = torch.empty((M, N), dtype=input.dtype, device=input.device)
    if M == 0:
        return out
    BLOCK_M = 16 if M <= 16 else 64
    BLOCK_N = 64
    BLOCK_K = 64
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _awq_gemm_kernel[grid](input, qweight, scales, qzeros, out, M, N, K, group_size,
                           input.stride(0), input.stride(1), qweight.stride(0),
                           scales.stride(0), qzeros.stride(0), out.stride(0),
                           BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return out
'''

# Assumes AWQ's most common group size: right only when G == 128.
NEGATIVE_GROUP_128 = SOLUTION.replace("g = rk // group_size", "g = rk // 128")

# Drops the last partial K block: right only when K is a multiple of BLOCK_K = 64.
NEGATIVE_K_TAIL = SOLUTION.replace("for k0 in range(0, K, BLOCK_K):",
                                   "for k0 in range(0, K - BLOCK_K + 1, BLOCK_K):")

_PROD = (  # (M, K, N, G): Llama-2-7B/Llama-3-8B/Mistral projections, decode and small batches
    (1, 4096, 11008, 128), (16, 11008, 4096, 128), (7, 14336, 4096, 128), (64, 4096, 4096, 64),
    (255, 4096, 14336, 32), (3, 4096, 6144, 128),
)


@register("vllm::awq_gemm", version=1, kind=Kind.COMPUTE)
class AwqGemm(_gemm.QuantGemmSpec):
    entry_points = (
        EntryPoint(
            "awq_gemm",
            "awq_gemm(input: Tensor, qweight: Tensor, scales: Tensor, qzeros: Tensor, "
            "split_k_iters: int) -> Tensor",
            "Returns input @ W (float16 [M, N]) for the AWQ 4-bit weight W.",
        ),
    )
    description = (
        "AWQ 4-bit weight-only GEMM as vLLM 0.13's `awq_gemm(input, qweight, scales, qzeros, "
        "split_k_iters)` (scales come before qzeros). `input` is float16 `[M, K]` (rows "
        "contiguous), `qweight` int32 `[K, N/8]`, `scales` float16 `[K/G, N]`, `qzeros` int32 "
        "`[K/G, N/8]`, all contiguous; the group size is `G = K // scales.shape[0]` "
        "(G in {32, 64, 128}; K % 32 == 0, N % 64 == 0, N % G == 0). Each int32 holds 8 "
        "4-bit codes (bits 4t..4t+3 = nibble t) in AWQ's interleaved order: nibbles 0..7 of "
        "`qweight[k, j]` hold columns `8j+0, 8j+2, 8j+4, 8j+6, 8j+1, 8j+3, 8j+5, 8j+7`, i.e. "
        "column n is nibble `(n%8)//2 + 4*(n%2)` of word `n//8`. `qzeros[g, j]` packs the "
        "4-bit zero points of group g the same way. The weight is `W[k, n] = (q[k, n] - "
        "z[k // G, n]) * scales[k // G, n]`, and the result is a new float16 tensor `[M, N]` "
        "= `input @ W`, accumulated in float32 (rounding the dequantized weight to float16 "
        "before the product is fine). `split_k_iters` is vLLM's K-split hint (8 in practice); "
        "it does not change the result. Do not modify the inputs."
    )
    solution = SOLUTION
    negatives = (
        Negative("group_128", "hard-codes AWQ's usual group size 128 instead of K // "
                 "scales.shape[0]", NEGATIVE_GROUP_128),
        Negative("k_tail", "drops the last partial 64-wide K block (right only when K % 64 "
                 "== 0)", NEGATIVE_K_TAIL),
    )

    def cases(self) -> Sequence[Case]:
        cs = [
            case("awq_gemm", "float16", (1, 128, 64), group=32, split=8, cpu=True),
            case("awq_gemm", "float16", (5, 256, 128), group=128, split=8, cpu=True),
            case("awq_gemm", "float16", (8, 96, 64), group=32, split=2, cpu=True),
            case("awq_gemm", "float16", (3, 192, 128), group=64, split=8, outliers=True,
                 cpu=True),
            case("awq_gemm", "float16", (2, 160, 64), group=32, split=1, row_pad=8, cpu=True),
        ]
        for m, k, n, g in _PROD:
            cs.append(case("awq_gemm", "float16", (m, k, n), group=g, split=8))
        cs.append(case("awq_gemm", "float16", (33, 4096, 11008), group=128, split=8,
                       outliers=True))
        cs.append(case("awq_gemm", "float16", (9, 1056, 192), group=32, split=4, row_pad=24))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(2 if small else 4):
            g = rng.choice([32, 64, 128])
            k = g * rng.randrange(1, 3 if small else 40)
            k += 0 if k % 32 == 0 else 32 - k % 32
            step = 128 if g == 128 else 64
            n = step * rng.randrange(1, 3 if small else 60)
            k, n = _gemm.capped(k, n, g, step)
            m = rng.randrange(1, 9 if small else 256)
            params: dict[str, object] = {"group": g, "split": rng.choice([1, 2, 4, 8])}
            if rng.random() < 0.3:
                params["outliers"] = True
            if rng.random() < 0.3:
                params["row_pad"] = 8 * rng.randrange(1, 4)
            out.append(case("awq_gemm", "float16", (m, k, n), cpu=small, **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            case("awq_gemm", "float16", (16, 8192, 28672), group=128, split=8),
            case("awq_gemm", "float16", (128, 4096, 14336), group=128, split=8),
            case("awq_gemm", "float16", (255, 14336, 4096), group=128, split=8),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        m, k, n = c.shape
        dt = c.torch_dtype
        a = _gemm.activations(m, k, dt, gen, row_pad=int(c.get("row_pad", 0)),
                              outliers=bool(c.get("outliers", False)))
        qw = _quant.quantize_zp(_quant.weights(k, n, gen), 4, int(c["group"]), dt)
        layout = _packing.awq_layout(4)
        qweight = _packing.pack_cols(qw.codes, 4, layout)
        qzeros = _packing.pack_cols(qw.zeros, 4, layout)
        return Call(c.entry, (a, qweight, qw.scales, qzeros, int(c["split"])))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        a, qweight, scales, qzeros, _ = call.args
        return (_gemm.gemm_expected(a, _dequant(qweight, scales, qzeros), a.dtype),)

    def baseline(self, call: Call) -> object:
        a, qweight, scales, qzeros, split = call.args
        ops = _gemm.vllm_ops(a)
        if ops is not None:
            return ops.awq_gemm(a, qweight, scales, qzeros, split)
        _check(a, qweight, scales, qzeros)
        w = _dequant(qweight, scales, qzeros, torch.float32).to(a.dtype)
        return torch.matmul(a, w)

    def cost(self, c: Case) -> Cost:
        m, k, n = c.shape
        groups = k // int(c["group"])
        return _gemm.gemm_cost(m, n, k, c.dtype, weight_bytes=k * n / 2,
                               other_bytes=groups * n * 2.5)


def _check(a: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor,
           qzeros: torch.Tensor) -> None:
    """vLLM 0.13's checks (``std::invalid_argument`` -> ValueError), plus the shapes its CUDA
    kernel silently trusts."""
    k = a.shape[1]
    n = qweight.shape[1] * 8
    group = k // scales.shape[0] if scales.shape[0] else 0
    _gemm.require(n % 64 == 0, "OC is not multiple of cta_N = 64", ValueError)
    _gemm.require(group % 32 == 0, "Group size should be a multiple of 32", ValueError)
    _gemm.require(group > 0 and n % group == 0, "OC is not multiple of Group size", ValueError)
    _gemm.require(qweight.shape[0] == k and k % 32 == 0,
                  f"qweight has {qweight.shape[0]} rows, expected K = {k} (a multiple of 32)",
                  ValueError)
    _gemm.require(scales.shape[0] * group == k and tuple(scales.shape[1:]) == (n,),
                  f"scales shape {tuple(scales.shape)} is not [K/G, N] with G dividing K = {k}",
                  ValueError)
    _gemm.require(tuple(qzeros.shape) == (scales.shape[0], n // 8),
                  f"qzeros shape {tuple(qzeros.shape)} is not [K/G, N/8]", ValueError)


def _dequant(qweight: torch.Tensor, scales: torch.Tensor, qzeros: torch.Tensor,
             dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The weight ``[K, N]`` in ``dtype`` (exact in float64), on the tensors' device."""
    layout = _packing.awq_layout(4)
    q = _packing.unpack_cols(qweight, 4, layout)
    z = _packing.unpack_cols(qzeros, 4, layout)
    group = q.shape[0] // scales.shape[0]
    g = torch.arange(q.shape[0], device=q.device) // group
    return (q - z[g]).to(dtype) * scales.to(dtype)[g]
