"""vllm::cutlass_pack_scale_fp8 — ``vllm._custom_ops.cutlass_pack_scale_fp8(scales)``
(vLLM 0.13.0): the W4A8 (fp8 x int4) lookup-table scale packing of CUTLASS's mixed-input GEMM.

``scales`` is a contiguous float8_e4m3fn tensor of any shape (vLLM passes the group scales,
e.g. ``[N, K / 128]`` or ``[E, K / 128, N]``). Returns a NEW 1-D float8_e4m3fn tensor of
``8 * scales.numel()`` values: for scale ``s`` at flat index ``i``, values ``8i .. 8i+7`` are
``e4m3(-8 s), e4m3(-7 s), ..., e4m3(-2 s), -s``. Pinned source: vLLM 0.13.0's
``csrc/quantization/cutlass_w4a8/w4a8_mm_entry.cu`` (``pack_scale_fp8``: TORCH_CHECKs dtype,
contiguity and CUDA, output ``{numel * 8}``) calling CUTLASS v4.2.1's
``cutlass::pack_scale_fp8`` (``tools/util/include/cutlass/util/mixed_dtype_utils.hpp``): on the
host, ``packed_scale_t<float_e4m3_t>`` stores ``T(float(s) * -8.f) ... T(float(s) * -2.f), -s``
little-endian in two uint32 (the positive multiples are made in the GEMM's main loop). The
products are exact in float32 (4 x 3 significant bits); ``float_e4m3_t(float)`` on the host is
``convert_float_to_fp8``: round to nearest even, subnormals included, finite values beyond 448
saturate to +-448 (satfinite). So the values are exact: compared exactly (the sign of a zero is
not compared). Scope: finite scales (vLLM's are quantized positive group scales; negative,
zero, subnormal and saturating ones are covered too). Bad input: a scale tensor of another
dtype or not contiguous fails vLLM's ``TORCH_CHECK`` ("Expected scales.dtype() ==
torch::kFloat8_e4m3fn to be true, but got false." / "Expected scales.is_contiguous() to be
true, but got false."; RuntimeError), as the PyTorch baseline does.
"""

from __future__ import annotations

import math
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
)
from operators.vllm._ggml_triton import patched
from operators.vllm._vllm_ops import library, vllm_ops

FP8 = torch.float8_e4m3fn
MULTIPLES = (-8.0, -7.0, -6.0, -5.0, -4.0, -3.0, -2.0)

SOLUTION = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _pack_scale_kernel(s_ptr, o_ptr, n, BLOCK: tl.constexpr):
    # e4m3 bytes in, 8 e4m3 bytes out per scale: e4m3(-k s) for k = 8..2 with round to nearest
    # even and saturation at 448, then -s. All in integers: s = ms * 2^es with ms < 16, so
    # k * s = P * 2^es with P < 128 exactly.
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    b = tl.load(s_ptr + i, mask=m, other=0).to(tl.int32)
    sign = (b >> 7) & 1
    E = (b >> 3) & 15
    ms = tl.where(E > 0, (b & 7) + 8, b & 7)
    es = tl.where(E > 0, E - 10, -9)
    j = tl.arange(0, 8)
    P = ms[:, None] * (8 - j)[None, :]
    h = ((P >= 2).to(tl.int32) + (P >= 4).to(tl.int32) + (P >= 8).to(tl.int32)
         + (P >= 16).to(tl.int32) + (P >= 32).to(tl.int32) + (P >= 64).to(tl.int32))
    e_unb = tl.maximum(h + es[:, None], -6)  # the exponent of the result, -6 for subnormals
    r = e_unb - 3 - es[:, None]  # P's bits below the 3-bit mantissa (negative: exact)
    rr = tl.maximum(r, 0)
    q = P >> rr
    rem = P - (q << rr)
    half = (1 << rr) >> 1
    q = q + ((rr > 0) & ((rem > half) | ((rem == half) & ((q & 1) == 1)))).to(tl.int32)
    q = tl.where(r < 0, P << tl.maximum(-r, 0), q)
    mag = tl.where(P == 0, 0, tl.minimum((e_unb + 6) * 8 + q, 126))
    out = mag | ((1 - sign)[:, None] << 7)
    out = tl.where((j == 7)[None, :], (b ^ 128)[:, None], out)
    tl.store(o_ptr + i[:, None] * 8 + j[None, :], out.to(tl.uint8), mask=m[:, None])


