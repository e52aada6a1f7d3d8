"""The BLAS-3 and extension routines beyond GEMM (Csymm, Ssyrk, CsyrkEx, Sdgmm, Sgeam): their
references against element-by-element transcriptions of the C API's definitions, what their
inputs hold where a routine must not read, and their in-place forms (C is A or B) run with
real aliasing, which the harness's argument copies do not keep."""

from __future__ import annotations

import math

import pytest
import torch

import operators
from device_agent.platforms.cpu import install_interpreter_support
from operators.cublas import _blas
from operators.spec import Call, Tier, Tolerance
from operators.testing import load_module

install_interpreter_support()


def _col(buf: torch.Tensor, i: int, j: int, ld: int) -> complex:
    return complex(buf[i + j * ld].item())


def _loops_syrk(args: tuple, routine: str) -> torch.Tensor:
    """C after syrk, by the definition: for i, j in the triangle uplo,
    C(i, j) = alpha * sum_p op(A)(i, p) op(A)(j, p) + beta * C(i, j) (beta == 0: C unread)."""
    if routine == "cublasCsyrkEx":
        uplo, trans, n, k, alpha, a, atype, lda, beta, c, _ctype, ldc = args
        if atype == 7:
            pairs = a.double().reshape(-1, 2)
            a = torch.complex(pairs[:, 0], pairs[:, 1])
    else:
        uplo, trans, n, k, alpha, a, lda, beta, c, ldc = args
    alpha, beta = (_blas.as_c(s, c.dtype) for s in (alpha, beta))
    out = c.to(torch.complex128).clone()

    def op(i: int, p: int) -> complex:
        return _col(a, i, p, lda) if trans == 0 else _col(a, p, i, lda)

    for j in range(n):
        for i in range(n):
            if (uplo == 1 and i > j) or (uplo == 0 and i < j):
                continue
            s = sum(op(i, p) * op(j, p) for p in range(k)) if alpha != 0 else 0
            v = alpha * s
            if beta != 0:
                v += beta * _col(c, i, j, ldc)
            out[i + j * ldc] = v
    return out


def _loops_symm(args: tuple) -> torch.Tensor:
    side, uplo, m, n, alpha, a, lda, b, ldb, beta, c, ldc = args
    alpha, beta = _blas.as_c(alpha, c.dtype), _blas.as_c(beta, c.dtype)
    out = c.to(torch.complex128).clone()

    def sym(i: int, j: int) -> complex:  # only the stored triangle is read
        stored = i <= j if uplo == 1 else i >= j
        return _col(a, i, j, lda) if stored else _col(a, j, i, lda)

    for j in range(n):
        for i in range(m):
            if alpha == 0:
                s = 0j
            elif side == 0:
                s = sum(sym(i, p) * _col(b, p, j, ldb) for p in range(m))
            else:
                s = sum(_col(b, i, p, ldb) * sym(p, j) for p in range(n))
            v = alpha * s + (beta * _col(c, i, j, ldc) if beta != 0 else 0)
            out[i + j * ldc] = v
    return out


def _loops_geam(args: tuple) -> torch.Tensor:
    ta, tb, m, n, alpha, a, lda, beta, b, ldb, c, ldc = args
    out = c.double().clone()
    alpha, beta = _blas.as_real(alpha, "float32"), _blas.as_real(beta, "float32")
    for j in range(n):
        for i in range(m):
            v = 0.0
            if alpha != 0:
                v += alpha * (a[i + j * lda] if ta == 0 else a[j + i * lda]).item()
            if beta != 0:
                v += beta * (b[i + j * ldb] if tb == 0 else b[j + i * ldb]).item()
            out[i + j * ldc] = v
    return out


def _loops_dgmm(args: tuple) -> torch.Tensor:
    mode, m, n, a, lda, x, incx, c, ldc = args
    out = c.double().clone()
    length = m if mode == 0 else n

    def xv(j: int) -> float:
        return x[j * incx].item() if incx >= 0 else x[(length - 1 - j) * -incx].item()

    for j in range(n):
        for i in range(m):
            out[i + j * ldc] = a[i + j * lda].item() * (xv(i) if mode == 0 else xv(j))
    return out


LOOPS = {
    "cublas::cublasSsyrk_v2": lambda args: _loops_syrk(args, "cublasSsyrk_v2"),
    "cublas::cublasCsyrkEx": lambda args: _loops_syrk(args, "cublasCsyrkEx"),
    "cublas::cublasCsymm_v2": _loops_symm,
    "cublas::cublasSgeam": _loops_geam,
    "cublas::cublasSdgmm": _loops_dgmm,
}


