"""The BLAS-1 problems' shared cases and inputs (operators/cublas/_level1.py)."""

from __future__ import annotations

import math
import random

import torch

from operators.cublas import _blas, _level1
from operators.spec import Tier, case


def test_the_grid_crosses_sizes_and_increments_once_each_after_the_given_cases() -> None:
    first = [case("f", "float32", (71,), incx=1, incy=1, cpu=True)]
    cases = _level1.grid("f", "float32", first, two=True, incs=(1, -2))
    names = [c.name for c in cases]
    assert cases[0] is first[0] and len(names) == len(set(names))
    sizes = len(_level1.GRID_N) + len(_level1.QUICK_N)
    assert len(cases) == sizes * 4  # (71, 1, 1) is in the grid too: not repeated
    assert {c["incx"] for c in cases} == {1, -2} and {c.shape[0] for c in cases} >= {0, -3, 5333}
    scaled = _level1.grid("g", "float64", [], two=False, alphas=(0.0, 2.0), incs=(1,))
    assert len(scaled) == sizes * 2 and all("incy" not in dict(c.params) for c in scaled)


def test_hidden_cases_have_a_quick_return_and_both_signs_and_stay_small_on_cpu() -> None:
    for seed in range(20):
        cpu = _level1.hidden("f", "float32", random.Random(seed), Tier.CPU, two=True)
        assert cpu[0].shape[0] in _level1.QUICK_N and all(c.cpu for c in cpu)
        assert all(c.shape[0] < 3000 for c in cpu)
    incs = {c["incx"] for s in range(20)
            for c in _level1.hidden("f", "float32", random.Random(s), Tier.FULL, two=False)}
    assert min(incs) < 0 < max(incs)


def test_edge_value_cases_put_specials_subnormals_and_real_parts_in_the_vector() -> None:
    gen = torch.Generator().manual_seed(0)
    x = _level1.vector(case("f", "float64", (9,), incx=-2, specials=True), -2, gen)
    v = _blas.gather(x, 9, -2)
    assert v[0] == math.inf and v[4] == -math.inf and math.isnan(v[8])
    assert bool(v[1:4].isfinite().all())
    x = _level1.vector(case("f", "float32", (8,), incx=1, subnormal=True), 1, gen)
    tiny = torch.finfo(torch.float32).tiny
    assert [bool(0 < abs(float(e)) < tiny) for e in x] == [True, False] * 4
    z = _level1.vector(case("f", "complex64", (5,), incx=3, real_x=True), 3, gen)
    assert bool((_blas.gather(z, 5, 3).imag == 0).all()) and bool(z[1].isnan())


def test_expected_buffers_replace_the_vector_and_keep_the_rest() -> None:
    y = torch.tensor([1.0, float("nan"), 2.0, float("nan"), 3.0], dtype=torch.float64)
    out = _level1.updated(y, 3, -2, torch.tensor([7.0, 8.0, 9.0]))
    assert out.dtype == torch.float64 and out[[4, 2, 0]].tolist() == [7.0, 8.0, 9.0]
    assert math.isnan(out[1]) and y[0] == 1.0  # the input is left alone
    assert _level1.at(y, 3, -2, torch.tensor([1.0, 2.0, 3.0])).tolist() == [3.0, 0, 2.0, 0, 1.0]
