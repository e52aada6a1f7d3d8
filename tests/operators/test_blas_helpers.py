"""The cuBLAS suite's shared storage, cost and tolerance helpers (operators/cublas/_blas.py),
checked against the BLAS definitions written out longhand."""

from __future__ import annotations

import math

import pytest
import torch

from operators.cublas import _blas
from operators.spec import unit_roundoff


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("n,inc", [(5, 1), (5, 3), (5, -1), (4, -3), (1, -7), (0, 2), (-3, 1)])
def test_vector_positions_follow_blas_including_negative_increments(n: int, inc: int) -> None:
    # BLAS (1-based): x(i) at X(1 + (i-1)*inc) for inc > 0, X(1 + (n-i)*|inc|) for inc < 0.
    want = [(i - 1) * inc if inc > 0 else (n - i) * -inc for i in range(1, n + 1)]
    assert _blas.vector_index(n, inc).tolist() == want
    assert _blas.vector_len(n, inc) == (1 + (n - 1) * abs(inc) if n > 0 else 1)
    if n > 0 and inc < 0:
        assert want[0] == (n - 1) * abs(inc)  # a negative increment starts at the far end


def test_make_vector_puts_nan_everywhere_but_the_vector() -> None:
    buf = _blas.make_vector(4, -3, "float32", gen(), tail=2)
    assert buf.shape == (10 + 2,)
    on = _blas.vector_index(4, -3)
    off = torch.ones(12, dtype=torch.bool)
    off[on] = False
    assert bool(buf[off].isnan().all()) and bool(buf[on].isfinite().all())
    vals = _blas.gather(buf, 4, -3)
    assert torch.equal(vals, torch.stack([buf[9], buf[6], buf[3], buf[0]]))
    _blas.scatter_(buf, 4, -3, torch.arange(4.0))
    assert buf[[9, 6, 3, 0]].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert bool(buf[off].isnan().all())


def test_complex_values_have_both_parts_random_and_scalars_round_to_the_routine() -> None:
    z = _blas.random_values(64, "complex64", gen())
    assert z.dtype == torch.complex64 and float(z.imag.abs().min()) > 0
    assert _blas.as_real(0.1, "float32") == float(torch.tensor(0.1, dtype=torch.float32))
    assert _blas.as_real(0.1, "float64") == 0.1
    c = _blas.as_c(0.1 - 0.3j, "complex64")
    assert c == complex(torch.tensor(0.1 - 0.3j, dtype=torch.complex64).item()) and c != 0.1 - 0.3j


def test_matrices_are_column_major_with_nan_padding() -> None:
    buf = _blas.make_matrix(3, 2, 5, "float64", gen())
    a = _blas.stored(buf, 3, 2, 5)
    for i in range(3):
        for j in range(2):
            assert a[i, j] == buf[i + j * 5]
    assert bool(buf.view(2, 5)[:, 3:].isnan().all()) and bool(a.isfinite().all())
    with pytest.raises(ValueError, match="leading dimension 2 below the 3 rows"):
        _blas.make_matrix(3, 2, 2, "float32", gen())


def test_op_c_conjugates_complex_data_and_is_op_t_for_real_data() -> None:
    z = _blas.make_matrix(2, 3, 2, "complex128", gen())
    assert torch.equal(_blas.op_view(z, _blas.OP_C, 3, 2, 2),
                       _blas.stored(z, 2, 3, 2).t().conj())
    assert torch.equal(_blas.op_view(z, _blas.OP_T, 3, 2, 2), _blas.stored(z, 2, 3, 2).t())
    r = _blas.make_matrix(2, 3, 4, "float32", gen())
    assert torch.equal(_blas.op_view(r, _blas.OP_C, 3, 2, 4), _blas.op_view(r, _blas.OP_T, 3, 2, 4))


