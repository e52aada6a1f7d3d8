"""vllm::rms_norm_per_block_quant — ``vllm._custom_ops.rms_norm_per_block_quant(input, weight,
epsilon, quant_dtype, group_size, scale_ub=None, residual=None, is_scale_transposed=False)``
(vLLM 0.13.0, csrc/quantization/fused_kernels/fused_layernorm_dynamic_per_token_quant.cu): an
optional residual add, RMS norm and dynamic quantization with one scale per group of
``group_size[1]`` (64 or 128) consecutive columns of each token (DeepSeek-V3's 1x128 blocks).

The candidate implements the ``_custom_ops`` wrapper (as the published benchmark calls it):
``output`` has ``input``'s shape and ``quant_dtype``; ``scales`` is float32
``[num_tokens, hidden / group]``, row-major, or with ``is_scale_transposed`` allocated
``[hidden / group, num_tokens]`` and returned transposed (strides ``(1, num_tokens)``, the
layout DeepGEMM reads). ``residual``, when given, is updated in place. hidden is a multiple of
the group (at most 256 groups); ``input``, ``weight`` and ``residual`` are contiguous.
Semantics and tolerances: :mod:`._norm_quant` (per group instead of per token).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.registry import register
from operators.spec import Call, Case, Cost, EntryPoint, Expected, Kind, Negative, Tier, case
from operators.vllm import _baseline, _norm_quant
from operators.vllm._act_quant import TRITON_ROUNDING, QuantSpec, unique
from operators.vllm._rms import FLOATS

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + TRITON_ROUNDING + _norm_quant.KERNEL + r'''

def rms_norm_per_block_quant(input, weight, epsilon, quant_dtype, group_size, scale_ub=None,
                             residual=None, is_scale_transposed=False):
    assert len(group_size) == 2
    group = group_size[1]
    output = torch.empty_like(input, dtype=quant_dtype)
    tokens = input.numel() // input.shape[-1]
    groups = input.shape[-1] // group
    if is_scale_transposed:
        scales = torch.empty((groups, tokens), device=input.device,
                             dtype=torch.float32).transpose(0, 1)
    else:
        scales = torch.empty((tokens, groups), device=input.device, dtype=torch.float32)
    _launch(input, weight, epsilon, quant_dtype, scale_ub, residual, output, scales, group)
    return output, scales
'''

# Writes transposed scales as if row-major (ignores the scales' strides).
NEGATIVE_ROW_MAJOR_SCALES = SOLUTION.replace(
    "n_cols, epsilon, scales.stride(0), scales.stride(1) if scales.dim() > 1 else 0,",
    "n_cols, epsilon, scales.shape[1] if scales.dim() > 1 else 1, 1,")

# One scale per token broadcast to every group (per-token quantization in a per-block layout).
NEGATIVE_TOKEN_SCALE = SOLUTION.replace(
    "            top = tl.max(tl.abs(y), axis=0)\n",
    "            top = tl.max(tl.abs(y), axis=0) * 0.0 + _row_top(x_ptr, r_ptr, w_ptr, row, "
    "n_cols, inv, HAS_RES, BLOCK_N)\n").replace(
    "@triton.jit\ndef _norm_quant_kernel(", '''@triton.jit
def _row_top(x_ptr, r_ptr, w_ptr, row, n_cols, inv, HAS_RES: tl.constexpr,
             BLOCK_N: tl.constexpr):
    amax = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        y, z = _normed(x_ptr, r_ptr, w_ptr, row, cols, cols < n_cols, inv, HAS_RES)
        amax = tl.maximum(amax, tl.abs(y))
    return tl.max(amax, axis=0)


@triton.jit
def _norm_quant_kernel(''')

# Group scales never capped by scale_ub (only the per-token path applies it).
NEGATIVE_GROUP_IGNORES_UB = SOLUTION.replace(
    """            top = tl.max(tl.abs(y), axis=0)
            if HAS_UB:
                top = tl.minimum(top, tl.load(ub_ptr))
