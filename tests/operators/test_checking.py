"""The comparison rule: tolerances, NaN/Inf positions, dtype/shape, poison coverage."""

from __future__ import annotations

import math

import pytest
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


# ---- check(): what an output must be beyond its values ---------------------------------------

from operators.checking import Layout, PyNumber, check  # noqa: E402
from operators.invoke import from_wire, layouts, wire_output  # noqa: E402
from operators.spec import Call, Out  # noqa: E402

EXACT = Tolerance(0.0, 0.0)


def test_a_view_must_share_the_arguments_storage_at_the_right_offset() -> None:
    x = torch.arange(12.0).reshape(3, 4)
    call = Call("narrow", (x, 1, 1, 2))
    view = x.narrow(1, 1, 2)
    copy = torch.empty_strided(view.shape, view.stride())  # same strides, own storage
    copy.copy_(view)
    exp = Expected(view.double(), torch.float32, strides=view.stride(), view_of=0, offset=1)
    [lay] = layouts(call, [view])
    assert lay == Layout(0, 1) and check(view, exp, EXACT, lay) is None
    [lay_copy] = layouts(call, [copy])
    m = check(copy, exp, EXACT, lay_copy)
    assert m is not None and "must be a view of argument 0" in m.summary
    wrong = x.narrow(1, 0, 2)
    m = check(wrong, exp, EXACT, layouts(call, [wrong])[0])
    assert m is not None  # wrong values (and offset)


def test_a_new_tensor_must_not_alias_a_read_only_argument() -> None:
    x = torch.arange(6.0)
    call = Call("clone", (x,))
    exp = Expected(x.double(), torch.float32)
    m = check(x, exp, EXACT, layouts(call, [x])[0])
    assert m is not None and "a new tensor is expected" in m.summary
    y = x.clone()
    assert check(y, exp, EXACT, layouts(call, [y])[0]) is None
    # an in-place output is its argument: no aliasing complaint
    inplace = Call("zero_", (x,), outputs=(Out.arg(0),), mutable=frozenset({0}))
    assert layouts(inplace, [x]) == [Layout()]


def test_strides_are_compared_except_on_size_one_dims() -> None:
    t = torch.empty_strided((2, 1, 3), (3, 99, 1))
    exp = Expected(torch.zeros(2, 1, 3, dtype=torch.float64), torch.float32, strides=(3, 3, 1),
                   values=False)
    assert check(t, exp, EXACT) is None  # values undefined, stride of the size-1 dim ignored
    tt = torch.empty_strided((2, 1, 3), (1, 1, 2))
    m = check(tt, exp, EXACT)
    assert m is not None and "wrong strides" in m.summary


def test_python_numbers_travel_and_are_checked_by_type_and_value() -> None:
    exp = Expected(torch.tensor(2.5, dtype=torch.float64), torch.float64, python="float")
    assert check(2.5, exp, EXACT) is None
    wire = from_wire(wire_output(2.5))
    assert wire == PyNumber("float", "2.5") and check(wire, exp, EXACT) is None
    assert check(from_wire(wire_output(float("nan"))), exp, EXACT) is not None
    m = check(torch.tensor(2.5), exp, EXACT)
    assert m is not None and "got a tensor" in m.summary
    m = check(2, exp, EXACT)
    assert m is not None and "got a Python int" in m.summary
    nan_exp = Expected(torch.tensor(math.nan, dtype=torch.float64), torch.float64, python="float")
    assert check(from_wire(wire_output(math.nan)), nan_exp, EXACT) is None
    assert check(True, Expected(torch.tensor(True), torch.bool, python="bool"), EXACT) is None


def test_a_judge_replaces_the_value_comparison() -> None:
    def only_zeros_and_ones(t: torch.Tensor) -> str | None:
        return None if bool(((t == 0) | (t == 1)).all()) else "values other than 0 and 1"

    exp = Expected(torch.zeros(4, dtype=torch.float64), torch.float32, judge=only_zeros_and_ones)
    assert not exp.by_value
    assert check(torch.tensor([0.0, 1.0, 1.0, 0.0]), exp, EXACT) is None
    m = check(torch.tensor([0.0, 2.0, 1.0, 0.0]), exp, EXACT)
    assert m is not None and "other than" in m.summary


