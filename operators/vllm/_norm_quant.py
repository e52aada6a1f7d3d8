"""What ``rms_norm_dynamic_per_token_quant`` and ``rms_norm_per_block_quant`` share (vLLM 0.13.0,
csrc/quantization/fused_kernels/): an optional residual add, RMS norm and dynamic quantization
in one pass over each token. Registers nothing.

Semantics per token row (``input`` and ``residual`` contiguous ``[..., hidden]``, one dtype):
``z = input + residual`` in float32 (residual, when given, is overwritten with ``z`` rounded to
the dtype); ``y = dt(dt(z * rsqrt(mean(z**2) + eps)) * weight)`` — vLLM rounds the normalized
value to the input dtype ``dt`` twice before quantizing; per token (or per group of
``group_size`` consecutive columns) ``scale = max(min(max|y|, scale_ub) / qmax, min_scale)``
(``scale_ub`` fp8 only; qmax 448 / 127, min_scale 1/(448*512) / float32 eps), then
``q = quant(y / scale)`` (fp8: saturate, nearest; int8: ``rne(y * (1 / scale))`` saturated).

**Tolerance.** The reference is exact (float64, no intermediate rounding). The two roundings to
``dt`` move ``y`` by up to ``2u`` (u: dt's unit roundoff) and the scale, a max of such values,
as much again, so the pre-rounding quotient of a faithful kernel lies within ``4u + SLACK`` of
the exact one, relative: the tie band of :func:`_quant.quantized` widens by that. For fp8
outputs that stays under 5/8 of a quantum; for int8 from bfloat16 (u = 2**-9, |q| up to 127) it
reaches one quantum — bfloat16 carries less precision than int8 near the top of its range, so
two faithful kernels (or vLLM and a float32 path) may differ by one level there. Scales allow
``2u + SLACK`` relative; the residual ``2u``.

The relative bound ``u`` holds only in ``dt``'s normal range: a value rounded to a float16
subnormal (|y| < 2**-14, e.g. a tiny input element in a group whose max is ~3) is off by up to
half the subnormal spacing, ``eta`` = 2**-25 absolute, about 1e-3 relative there. So each
rounding to ``dt`` also contributes ``eta`` absolute: ``(1 + |w|) * eta`` for ``y`` (the first
one is scaled by the weight), the same with ``max|w|`` for the group max. These terms are tiny
outside subnormals; they widen the tie band by at most half a quantum (capped), so an output is
still never accepted one full quantum from its nearest grid point's neighbour.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from operators.spec import Call, Case, Cost, Expected, Out, unit_roundoff
from operators.vllm._act_quant import (
    FP8,
    SLACK,
    approx,
    fp8_half_quantum,
    min_scale,
    qmax,
    quantized,
    torch_quantize,
)
from operators.vllm._rms import rms64, rows_input, torch_rms_norm

# One program per token row. GROUP == 0: per-token scale (three passes: sum of squares, max,
# quantize); GROUP > 0: per-group scales, BLOCK_N == GROUP, each group quantized once its max
# is known (the sum of squares takes wider BLOCK_SS steps). The residual is written in the
# last pass, after every read of it.
KERNEL = r'''

@triton.jit
def _normed(x_ptr, r_ptr, w_ptr, row, cols, mask, inv, HAS_RES: tl.constexpr):
    # y = dt(dt(z * inv) * w) for one block of a row, in float32 (vLLM rounds to dt twice).
    z = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RES:
        z += tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    zn = (z * inv).to(w_ptr.dtype.element_ty).to(tl.float32)
    return (zn * w.to(tl.float32)).to(w_ptr.dtype.element_ty).to(tl.float32), z


@triton.jit
def _quant(y, scale, IS_FP8: tl.constexpr):
    if IS_FP8:
        return _e4m3(y / scale)
    return _int8(y * (1.0 / scale))


@triton.jit
def _norm_quant_kernel(x_ptr, r_ptr, w_ptr, o_ptr, s_ptr, ub_ptr, n_cols, eps,
                       s_row_stride, s_group_stride, min_scale, qmax,
                       HAS_RES: tl.constexpr, HAS_UB: tl.constexpr, IS_FP8: tl.constexpr,
                       GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_SS: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    row = pid * n_cols
    cols0 = tl.arange(0, BLOCK_N)
    ss = tl.zeros([BLOCK_SS], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SS):
        cols = start + tl.arange(0, BLOCK_SS)
        mask = cols < n_cols
        z = tl.load(x_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_RES:
            z += tl.load(r_ptr + row + cols, mask=mask, other=0.0).to(tl.float32)
        ss += z * z
    inv = tl.rsqrt(tl.sum(ss, axis=0) / n_cols + eps)
    if GROUP == 0:
        amax = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + cols0
            mask = cols < n_cols
            y, z = _normed(x_ptr, r_ptr, w_ptr, row, cols, mask, inv, HAS_RES)
            amax = tl.maximum(amax, tl.abs(y))
        top = tl.max(amax, axis=0)
        if HAS_UB:
            top = tl.minimum(top, tl.load(ub_ptr))
        scale = tl.maximum(top / qmax, min_scale)
        tl.store(s_ptr + pid * s_row_stride, scale)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + cols0
        mask = cols < n_cols
        y, z = _normed(x_ptr, r_ptr, w_ptr, row, cols, mask, inv, HAS_RES)
        if GROUP > 0:
            top = tl.max(tl.abs(y), axis=0)
            if HAS_UB:
                top = tl.minimum(top, tl.load(ub_ptr))
            scale = tl.maximum(top / qmax, min_scale)
            tl.store(s_ptr + pid * s_row_stride + (start // GROUP) * s_group_stride, scale)
        q = _quant(y, scale, IS_FP8)
        tl.store(o_ptr + row + cols, q.to(o_ptr.dtype.element_ty), mask=mask)
        if HAS_RES:
            tl.store(r_ptr + row + cols, z.to(r_ptr.dtype.element_ty), mask=mask)


def _launch(input, weight, epsilon, quant_dtype, scale_ub, residual, output, scales, group):
    n_cols = input.shape[-1]
    n_rows = input.numel() // n_cols if n_cols else 0
    if n_rows == 0:
        return
    is_fp8 = quant_dtype == torch.float8_e4m3fn
    block_ss = min(1024, triton.next_power_of_2(n_cols))
    block_n = group if group else block_ss
    ub = scale_ub if scale_ub is not None else scales
    _norm_quant_kernel[(n_rows,)](
        input, residual if residual is not None else input, weight, output, scales, ub,
        n_cols, epsilon, scales.stride(0), scales.stride(1) if scales.dim() > 1 else 0,
        1.0 / (448.0 * 512.0) if is_fp8 else 1.1920928955078125e-07,
        448.0 if is_fp8 else 127.0,
        HAS_RES=residual is not None, HAS_UB=scale_ub is not None, IS_FP8=is_fp8,
        GROUP=group, BLOCK_N=block_n, BLOCK_SS=block_ss)
'''


def reference(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float,
              quant_dtype: torch.dtype, scale_ub: torch.Tensor | None,
              group: int) -> tuple[Expected, torch.Tensor, torch.Tensor, Expected | None]:
    """``(output expectation, scales, allowed scale error, residual expectation)``; scales are
    ``[rows, groups]`` float64 (``group`` 0: one group per row)."""
    hidden = x.shape[-1]
    u = unit_roundoff(x.dtype)
    rel_y = 2 * u + SLACK
    z = x.double().reshape(-1, hidden)
    if residual is not None:
        z = z + residual.double().reshape(-1, hidden)
    y = z / rms64(z, eps) * weight.double() if z.numel() else z
    groups = 1 if group == 0 else hidden // group
    yg = y.reshape(y.shape[0], groups, hidden // groups)
    top = yg.abs().amax(dim=2) if y.numel() else y.new_zeros(y.shape[0], groups)
    if scale_ub is not None:
        top = top.clamp(max=float(scale_ub))
    scales = (top / qmax(quant_dtype)).clamp(min=min_scale(quant_dtype))
    vg = yg / scales[:, :, None]
    y_eta, s_eta = _subnormal_bounds(weight, x.dtype, quant_dtype)
    # Absolute error of y / scale from dt's subnormal roundings (y's and the group max's).
    extra = (y_eta.reshape(groups, -1)[None] + vg.abs() * s_eta) / scales[:, :, None]
    out = widened(quantized(vg.reshape(x.shape), quant_dtype, rel=2 * rel_y),
                  extra.reshape(x.shape))
    res = None
    if residual is not None:
        zr = z.reshape(x.shape)
        res = approx(zr, residual.dtype, 2 * u * zr.abs())
    return out, scales, rel_y * scales + s_eta, res


def _subnormal_bounds(weight: torch.Tensor, dt: torch.dtype,
                      quant_dtype: torch.dtype) -> tuple[torch.Tensor, float]:
    """``(per-column absolute error of y, absolute error of a scale)`` from rounding to ``dt``
    below its normal range: ``eta`` (half the subnormal spacing) per rounding, the first scaled
    by |w| (see the module docstring). Zero for float32 inputs' purposes (2**-150)."""
    fi = torch.finfo(dt)
    eta = fi.smallest_normal * fi.eps / 2  # half the subnormal spacing: 2**-25 for float16
    w_abs = weight.double().abs()
    w_max = float(w_abs.max()) if w_abs.numel() else 0.0
    return (1 + w_abs) * eta, (1 + w_max) * eta / qmax(quant_dtype)


