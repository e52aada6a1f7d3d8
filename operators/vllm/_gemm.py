"""What the quantized-GEMM problems share: activations, the fp64 reference with its
conditioning, the tolerance, the cost model, vLLM's ``ScalarType`` stand-ins and the input
checks vLLM's kernels make (so the PyTorch baseline fails bad input as vLLM 0.13 does).

Tolerance of a weight-only-quantized GEMM ``out = a @ dequant(W)`` (+ bias), relative to each
element's conditioning ``sum_k |a[m,k]| |W[k,n]|`` (+ |bias|): the dequantized weight rounded
to the activation dtype before the tensor-core product (1 unit roundoff ``u`` of that dtype),
partial sums of a split-K reduction rounded to it (1 u), the output rounding (1 u), and the
float32 accumulation over K terms (``K * u_fp32``, the worst case of recursive summation).
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from operators.inputs import HIDDEN_MAX_NUMEL
from operators.spec import Case, Cost, Expected, OperatorSpec, Tolerance, unit_roundoff
from operators.vllm import _baseline

# vLLM 0.13 ``scalar_types`` the problems use: name -> (bits, bias). Candidates receive the name
# (a plain string) where vLLM passes a ``ScalarType``; the baseline maps it back with
# ``getattr(vllm.scalar_type.scalar_types, name)`` (its ``.id`` is what ``torch.ops._C`` gets).
SCALAR_TYPES: dict[str, tuple[int, int]] = {
    "uint4b8": (4, 8),
    "uint8b128": (8, 128),
    "uint4": (4, 0),
    "uint8": (8, 0),
    "float8_e4m3fn": (8, 0),
}
SCALAR_TYPE_IDS = {  # ScalarType.id of vLLM 0.13, for the record
    "uint4b8": 1125899907892224,
    "uint8b128": 1125899923621888,
    "uint4": 1125899906843648,
    "uint8": 1125899906844672,
    "float8_e4m3fn": 2814749767172868,
}


def vllm_ops(t: torch.Tensor) -> Any:
    """``vllm._custom_ops`` when vLLM imports and ``t`` lives where its kernels run (CUDA),
    else None: the problems' baselines then run their PyTorch implementation."""
    ops = _baseline.custom_ops()
    return ops if ops is not None and t.is_cuda else None


def vllm_scalar_type(name: str) -> Any:
    """vLLM's own ``ScalarType`` for a stand-in name (only where vLLM imports)."""
    return getattr(importlib.import_module("vllm.scalar_type").scalar_types, name)


def require(cond: bool, msg: str, exc: type[Exception] = RuntimeError) -> None:
    """vLLM's ``TORCH_CHECK`` (surfacing as RuntimeError) and friends, for the baselines."""
    if not cond:
        raise exc(msg)


def capped(k: int, n: int, k_step: int, n_step: int,
           limit: int = HIDDEN_MAX_NUMEL) -> tuple[int, int]:
    """A hidden case's weight dims halved (staying multiples of their steps) until K*N <= limit:
    random shapes need odd sizes, not huge ones (as :data:`operators.inputs.HIDDEN_MAX_NUMEL`)."""
    while k * n > limit:
        if k >= n and k > k_step:
            k = max(k_step, k // 2 // k_step * k_step)
        elif n > n_step:
            n = max(n_step, n // 2 // n_step * n_step)
        else:
            break
    return k, n


def activations(m: int, k: int, dtype: torch.dtype, gen: torch.Generator, *,
                row_pad: int = 0, outliers: bool = False) -> torch.Tensor:
    """``[M, K]`` activations, standard normal; ``outliers``: a few input channels 30x larger
    (as LLM hidden states have); ``row_pad``: rows strided by ``K + row_pad``."""
    a = torch.randn(m, k, generator=gen, dtype=torch.float64)
    if outliers and k:
        idx = torch.randperm(k, generator=gen)[: max(1, k // 64)]
        a[:, idx] *= 30.0
    a = a.to(dtype)
    if row_pad:
        wide = torch.zeros(m, k + row_pad, dtype=dtype)
        wide[:, :k] = a
        return wide[:, :k]
    return a


def gemm_expected(a: torch.Tensor, w_ref: torch.Tensor, out_dtype: torch.dtype,
                  bias: torch.Tensor | None = None) -> Expected:
    """``a @ w_ref (+ bias)`` in float64 with its conditioning ``|a| @ |w_ref| (+ |bias|)``."""
    a64 = a.to(torch.float64)
    value = a64 @ w_ref
    scale = a64.abs() @ w_ref.abs()
    if bias is not None:
        b64 = bias.to(torch.float64)
        value = value + b64
        scale = scale + b64.abs()
    return Expected(value, out_dtype, scale)


def gemm_tolerance(dtype: torch.dtype, k: int) -> Tolerance:
    """See the module docstring: ``3 u(dtype) + K u(fp32)`` relative to the conditioning."""
    u = unit_roundoff(dtype)
    return Tolerance(rtol=3 * u + k * unit_roundoff(torch.float32),
                     atol=3 * torch.finfo(dtype).tiny)


def gemm_cost(m: int, n: int, k: int, act_dtype: str, weight_bytes: float,
              other_bytes: float = 0.0, macs: float | None = None) -> Cost:
    """2 FLOPs per multiply-add at the activation dtype's tensor-core rate (the weights are
    dequantized to it); bytes: activations, packed weights, scales/zeros/..., output."""
    size = torch.empty((), dtype=getattr(torch, act_dtype)).element_size()
    macs = float(m) * n * k if macs is None else macs
    return Cost(flops=2.0 * macs,
                bytes=float(size * (m * k + m * n)) + weight_bytes + other_bytes,
                dtype=act_dtype)


class VllmSpec(OperatorSpec):
    """Base of these problems: vLLM's kernel is the baseline where vLLM runs (see
    :func:`vllm_ops`), PyTorch elsewhere."""

    def baseline_library(self) -> str:
        return _baseline.library()


class QuantGemmSpec(VllmSpec):
    """Base of the quantized GEMMs: :func:`gemm_tolerance` with the case's K (``shape[1]``)."""

    def tolerance(self, c: Case, dtype: torch.dtype) -> Tolerance:
        return gemm_tolerance(dtype, c.shape[1])
