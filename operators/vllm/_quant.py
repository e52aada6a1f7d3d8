"""Real weight quantization of float matrices, the way GPTQ, AWQ and FP8 checkpoints are made,
for the quantized-GEMM problems' inputs: every case multiplies by a genuinely quantized weight,
and the fp64 reference dequantizes exactly the codes, scales and zero points the kernel gets.

A :class:`QuantWeight` is the logical weight ``[K, N]`` before any packing: unsigned codes,
scales ``[G, N]`` already rounded to their storage dtype, integer zero points (or the type's
fixed bias) and optionally ``g_idx`` (act order). ``dequant()`` is the fp64 weight every
reference multiplies by.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch


@dataclass(frozen=True)
class QuantWeight:
    codes: torch.Tensor  # [K, N] int64 unsigned codes (fp8: the float8_e4m3fn values)
    scales: torch.Tensor  # [G, N], storage dtype
    zeros: torch.Tensor  # [G, N] int64 zero points (the type's bias for symmetric types)
    g_idx: torch.Tensor  # [K] int64 group of each row
    bits: int

    @property
    def size_k(self) -> int:
        return int(self.codes.shape[0])

    @property
    def num_groups(self) -> int:
        return int(self.scales.shape[0])

    def dequant(self) -> torch.Tensor:
        """``(code - zero[g_idx[k], n]) * scale[g_idx[k], n]`` in float64."""
        g = self.g_idx
        if self.codes.dtype.is_floating_point:
            return self.codes.to(torch.float64) * self.scales.to(torch.float64)[g]
        return (self.codes - self.zeros[g]).to(torch.float64) * self.scales.to(torch.float64)[g]


def weights(k: int, n: int, gen: torch.Generator, std: float = 0.05) -> torch.Tensor:
    """A float weight matrix with the heavy-ish tails of trained layers: normal, with a few
    columns (output channels) scaled up."""
    w = torch.randn(k, n, generator=gen, dtype=torch.float64) * std
    col_scale = torch.exp(torch.randn(1, n, generator=gen, dtype=torch.float64) * 0.5)
    return w * col_scale


def group_index(k: int, group_size: int) -> torch.Tensor:
    return torch.arange(k, dtype=torch.int64) // group_size


def _grouped(w: torch.Tensor, group_size: int) -> torch.Tensor:
    k, n = w.shape
    return w.reshape(k // group_size, group_size, n)


def quantize_sym(w: torch.Tensor, bits: int, group_size: int, sdtype: torch.dtype) -> QuantWeight:
    """GPTQ-style symmetric quantization with the type's bias ``2**(bits-1)`` (uint4b8,
    uint8b128 ...): ``scale = max(max/(bias-1), min/-bias)`` per group and column."""
    k, n = w.shape
    group_size = k if group_size == -1 else group_size
    if k % group_size:
        raise ValueError(f"group size {group_size} does not divide K={k}")
    bias = 1 << (bits - 1)
    g = _grouped(w, group_size)
    hi = (g.amax(dim=1) / (bias - 1)).abs()
    lo = (g.amin(dim=1) / -bias).abs()
    scales = torch.maximum(hi, lo).clamp(min=1e-6).to(sdtype)
    s = scales.to(torch.float64)[:, None, :]
    codes = (torch.round(g / s) + bias).clamp(0, 2 * bias - 1).to(torch.int64).reshape(k, n)
    zeros = torch.full_like(scales, bias, dtype=torch.int64)
    return QuantWeight(codes, scales, zeros, group_index(k, group_size), bits)


def quantize_zp(w: torch.Tensor, bits: int, group_size: int, sdtype: torch.dtype,
                zero_min: int = 0) -> QuantWeight:
    """AWQ-style asymmetric quantization: ``scale = (max - min) / maxq``,
    ``zero = round(-min / scale)`` clamped to ``[zero_min, maxq]`` (GPTQ's v1 format cannot
    store a zero point of 0: it keeps ``zero - 1``)."""
    k, n = w.shape
    group_size = k if group_size == -1 else group_size
    if k % group_size:
        raise ValueError(f"group size {group_size} does not divide K={k}")
    maxq = (1 << bits) - 1
    g = _grouped(w, group_size)
    lo, hi = g.amin(dim=1), g.amax(dim=1)
    scales = ((hi - lo).clamp(min=1e-5) / maxq).to(sdtype)
    s = scales.to(torch.float64)
    zeros = torch.round(-lo / s).clamp(zero_min, maxq).to(torch.int64)
    codes = (torch.round(g / s[:, None, :]) + zeros[:, None, :]).clamp(0, maxq)
    return QuantWeight(codes.to(torch.int64).reshape(k, n), scales, zeros,
                       group_index(k, group_size), bits)


def quantize_fp8(w: torch.Tensor, group_size: int, sdtype: torch.dtype) -> QuantWeight:
    """FP8 (e4m3fn) weights with a scale per group and column: ``scale = amax / 448``."""
    k, n = w.shape
    group_size = k if group_size == -1 else group_size
    g = _grouped(w, group_size)
    scales = (g.abs().amax(dim=1) / 448.0).clamp(min=1e-8).to(sdtype)
    s = scales.to(torch.float64)[:, None, :]
    codes = (g / s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).reshape(k, n)
    zeros = torch.zeros_like(scales, dtype=torch.int64)
    return QuantWeight(codes, scales, zeros, group_index(k, group_size), 8)


def shuffle_rows(qw: QuantWeight, gen: torch.Generator) -> QuantWeight:
    """Act order (``desc_act``): the rows of a group-quantized weight in a random order, so
    ``g_idx`` is no longer sorted (what GPTQ checkpoints with act order hold)."""
    p = torch.randperm(qw.size_k, generator=gen)
    return replace(qw, codes=qw.codes[p].contiguous(), g_idx=qw.g_idx[p].contiguous())


def sort_rows(qw: QuantWeight) -> tuple[QuantWeight, torch.Tensor]:
    """Rows sorted by group (stable), as Marlin stores act-order weights, and the sort indices
    (``perm``: sorted row ``i`` is original row ``perm[i]``)."""
    perm = torch.argsort(qw.g_idx, stable=True)
    return replace(qw, codes=qw.codes[perm].contiguous(), g_idx=qw.g_idx[perm].contiguous()), perm
