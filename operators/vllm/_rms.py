"""What vLLM's RMS-norm problems share (``rms_norm``, ``fused_add_rms_norm``, the fused
norm-and-quantize problems and ``fused_qk_norm_rope``). Registers nothing.

- :func:`normalized64`: one RMS normalization in float64 and each element's conditioning.
  The mean of squares has only non-negative terms, so it is well conditioned: an output's error
  is a few roundings relative to ``|z_i| * |w_i| / rms``, whatever the row's length.
- ``FLOATS``, ``GRID`` and :func:`grid_cases`: the dtypes vLLM's norm kernels take and the
  published benchmark's case grid (tokens x hidden x eps x weight).
- :func:`rows_input`: a ``[tokens, hidden]`` activation whose rows may be strided (a column
  slice of a wider tensor, as vLLM passes slices of fused projections).
- :func:`torch_rms_norm`: PyTorch's fused RMS norm (float32 accumulation), the baselines'
  fallback where vLLM is not installed.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from operators.inputs import randn
from operators.spec import Case, case

FLOATS = ("float16", "bfloat16", "float32")
# The published benchmark's rms_norm grid (tokens, hidden).
GRID = ((1, 32), (71, 497), (128, 512), (1024, 4096), (5333, 8192))


def grid_cases(entry: str, existing: list[Case],
               shape_of: Callable[[str, tuple[int, int]], tuple[int, int]] | None = None
               ) -> list[Case]:
    """The published grid, GRID x FLOATS x eps {1e-6, 1e-5} x weight {ones, randn}, less the
    cases already in ``existing``; ``shape_of(dtype, shape)`` may shrink a shape (to fit the
    correctness-case budget)."""
    names = {c.name for c in existing}
    out = []
    for shape in GRID:
        for dt in FLOATS:
            sized = shape_of(dt, shape) if shape_of is not None else shape
            for eps in (1e-6, 1e-5):
                for w in ("ones", "randn"):
                    c = case(entry, dt, sized, eps=eps, weight=w)
                    if c.name not in names:
                        out.append(c)
    return out


def rms64(z64: torch.Tensor, eps: float) -> torch.Tensor:
    """``sqrt(mean(z**2, last dim) + eps)`` with the last dim kept, in z64's precision."""
    return torch.sqrt(z64.pow(2).mean(dim=-1, keepdim=True) + eps)


def normalized64(z64: torch.Tensor, w64: torch.Tensor,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(z / rms(z) * w, |z| * |w| / rms(z))``: the normalized rows and their conditioning."""
    rms = rms64(z64, eps)
    return z64 / rms * w64, z64.abs() * w64.abs() / rms


def rows_input(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator, *,
               row_pad: int = 0, std: float = 1.0) -> torch.Tensor:
    """Normal values of ``shape``; with ``row_pad`` a column slice of a tensor ``row_pad``
    columns wider, so rows are strided by ``hidden + row_pad`` (the last dim stays dense)."""
    if not row_pad:
        return randn(shape, dtype, gen, std=std)
    wide = randn((*shape[:-1], shape[-1] + row_pad), dtype, gen, std=std)
    return wide[..., :shape[-1]]


def torch_rms_norm(z: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """PyTorch's RMS norm of the last dim (it accumulates 16-bit inputs in float32)."""
    return torch.nn.functional.rms_norm(z, (z.shape[-1],), weight, eps)
