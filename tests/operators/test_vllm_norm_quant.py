"""The fused RMS-norm quantizers' tie band covers float16 subnormal roundings of ``y``."""

from __future__ import annotations

import torch

from operators.spec import unit_roundoff
from operators.vllm import _norm_quant
from operators.vllm._act_quant import FP8, SLACK, fp8_code_position, fp8_half_quantum, quantized

HIDDEN = 64


def _rows() -> torch.Tensor:
    """One row per float16 subnormal k * 2**-24 in column 1; column 0 holds 3 (the group max),
    the rest 1, so y[:, 1] (~k * 2**-24 * 0.99) stays a float16 subnormal near fp8's low codes."""
    k = torch.arange(1, 1024, dtype=torch.float64)
    x = torch.ones(len(k), HIDDEN, dtype=torch.float64)
    x[:, 0] = 3.0
    x[:, 1] = k * 2.0 ** -24
    return x.half()


def _expect() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    x = _rows()
    w = torch.full((HIDDEN,), 1.125, dtype=torch.float16)
    out, _, _, _ = _norm_quant.reference(x, None, w, 1e-6, FP8, None, HIDDEN)
    scales = torch.empty(x.shape[0], 1)
    got = _norm_quant.torch_norm_quant(x, w, 1e-6, FP8, None, None, HIDDEN, scales)
    return out.value[:, 1], out.scale[:, 1], got[:, 1].double(), out.scale[:, 2]


def _neighbours(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The e4m3fn grid points just below and above |v| (v below 2**-6: the subnormal grid)."""
    q = 2 * fp8_half_quantum(v)
    lo = torch.floor(v.abs() / q) * q
    return lo, lo + q


def test_float16_pipeline_is_accepted() -> None:
    # vLLM's own path (two roundings to float16, subnormal here) must pass its reference.
    value, allowed, got, _ = _expect()
    assert ((got - value).abs() <= allowed).all()


def test_near_tie_accepts_both_neighbours_far_one_only_correct_and_never_two() -> None:
    value, allowed, _, _ = _expect()
    pos = fp8_code_position(value.abs())
    dist = (pos - pos.floor() - 0.5).abs() * 2 * fp8_half_quantum(value)  # to the tie, absolute
    lo, hi = _neighbours(value)
    ok_lo = (lo - value.abs()).abs() <= allowed
    ok_hi = (hi - value.abs()).abs() <= allowed
    near = dist < 0.5 * (allowed - fp8_half_quantum(value))
    far = dist > 2 * (allowed - fp8_half_quantum(value))
    assert near.any() and far.any()
    assert (ok_lo & ok_hi)[near].all()
    assert (ok_lo ^ ok_hi)[far].all()
    two = hi + 2 * fp8_half_quantum(value)
    assert not ((two - value.abs()).abs() <= allowed).any()
    assert not (((lo - 2 * fp8_half_quantum(value)) - value.abs()).abs() <= allowed).any()


def test_subnormal_band_is_absolute_and_capped() -> None:
    # Outside float16's subnormals (column 2: y ~ 0.37) the widening is negligible; never
    # more than one quantum in all.
    x = _rows()
    w = torch.full((HIDDEN,), 1.125, dtype=torch.float16)
    out, _, _, _ = _norm_quant.reference(x, None, w, 1e-6, FP8, None, HIDDEN)
    rel = 2 * (2 * unit_roundoff(torch.float16) + SLACK)
    extra = out.scale - quantized(out.value, FP8, rel=rel).scale
    assert (extra[:, 2] < 1e-4).all() and (extra[:, 1] > 1e-6).all()
    assert (out.scale <= 2 * fp8_half_quantum(out.value) + rel * out.value.abs()).all()
