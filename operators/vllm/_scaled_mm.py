"""What ``cutlass_scaled_mm`` and ``cutlass_scaled_mm_azp`` share: real int8/fp8 quantization
of float activations and weights, the float64 reference with its conditioning, the input checks
vLLM 0.13 makes (so the PyTorch baseline fails bad input as vLLM does), the Triton kernel of the
reference solutions, and the cost model.

vLLM 0.13's epilogues (``scaled_mm_epilogues_c3x.hpp``): ``out = scale_a * (scale_b *
float(acc)) + bias`` rounded once to the output dtype, with ``acc`` the int32 (int8) or float32
(fp8) accumulation of ``a @ b`` and, for the zero-point variant, ``acc - azp * azp_adj`` (per
token) or ``acc - azp_adj`` (per tensor, ``azp`` folded into ``azp_adj``) in int32 first.
Tolerance, relative to each output's conditioning ``|sa sb| (sum_k |a||b| + |azp azp_adj|) +
|bias|``: 3 units of the output dtype and ``K`` float32 units (the worst case of a float32
accumulation, which fp8 tensor cores use).
"""

from __future__ import annotations

import torch

from operators.spec import Case, Cost, Expected, OperatorSpec, Tolerance, unit_roundoff
from operators.vllm._vllm_ops import library

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


def qtype(name: str) -> torch.dtype:
    return {"int8": torch.int8, "fp8": FP8}[name]