def cutlass_pack_scale_fp8(scales):
    n = scales.numel()
    out = torch.empty(n * 8, dtype=torch.float8_e4m3fn, device=scales.device)
    if n > 0:
        _pack_scale_kernel[(triton.cdiv(n, 512),)](scales.view(torch.uint8), out.view(torch.uint8),
                                                    n, BLOCK=512)
    return out
'''

# Rounds ties away from zero instead of to even: right whenever no product needs rounding.
NEGATIVE_HALF_AWAY = patched(SOLUTION, "((rem > half) | ((rem == half) & ((q & 1) == 1)))",
                             "(rem >= half)")
# No satfinite: products beyond 448 run into the NaN code and the sign bit.
NEGATIVE_NO_SATURATION = patched(SOLUTION, "tl.minimum((e_unb + 6) * 8 + q, 126)",
                                 "(e_unb + 6) * 8 + q")

_VARIANTS = ("group", "pow2", "edge", "large")


def _case(shape: Sequence[int], variant: str, *, cpu: bool = False) -> Case:
    return case("cutlass_pack_scale_fp8", "float8_e4m3fn", shape, scales=variant, cpu=cpu)


def scales_like(shape: tuple[int, ...], variant: str, gen: torch.Generator) -> torch.Tensor:
    """e4m3 scales. ``group``: positive group scales of an int4 weight (amax / 7 of N(0, 0.02)
    groups, as vLLM's W4A8 quantization makes, in e4m3); ``pow2``: powers of two (products
    need no rounding); ``edge``: every e4m3 code but NaN, shuffled (zeros, subnormals,
    negatives, the largest); ``large``: magnitudes up to 448, so most products saturate."""
    n = 1
    for d in shape:
        n *= d
    if variant == "group":
        # The largest |N(0, 1)| of 128 drawn by inverting its CDF, erf(x / sqrt 2)^128: the same
        # distribution as drawing the group, without the 128 draws per scale (benchmark cases
        # have 58 M scales: 60 GB of float64 draws).
        u = torch.rand(n, generator=gen, dtype=torch.float64)
        top = (u ** (1.0 / 128)).clamp(max=1.0 - 2.0**-53)  # erfinv(1) is infinite
        v = math.sqrt(2.0) * torch.erfinv(top) * 0.02 / 7
    elif variant == "pow2":
        v = torch.exp2(torch.randint(-9, 9, (n,), generator=gen).double())
    elif variant == "edge":
        codes = torch.tensor([c for c in range(256) if c & 0x7F != 0x7F], dtype=torch.uint8)
        v = codes[torch.randint(0, codes.numel(), (n,), generator=gen)].view(FP8).double()
    else:
        v = torch.rand(n, generator=gen, dtype=torch.float64) * 448.0
    return v.to(FP8).reshape(shape)


@register("vllm::cutlass_pack_scale_fp8", version=2, kind=Kind.COMPUTE)
class CutlassPackScaleFp8(OperatorSpec):
    entry_points = (
        EntryPoint(
            "cutlass_pack_scale_fp8",
            "cutlass_pack_scale_fp8(scales: Tensor) -> Tensor",
            "Returns a new 1-D float8_e4m3fn tensor of 8 * scales.numel() values: e4m3(-8 s), "
            "..., e4m3(-2 s), -s for each scale s in flat order.",
        ),
    )
    description = (
        "CUTLASS's fp8 scale packing for the W4A8 (fp8 activations x int4 weights) lookup-table "
        "GEMM, as vLLM 0.13's `vllm._custom_ops.cutlass_pack_scale_fp8(scales)`: scales is a "
        "contiguous torch.float8_e4m3fn tensor of any shape. Return a NEW contiguous 1-D "
        "float8_e4m3fn tensor of length 8 * scales.numel() on the same device where, for the "
        "scale s at flat index i, out[8i + j] = e4m3(-(8 - j) * s) for j = 0..6 (the multiples "
        "-8s, -7s, -6s, -5s, -4s, -3s, -2s) and out[8i + 7] = -s. The product (k * s) is exact "
        "in float32; e4m3(v) rounds to the nearest e4m3fn value with ties to EVEN (subnormals "
        "included, smallest 2^-9) and SATURATES finite values beyond the largest, 448, to +-448 "
        "(never NaN). e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; "
        "0x7F/0xFF are NaN. Scales are finite. Results are compared exactly (the sign of a zero "
        "is not compared). Note: Triton's fp32 -> fp8 cast may not saturate on every platform; "
        "encoding the bytes yourself (out.view(torch.uint8)) is safe. Do not modify scales."
    )
    solution = SOLUTION
    negatives = (
        Negative("ties_away", "rounds products halfway between two e4m3 values away from zero "
                 "instead of to even", NEGATIVE_HALF_AWAY),
        Negative("no_saturation", "lets products beyond 448 overflow into the NaN code and the "
                 "sign bit instead of saturating", NEGATIVE_NO_SATURATION),
    )
    tolerances = {"float8_e4m3fn": Tolerance(0.0, 0.0)}

    def cases(self) -> Sequence[Case]:
        return [
            _case((4, 8), "group", cpu=True), _case((3, 5, 7), "pow2", cpu=True),
            _case((300,), "edge", cpu=True), _case((2, 33), "large", cpu=True),
            _case((1,), "group", cpu=True),
            _case((4096, 32), "group"), _case((14336, 32), "group"), _case((8, 32, 14336), "group"),
            _case((11008, 112), "edge"), _case((7, 3, 5), "large"), _case((4096, 64), "pow2"),
        ]

    def hidden_cases(self, rng: random.Random, tier: Tier) -> Sequence[Case]:
        small = tier is Tier.CPU
        out = []
        for _ in range(2 if small else 4):
            rank = rng.randrange(1, 4)
            top = 8 if small else 300
            shape = tuple(rng.randrange(1, top) for _ in range(rank))
            out.append(_case(shape, rng.choice(_VARIANTS), cpu=small))
        return out

    def benchmark_cases(self) -> Sequence[Case]:
        return [  # MoE w13 group-128 scales (E, K / 128, N): DeepSeek-V3-sized, Mixtral-sized
            _case((256, 56, 4096), "group"),
            _case((8, 32, 28672), "group"),
        ]

    def make_call(self, c: Case, gen: torch.Generator) -> Call:
        return Call(c.entry, (scales_like(c.shape, c["scales"], gen),))

    def reference(self, call: Call) -> tuple[Expected, ...]:
        (scales,) = call.args
        return (Expected(packed_values(scales), FP8),)

    def baseline(self, call: Call) -> object:
        (scales,) = call.args
        ops = vllm_ops(scales)
        if ops is not None:
            return ops.cutlass_pack_scale_fp8(scales)
        check_scales(scales)
        return packed_values(scales).to(FP8)

    def baseline_library(self) -> str:
        return library()

    def cost(self, c: Case) -> Cost:
        n = 1
        for d in c.shape:
            n *= d
        return Cost(flops=7.0 * n, bytes=9.0 * n, dtype="float32")


def packed_values(scales: torch.Tensor) -> torch.Tensor:
    """The packed values in float64: float32 products (exact), clamped to +-448 (satfinite),
    rounded to e4m3 (PyTorch's cast rounds to nearest even), then -s."""
    s = scales.reshape(-1).to(torch.float32)
    k = torch.tensor(MULTIPLES, dtype=torch.float32, device=s.device)
    prod = (s[:, None] * k[None, :]).clamp(-448.0, 448.0).to(FP8).to(torch.float64)
    return torch.cat([prod, -s.to(torch.float64)[:, None]], dim=1).reshape(-1)


def check_scales(scales: torch.Tensor) -> None:
    """vLLM 0.13's TORCH_CHECKs (the CUDA one aside)."""
    if scales.dtype != FP8:
        raise RuntimeError("Expected scales.dtype() == torch::kFloat8_e4m3fn to be true, but got false.")
    if not scales.is_contiguous():
        raise RuntimeError("Expected scales.is_contiguous() to be true, but got false.")
