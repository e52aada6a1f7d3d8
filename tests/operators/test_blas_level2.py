"""The BLAS-2 problems' shared inputs and references (operators/cublas/_level2.py) and the
semantics their references encode: quick returns, untouched triangles, band storage, solves."""

from __future__ import annotations

import math

import pytest
import torch

import operators
from operators.cublas import _blas, _level2
from operators.spec import Call, Tier


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("n,k,ld", [(7, 2, 4), (5, 0, 1), (4, 6, 8), (1, 3, 4), (9, 8, 9)])
@pytest.mark.parametrize("uplo", [_blas.LOWER, _blas.UPPER])
def test_band_products_match_the_dense_matrix_the_band_stores(n: int, k: int, ld: int,
                                                              uplo: int) -> None:
    g = _gen(n * 31 + k)
    buf = _blas.make_band(n, k, ld, uplo, "float64", g)
    tri = _blas.dense_from_band(buf, n, k, ld, uplo)
    x = torch.randn(n, dtype=torch.float64, generator=g)
    sym = tri + tri.triu(1).t() + tri.tril(-1).t()
    prod, mag = _level2.band_product(buf, n, k, ld, uplo, x, symmetric=True)
    torch.testing.assert_close(prod, sym @ x)
    torch.testing.assert_close(mag, sym.abs() @ x.abs())
    for trans in (_blas.OP_N, _blas.OP_T, _blas.OP_C):
        for unit in (False, True):
            t = tri.clone()
            if unit:
                t.diagonal().fill_(1)
            op = t if trans == _blas.OP_N else t.t()
            prod, mag = _level2.band_product(buf, n, k, ld, uplo, x, symmetric=False,
                                             trans=trans, unit=unit)
            torch.testing.assert_close(prod, op @ x)
            torch.testing.assert_close(mag, op.abs() @ x.abs())


