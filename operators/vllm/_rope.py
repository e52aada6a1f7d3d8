"""What vLLM's rotary-embedding problems share (``rotary_embedding``, ``fused_qk_norm_rope``):
the cos/sin cache vLLM builds. Registers nothing."""

from __future__ import annotations

import torch


def cos_sin_cache(max_position: int, rot_dim: int, base: float, dtype: torch.dtype) -> torch.Tensor:
    """vLLM's cache: row p = [cos(p * inv_freq), sin(p * inv_freq)], in fp64 then rounded."""
    inv_freq = 1.0 / (base ** (torch.arange(0, rot_dim, 2, dtype=torch.float64) / rot_dim))
    freqs = torch.arange(max_position, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([freqs.cos(), freqs.sin()], dim=-1).to(dtype)
