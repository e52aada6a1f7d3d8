"""The comparison rule: tolerances, NaN/Inf positions, dtype/shape, poison coverage."""

from __future__ import annotations

import math

import torch

from operators.checking import compare, poison_value, same_bits
from operators.spec import Expected, Tolerance


def _exp(values: list[float], dtype: torch.dtype = torch.float32,
         scale: list[float] | None = None) -> Expected:
    return Expected(torch.tensor(values, dtype=torch.float64), dtype,
                    None if scale is None else torch.tensor(scale, dtype=torch.float64))


def test_within_tolerance_passes_and_beyond_fails() -> None:
    tol = Tolerance(rtol=1e-3, atol=0.0)
    assert compare(torch.tensor([1.0005, 2.0]), _exp([1.0, 2.0]), tol) is None
    m = compare(torch.tensor([1.01, 2.0]), _exp([1.0, 2.0]), tol)
    assert m is not None and m.bad == 1 and "at [0]" in m.summary


def test_scale_sets_the_error_bound() -> None:
    # A sum that cancels: result ~0, but the terms were large -> error allowed relative to them.
    tol = Tolerance(rtol=1e-6)
    exp = _exp([0.0], scale=[1000.0])
    assert compare(torch.tensor([5e-4]), exp, tol) is None
    assert compare(torch.tensor([5e-3]), exp, tol) is not None


def test_nan_and_inf_positions_must_match() -> None:
    tol = Tolerance(rtol=1e-3)
    exp = _exp([math.nan, math.inf, -math.inf, 1.0])
    assert compare(torch.tensor([math.nan, math.inf, -math.inf, 1.0]), exp, tol) is None
    assert compare(torch.tensor([0.0, math.inf, -math.inf, 1.0]), exp, tol) is not None
    assert compare(torch.tensor([math.nan, -math.inf, -math.inf, 1.0]), exp, tol) is not None
    assert compare(torch.tensor([math.nan, math.inf, -math.inf, math.inf]), exp, tol) is not None


def test_unwritten_poison_is_reported() -> None:
    m = compare(torch.tensor([1.0, math.nan]), _exp([1.0, 2.0]), Tolerance(1e-3))
    assert m is not None and "not fully written" in m.summary


def test_dtype_shape_and_type_are_checked() -> None:
    tol = Tolerance(1e-3)
    assert "wrong dtype" in compare(torch.tensor([1.0], dtype=torch.float64), _exp([1.0]), tol).summary  # type: ignore[union-attr]
    assert "wrong shape" in compare(torch.tensor([[1.0]]), _exp([1.0]), tol).summary  # type: ignore[union-attr]
    assert "torch.Tensor" in compare([1.0], _exp([1.0]), tol).summary  # type: ignore[union-attr]

    class Sub(torch.Tensor):
        pass

    assert compare(torch.tensor([1.0]).as_subclass(Sub), _exp([1.0]), tol) is not None


def test_integers_exact() -> None:
    exp = Expected(torch.tensor([1, 2, 3]), torch.int32)
    assert compare(torch.tensor([1, 2, 3], dtype=torch.int32), exp, Tolerance(0.5, 10)) is None
    assert compare(torch.tensor([1, 2, 4], dtype=torch.int32), exp, Tolerance(0.5, 10)) is not None


def test_blanket_tolerance_does_not_grow_with_size() -> None:
    # A big relative error on one element of a large output is caught.
    n = 1 << 16
    exp = Expected(torch.ones(n, dtype=torch.float64), torch.float32)
    got = torch.ones(n)
    got[n // 2] = 1.01
    assert compare(got, exp, Tolerance.ulps(torch.float32, 8)) is not None


def test_poison_values_and_same_bits() -> None:
    assert math.isnan(poison_value(torch.float16))  # type: ignore[arg-type]
    assert poison_value(torch.int32) == 2**31 - 1
    a = torch.tensor([1.0, math.nan])
    assert same_bits(a, a.clone())
    assert not same_bits(a, torch.tensor([1.0, 2.0]))
    assert same_bits(torch.tensor(3.0), torch.tensor(3.0))
