"""vllm::convert_fp8 — ``vllm._custom_ops.convert_fp8(output, input, scale=1.0, kv_dtype="fp8")``
(vLLM 0.13.0, csrc/cache_kernels.cu ``convert_fp8``): a KV cache to or from fp8 bytes.

The direction follows the dtypes. ``input`` float16 / bfloat16 / float32 -> ``output`` uint8
holding float8_e4m3fn codes: ``code(satfinite(input / scale))`` (nearest, ties to even; the
hardware cvt with ``__NV_SATFINITE``: beyond +-448, +-inf included, saturates to +-448; the sign
bit is kept, so negative values that round to zero are code 0x80). ``input`` uint8 -> ``output``
float16 / bfloat16 / float32: ``fp8_value(input) * scale`` (in float32, rounded once to the
output dtype). ``kv_dtype`` is ``"fp8"`` or ``"fp8_e4m3"`` (the same format; vLLM rejects any
other). ``input`` and ``output`` are contiguous and of one shape (a cache
``[num_blocks, ...]``); vLLM walks them as flat arrays. Returns None.

Quantized bytes are judged in code space (:func:`operators.vllm._act_quant.fp8_bytes`: one code is
one quantum, the neighbour only within 2**-16 of a tie). Dequantize inputs never hold the NaN
codes 0x7F / 0xFF: a cache written by the quantizer holds finite values.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import torch

from operators.inputs import randn
from operators.registry import register
from operators.spec import (
    Call,
    Case,
    Cost,
    EntryPoint,
    Expected,
    Kind,
    Negative,
    Out,
    Tier,
    case,
    unit_roundoff,
)
from operators.vllm import _baseline
from operators.vllm._act_quant import FP8, TRITON_ROUNDING, U32, QuantSpec, approx, fp8_bytes
from operators.vllm._rms import FLOATS

SOLUTION = r'''
import torch
import triton
import triton.language as tl
''' + TRITON_ROUNDING + r'''

@triton.jit
def _quantize_kernel(src_ptr, dst_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(src_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    q = _e4m3(x / scale)
    tl.store(dst_ptr + offs, q.to(tl.float8e4nv).to(tl.uint8, bitcast=True), mask=mask)


@triton.jit
def _dequantize_kernel(src_ptr, dst_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    b = tl.load(src_ptr + offs, mask=mask, other=0)
    v = b.to(tl.float8e4nv, bitcast=True).to(tl.float32) * scale
    tl.store(dst_ptr + offs, v.to(dst_ptr.dtype.element_ty), mask=mask)


def convert_fp8(output, input, scale=1.0, kv_dtype="fp8"):
    if kv_dtype not in ("fp8", "fp8_e4m3"):
        raise ValueError(f"unsupported kv_dtype {kv_dtype!r}")
    n = input.numel()
    if n == 0:
        return None
    block = 1024
    grid = (triton.cdiv(n, block),)
    if input.dtype == torch.uint8:
        _dequantize_kernel[grid](input, output, n, float(scale), BLOCK=block)
    else:
        _quantize_kernel[grid](input, output, n, float(scale), BLOCK=block)
    return None
'''

# Multiplies by the scale when quantizing: right only for a scale of 1.
NEGATIVE_QUANT_TIMES_SCALE = SOLUTION.replace("q = _e4m3(x / scale)", "q = _e4m3(x * scale)")

# Forgets the scale when dequantizing.
NEGATIVE_DEQUANT_NO_SCALE = SOLUTION.replace(
    "v = b.to(tl.float8e4nv, bitcast=True).to(tl.float32) * scale",
    "v = b.to(tl.float8e4nv, bitcast=True).to(tl.float32)")

# Negates a rounded magnitude (0 - r), so negative values that round to zero lose their sign.
NEGATIVE_POSITIVE_ZERO = SOLUTION.replace(
    "    q = _e4m3(x / scale)\n",
    "    v = x / scale\n    q = tl.where(v < 0, -_e4m3(-v), _e4m3(v))\n")


def _case(direction: str, dt: str, shape: Sequence[int], *, scale: float = 1.0,
          kv_dtype: str = "fp8", cpu: bool = False, **params: Any) -> Case:
    return case("convert_fp8", dt, shape, direction=direction, scale=scale, kv_dtype=kv_dtype,
                cpu=cpu, **params)


@register("vllm::convert_fp8", version=1, kind=Kind.COMPUTE)
class ConvertFp8(QuantSpec):
    entry_points = (
        EntryPoint(
            "convert_fp8",
            "convert_fp8(output: Tensor, input: Tensor, scale: float = 1.0, "
            "kv_dtype: str = 'fp8') -> None",
            "Converts a KV cache to fp8 (e4m3) bytes or back, by the dtypes, into output.",
        ),
    )
    description = (
        "KV-cache fp8 conversion as vLLM's `vllm._custom_ops.convert_fp8(output, input, scale, "
        "kv_dtype)`. `input` and `output` are contiguous tensors of one shape (a cache "
        "`[num_blocks, block_size, num_heads, head_size]` or any other; treat them as flat "
        "arrays). `kv_dtype` is 'fp8' or 'fp8_e4m3' (both mean float8_e4m3fn). The direction "
        "follows the dtypes. Quantize: `input` float16/bfloat16/float32, `output` uint8 holding "
        "float8_e4m3fn bit patterns: `output = bits(e4m3(input / scale))`, computed in float32, "
        "rounded to the nearest e4m3fn value (ties to even; the other neighbour is accepted only "
        "within 2**-16 relative of a tie), saturating: beyond +-448 (inf included) gives +-448 "
        "(0x7E / 0xFE). Keep the sign bit: a negative value that rounds to zero is 0x80. "
        "Dequantize: `input` uint8 (e4m3fn bit patterns, never the NaN codes 0x7F/0xFF), "
        "`output` float16/bfloat16/float32: `output = float(e4m3 value) * scale` in float32, "
        "rounded to the output dtype (subnormals kept). `scale` is a Python float. Write "
        "`output` in place, return None; do not modify `input`."
    )
    solution = SOLUTION
    negatives = (
        Negative("quant_times_scale", "multiplies by the scale when quantizing (right only "
                 "for scale 1)", NEGATIVE_QUANT_TIMES_SCALE),
        Negative("dequant_ignores_scale", "dequantizes without applying the scale",
                 NEGATIVE_DEQUANT_NO_SCALE),
        Negative("positive_zero", "negates a rounded magnitude: negative values that round to "
                 "zero come out as 0x00 instead of 0x80", NEGATIVE_POSITIVE_ZERO),
    )

    def cases(self) -> Sequence[Case]:
        cs: list[Case] = [
            _case("quantize", "float32", (3, 16, 2, 64), cpu=True),
            _case("quantize", "bfloat16", (5, 16, 1, 80), scale=0.0123, cpu=True),
            _case("quantize", "float16", (2, 32, 4, 32), scale=2.5, kv_dtype="fp8_e4m3",
                  specials=True, cpu=True),
            _case("quantize", "float32", (7, 16, 2, 32), scale=0.5, std=0.001, cpu=True),
            _case("dequantize", "float32", (3, 16, 2, 64), cpu=True),
            _case("dequantize", "bfloat16", (5, 16, 1, 80), scale=0.0123, cpu=True),
            _case("dequantize", "float16", (2, 32, 4, 32), scale=2.5, kv_dtype="fp8_e4m3",
                  cpu=True),
            _case("quantize", "float16", (0, 16, 8, 128), cpu=True),
        ]
        for dt in FLOATS:
            for direction in ("quantize", "dequantize"):
                cs += [
                    # Llama-3 8B: 8 KV heads of 128; 70B likewise; block sizes 16 and 32.
                    _case(direction, dt, (1024, 16, 8, 128)),
                    _case(direction, dt, (257, 32, 8, 128), scale=0.0123),
                    _case(direction, dt, (64, 16, 1, 576), scale=0.5, kv_dtype="fp8_e4m3"),
                    _case(direction, dt, (333, 16, 4, 80), scale=3.0),
                    _case(direction, dt, (1, 16, 32, 256), scale=0.03125),
                    _case(direction, dt, (5, 7, 11, 13), scale=1.7),
                ]
            cs.append(_case("quantize", dt, (128, 16, 8, 128), scale=0.25, specials=True))
            cs.append(_case("quantize", dt, (300, 16, 8, 64), scale=1.0, std=0.02))
        return cs

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for dt in FLOATS:
            for direction in ("quantize", "dequantize"):
                blocks = rng.randrange(1, 6 if small else 600)
                shape = (blocks, rng.choice([16, 32]), rng.randrange(1, 4 if small else 9),
                         rng.choice([32, 64, 80, 128] if small else [64, 96, 128, 256, 576]))
                params: dict[str, Any] = {}
                if direction == "quantize" and rng.random() < 0.3:
                    params["specials"] = True
                out.append(_case(direction, dt, shape,
                                 scale=rng.choice([1.0, 0.0123, 0.5, 2.0, 7.3]),
                                 kv_dtype=rng.choice(["fp8", "fp8_e4m3"]), cpu=small,
                                 **params))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [
            _case("quantize", "bfloat16", (4096, 16, 8, 128), scale=0.0123),
            _case("dequantize", "bfloat16", (4096, 16, 8, 128), scale=0.0123),
            _case("quantize", "float16", (2048, 32, 8, 128)),
            _case("dequantize", "float32", (2048, 16, 8, 128), scale=0.5),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        dt = c.torch_dtype
        if c["direction"] == "quantize":
            # KV values; scaled so that some exceed the fp8 range at the case's scale.
            src = randn(c.shape, dt, gen, std=float(c.get("std", 1.0)) * 150.0 * c["scale"])
            if c.get("specials") and src.numel():
                flat = src.view(-1)
                idx = torch.randperm(flat.numel(), generator=gen)[:max(2, flat.numel() // 100)]
                flat[idx[0::2]] = float("inf")
                flat[idx[1::2]] = float("-inf")
            dst = torch.empty(c.shape, dtype=torch.uint8)
        else:
            codes = torch.randint(0, 254, c.shape, generator=gen, dtype=torch.int64)
            codes = codes + (codes >= 127).to(torch.int64)  # skip 0x7F; 0xFF is past the range
            src = codes.to(torch.uint8)
            dst = torch.empty(c.shape, dtype=dt)
        return Call(c.entry, (dst, src, float(c["scale"]), c["kv_dtype"]), outputs=(Out.arg(0),),
                    mutable=frozenset({0}), out_buffers=frozenset({0}))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        dst, src, scale, _ = call.args
        if src.dtype == torch.uint8:
            v = src.view(FP8).double() * scale
            u = unit_roundoff(dst.dtype)
            allowed = (u + 2 * U32) * v.abs() + u * torch.finfo(dst.dtype).tiny
            return (approx(v, dst.dtype, allowed),)
        return (fp8_bytes(src.double() / scale),)

    def baseline(self, call: Call) -> object:
        # vLLM's kernel where vLLM is installed (device tensors); else PyTorch's float8
        # conversion (round to nearest even after clamping, as the hardware cvt saturates).
        dst, src, scale, kv_dtype = call.args
        ops = _baseline.custom_ops()
        if ops is not None and src.device.type != "cpu":
            ops.convert_fp8(dst, src, scale, kv_dtype)
            return None
        if src.dtype == torch.uint8:
            dst.copy_(src.view(FP8).float() * scale)
        else:
            q = (src.float() / scale).clamp(-448.0, 448.0).to(FP8)
            dst.copy_(q.view(torch.uint8))
        return None

    def baseline_library(self) -> str:
        return _baseline.library()

    def cost(self, c: Case) -> Cost:
        n = math.prod(c.shape)
        size = c.torch_dtype.itemsize
        return Cost(flops=float(n), bytes=float(n * (size + 1)), dtype=c.dtype)