def quantize_rows(x: torch.Tensor, dt: torch.dtype, per_row: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric quantization of float rows ``x`` [R, K] to int8 (round to nearest) or e4m3
    (the cast, saturating), with a float32 scale per row ([R, 1]) or per tensor ([1])."""
    amax = x.abs().amax(dim=1, keepdim=True) if per_row else x.abs().amax().reshape(1, 1)
    top = 127.0 if dt == torch.int8 else FP8_MAX
    scale = (amax / top).clamp(min=1e-10).to(torch.float32)
    y = x / scale.double()
    if dt == torch.int8:
        q = torch.round(y).clamp(-128, 127).to(torch.int8)
    else:
        q = y.clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q, scale if per_row else scale.reshape(1)


def quantize_asym(x: torch.Tensor, per_row: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Asymmetric int8 (vLLM's ``scaled_int8_quant(symmetric=False)``): scale = (max - min) /
    255, azp = round(-128 - min / scale), q = clamp(round(x / scale) + azp). Returns (q, scale,
    azp) with scale [R, 1] or [1] float32 and azp [R] or [1] int32."""
    lo = x.amin(dim=1, keepdim=True) if per_row else x.amin().reshape(1, 1)
    hi = x.amax(dim=1, keepdim=True) if per_row else x.amax().reshape(1, 1)
    lo, hi = lo.clamp(max=0.0), hi.clamp(min=0.0)
    scale = ((hi - lo) / 255).clamp(min=1e-10).to(torch.float32)
    azp = torch.round(-128 - lo / scale.double()).to(torch.int32)
    q = (torch.round(x / scale.double()) + azp).clamp(-128, 127).to(torch.int8)
    if per_row:
        return q, scale, azp.reshape(-1)
    return q, scale.reshape(1), azp.reshape(1)


def column_major(w_q: torch.Tensor) -> torch.Tensor:
    """``b`` [K, N] with stride (1, K): the transpose of the quantized weight [N, K]."""
    return w_q.t()


def expected(a: torch.Tensor, b: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor,
             out_dtype: torch.dtype, bias: torch.Tensor | None,
             correction: torch.Tensor | None = None) -> Expected:
    """``sa * sb * (a @ b - correction) + bias`` in float64 with its conditioning;
    ``correction`` [M, N] (int64) is the zero-point term."""
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    acc = a64 @ b64
    cond = a64.abs() @ b64.abs()
    if correction is not None:
        acc = acc - correction.double()
        cond = cond + correction.double().abs()
    s = sa.double().reshape(-1, 1) * sb.double().reshape(1, -1)
    value, scale = s * acc, s.abs() * cond
    if bias is not None:
        value = value + bias.double()
        scale = scale + bias.double().abs()
    return Expected(value, out_dtype, scale)


def tolerance(dtype: torch.dtype, k: int) -> Tolerance:
    u = unit_roundoff(dtype)
    return Tolerance(rtol=3 * u + k * unit_roundoff(torch.float32), atol=3 * torch.finfo(dtype).tiny)


def torch_scaled_mm(a: torch.Tensor, b: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor,
                    out_dtype: torch.dtype, bias: torch.Tensor | None,
                    correction: torch.Tensor | None = None) -> torch.Tensor:
    """The PyTorch baseline: a float32 GEMM of the quantized values (exact products; the
    int32 sum rounded as float32 accumulates), then vLLM's epilogue."""
    acc = a.to(torch.float32) @ b.to(torch.float32)
    if correction is not None:
        acc = acc - correction.to(torch.float32)
    y = sa.reshape(-1, 1) * (sb.reshape(1, -1) * acc)
    if bias is not None:
        y = y + bias.to(torch.float32)
    return y.to(out_dtype)


def require(cond: bool, msg: str, exc: type[Exception] = RuntimeError) -> None:
    """vLLM's ``TORCH_CHECK`` (RuntimeError) or Python ``assert`` (AssertionError)."""
    if not cond:
        raise exc(msg)


def mm_cost(m: int, n: int, k: int, in_dtype: str, out_dtype: torch.dtype, extra: float = 0.0) -> Cost:
    """Tensor-core MACs at the 8-bit input's rate; bytes: both operands once, the output, the
    scales/bias/zero points in ``extra``."""
    rate = "int8" if in_dtype == "int8" else "float8_e4m3fn"
    return Cost(flops=2.0 * m * n * k,
                bytes=float(m * k + k * n + m * n * out_dtype.itemsize) + extra, dtype=rate)


class ScaledMmSpec(OperatorSpec):
    """Base: the tolerance depends on K (``shape = (M, K, N)``); vLLM is the baseline where it
    runs."""

    def tolerance(self, c: Case, dtype: torch.dtype) -> Tolerance:
        if not dtype.is_floating_point:
            return Tolerance(0.0, 0.0)
        return tolerance(dtype, c.shape[1])

    def baseline_library(self) -> str:
        return library()


# Negative-control rewrite both problems use: the bias added to the accumulator before the scales.
BIAS_FIRST = ("    y = sa * (sb * acc.to(tl.float32))\n    if HAS_BIAS:\n"
              "        y = y + tl.load(bias_ptr + bn).to(tl.float32)[None, :]\n",
              "    y = acc.to(tl.float32)\n    if HAS_BIAS:\n"
              "        y = y + tl.load(bias_ptr + bn).to(tl.float32)[None, :]\n    y = sa * (sb * y)\n")

KERNEL = r'''
import torch
import triton
import triton.language as tl


@triton.jit
def _scaled_mm_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, bias_ptr, azp_ptr, adj_ptr, c_ptr, M, N, K,
                      sam, sak, sbk, sbn, SA_ROWS: tl.constexpr, SB_COLS: tl.constexpr,
                      HAS_BIAS: tl.constexpr, AZP: tl.constexpr, IS_INT: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # AZP: 0 none, 1 acc - azp_adj[n] (per tensor), 2 acc - azp[m] * azp_adj[n] (per token).
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mmask = rm < M
    nmask = rn < N
    am = tl.where(mmask, rm, 0).to(tl.int64)
    bn = tl.where(nmask, rn, 0).to(tl.int64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32 if IS_INT else tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        kmask = rk < K
        kk = tl.where(kmask, rk, 0).to(tl.int64)
        a = tl.load(a_ptr + am[:, None] * sam + kk[None, :] * sak)
        a = tl.where(kmask[None, :], a, tl.zeros_like(a))
        b = tl.load(b_ptr + kk[:, None] * sbk + bn[None, :] * sbn)
        if IS_INT:
            acc += tl.dot(a, b, out_dtype=tl.int32)
        else:
            acc += tl.dot(a, b)
    if AZP == 1:
        acc = acc - tl.load(adj_ptr + bn)[None, :]
    if AZP == 2:
        acc = acc - tl.load(azp_ptr + am)[:, None] * tl.load(adj_ptr + bn)[None, :]
    if SB_COLS:
        sb = tl.load(sb_ptr + bn)[None, :]
    else:
        sb = tl.load(sb_ptr)
    if SA_ROWS:
        sa = tl.load(sa_ptr + am)[:, None]
    else:
        sa = tl.load(sa_ptr)
    y = sa * (sb * acc.to(tl.float32))
    if HAS_BIAS:
        y = y + tl.load(bias_ptr + bn).to(tl.float32)[None, :]
    ptrs = c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(ptrs, y.to(c_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])


def _launch(a, b, scale_a, scale_b, out_dtype, bias, azp, azp_adj, azp_mode):
    M, K = a.shape
    N = b.shape[1]
    out = torch.empty((M, N), dtype=out_dtype, device=a.device)
    if M == 0 or N == 0:
        return out
    block_m = 16 if M <= 16 else 64
    dummy = scale_a
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, 64))
    _scaled_mm_kernel[grid](
        a, b, scale_a, scale_b, dummy if bias is None else bias,
        dummy if azp is None else azp, dummy if azp_adj is None else azp_adj, out, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        SA_ROWS=scale_a.numel() > 1, SB_COLS=scale_b.numel() > 1, HAS_BIAS=bias is not None,
        AZP=azp_mode, IS_INT=a.dtype == torch.int8,
        BLOCK_M=block_m, BLOCK_N=64, BLOCK_K=64)
    return out
'''
