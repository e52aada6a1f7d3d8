"""vllm::cutlass_scaled_mm — ``vllm._custom_ops.cutlass_scaled_mm(a, b, scale_a, scale_b,
out_dtype, bias=None)`` (vLLM 0.13.0): the w8a8 GEMM with fused dequantization.

``a`` [M, K] int8 or float8_e4m3fn, row-major; ``b`` [K, N] of the same dtype, column-major
(stride (1, K): vLLM passes the transposed [N, K] weight); ``scale_a`` float32 with 1 (per
tensor) or M (per token) elements, ``scale_b`` float32 with 1 or N (per channel), both
contiguous; ``out_dtype`` float16 or bfloat16; ``bias`` [N] of ``out_dtype`` or None. Returns
a new [M, N] tensor ``scale_a[m] * (scale_b[n] * (a @ b)[m, n]) + bias[n]`` (int32 or float32
accumulation, one rounding to ``out_dtype``). vLLM runs CUTLASS when K and N are multiples of
16 and its ``triton_scaled_mm`` otherwise; both have these semantics. Out of scope: the
blockwise fp8 scales (2-D ``scale_a`` [M, K/128], ``scale_b`` [K/128, N/128]).

Bad input, as vLLM 0.13 reports it: ``out_dtype`` not float16/bfloat16, or a bias of the wrong
size or dtype, fail the wrapper's ``assert`` (AssertionError); a scale with neither 1 nor M (N)
elements is taken as a blockwise scale, so a 1-D one fails ``TORCH_CHECK`` with "a scale must
be 2d tensor." (RuntimeError) on the CUTLASS path, and the Triton path's ``assert`` otherwise.
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

def cutlass_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias=None):
    return _launch(a, b, scale_a, scale_b, out_dtype, bias, None, None, 0)
'''

# Loads scale_b[0] for every column: right for per-tensor weight scales only.
NEGATIVE_SCALAR_B = patched(SOLUTION, "SB_COLS=scale_b.numel() > 1", "SB_COLS=False")
# Adds the bias to the accumulator before scaling.
NEGATIVE_BIAS_FIRST = patched(SOLUTION, *S.BIAS_FIRST)
# Loops over whole K tiles only, dropping the last K % 64 values.
NEGATIVE_K_TAIL = patched(SOLUTION, "for k0 in range(0, K, BLOCK_K):",
                          "for k0 in range(0, K - BLOCK_K + 1, BLOCK_K):")

# (input, a scales, b scales, out, bias, M, K, N): per-token "token", per-channel "channel",
# per-tensor "tensor"; K or N not a multiple of 16 takes vLLM's Triton path.
_CPU = (("int8", "token", "channel", "float16", False, 5, 64, 48),
        ("fp8", "tensor", "tensor", "bfloat16", True, 3, 128, 32),
        ("int8", "tensor", "tensor", "bfloat16", True, 8, 80, 64),
        ("fp8", "token", "channel", "float16", True, 1, 48, 24),
        ("int8", "token", "tensor", "float16", False, 7, 96, 40))
_FULL = ((1, 4096, 4096), (16, 14336, 1024), (127, 4096, 1536), (64, 11008, 512),
         (300, 2048, 768), (33, 1000, 700))
_MODES = (("token", "channel"), ("tensor", "tensor"), ("token", "tensor"), ("tensor", "channel"))


def _case(inp: str, sa: str, sb: str, out: str, bias: bool, m: int, k: int, n: int, *,
          cpu: bool = False) -> Case:
    return case("cutlass_scaled_mm", out, (m, k, n), input=inp, scale_a=sa, scale_b=sb,
                bias=bias, cpu=cpu)


@register("vllm::cutlass_scaled_mm", version=1, kind=Kind.COMPUTE)
class CutlassScaledMm(S.ScaledMmSpec):
    entry_points = (
        EntryPoint(
            "cutlass_scaled_mm",
            "cutlass_scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, "
            "out_dtype: torch.dtype, bias: Tensor | None = None) -> Tensor",
            "Returns a new [M, N] tensor of out_dtype: scale_a * scale_b * (a @ b) + bias.",
        ),
    )
    description = (
        "The int8/fp8 scaled GEMM of vLLM 0.13's `vllm._custom_ops.cutlass_scaled_mm(a, b, "
        "scale_a, scale_b, out_dtype, bias=None)` (w8a8 linear layers): a is [M, K] int8 or "
        "torch.float8_e4m3fn, row-major (stride(1) == 1); b is [K, N] of the same dtype in "
        "COLUMN-major layout (b.stride(0) == 1, b.stride(1) == K: the transpose of a contiguous "
        "[N, K] weight); scale_a is float32 with 1 element (per-tensor) or M elements "
        "(per-token, shape [M, 1]); scale_b float32 with 1 element or N (per output channel, "
        "shape [N, 1]); both contiguous. out_dtype is torch.float16 or torch.bfloat16; bias is "
        "None or a [N] tensor of out_dtype. Return a NEW contiguous [M, N] tensor of out_dtype "
        "on a's device: out[m, n] = scale_a[m] * (scale_b[n] * float(sum_k a[m, k] * b[k, n])) "
        "+ bias[n] (scale_a[m] / scale_b[n] meaning the single value when per-tensor), the "
        "products summed exactly in int32 for int8 and in float32 for fp8 (tensor cores: "
        "tl.dot), the epilogue in float32, rounded once to out_dtype. M may be any size; K and N "
        "need not be multiples of 16. Accuracy: compared with a float64 reference relative to "
        "|scale_a scale_b| sum_k |a b| + |bias| with 3 units of out_dtype plus K float32 units. "
        "Do not modify the inputs."
    )
    solution = SOLUTION
    negatives = (
        Negative("scalar_scale_b", "reads scale_b[0] for every column (per-tensor only)",
                 NEGATIVE_SCALAR_B),
        Negative("bias_before_scale", "adds the bias to the accumulator before the scales",
                 NEGATIVE_BIAS_FIRST),
        Negative("k_tail", "drops the last K % 64 values (whole K tiles only)", NEGATIVE_K_TAIL),
    )

    def cases(self) -> Sequence[Case]:
        cs = [_case(*row, cpu=True) for row in _CPU]
        for i, (m, k, n) in enumerate(_FULL):
            for j, inp in enumerate(("int8", "fp8")):
                sa, sb = _MODES[(i + j) % 4]
                cs.append(_case(inp, sa, sb, ("float16", "bfloat16")[(i + j) % 2], (i + j) % 3 > 0,
                                m, k, n))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(2 if small else 5):
            sa, sb = rng.choice(_MODES)
            k = (rng.randrange(16, 257) if small
                 else rng.choice((16 * rng.randrange(1, 400), rng.randrange(1, 3000))))
            out.append(_case(rng.choice(("int8", "fp8")), sa, sb, rng.choice(("float16", "bfloat16")),
                             rng.random() < 0.5, rng.randrange(1, 9 if small else 300), k,
                             rng.randrange(1, 65 if small else 1500), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("int8", "token", "channel", "bfloat16", False, 2048, 4096, 14336),
            _case("fp8", "token", "channel", "bfloat16", True, 16, 8192, 28672),
            _case("fp8", "tensor", "tensor", "float16", False, 4096, 14336, 4096),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        m, k, n = c.shape
        dt = S.qtype(c["input"])
        x = torch.randn(m, k, generator=gen, dtype=torch.float64)
        w = torch.randn(n, k, generator=gen, dtype=torch.float64) * 0.02
        a, sa = S.quantize_rows(x, dt, c["scale_a"] == "token")
        wq, sb = S.quantize_rows(w, dt, c["scale_b"] == "channel")
        out = c.torch_dtype
        bias = (torch.randn(n, generator=gen, dtype=torch.float64) * 0.1).to(out) if c["bias"] else None
        return Call(c.entry, (a, S.column_major(wq), sa, sb, out, bias))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        a, b, sa, sb, out_dtype, bias = call.args
        return (S.expected(a, b, sa, sb, out_dtype, bias),)

    def baseline(self, call: Call) -> object:
        a, b, sa, sb, out_dtype, bias = call.args
        ops = vllm_ops(a)
        if ops is not None:
            return ops.cutlass_scaled_mm(a, b, sa, sb, out_dtype, bias)
        check_inputs(a, b, sa, sb, out_dtype, bias)
        return S.torch_scaled_mm(a, b, sa, sb, out_dtype, bias)

    def cost(self, c: Case) -> Cost:
        m, k, n = c.shape
        extra = 4.0 * (m + n) + (2.0 * n if c["bias"] else 0.0)
        return S.mm_cost(m, n, k, c["input"], c.torch_dtype, extra)


def check_inputs(a: torch.Tensor, b: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor,
                 out_dtype: torch.dtype, bias: torch.Tensor | None) -> None:
    """vLLM 0.13's checks, in its order: the Python wrapper's asserts, then the kernel's."""
    S.require(out_dtype in (torch.bfloat16, torch.float16), "", AssertionError)
    S.require(bias is None or (bias.numel() == b.shape[1] and bias.dtype == out_dtype), "",
              AssertionError)
    m, n = a.shape[0], b.shape[1]
    standard = sa.numel() in (1, m) and sb.numel() in (1, n)
    if b.shape[0] % 16 == 0 and n % 16 == 0:  # CUTLASS
        S.require(sa.dtype == torch.float32 and sb.dtype == torch.float32,
                  "Expected a_scales.dtype() == torch::kFloat32 to be true, but got false.")
        if not standard:  # vLLM takes these for blockwise scales
            k = a.shape[1]
            S.require(sa.dim() == 2, "a scale must be 2d tensor.")
            S.require(sb.dim() == 2, "b scale must be 2d tensor.")
            S.require(sa.shape[0] == m and sa.shape[1] == (k + 127) // 128,
                      "a_scale_group_shape must be [1, 128].")
            S.require(sb.shape[0] == (k + 127) // 128 and sb.shape[1] == (n + 127) // 128,
                      "b_scale_group_shape must be [128, 128].")
            raise NotImplementedError("blockwise fp8 scales are out of this problem's scope")
    else:  # triton_scaled_mm's asserts
        S.require(standard and sa.dtype == sb.dtype and sa.is_floating_point(), "", AssertionError)