@pytest.mark.parametrize("sid", sorted(LOOPS))
def test_references_match_the_c_api_definition_on_the_cpu_tier(sid: str) -> None:
    spec = operators.get(sid)
    for i, c in enumerate(spec.public_cases(Tier.CPU)):
        call = spec.make_call(c, torch.Generator().manual_seed(i))
        (exp,) = spec.reference(call)
        want = LOOPS[sid](call.args)
        got = exp.value
        if not got.is_complex():
            want = want.real if want.is_complex() else want
        finite = ~torch.isnan(got)
        assert torch.equal(finite, ~torch.isnan(want)), c.name  # NaN only where it was
        tol = 1e-12 * (1 + exp.scale.abs()[finite]) if exp.scale is not None else 1e-12
        assert bool(((got[finite] - want[finite]).abs() <= tol).all()), c.name


def test_symmetric_inputs_hold_nan_in_the_unreferenced_triangle_and_syrk_keeps_the_other() -> None:
    symm = operators.get("cublas::cublasCsymm_v2")
    c = next(c for c in symm.public_cases(Tier.CPU) if c["alpha"] != 0 and c["uplo"] == 1)
    call = symm.make_call(c, torch.Generator().manual_seed(0))
    side, uplo, m, n, _, a, lda = call.args[:7]
    ka = m if side == 0 else n
    tri = _blas.stored(a, ka, ka, lda)
    assert bool(torch.isnan(tri[~_blas.in_triangle(ka, uplo)]).all())
    assert not bool(torch.isnan(tri[_blas.in_triangle(ka, uplo)]).any())
    syrk = operators.get("cublas::cublasSsyrk_v2")
    c = next(c for c in syrk.public_cases(Tier.CPU) if c["beta"] == 0 and c.shape[0] > 0)
    call = syrk.make_call(c, torch.Generator().manual_seed(0))
    uplo, n, cbuf, ldc = call.args[0], call.args[2], call.args[8], call.args[9]
    (exp,) = syrk.reference(call)
    cm = _blas.stored(cbuf, n, n, ldc)
    assert bool(torch.isnan(cm[_blas.in_triangle(n, uplo)]).all())  # beta == 0: unread
    other = ~_blas.in_triangle(n, uplo)
    assert not bool(torch.isnan(cm[other]).any())  # values a stray write would change
    assert torch.equal(_blas.stored(exp.value, n, n, ldc)[other], cm[other].double())
    assert bool((_blas.stored(exp.scale, n, n, ldc)[other] == 0).all())  # bit for bit


def test_csyrkex_int8_pairs_are_real_then_imaginary() -> None:
    spec = operators.get("cublas::cublasCsyrkEx")
    c = next(c for c in spec.public_cases(Tier.CPU) if c.get("atype") == 7 and c.shape[0] > 0)
    call = spec.make_call(c, torch.Generator().manual_seed(3))
    a = call.args[5]
    assert a.dtype == torch.int8 and a.numel() == 2 * call.args[7] * (
        c.shape[1] if c["trans"] == 0 else c.shape[0])
    z = _col_pairs(a)
    assert z[1] == complex(a[2].item(), a[3].item())


