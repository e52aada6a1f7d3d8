"""The triangular solves (``operators/cublas/_trsm.py``): the reference against a transcription
of the C API's definition element by element, the inputs' NaN conventions, the backward-error
tolerance against what a stable solve and a wrong one make, and the cost model."""

from __future__ import annotations

import math

import pytest
import torch

import operators
from operators.checking import check
from operators.cublas import _blas, _trsm
from operators.invoke import collect, prepare
from operators.spec import PointerArray

IDS = ("cublas::cublasStrsm_v2", "cublas::cublasDtrsmBatched", "cublas::cublasZtrsmBatched")


def _element(buf: torch.Tensor, i: int, j: int, ld: int) -> complex:
    return complex(buf[i + j * ld].item())


def _op_element(a: torch.Tensor, i: int, j: int, lda: int, uplo: int, trans: int,
                diag: int) -> complex:
    """op(A)(i, j) read the way the C API defines it: the stored triangle only, 1 on a unit
    diagonal, A(j, i) for T, its conjugate for C."""
    if trans != _blas.OP_N:
        i, j = j, i
    if i == j and diag == _blas.UNIT:
        return 1.0
    if (uplo == _blas.UPPER and i > j) or (uplo == _blas.LOWER and i < j):
        return 0.0
    v = _element(a, i, j, lda)
    return v.conjugate() if trans == _blas.OP_C else v


def _substitute(a: torch.Tensor, b: torch.Tensor, args: tuple) -> list[list[complex]]:
    """X by plain substitution in Python complex arithmetic (float64 per component), straight
    from ``op(A) X = alpha B`` / ``X op(A) = alpha B``."""
    side, uplo, trans, diag, m, n, alpha, lda, ldb = args
    k = m if side == _blas.LEFT else n
    t = [[_op_element(a, i, j, lda, uplo, trans, diag) for j in range(k)] for i in range(k)]
    x = [[alpha * _element(b, i, j, ldb) for j in range(n)] for i in range(m)]
    lower_op = all(t[i][j] == 0 for i in range(k) for j in range(i + 1, k))
    if side == _blas.LEFT:  # column by column: T x_j = alpha b_j
        for j in range(n):
            order = range(m) if lower_op else range(m - 1, -1, -1)
            for i in order:
                s = x[i][j] - sum(t[i][p] * x[p][j] for p in range(m) if p != i)
                x[i][j] = s / t[i][i]
    else:  # row by row: x_i^T T = alpha b_i^T, unknowns in the order T's columns allow
        for i in range(m):
            order = range(n - 1, -1, -1) if lower_op else range(n)
            for j in order:
                s = x[i][j] - sum(x[i][p] * t[p][j] for p in range(n) if p != j)
                x[i][j] = s / t[j][j]
    return x


@pytest.mark.parametrize("flags", _trsm.ALL_FLAGS)
def test_reference_solves_the_system_the_c_api_defines(flags: str) -> None:
    spec = operators.get("cublas::cublasZtrsmBatched")
    c = spec.c(flags, 5, 4, alpha=complex(0.5, -1.25), batch=2, pad_a=1, pad_b=2)
    call = spec.make_call(c, torch.Generator().manual_seed(3))
    (exp,) = spec.reference(call)
    side, uplo, trans, diag, m, n, alpha, a_arr, lda, b_arr, ldb, _ = call.args
    a_list, b_list = _trsm.entries(call)
    for e, (a, b) in enumerate(zip(a_list, b_list, strict=True)):
        want = _substitute(a, b, (side, uplo, trans, diag, m, n, alpha, lda, ldb))
        got = _blas.stored(exp.value[b_arr.offsets[e]:], m, n, ldb)
        for i in range(m):
            for j in range(n):
                assert abs(got[i, j].item() - want[i][j]) <= 1e-12 * (1 + abs(want[i][j]))