def widened(e: Expected, extra: torch.Tensor) -> Expected:
    """``e`` (a :func:`_act_quant.quantized` expectation) with its tie band widened by
    ``extra`` (absolute), capped at half a quantum so no answer two grid points away passes."""
    assert e.scale is not None, "a quantized expectation carries its tie band as its scale"
    half = fp8_half_quantum(e.value) if e.dtype == FP8 else torch.full_like(e.value, 0.5)
    return dataclasses.replace(e, scale=e.scale + torch.minimum(extra, half))


def torch_norm_quant(x: torch.Tensor, weight: torch.Tensor, eps: float,
                     quant_dtype: torch.dtype, scale_ub: torch.Tensor | None,
                     residual: torch.Tensor | None, group: int,
                     scales: torch.Tensor) -> torch.Tensor:
    """vLLM's semantics in PyTorch: float32 sum, PyTorch's RMS norm rounded to the dtype,
    times weight rounded again, then the per-token or per-group quantization. Writes
    ``scales`` (``[rows, groups]``, any strides) and the residual; returns the output."""
    hidden = x.shape[-1]
    z = x.float()
    if residual is not None:
        z = z + residual.float()
        residual.copy_(z)
    y = (torch_rms_norm(z, None, eps).to(x.dtype) * weight).float().reshape(-1, hidden)
    groups = 1 if group == 0 else hidden // group
    yg = y.reshape(y.shape[0], groups, hidden // groups)
    top = yg.abs().amax(dim=2) if y.numel() else y.new_zeros(y.shape[0], groups)
    if scale_ub is not None:
        top = top.clamp(max=scale_ub.reshape(()))
    s = (top / qmax(quant_dtype)).clamp(min=min_scale(quant_dtype))
    scales.copy_(s.reshape(scales.shape))
    v = yg / s[:, :, None] if quant_dtype == FP8 else yg * (1.0 / s[:, :, None])
    return torch_quantize(v, quant_dtype).reshape(x.shape)


def make_call(c: Case, gen: torch.Generator, *, group: int) -> Call:
    """Inputs of both fused norm-quant problems: activations, a weight near 1 (as trained RMS
    norms have), an optional residual, ``zero_rows`` padding tokens (input and residual zero),
    and scale_ub, the median row max of the normalized values (about half the tokens capped).
    ``group`` > 0 adds the per-block arguments (``group_size``, ``is_scale_transposed``)."""
    dt = c.torch_dtype
    shape = tuple(c.shape)
    hidden = shape[-1]
    x = rows_input(shape, dt, gen)
    weight = (rows_input((hidden,), torch.float64, gen) * 0.1 + 1.0).to(dt)
    quant_dtype = FP8 if c["quant"] == "fp8" else torch.int8
    kwargs: dict[str, Any] = {}
    outputs = [Out.ret(0), Out.ret(1)]
    if c.get("residual"):
        kwargs["residual"] = rows_input(shape, dt, gen)
        outputs.append(Out.arg("residual"))
    zero = int(c.get("zero_rows", 0))
    if zero:
        pick = torch.randperm(x.numel() // hidden, generator=gen)[:zero]
        for tensor in [x, *kwargs.values()]:
            tensor.view(-1, hidden)[pick] = 0
    if c.get("scale_ub"):
        z = (x.double() + kwargs["residual"].double()) if "residual" in kwargs else x.double()
        flat = z.reshape(-1, hidden)
        y = flat / rms64(flat, float(c["eps"])) * weight.double()
        top = y.abs().amax(dim=1) if y.numel() else torch.ones(1, dtype=torch.float64)
        kwargs["scale_ub"] = torch.tensor([float(top.median())], dtype=torch.float32)
    args: tuple[Any, ...] = (x, weight, float(c["eps"]), quant_dtype)
    if group:
        args += ([1, group],)
        if c.get("transposed"):
            kwargs["is_scale_transposed"] = True
    mutable: frozenset[int | str] = frozenset({"residual"} if "residual" in kwargs else ())
    return Call(c.entry, args, kwargs, outputs=tuple(outputs), mutable=mutable)


def cost(c: Case) -> Cost:
    n = math.prod(c.shape)
    size = c.torch_dtype.itemsize
    tokens = n // c.shape[-1] if c.shape[-1] else 0
    # Input read once (and the residual read and written), the quantized bytes and scales out.
    res = 2 * size * n if c.get("residual") else 0
    nbytes = size * n + res + n + size * c.shape[-1] + 4 * tokens
    return Cost(flops=8.0 * n, bytes=float(nbytes), dtype=c.dtype)
