"""Deterministic input construction for problem modules.

Every helper draws from an explicit CPU ``torch.Generator`` so the same (case, seed) always
gives the same tensors, on any machine. Layouts let a case ask for non-contiguous inputs: the
values are the same logical tensor, only the strides differ.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import cast

import torch

from operators.spec import dtype_from_name

LAYOUTS = ("contiguous", "transposed", "strided")

# Random hidden shapes are capped at this many elements: a product of independently drawn dims
# can otherwise reach billions (several GB per case, past the worker channel's frame limit), and
# a hidden case needs odd sizes, not big ones.
HIDDEN_MAX_NUMEL = 1 << 24


def _shape(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(d) for d in shape)


def broadcast_shapes(*shapes: Sequence[int]) -> torch.Size:
    """``torch.broadcast_shapes`` with a type: torch's own is unannotated, so strict mypy
    rejects every direct call."""
    return cast(Callable[..., torch.Size], torch.broadcast_shapes)(*shapes)


def bounded(shape: Sequence[int], max_numel: int = HIDDEN_MAX_NUMEL, *,
            keep: Sequence[int] = (),
            size_of: Callable[[list[int]], int] = math.prod) -> list[int]:
    """``shape`` with its largest dim (outside ``keep``) halved, rounding up, until
    ``size_of(shape)`` is at most ``max_numel``. Deterministic, so a seed still names one case;
    ``size_of`` lets a case bound its output rather than its input."""
    out = [int(d) for d in shape]
    kept = {k % len(out) for k in keep} if out else set()
    while size_of(out) > max_numel:
        free = [i for i in range(len(out)) if i not in kept and out[i] > 1]
        if not free:
            break
        i = max(free, key=lambda j: out[j])
        out[i] = (out[i] + 1) // 2
    return out


def with_layout(t: torch.Tensor, layout: str) -> torch.Tensor:
    """The same values as ``t`` laid out as asked.

    ``transposed``: the last two dims are stored swapped (as ``x.mT`` of a contiguous tensor).
    ``strided``: every element of the last dim is followed by a gap (a ``[..., ::2]`` slice).
    """
    if layout == "contiguous" or t.dim() == 0:
        return t.contiguous()
    if layout == "transposed":
        if t.dim() < 2:
            return t.contiguous()
        return t.mT.contiguous().mT
    if layout == "strided":
        big = torch.empty(*t.shape[:-1], t.shape[-1] * 2, dtype=t.dtype)
        big.zero_()
        view = big[..., ::2]
        view.copy_(t)
        return view
    raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")


def randn(shape: Sequence[int], dtype: str | torch.dtype, gen: torch.Generator, *,
          std: float = 1.0, mean: float = 0.0, layout: str = "contiguous") -> torch.Tensor:
    """Normal values, rounded to ``dtype``."""
    dt = dtype_from_name(dtype) if isinstance(dtype, str) else dtype
    base = torch.randn(_shape(shape), generator=gen, dtype=torch.float64) * std + mean
    return with_layout(base.to(dt), layout)


def uniform(shape: Sequence[int], dtype: str | torch.dtype, gen: torch.Generator, *,
            low: float = -1.0, high: float = 1.0, layout: str = "contiguous") -> torch.Tensor:
    """Uniform values in ``[low, high)``, rounded to ``dtype``."""
    dt = dtype_from_name(dtype) if isinstance(dtype, str) else dtype
    base = torch.rand(_shape(shape), generator=gen, dtype=torch.float64) * (high - low) + low
    return with_layout(base.to(dt), layout)


def randint(shape: Sequence[int], dtype: str | torch.dtype, gen: torch.Generator, *,
            low: int, high: int, layout: str = "contiguous") -> torch.Tensor:
    """Integers in ``[low, high)``."""
    dt = dtype_from_name(dtype) if isinstance(dtype, str) else dtype
    base = torch.randint(low, high, _shape(shape), generator=gen, dtype=torch.int64)
    return with_layout(base.to(dt), layout)


def scalar(gen: torch.Generator, choices: Sequence[float]) -> float:
    """One of ``choices``, picked by ``gen``."""
    i = int(torch.randint(0, len(choices), (1,), generator=gen).item())
    return float(choices[i])


def sprinkle_specials(t: torch.Tensor, gen: torch.Generator, fraction: float = 0.01) -> torch.Tensor:
    """A copy of float tensor ``t`` with a few elements replaced by inf, -inf and nan."""
    out = t.clone()
    flat = out.view(-1) if out.is_contiguous() else None
    if flat is None or out.numel() == 0:
        return out
    n = max(1, min(out.numel(), int(out.numel() * fraction)))
    # distinct positions: assigning twice to one index is nondeterministic in PyTorch
    idx = torch.randperm(out.numel(), generator=gen)[:n]
    vals = torch.tensor([float("inf"), float("-inf"), float("nan")], dtype=out.dtype)
    flat[idx] = vals[torch.arange(n) % 3]
    return out