def test_inputs_hold_nan_wherever_the_routine_must_not_read() -> None:
    spec = operators.get("cublas::cublasStrsm_v2")
    for flags in ("LUNU", "RLTN"):
        c = spec.c(flags, 6, 9, pad_a=2, pad_b=3)
        side, uplo, _, diag, m, n, _, a, lda, b, ldb = spec.make_call(
            c, torch.Generator().manual_seed(0)).args
        k = _trsm.order(c)
        stored = _blas.stored(a, lda, k, lda)
        read = torch.zeros(lda, k, dtype=torch.bool)
        read[:k, :k] = _blas.in_triangle(k, uplo, diagonal=diag == _blas.NON_UNIT)
        assert bool(stored[read].isfinite().all()) and bool(stored[~read].isnan().all())
        b_all = _blas.stored(b, ldb, n, ldb)
        assert bool(b_all[:m].isfinite().all()) and bool(b_all[m:].isnan().all())
    # alpha == 0: A is never read (all NaN); B's padding is random and must come back as it was.
    c = spec.c("LLNN", 6, 4, alpha=0.0, pad_b=2)
    call = spec.make_call(c, torch.Generator().manual_seed(0))
    assert bool(call.args[7].isnan().all())
    (exp,) = spec.reference(call)
    b_exp = _blas.stored(exp.value, 8, 4, 8)
    assert bool((b_exp[:6] == 0).all())
    assert torch.equal(b_exp[6:], _blas.stored(call.args[9], 8, 4, 8)[6:].double())


def test_unit_and_dominant_triangles_are_well_conditioned() -> None:
    for unit in (False, True):
        buf = _trsm.triangle(300, 300, _blas.LOWER, unit, "float64", torch.Generator())
        t = _trsm.op_triangle(buf, 300, 300, _blas.LOWER, _blas.OP_N, int(unit))
        assert float(torch.linalg.cond(t)) < 10


def test_a_shared_a_is_one_pointee_and_every_b_its_own() -> None:
    spec = operators.get("cublas::cublasDtrsmBatched")
    c = spec.c("LUNN", 5, 3, batch=4, shared_a=True)
    call = spec.make_call(c, torch.Generator().manual_seed(1))
    a_arr, b_arr = call.args[7], call.args[9]
    assert isinstance(a_arr, PointerArray) and isinstance(b_arr, PointerArray)
    assert len(set(a_arr.offsets)) == 1 and len(set(b_arr.offsets)) == 4


@pytest.mark.parametrize("spec_id", IDS)
def test_tolerance_takes_a_stable_solve_and_rejects_a_wrong_one(spec_id: str) -> None:
    """PyTorch's solve in the routine's precision passes on a 300-order system; the same
    solve with A's diagonal off by 1e3 u (a tiny backward error, beyond the allowance) and
    with one off-diagonal term dropped (a wrong triangle's kind of error) fails."""
    spec = operators.get(spec_id)
    c = spec.c("RUCN", 40, 300, alpha=-1.5, **({"batch": 2} if spec.batched else {}))
    call = spec.make_call(c, torch.Generator().manual_seed(7))
    (exp,) = spec.reference(call)
    tol = spec.tolerance(c, exp.dtype)
    assert math.isclose(tol.rtol, 4 * math.sqrt(300) * torch.finfo(
        torch.float32 if spec.precision == "float32" else torch.float64).eps / 2)

    def run(edit: str) -> object:
        dev = prepare(call, "cpu")
        for a in _trsm.entries(dev)[0]:
            t = _blas.stored(a, 300, 300, call.args[8])
            if edit == "diagonal":
                t.diagonal().mul_(1 + 1e3 * torch.finfo(t.real.dtype).eps)
            elif edit == "term":
                t[0, 299] = 0
        spec.baseline(dev)
        (got,) = collect(dev, None)
        return check(got, exp, tol)

    assert run("none") is None
    assert run("diagonal") is not None
    assert run("term") is not None


def test_cost_counts_the_triangle_and_both_passes_over_b() -> None:
    s = operators.get("cublas::cublasStrsm_v2")
    cost = s.cost(s.c("LLNN", 100, 30))
    assert cost.flops == 2 * (100 * 101 // 2) * 30
    assert cost.bytes == 4 * (100 * 101 // 2 + 2 * 100 * 30)
    z = operators.get("cublas::cublasZtrsmBatched")
    cost = z.cost(z.c("RUNU", 30, 100, batch=3, shared_a=True))
    assert cost.flops == 3 * 8 * (100 * 99 // 2) * 30 and cost.dtype == "float64"
    assert cost.bytes == 16 * (100 * 99 // 2 + 3 * 2 * 30 * 100)
    assert z.cost(z.c("LLNN", 30, 10, alpha=0.0, batch=2)).flops == 0
