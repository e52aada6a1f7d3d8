"""hadacore_transform: the reference is the Sylvester transform, its bound admits vLLM's
round-wise arithmetic (each 16-point round rounded to the dtype) while staying tight, and bad
input fails as vLLM 0.13's TORCH_CHECKs do."""

from __future__ import annotations

import math

import pytest
import torch

import operators
from operators.checking import check
from operators.vllm import hadacore_transform as H


def _sylvester(n: int) -> torch.Tensor:
    i = torch.arange(n)
    bits = (i[:, None] & i[None, :]).tolist()
    return torch.tensor([[(-1.0) ** bin(v).count("1") for v in row] for row in bits],
                        dtype=torch.float64)


@pytest.mark.parametrize("n", [2, 8, 32, 128, 512])
def test_reference_is_the_normalized_sylvester_transform(n: int) -> None:
    x = torch.randn(3, n, generator=torch.Generator().manual_seed(n)).to(torch.bfloat16)
    value, bound = H.hadamard_with_bound(x)
    assert torch.allclose(value, x.double() @ _sylvester(n) / math.sqrt(n), rtol=1e-12, atol=1e-12)
    assert bool((bound > 0).all())
    twice, _ = H.hadamard_with_bound(value.to(torch.float64))  # an involution
    assert torch.allclose(twice, x.double(), atol=1e-12)


def _vllm_rounds(x: torch.Tensor) -> torch.Tensor:
    """vLLM's arithmetic, emulated: 16-point rounds over 4 index bits (low bits first), each
    exact and rounded to the dtype (the tensor cores' accumulation is exact for 16 terms)."""
    n = x.shape[-1]
    logn = n.bit_length() - 1
    z = x.reshape(-1, n).double()
    for lo in range(0, logn, 4):
        z = H._round(z, lo, min(lo + 4, logn), "signed").to(x.dtype).double()
    return z.reshape(x.shape).to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", [16, 64, 1024, 8192])
def test_bound_admits_vllms_rounds_and_stays_tight(dtype: torch.dtype, n: int) -> None:
    gen = torch.Generator().manual_seed(n)
    x = (torch.randn(8, n, generator=gen, dtype=torch.float64) * 3).to(dtype)
    value, bound = H.hadamard_with_bound(x)
    expected = operators.Expected(value, dtype, bound)
    tol = operators.Tolerance(1.0)
    assert check(_vllm_rounds(x), expected, tol) is None
    # Not the elementwise worst case (~sqrt(n) units): a few dozen units of the rms output at
    # most, so a transform 40 units off is caught whatever n is.
    u = H.unit_roundoff(dtype)
    rms = value.pow(2).mean().sqrt()
    assert float(bound.max() / rms) < (100 if dtype == torch.float16 else 30) * u
    assert check((value * (1 + 40 * u)).to(dtype), expected, tol) is not None


def test_bad_input_fails_as_vllm_does() -> None:
    spec = operators.get("vllm::hadacore_transform")
    with pytest.raises(RuntimeError, match="Only fp16 and bf16 supported currently"):
        spec.baseline(operators.Call("hadacore_transform", (torch.ones(2, 8),)))
    with pytest.raises(RuntimeError, match="up to 2\\^15 are supported, got 48"):
        spec.baseline(operators.Call("hadacore_transform", (torch.ones(2, 48, dtype=torch.half),)))