def test_a_canonical_form_frees_what_the_op_leaves_unspecified() -> None:
    """Order within each pair and the last element free: [3, 1, 2, 0, x] equals [1, 3, 0, 2, 9];
    the output stays judged by value (exactly, here)."""
    def pairs_sorted_tail_nine(t: torch.Tensor) -> torch.Tensor:
        out = t.clone()
        out[:4] = t[:4].view(2, 2).sort(dim=1).values.reshape(4)
        out[4:] = 9
        return out

    exp = Expected(torch.tensor([1, 3, 0, 2, 9], dtype=torch.int32), torch.int32,
                   canonical=pairs_sorted_tail_nine)
    assert exp.by_value
    assert check(torch.tensor([3, 1, 2, 0, -5], dtype=torch.int32), exp, EXACT) is None
    assert check(torch.tensor([1, 3, 0, 2, 7], dtype=torch.int32), exp, EXACT) is None
    m = check(torch.tensor([1, 2, 0, 3, 9], dtype=torch.int32), exp, EXACT)  # across pairs
    assert m is not None and "2 of 5 elements differ" in m.summary
    m = check(torch.tensor([1, 3, 0, 2], dtype=torch.int32), exp, EXACT)  # shape first
    assert m is not None and "wrong shape" in m.summary


def test_same_bits_takes_one_element_tensors_with_any_stride() -> None:
    """``contiguous()`` keeps a one-element tensor's stride; viewing it as bytes then failed
    (found on the H200: a strided one-element bfloat16 argument crashed the mutation check)."""
    one = torch.randn(4, dtype=torch.bfloat16)[::2][:1]
    assert one.stride() == (2,) and one.is_contiguous()
    assert same_bits(one, one.clone())
    assert not same_bits(one, one + 1)
    nan = torch.full((3,), float("nan"), dtype=torch.float16)
    other_nan = nan.view(torch.int16).add(1).view(torch.float16)  # another NaN payload
    assert same_bits(nan, nan.clone()) and not same_bits(nan, other_nan)
    t = torch.randn(6, 4).t()[:, ::2]
    assert same_bits(t, t.clone()) and not same_bits(t, t * 2)


def _rule_bad(a: torch.Tensor, e: torch.Tensor, scale: torch.Tensor, tol: Tolerance) -> int:
    """The comparison rule written out element by element (the test's own oracle)."""
    bad = 0
    for x, y, s in zip(a.double().tolist(), e.tolist(), scale.tolist(), strict=True):
        if math.isnan(y) or math.isnan(x):
            bad += math.isnan(y) != math.isnan(x)
        elif math.isinf(y) or math.isinf(x):
            bad += x != y
        else:
            bad += abs(x - y) > tol.atol + tol.rtol * abs(s)
    return bad


def test_large_outputs_are_judged_by_the_same_rule_across_slices() -> None:
    """Outputs above one slice of the host's fast path (checking.CHUNK) give the verdict the rule
    gives, with the one wrong, NaN or inf element anywhere — a slice's first or last included."""
    from operators import checking

    n = 2 * checking.CHUNK + 7
    gen = torch.Generator().manual_seed(0)
    e = torch.randn(n, generator=gen, dtype=torch.float64) * 100
    scale = e.abs() + torch.rand(n, generator=gen, dtype=torch.float64)
    tol = Tolerance(rtol=1e-3, atol=1e-6)
    base = e.to(torch.float32)
    spots = (0, checking.CHUNK - 1, checking.CHUNK, n - 1)
    for where in spots:
        for wrong in (math.nan, math.inf, float(e[where]) * 1.1 + 1.0, float(e[where]) * (1 + 1e-4)):
            a = base.clone()
            a[where] = wrong
            got = compare(a, Expected(e, torch.float32, scale), tol)
            want = _rule_bad(a[where:where + 1], e[where:where + 1], scale[where:where + 1], tol)
            assert (got is not None) == bool(want), (where, wrong)
            if got is not None:
                assert got.bad == want and got.total == n
    assert compare(base, Expected(e, torch.float32, scale), tol) is None
    # NaN and inf where the reference has them pass in any slice; a transposed output too.
    e2 = e.clone()
    e2[checking.CHUNK] = math.nan
    e2[n - 1] = -math.inf
    assert compare(e2.to(torch.float32), Expected(e2, torch.float32), tol) is None
    m = e[: 512 * 1024].reshape(512, 1024)
    assert compare(m.t().contiguous().t().float(), Expected(m, torch.float32), tol) is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_host_scale_judges_device_values() -> None:
    """The re-check after timing computes references on the device; a reference that makes its
    error scale on the host (zeros for exact values, a 1x1 tensor) was once judged as a
    RUNTIME_ERROR of the candidate (vllm::scaled_fp8_quant on the H100)."""
    value = torch.linspace(-1, 1, 1000, dtype=torch.float64, device="cuda")
    exp = Expected(value, torch.float32, torch.zeros(1000, dtype=torch.float64))
    assert compare(value.float(), exp, Tolerance(0.0, 1e-6)) is None
    assert compare(value.float() + 1, exp, Tolerance(0.0, 1e-6)) is not None