@pytest.mark.parametrize("uplo", [_blas.LOWER, _blas.UPPER])
def test_triangles_hold_nan_where_blas_never_reads(uplo: int) -> None:
    n, ld = 5, 7
    buf = _blas.make_triangle(n, ld, uplo, "float32", gen(), unit=True)
    a = _blas.stored(buf, n, n, ld)
    for i in range(n):
        for j in range(n):
            read = (i < j) if uplo == _blas.UPPER else (i > j)  # unit: diagonal never read
            assert math.isnan(a[i, j]) != read
    tri = _blas.dense_from_triangle(buf, n, ld, uplo, "triangular", unit=True)
    assert torch.equal(tri.diagonal(), torch.ones(n, dtype=torch.float64))
    assert bool((tri == (torch.triu(tri) if uplo == _blas.UPPER else torch.tril(tri))).all())


def test_dominant_triangles_are_well_conditioned_and_kinds_mirror() -> None:
    n = 40
    buf = _blas.make_triangle(n, n, _blas.LOWER, "complex64", gen(), dominant=True)
    t = _blas.dense_from_triangle(buf, n, n, _blas.LOWER, "triangular")
    assert float(torch.linalg.cond(t)) < 10
    s = _blas.dense_from_triangle(buf, n, n, _blas.LOWER, "symmetric")
    h = _blas.dense_from_triangle(buf, n, n, _blas.LOWER, "hermitian")
    assert torch.equal(s, s.t()) and torch.equal(h, h.t().conj())
    assert torch.equal(torch.tril(s), t)
    assert torch.equal(h.diagonal().imag, torch.zeros(n, dtype=torch.float64))


@pytest.mark.parametrize("uplo", [_blas.LOWER, _blas.UPPER])
@pytest.mark.parametrize("n,k", [(6, 2), (4, 0), (3, 5), (1, 1)])
def test_band_storage_matches_the_blas_loops(uplo: int, n: int, k: int) -> None:
    ld = k + 2
    buf = _blas.make_band(n, k, ld, uplo, "float64", gen())
    dense = _blas.dense_from_band(buf, n, k, ld, uplo)
    want = torch.zeros(n, n, dtype=torch.float64)
    used = torch.zeros(ld * n, dtype=torch.bool)
    for j in range(n):  # the reference BLAS loops (0-based)
        if uplo == _blas.UPPER:
            for i in range(max(0, j - k), j + 1):
                want[i, j] = buf[k + i - j + j * ld]
                used[k + i - j + j * ld] = True
        else:
            for i in range(j, min(n, j + k + 1)):
                want[i, j] = buf[i - j + j * ld]
                used[i - j + j * ld] = True
    assert torch.equal(dense, want)
    assert bool(buf[used].isfinite().all()) and bool(buf[~used].isnan().all())
    with pytest.raises(ValueError, match="ld >= k"):
        _blas.make_band(n, k, k, uplo, "float32", gen())


def test_pointer_arrays_shuffle_pointees_and_share_broadcast_ones() -> None:
    entries = [torch.full((3,), float(b)) for b in range(6)]
    arrays = [_blas.pointer_array(entries, gen(s)) for s in range(4)]
    for arr in arrays:
        for b in range(6):
            assert _blas.pointee(arr, b, 3).tolist() == [float(b)] * 3
            assert math.isnan(arr.buffer[arr.offsets[b] + 3])  # a NaN after each entry
    assert any(list(a.offsets) != sorted(a.offsets) for a in arrays)  # not in batch order
    shared = torch.ones(4)
    arr = _blas.pointer_array([shared, torch.zeros(4), shared], gen())
    assert arr.offsets[0] == arr.offsets[2] != arr.offsets[1]
    # one copy of the shared pointee, every pointee 16-byte aligned (4 floats), NaN after each
    assert int((arr.buffer == 1).sum()) == 4 and all(o % 4 == 0 for o in arr.offsets)
    assert all(math.isnan(arr.buffer[o + 4]) for o in arr.offsets)


