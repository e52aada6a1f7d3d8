"""vllm::cutlass_scaled_mm_azp — ``vllm._custom_ops.cutlass_scaled_mm_azp(a, b, scale_a,
scale_b, out_dtype, azp_adj, azp=None, bias=None)`` (vLLM 0.13.0): the int8 GEMM for
asymmetrically quantized activations (zero points).

``a`` [M, K] int8 row-major, quantized as ``round(x / scale_a) + azp``; ``b`` [K, N] int8
column-major (the transposed symmetric [N, K] weight); ``scale_a`` float32 (1 or M elements),
``scale_b`` float32 (1 or N); ``azp_adj`` int32 with N elements (``[1, N]`` in vLLM): the column
sums ``sum_k b[k, n]`` when ``azp`` is given per token (int32, M elements), else those sums
already multiplied by the one per-tensor zero point; ``bias`` [N] of ``out_dtype`` or None.
Returns a new [M, N] tensor of ``out_dtype`` (float16/bfloat16)::

    out = scale_a * (scale_b * float(acc - azp[m] * azp_adj[n])) + bias     (per token)
    out = scale_a * (scale_b * float(acc - azp_adj[n])) + bias             (azp None)

with ``acc = a @ b`` and the correction in int32 (``csrc/cutlass_extensions/epilogue/
scaled_mm_epilogues_c3x.hpp``, ``ScaledEpilogueBiasAzp[Token]``). K and N are multiples of 16
(the wrapper asserts it).

Bad input, as vLLM 0.13 reports it: K or N not a multiple of 16, ``out_dtype`` not
float16/bfloat16, a bias of the wrong size or dtype, or ``azp`` without M elements fail the
wrapper's ``assert`` (AssertionError); a scale with neither 1 nor M (N) elements, or
``azp_adj``/``azp`` of the wrong size or dtype, fail the kernel's ``TORCH_CHECK``
(RuntimeError "Expected ... to be true, but got false.").
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from operators.registry import register
from operators.spec import Call, Case, Cost, EntryPoint, Expected, Kind, Negative, Tier, case
from operators.vllm import _scaled_mm as S
from operators.vllm._ggml_triton import patched
from operators.vllm._vllm_ops import vllm_ops

SOLUTION = S.KERNEL + r'''

def cutlass_scaled_mm_azp(a, b, scale_a, scale_b, out_dtype, azp_adj, azp=None, bias=None):
    adj = azp_adj.reshape(-1)
    if azp is None:
        return _launch(a, b, scale_a, scale_b, out_dtype, bias, None, adj, 1)
    return _launch(a, b, scale_a, scale_b, out_dtype, bias, azp.reshape(-1), adj, 2)
'''

# Treats azp_adj as if it held azp already (the per-tensor rule) for per-token zero points too.
NEGATIVE_IGNORES_AZP = patched(SOLUTION, "bias, azp.reshape(-1), adj, 2)", "bias, None, adj, 1)")
# Adds the bias to the corrected accumulator before the scales.
NEGATIVE_BIAS_FIRST = patched(SOLUTION, *S.BIAS_FIRST)

# (zero points, b scales, out, bias, M, K, N): "token" = dynamic per-token scale and azp,
# "tensor" = static per-tensor scale with azp folded into azp_adj.
_CPU = (("token", "channel", "float16", True, 5, 64, 48),
        ("tensor", "tensor", "bfloat16", False, 3, 128, 32),
        ("token", "tensor", "bfloat16", True, 8, 96, 64),
        ("tensor", "channel", "float16", True, 1, 48, 16))
_FULL = ((1, 4096, 4096), (16, 14336, 1024), (127, 4096, 1536), (64, 11008, 512),
         (300, 2048, 768), (33, 1024, 704))


def _case(zp: str, sb: str, out: str, bias: bool, m: int, k: int, n: int, *,
          cpu: bool = False) -> Case:
    return case("cutlass_scaled_mm_azp", out, (m, k, n), azp=zp, scale_b=sb, bias=bias, cpu=cpu)


@register("vllm::cutlass_scaled_mm_azp", version=1, kind=Kind.COMPUTE)
class CutlassScaledMmAzp(S.ScaledMmSpec):
    entry_points = (
        EntryPoint(
            "cutlass_scaled_mm_azp",
            "cutlass_scaled_mm_azp(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, "
            "out_dtype: torch.dtype, azp_adj: Tensor, azp: Tensor | None = None, "
            "bias: Tensor | None = None) -> Tensor",
            "Returns a new [M, N] tensor of out_dtype: scale_a * scale_b * (a @ b - azp * "
            "azp_adj) + bias (azp_adj alone when azp is None).",
        ),
    )
    description = (
        "The int8 GEMM with activation zero points of vLLM 0.13's `vllm._custom_ops."
        "cutlass_scaled_mm_azp(a, b, scale_a, scale_b, out_dtype, azp_adj, azp=None, bias=None)`"
        ": a is [M, K] int8, row-major, asymmetrically quantized (a = round(x / scale_a) + azp); "
        "b is [K, N] int8 in COLUMN-major layout (b.stride(0) == 1, b.stride(1) == K: the "
        "transpose of a contiguous symmetric [N, K] weight); scale_a float32 with 1 or M "
        "elements ([M, 1] per token), scale_b float32 with 1 or N elements ([N, 1] per "
        "channel); azp_adj int32 with N elements (shape [1, N]); azp None or int32 with M "
        "elements ([M, 1], per-token zero points); bias None or [N] of out_dtype; out_dtype "
        "torch.float16 or torch.bfloat16; K and N are multiples of 16. With azp: out[m, n] = "
        "scale_a[m] * (scale_b[n] * float(acc[m, n] - azp[m] * azp_adj[n])) + bias[n], where "
        "acc = a @ b summed exactly in int32 and azp_adj[n] = sum_k b[k, n]. Without azp "
        "(per-tensor zero point): out[m, n] = scale_a * (scale_b[n] * float(acc[m, n] - "
        "azp_adj[n])) + bias[n], azp_adj holding the zero point times the column sums already. "
        "The zero-point correction is done in int32, the rest in float32, rounded once to "
        "out_dtype. Return a NEW contiguous [M, N] tensor of out_dtype on a's device. Accuracy: "
        "compared with a float64 reference relative to |scale_a scale_b| (sum_k |a b| + "
        "|azp azp_adj|) + |bias| with 3 units of out_dtype plus K float32 units. Do not modify "
        "the inputs."
    )
    solution = SOLUTION
    negatives = (
        Negative("ignores_token_azp", "subtracts azp_adj alone even when per-token zero points "
                 "are given (the per-tensor rule)", NEGATIVE_IGNORES_AZP),
        Negative("bias_before_scale", "adds the bias before the scales", NEGATIVE_BIAS_FIRST),
    )

    def cases(self) -> Sequence[Case]:
        cs = [_case(*row, cpu=True) for row in _CPU]
        for i, (m, k, n) in enumerate(_FULL):
            for j, zp in enumerate(("token", "tensor")):
                cs.append(_case(zp, ("channel", "tensor")[(i + j) % 2],
                                ("float16", "bfloat16")[i % 2], (i + j) % 3 > 0, m, k, n))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(2 if small else 5):
            out.append(_case(rng.choice(("token", "tensor")), rng.choice(("channel", "tensor")),
                             rng.choice(("float16", "bfloat16")), rng.random() < 0.5,
                             rng.randrange(1, 9 if small else 300),
                             16 * rng.randrange(1, 17 if small else 500),
                             16 * rng.randrange(1, 5 if small else 100), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("token", "channel", "bfloat16", False, 2048, 4096, 14336),
            _case("tensor", "channel", "float16", True, 16, 8192, 28672),
            _case("token", "tensor", "bfloat16", True, 4096, 14336, 4096),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        m, k, n = c.shape
        x = torch.randn(m, k, generator=gen, dtype=torch.float64) + 0.5  # skewed: zero points
        w = torch.randn(n, k, generator=gen, dtype=torch.float64) * 0.02
        per_token = c["azp"] == "token"
        a, sa, azp = S.quantize_asym(x, per_token)
        wq, sb = S.quantize_rows(w, torch.int8, c["scale_b"] == "channel")
        colsum = wq.to(torch.int32).sum(1).to(torch.int32).reshape(1, n)
        adj = colsum if per_token else (azp * colsum).to(torch.int32)
        out = c.torch_dtype
        bias = (torch.randn(n, generator=gen, dtype=torch.float64) * 0.1).to(out) if c["bias"] else None
        return Call(c.entry, (a, S.column_major(wq), sa, sb, out, adj,
                              azp.reshape(m, 1) if per_token else None, bias))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        a, b, sa, sb, out_dtype, adj, azp, bias = call.args
        return (S.expected(a, b, sa, sb, out_dtype, bias, _correction(a, adj, azp)),)

    def baseline(self, call: Call) -> object:
        a, b, sa, sb, out_dtype, adj, azp, bias = call.args
        ops = vllm_ops(a)
        if ops is not None:
            return ops.cutlass_scaled_mm_azp(a, b, sa, sb, out_dtype, adj, azp, bias)
        check_inputs(a, b, sa, sb, out_dtype, adj, azp, bias)
        return S.torch_scaled_mm(a, b, sa, sb, out_dtype, bias, _correction(a, adj, azp))

    def cost(self, c: Case) -> Cost:
        m, k, n = c.shape
        extra = 4.0 * (2 * m + 2 * n) + (2.0 * n if c["bias"] else 0.0)
        return S.mm_cost(m, n, k, "int8", c.torch_dtype, extra)


def _correction(a: torch.Tensor, adj: torch.Tensor, azp: torch.Tensor | None) -> torch.Tensor:
    """The int64 [M, N] zero-point term: azp[m] * azp_adj[n], or azp_adj[n] per tensor."""
    adj64 = adj.reshape(1, -1).to(torch.int64)
    if azp is None:
        return adj64.expand(a.shape[0], -1)
    return azp.reshape(-1, 1).to(torch.int64) * adj64


def check_inputs(a: torch.Tensor, b: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor,
                 out_dtype: torch.dtype, adj: torch.Tensor, azp: torch.Tensor | None,
                 bias: torch.Tensor | None) -> None:
    """vLLM 0.13's checks, in its order: the Python wrapper's asserts, then the kernel's."""
    m, n = a.shape[0], b.shape[1]
    S.require(b.shape[0] % 16 == 0 and n % 16 == 0, "", AssertionError)
    S.require(out_dtype in (torch.bfloat16, torch.float16), "", AssertionError)
    S.require(bias is None or (bias.numel() == n and bias.dtype == out_dtype), "", AssertionError)
    S.require(azp is None or azp.numel() == m, "", AssertionError)
    for cond, text in (
        (sa.numel() in (1, m), "a_scales.numel() == 1 || a_scales.numel() == a.size(0)"),
        (sb.numel() in (1, n), "b_scales.numel() == 1 || b_scales.numel() == b.size(1)"),
        (adj.numel() == n and adj.is_contiguous(),
         "azp_adj.numel() == b.size(1) && azp_adj.is_contiguous()"),
        (adj.dtype == torch.int32, "azp_adj.dtype() == torch::kInt32"),
        (azp is None or azp.dtype == torch.int32, "!azp || azp->dtype() == torch::kInt32"),
    ):
        S.require(cond, f"Expected {text} to be true, but got false.")