""", """            top = tl.max(tl.abs(y), axis=0)
""")


def _case(dt: str, shape: Sequence[int], quant: str, group: int, *, residual: bool = False,
          scale_ub: bool = False, transposed: bool = False, cpu: bool = False,
          **params: Any) -> Case:
    p: dict[str, Any] = {"quant": quant, "group": group, "eps": params.pop("eps", 1e-6)}
    for key, on in (("residual", residual), ("scale_ub", scale_ub), ("transposed", transposed)):
        if on:
            p[key] = True
    return case("rms_norm_per_block_quant", dt, shape, cpu=cpu, **p, **params)


# (tokens, hidden): Llama-3 8B / 70B, Qwen2.5-7B (3584), DeepSeek-V3 (7168), an odd batch.
_SHAPES = ((1, 1024), (7, 5120), (2048, 1024), (333, 3584), (2048, 4096), (1024, 8192),
           (512, 7168))


@register("vllm::rms_norm_per_block_quant", version=2, kind=Kind.COMPUTE)
class RmsNormPerBlockQuant(QuantSpec):
    entry_points = (
        EntryPoint(
            "rms_norm_per_block_quant",
            "rms_norm_per_block_quant(input: Tensor, weight: Tensor, epsilon: float, "
            "quant_dtype: torch.dtype, group_size: list[int], scale_ub: Tensor | None = None, "
            "residual: Tensor | None = None, is_scale_transposed: bool = False) "
            "-> tuple[Tensor, Tensor]",
            "(Residual add,) RMS norm and per-group dynamic quantization; returns (out, scales).",
        ),
    )
    description = (
        "Fused RMS norm and per-block (1 x group) dynamic quantization, as vLLM's "
        "`vllm._custom_ops.rms_norm_per_block_quant` (the Python wrapper). `input` is "
        "contiguous `[..., hidden]` (float16, bfloat16 or float32), tokens are its rows; "
        "`weight` `[hidden]` in the same dtype; `quant_dtype` `torch.float8_e4m3fn` or "
        "`torch.int8`; `group_size` a list `[1, group]` with group 64 or 128 dividing hidden "
        "(only `group_size[1]` is used); `residual`, if given, contiguous like `input`. Per "
        "token: `z = input + residual` in float32 (without residual `z = input`); if residual "
        "is given, write `z` rounded to the dtype into `residual` in place. `y = dt(dt(z * "
        "rsqrt(mean(z**2) + epsilon)) * weight)` (`dt` rounds to the input dtype, as vLLM does; "
        "a float32 path is accepted too). For each group g of `group` consecutive columns: "
        "`scale[t, g] = max(min(max(|y[group g]|), scale_ub) / qmax, min_scale)` (qmax 448 / "
        "127, min_scale 1/(448*512) / 2**-23 for fp8 / int8; the `min` only with `scale_ub`, a "
        "one-element float32 tensor, fp8 only). fp8: `out = nearest e4m3fn(clamp(y / scale, "
        "-448, 448))`; int8: `out = clamp(rne(y / scale), -128, 127)` (ties to even). Return "
        "`(out, scales)`: `out` new contiguous, input's shape, quant_dtype; `scales` float32 "
        "`[num_tokens, hidden // group]`, row-major, or if `is_scale_transposed` allocated as "
        "`[hidden // group, num_tokens]` and returned `.transpose(0, 1)` (strides "
        "`(1, num_tokens)`; the strides are checked). Rounding ties may go either way within "
        "the input dtype's precision. Do not modify input or weight."
    )
    solution = SOLUTION
    negatives = (
        Negative("row_major_scales", "writes transposed scales in row-major order",
                 NEGATIVE_ROW_MAJOR_SCALES),
        Negative("token_scale", "one scale per token (the row max) for every group",
                 NEGATIVE_TOKEN_SCALE),
        Negative("ignores_scale_ub", "never caps the group scales by scale_ub",
                 NEGATIVE_GROUP_IGNORES_UB),
    )

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            _case("float32", (1, 128), "fp8", 128, cpu=True),
            _case("bfloat16", (5, 256), "fp8", 64, residual=True, cpu=True),
            _case("float16", (3, 384), "int8", 128, transposed=True, cpu=True),
            _case("bfloat16", (6, 512), "fp8", 128, scale_ub=True, transposed=True, cpu=True),
            _case("float32", (2, 3, 192), "int8", 64, residual=True, cpu=True),
            _case("bfloat16", (6, 256), "int8", 128, zero_rows=2, cpu=True),
            _case("float16", (0, 256), "fp8", 128, transposed=True, cpu=True),
        ]
        for dt in FLOATS:
            for shape in _SHAPES:
                for quant in ("fp8", "int8"):
                    for group in (64, 128):
                        cs.append(_case(dt, shape, quant, group, residual=group == 128,
                                        transposed=quant == "fp8"))
                cs.append(_case(dt, shape, "fp8", 128, residual=True, scale_ub=True))
            cs.append(_case(dt, (1000, 7168), "fp8", 128, residual=True, zero_rows=9,
                            transposed=True))
        return unique(cs)

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in FLOATS:
            for quant in ("fp8", "int8"):
                group = rng.choice([64, 128])
                rows = rng.randrange(1, 8 if small else 3000)
                hidden = group * rng.randrange(1, 4 if small else 65)
                out.append(_case(dt, (rows, hidden), quant, group, residual=rng.random() < 0.5,
                                 scale_ub=quant == "fp8" and rng.random() < 0.3,
                                 transposed=rng.random() < 0.5,
                                 eps=rng.choice([1e-6, 1e-5]), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("bfloat16", (16384, 7168), "fp8", 128, residual=True, transposed=True),
            _case("bfloat16", (16384, 8192), "fp8", 128),
            _case("float16", (16384, 4096), "int8", 64, residual=True),
            _case("bfloat16", (16384, 4096), "int8", 128, transposed=True),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return _norm_quant.make_call(c, gen, group=int(c["group"]))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        x, weight, eps, quant_dtype, group_size = call.args
        kw = call.kwargs
        residual = kw.get("residual")
        out, scales, allowed, res = _norm_quant.reference(
            x, residual, weight, eps, quant_dtype, kw.get("scale_ub"), group_size[1])
        tokens, groups = scales.shape
        strides = (1, tokens) if kw.get("is_scale_transposed") else (groups, 1)
        outs = [out, Expected(scales, torch.float32, allowed, strides=strides)]
        if res is not None:
            outs.append(res)
        return tuple(outs)

    def baseline(self, call: Call) -> object:
        # vLLM's wrapper where vLLM is installed (device tensors); else PyTorch (vLLM's
        # roundings, float32 math).
        x, weight, eps, quant_dtype, group_size = call.args
        ops = _baseline.custom_ops()
        if ops is not None and x.device.type != "cpu":
            return ops.rms_norm_per_block_quant(x, weight, eps, quant_dtype, group_size,
                                                **call.kwargs)
        kw = call.kwargs
        tokens, groups = x.numel() // x.shape[-1], x.shape[-1] // group_size[1]
        if kw.get("is_scale_transposed"):
            scales = torch.empty((groups, tokens), dtype=torch.float32,
                                 device=x.device).transpose(0, 1)
        else:
            scales = torch.empty((tokens, groups), dtype=torch.float32, device=x.device)
        out = _norm_quant.torch_norm_quant(x, weight, eps, quant_dtype, kw.get("scale_ub"),
                                           kw.get("residual"), group_size[1], scales)
        return out, scales

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        return _norm_quant.cost(c)