def test_costs_count_real_flops_and_bound_complex_by_real_units() -> None:
    assert _blas.rate_dtype("complex64") == "float32" and _blas.rate_dtype("complex128") == "float64"
    assert _blas.rate_dtype(torch.float64) == "float64"
    c = _blas.streaming_cost(8 * 10, 3 * 10, "complex128")
    assert (c.flops, c.bytes, c.dtype) == (80.0, 480.0, "float64")
    g = _blas.gemm_cost(2, 3, 4, "complex64", reads_c=True, batch=5)
    assert g.flops == 5 * (8 * 24 + 18) and g.bytes == 5 * (8 + 12 + 12) * 8 and g.dtype == "float32"


def test_product_terms_scale_each_complex_component_by_its_own_terms() -> None:
    x = torch.tensor([1 + 2j, -3 + 0.5j], dtype=torch.complex64)
    y = torch.tensor([2 - 1j, 1 + 1j], dtype=torch.complex64)
    value, scale = _blas.product_terms(x, y)
    assert value == (1 + 2j) * (2 - 1j) + (-3 + 0.5j) * (1 + 1j)
    assert scale == complex(1 * 2 + 2 * 1 + 3 * 1 + 0.5 * 1, 1 * 1 + 2 * 2 + 3 * 1 + 0.5 * 1)
    value, scale = _blas.product_terms(torch.tensor([1.0, -2.0]), torch.tensor([3.0, 4.0]))
    assert (float(value), float(scale)) == (-5.0, 11.0)


def _substitution(dominant: bool, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(A, exact x, float32 back substitution's x) for an upper triangular A x = b."""
    n = 48
    buf = _blas.make_triangle(n, n, _blas.UPPER, "float32", gen(seed), dominant=dominant)
    a = _blas.dense_from_triangle(buf, n, n, _blas.UPPER, "triangular")
    b = torch.randn(n, generator=gen(seed + 100), dtype=torch.float64)
    x = torch.linalg.solve_triangular(a, b[:, None], upper=True)[:, 0]
    x32 = torch.zeros(n, dtype=torch.float32)
    a32, b32 = a.float(), b.float()
    for i in reversed(range(n)):
        x32[i] = (b32[i] - (a32[i, i + 1:] * x32[i + 1:]).sum()) / a32[i, i]
    return a, x, x32.double()


def test_a_float32_substitution_is_within_the_backward_error_scale() -> None:
    u = _blas.SUM_ULPS * unit_roundoff(torch.float32)
    a, x, x32 = _substitution(dominant=True, seed=0)
    scale = _blas.solve_scale(a, x)
    assert bool(((x32 - x).abs() <= u * scale).all())
    wrong = x32.clone()
    wrong[3] *= 1 + 1e-3  # one element off by 1e-3 is far outside it
    assert not bool(((wrong - x).abs() <= u * scale).all())
    # An ill-conditioned triangle (cond ~ 4e13): the substitution's forward error is far beyond
    # u |x|, yet within the backward error carried to the solution.
    a, x, x32 = _substitution(dominant=False, seed=1)
    assert bool(((x32 - x).abs() <= u * _blas.solve_scale(a, x)).all())
    assert not bool(((x32 - x).abs() <= u * x.abs()).all())


def test_variants_must_edit_the_solution_exactly_once() -> None:
    assert _blas.variant("a + b", ("+", "-")) == "a - b"
    with pytest.raises(ValueError, match="found 0"):
        _blas.variant("a + b", ("*", "-"))
    with pytest.raises(ValueError, match="found 2"):
        _blas.variant("a + b + c", ("+", "-"))


def test_random_gaps_when_nan_would_hide_a_write() -> None:
    buf = _blas.make_vector(3, 2, "float32", gen(), gap=None)
    assert bool(buf.isfinite().all()) and buf.numel() == 5


def test_references_compute_on_copies_never_on_the_inputs() -> None:
    for t in (torch.zeros(3, dtype=torch.float64), torch.zeros(3), torch.zeros(3, dtype=torch.complex128)):
        h = _blas.hp(t)
        h += 1
        assert bool((t == 0).all()) and h.dtype in (torch.float64, torch.complex128)
