"""What the random problems share: the seeding helper their solutions start with, and the
placeholder expectation (the value is only a shape; a distribution judge decides)."""

from __future__ import annotations

import torch

from operators.spec import Expected

# Each call draws from a fresh Philox stream: torch's seed (or the given generator's) mixed with
# a per-process call counter, so two calls never repeat their samples (the agent checks).
SEED_HELPER = r'''
_CALLS = [0]


def _seed(generator=None):
    base = generator.initial_seed() if generator is not None else torch.initial_seed()
    _CALLS[0] += 1
    return (base * 1000003 + _CALLS[0] * 7919) % 2147483647
'''


def judged(shape: torch.Size | tuple[int, ...], dtype: torch.dtype, judge: object) -> Expected:
    """An output of ``shape`` and ``dtype`` whose values the distribution ``judge`` checks."""
    return Expected(torch.zeros(tuple(shape), dtype=torch.float64), dtype, judge=judge)
