"""Input helpers shared by problem modules."""

from __future__ import annotations

import math

import pytest
import torch

from operators.inputs import HIDDEN_MAX_NUMEL, bounded, broadcast_shapes


def test_bounded_halves_the_largest_dims_until_under_the_cap() -> None:
    assert bounded([39, 25, 35, 2626]) == bounded([39, 25, 35, 2626])  # deterministic
    capped = bounded([39, 25, 35, 2626])
    assert math.prod(capped) <= HIDDEN_MAX_NUMEL
    assert capped[:3] == [39, 25, 35] and capped[3] < 2626  # only the largest dim shrank
    assert bounded([7, 9, 3]) == [7, 9, 3]  # small shapes are left alone
    assert bounded([]) == []


def test_bounded_keeps_dims_and_bounds_what_size_of_measures() -> None:
    # An output that is the shape's numel times 1000: the bound applies to that.
    shape = bounded([300, 300, 300], max_numel=10**7, keep=(0,),
                    size_of=lambda s: math.prod(s) * 1000)
    assert shape[0] == 300 and math.prod(shape) * 1000 <= 10**7
    # Nothing left to shrink: returns what it can rather than looping.
    assert bounded([1, 1, 5000], max_numel=10, keep=(-1,)) == [1, 1, 5000]


def test_broadcast_shapes_is_torchs() -> None:
    assert broadcast_shapes((3, 1, 5), (4, 1), torch.Size([1])) == torch.Size([3, 4, 5])
    assert isinstance(broadcast_shapes((2,)), torch.Size)
    assert broadcast_shapes() == torch.Size([])
    with pytest.raises(RuntimeError):
        broadcast_shapes((2, 3), (4,))