def test_a_band_product_in_the_buffers_precision_stays_there() -> None:
    buf = _blas.make_band(50, 3, 5, _blas.UPPER, "float32", _gen())
    x = torch.randn(50)
    prod, _ = _level2.band_product(buf, 50, 3, 5, _blas.UPPER, x, symmetric=True, precise=False)
    exact, _ = _level2.band_product(buf, 50, 3, 5, _blas.UPPER, x, symmetric=True)
    assert prod.dtype == torch.float32 and exact.dtype == torch.float64
    torch.testing.assert_close(prod.double(), exact, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("uplo", [_blas.LOWER, _blas.UPPER])
def test_triangles_never_let_the_other_triangles_nan_in(uplo: int) -> None:
    a = _blas.make_triangle(6, 9, uplo, "complex64", _gen())
    sym = _level2.symmetric(a, 6, 9, uplo)
    assert bool(sym.isfinite().all()) and torch.equal(sym, sym.t())  # symmetric: no conj
    assert torch.equal(sym, _blas.dense_from_triangle(a, 6, 9, uplo, "symmetric"))
    u = _blas.make_triangle(6, 6, uplo, "float32", _gen(1), unit=True)
    t = _level2.triangular(u, 6, 6, uplo, unit=True)
    assert torch.equal(t, _blas.dense_from_triangle(u, 6, 6, uplo, "triangular", unit=True))
    assert torch.equal(_level2.triangle_mask(3, uplo),
                       _blas.in_triangle(3, uplo))


@pytest.mark.parametrize("uplo", [_blas.LOWER, _blas.UPPER])
def test_the_comparison_matrix_scale_bounds_the_exact_backward_error_scale(uplo: int) -> None:
    n = 40
    a = _blas.make_triangle(n, n, uplo, "float64", _gen(uplo), dominant=True)
    op = _level2.triangular(a, n, n, uplo, unit=False)
    x = torch.randn(n, dtype=torch.float64, generator=_gen(5))
    exact = _blas.solve_scale(op, x)
    bound = _level2.comparison_solve_scale(op, x, upper=uplo == _blas.UPPER)
    assert bool((bound >= exact * (1 - 1e-12)).all())  # |A^-1| <= M(A)^-1
    assert float((bound / exact).max()) < 3  # and close on dominant matrices


def test_unit_triangles_for_solves_are_well_conditioned() -> None:
    n = 500
    u = _level2.unit_triangle(n, n, _blas.LOWER, "float64", _gen())
    t = _level2.triangular(u, n, n, _blas.LOWER, unit=True)
    assert float(torch.linalg.cond(t)) < 10
    assert bool(_blas.stored(u, n, n, n).diagonal().isnan().all())  # never read


def test_mv_update_with_beta_zero_never_reads_y_and_keeps_its_gaps() -> None:
    y = torch.full((7,), float("nan"), dtype=torch.float32)  # an unset y, gaps NaN too
    prod = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
    e = _level2.mv_update(y, 3, -3, 2.0, 0.0, prod, prod.abs())
    assert e.value[[6, 3, 0]].tolist() == [2.0, -4.0, 6.0]
    assert bool(e.value[[1, 2, 4, 5]].isnan().all()) and float(e.scale[1]) == 0.0
    y = torch.tensor([1.0, 5.0, 2.0])
    e = _level2.mv_update(y, 2, 2, 0.0, 0.5, torch.zeros(2, dtype=torch.float64),
                          torch.zeros(2, dtype=torch.float64))
    assert e.value.tolist() == [0.5, 5.0, 1.0]  # alpha == 0: beta * y; the gap untouched


@pytest.mark.parametrize("op_id,args,vectors", [
    ("cublas::cublasSger_v2", (3, 4, 0.0, 2, -1, 3), (3, 5)),
    ("cublas::cublasZgerc_v2", (3, 4, 0j, 1, 1, 0), (3, 5)),
])
def test_alpha_zero_poisons_what_the_quick_return_must_not_read(
        op_id: str, args: tuple[object, ...], vectors: tuple[int, ...]) -> None:
    spec = operators.get(op_id)
    call = spec.make_call(spec.c(*args), _gen())  # type: ignore[attr-defined]
    for i in vectors:
        assert bool(call.args[i].isnan().all())
    (e,) = spec.reference(call)
    out = call.buffer(call.outputs[0].key)  # type: ignore[arg-type]
    assert torch.equal(e.value.isnan(), out.isnan())  # nothing new becomes NaN


@pytest.mark.parametrize("op_id,args,vectors", [
    ("cublas::cublasDsyr2_v2", (5, 1, 0.0, 2, -1, 3), (3, 5)),
    ("cublas::cublasCsymv_v2", (5, 1, 0, 0.5, -1, -2, 7), (5,)),
    ("cublas::cublasDsbmv_v2", (5, 2, 0, 0.0, 0.5, 1, 1, 0), (6,)),
])
def test_alpha_zero_keeps_finite_what_libcublas_reads(
        op_id: str, args: tuple[object, ...], vectors: tuple[int, ...]) -> None:
    """symv, sbmv and syr2: cuBLAS in DEVICE pointer mode reads x (and y) even when alpha == 0
    (seen on an H100), so those vectors' own elements are finite then; the result is as BLAS's
    quick return gives it, nothing new NaN."""
    spec = operators.get(op_id)
    c = spec.c(*args)  # type: ignore[attr-defined]
    call = spec.make_call(c, _gen())
    for i in vectors:
        inc = call.args[i + 1]
        assert not bool(_blas.gather(call.args[i], c.shape[0], inc).isnan().any())
    (e,) = spec.reference(call)
    out = call.buffer(call.outputs[0].key)  # type: ignore[arg-type]
    assert torch.equal(e.value.isnan(), out.isnan())


def test_ger_conjugates_y_only_for_gerc() -> None:
    for op_id, dtype, want in (("cublas::cublasCgeru_v2", torch.complex64, (1 + 2j) * (3 - 1j)),
                               ("cublas::cublasZgerc_v2", torch.complex128, (1 + 2j) * (3 + 1j))):
        spec = operators.get(op_id)
        x = torch.tensor([1 + 2j], dtype=dtype)
        y = torch.tensor([3 - 1j], dtype=dtype)
        a = torch.zeros(1, dtype=dtype)
        (e,) = spec.reference(Call(spec.entry_points[0].name, (1, 1, 1 + 0j, x, 1, y, 1, a, 1)))
        assert complex(e.value[0]) == pytest.approx(want)


@pytest.mark.parametrize("uplo", [_blas.LOWER, _blas.UPPER])
def test_syr2_leaves_the_other_triangle_and_the_padding_bit_for_bit(uplo: int) -> None:
    spec = operators.get("cublas::cublasDsyr2_v2")
    call = spec.make_call(spec.c(6, uplo, -1.5, 2, -1, 3), _gen())  # type: ignore[attr-defined]
    (e,) = spec.reference(call)
    a = call.args[7]
    untouched = ~_level2.triangle_mask(6, uplo)
    before = _blas.stored(a, 6, 6, 9)
    after = _blas.stored(e.value, 6, 6, 9)
    assert bool(before[untouched].isfinite().all())  # a write there would show
    assert torch.equal(after[untouched], before[untouched].double())
    assert float(_blas.stored(e.scale, 6, 6, 9)[untouched].abs().max()) == 0.0
    assert bool(a.reshape(6, 9)[:, 6:].isnan().all())  # padding rows
    assert not torch.equal(after[~untouched], before[~untouched].double())


@pytest.mark.parametrize("uplo", [_blas.LOWER, _blas.UPPER])
def test_stbmv_unit_diagonal_is_garbage_in_the_band_storage(uplo: int) -> None:
    spec = operators.get("cublas::cublasStbmv_v2")
    call = spec.make_call(spec.c(9, 2, uplo, 0, 1, 1, 1), _gen())  # type: ignore[attr-defined]
    a, lda = call.args[5], call.args[6]
    diag_row = _blas.stored(a, lda, 9, lda)[2 if uplo == _blas.UPPER else 0]
    assert bool(diag_row.isnan().all())
    (e,) = spec.reference(call)
    assert bool(e.value.isfinite().all())


def test_strsv_tolerance_grows_like_sqrt_n_from_the_sum_floor() -> None:
    spec = operators.get("cublas::cublasStrsv_v2")
    u = 2.0 ** -24
    floor = spec.tolerance(spec.c(10, 0, 0, 0, 1, 0), torch.float32)  # type: ignore[attr-defined]
    big = spec.tolerance(spec.c(2049, 0, 0, 0, 1, 0), torch.float32)  # type: ignore[attr-defined]
    assert floor.rtol == pytest.approx(_blas.SUM_ULPS * u)
    assert big.rtol == pytest.approx(4 * math.sqrt(2049) * u)


@pytest.mark.parametrize("op_id", [
    "cublas::cublasSger_v2", "cublas::cublasCgeru_v2", "cublas::cublasZgerc_v2",
    "cublas::cublasCsymv_v2", "cublas::cublasDsbmv_v2", "cublas::cublasDsyr2_v2",
    "cublas::cublasStbmv_v2", "cublas::cublasStrsv_v2"])
def test_grids_cover_both_flags_signs_and_quick_returns(op_id: str) -> None:
    spec = operators.get(op_id)
    cases = spec.public_cases(Tier.FULL)
    assert len({c.name for c in cases}) == len(cases)
    assert any(c.shape[0] <= 0 or (len(c.shape) > 1 and c.shape[1] <= 0) for c in cases)
    assert min(c["incx"] for c in cases) < 0 < max(c["incx"] for c in cases)
    for flag in ("uplo", "trans", "diag"):
        if flag in dict(cases[0].params):
            assert {c[flag] for c in cases} == ({0, 1, 2} if flag == "trans" else {0, 1})
    if "alpha" in dict(cases[0].params):
        assert any(c["alpha"] == 0 for c in cases)
    if "beta" in dict(cases[0].params):
        assert any(c["beta"] == 0 for c in cases)