def _col_pairs(a: torch.Tensor) -> list[complex]:
    return [complex(a[2 * e].item(), a[2 * e + 1].item()) for e in range(a.numel() // 2)]


def _aliased(spec_id: str, inplace: object) -> list[tuple[Call, Call]]:
    """Each cpu-tier in-place case as (the harness's call, the same call with C really the
    operand it names)."""
    spec = operators.get(spec_id)
    out = []
    for i, c in enumerate(spec.public_cases(Tier.CPU)):
        if c.get("inplace") != inplace:
            continue
        call = spec.make_call(c, torch.Generator().manual_seed(i))
        args = list(call.args)
        c_at = call.outputs[0].key
        assert isinstance(c_at, int)
        alias = next(k for k in call.mutable if k != c_at)
        assert args[alias] is args[c_at]  # make_call passes the operand itself
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        args[c_at] = args[alias]
        out.append((call, Call(call.entry, tuple(args), outputs=call.outputs,
                               mutable=call.mutable)))
    assert out, f"{spec_id} has no cpu-tier case in place as {inplace!r}"
    return out


@pytest.mark.parametrize("sid,inplace", [("cublas::cublasSgeam", "A"),
                                         ("cublas::cublasSgeam", "B"),
                                         ("cublas::cublasSdgmm", True)])
def test_in_place_cases_pass_with_real_aliasing(sid: str, inplace: object) -> None:
    from operators.checking import check

    spec = operators.get(sid)
    module = load_module(spec.solution)
    for pristine, aliased in _aliased(sid, inplace):
        (exp,) = spec.reference(pristine)
        getattr(module, aliased.entry)(*aliased.args)
        c_at = aliased.outputs[0].key
        assert isinstance(c_at, int)
        got = aliased.args[c_at]
        assert check(got, exp, _tolerance(spec, exp.dtype)) is None
        base = [a.clone() if isinstance(a, torch.Tensor) else a for a in pristine.args]
        alias = next(k for k in pristine.mutable if k != c_at)
        base[c_at] = base[alias]
        spec.baseline(Call(pristine.entry, tuple(base), outputs=pristine.outputs))
        assert check(base[c_at], exp, _tolerance(spec, exp.dtype)) is None


def test_an_in_place_kernel_that_writes_before_it_reads_is_caught_with_real_aliasing() -> None:
    """Why the aliasing matters: geam in two passes (C = beta * op(B), then C += alpha * A)
    reads A after C (= A) was overwritten."""
    from operators.checking import check

    spec = operators.get("cublas::cublasSgeam")
    two_pass = _blas.variant(spec.solution, (
        "    _geam_kernel[grid](A, B, C, m, n, float(alpha), float(beta),",
        "    _geam_kernel[grid](A, B, C, m, n, 0.0, float(beta), s_am, s_an, s_bm, s_bn, ldc,\n"
        "                       ALPHA_ZERO=True, BETA_ZERO=(beta == 0), BLOCK_M=BM,\n"
        "                       BLOCK_N=BN, num_warps=4)\n"
        "    _geam_kernel[grid](A, C, C, m, n, float(alpha), 1.0,"))
    module = load_module(two_pass)
    (pristine, aliased), = _aliased("cublas::cublasSgeam", "A")[:1]
    (exp,) = spec.reference(pristine)
    getattr(module, aliased.entry)(*aliased.args)
    assert check(aliased.args[10], exp, _tolerance(spec, exp.dtype)) is not None


def _tolerance(spec: operators.OperatorSpec, dtype: torch.dtype) -> Tolerance:
    return spec.tolerance(spec.public_cases(Tier.CPU)[0], dtype)  # by dtype only


def test_costs_are_compute_bound_for_blas3_and_bandwidth_bound_for_extensions() -> None:
    for sid in ("cublas::cublasSsyrk_v2", "cublas::cublasCsyrkEx", "cublas::cublasCsymm_v2"):
        spec = operators.get(sid)
        for c in spec.benchmark_cases():
            cost = spec.cost(c)
            assert cost.flops / cost.bytes > 100, c.name  # far beyond any machine balance
            assert cost.dtype == "float32"
            # >= 100 us at an H200's 67 TFLOP/s fp32 (non-tensor) peak.
            assert cost.flops / 67e12 > 100e-6, c.name
    for sid in ("cublas::cublasSgeam", "cublas::cublasSdgmm"):
        spec = operators.get(sid)
        for c in spec.benchmark_cases():
            cost = spec.cost(c)
            assert cost.flops / cost.bytes < 1, c.name
            assert 0.5 * 2**30 <= cost.bytes <= 2**30 * 1.6, c.name
    syrk = operators.get("cublas::cublasSsyrk_v2")
    c = syrk.benchmark_cases()[0]
    n, k = c.shape
    assert math.isclose(syrk.cost(c).flops, n * (n + 1) * k + 1.5 * n * (n + 1))


@pytest.mark.gpu
@pytest.mark.parametrize("sid", ["cublas::cublasSgeam", "cublas::cublasSdgmm"])
def test_libcublas_in_place_with_real_aliasing(sid: str) -> None:
    """On a CUDA host: cuBLAS itself on every full-tier in-place case with C really being A
    (or B) on the device, against the reference (the harness's copies keep no aliasing); in
    its own interpreter, so another routine's sticky CUDA error cannot fail it."""
    from tests.operators.cublas_gpu_cases import run_isolated

    assert operators.get(sid).baseline_library() == "cublas"
    wrong = run_isolated(sid, "inplace")
    assert not wrong, f"{len(wrong)} cases:\n" + "\n".join(wrong)
