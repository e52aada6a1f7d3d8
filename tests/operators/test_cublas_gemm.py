"""The GEMM family's shared code (operators/cublas/_gemm*.py): the reference against an
element-by-element transcription of the C API, the inputs' conventions, the binding's
signatures, Hgemm's float16 accumulation against its tolerance, the `_64` routines' offset
cases and cublasSgemm_v2's inputs kept as they were before it moved onto the shared code."""

from __future__ import annotations

import hashlib
import math
import random

import pytest
import torch

import operators
from operators.checking import check
from operators.cublas import _cublas, _gemm_cases, _gemm_data
from operators.spec import Case, OperatorSpec, PointerArray, Tier

GEMMS = [s for s in operators.all_specs(source="cublas") if "gemm" in s.id]


def _spec(routine: str) -> OperatorSpec:
    return operators.get(f"cublas::{routine}")


def _naive(call_args: tuple[object, ...], convention: str, scalar: str) -> torch.Tensor:
    """C after the call, element by element from the C API's definition: entry e's A(i, p) is
    element ``start_e + i + p*lda`` of its buffer, op() transposes (and conjugates for C)."""
    g = _gemm_data.operands(convention, call_args)
    out = g.c.to(torch.complex128 if g.c.is_complex() else torch.float64)
    cplx = out.is_complex()
    alpha = complex(torch.tensor(g.alpha, dtype=getattr(torch, scalar)).item())
    beta = complex(torch.tensor(g.beta, dtype=getattr(torch, scalar)).item())
    if g.empty():
        return out

    def op(buf: torch.Tensor, start: int, trans: int, r: int, c: int, ld: int) -> torch.Tensor:
        i = torch.arange(r)[:, None]
        j = torch.arange(c)[None, :]
        idx = start + (i + j * ld if trans == 0 else j + i * ld)
        x = buf[idx].to(out.dtype)
        return x.conj() if trans == 2 and cplx else x

    for e in range(g.batch):
        oc = g.offsets[2][e]
        idx = oc + torch.arange(g.m)[:, None] + torch.arange(g.n)[None, :] * g.ldc
        new = torch.zeros(g.m, g.n, dtype=out.dtype)
        if g.alpha != 0 and g.k > 0:
            a = op(g.a, g.offsets[0][e], g.ta, g.m, g.k, g.lda)
            b = op(g.b, g.offsets[1][e], g.tb, g.k, g.n, g.ldb)
            new += (alpha if cplx else alpha.real) * (a @ b)
        if g.beta != 0:
            new += (beta if cplx else beta.real) * out[idx]
        out[idx] = new
    return out


@pytest.mark.parametrize("spec", GEMMS, ids=lambda s: s.id)
def test_the_reference_is_the_c_api_element_by_element(spec: OperatorSpec) -> None:
    cases = spec.public_cases(Tier.CPU) + list(spec.hidden_cases(random.Random(5), Tier.CPU))
    for i, c in enumerate(cases):
        call = spec.make_call(c, torch.Generator().manual_seed(i))
        (exp,) = spec.reference(call)
        want = _naive(call.args, spec.convention, spec.scalar)  # type: ignore[attr-defined]
        assert exp.value.shape == want.shape, c.name
        # Untouched elements (padding, gaps, NaN included) bit for bit; products within fp64.
        same = (exp.value == want) | (exp.value.isnan() & want.isnan())
        close = torch.isclose(exp.value, want, rtol=1e-12, atol=1e-12)
        assert bool((same | close).all()), c.name
        assert bool(((exp.scale == 0) <= same).all()), f"{c.name}: scale 0 on a changed element"


def test_inputs_poison_what_the_routine_must_not_read() -> None:
    spec = _spec("cublasZgemmStridedBatched")
    nan_ab = _gemm_cases.strided_case(spec.routine, "complex128", "N", "T", 5, 4, 3, 0.0,  # type: ignore[attr-defined]
                                      0.5j, 2)
    call = spec.make_call(nan_ab, torch.Generator().manual_seed(0))
    g = _gemm_data.operands("strided", call.args)
    # alpha == 0: cuBLAS (DEVICE pointer mode) reads A and B all the same, so they are finite
    assert not bool(g.a.isnan().any()) and not bool(g.b.isnan().any())
    assert not bool(g.c.isnan().any())  # beta != 0: random, padding and gaps included
    nan_c = _gemm_cases.strided_case(spec.routine, "complex128", "N", "N", 5, 4, 3, 1.0, 0.0,  # type: ignore[attr-defined]
                                     3, sa="gap", pads=(2, 0, 1))
    g = _gemm_data.operands("strided", spec.make_call(nan_c, torch.Generator()).args)
    assert bool(g.c.isnan().all())  # beta == 0: C never read
    a = g.a.view(-1)
    assert g.offsets[0] == (0, 26, 52)  # lda 7 * 3 columns + a gap of 5
    assert bool(a[5:7].isnan().all()) and bool(a[21:26].isnan().all())  # padding, gap
    assert not bool(a[:5].isnan().any())


def test_shared_pointees_are_one_matrix_and_entries_are_shuffled() -> None:
    spec = _spec("cublasDgemmBatched")
    c = _gemm_cases.gemm_case(spec.routine, "float64", "N", "N", 4, 3, 2, alpha=1.0, beta=1.0,
                              batch=6, shared_a=True)
    call = spec.make_call(c, torch.Generator().manual_seed(1))
    a, b = call.args[6], call.args[8]
    assert isinstance(a, PointerArray) and isinstance(b, PointerArray)
    # one pointee of 8 float64 then NaN up to the next 16-byte boundary
    assert len(set(a.offsets)) == 1 and a.buffer.numel() == 4 * 2 + 2
    assert all(o * 8 % 16 == 0 for o in (*a.offsets, *b.offsets))  # 16-byte aligned
    assert len(set(b.offsets)) == 6 and list(b.offsets) != sorted(b.offsets)


@pytest.mark.parametrize("spec", GEMMS, ids=lambda s: s.id)
def test_the_binding_takes_the_entry_points_arguments(spec: OperatorSpec) -> None:
    names = _gemm_data.arg_names(spec.convention)  # type: ignore[attr-defined]
    sig = _cublas.SIGNATURES[spec.routine]  # type: ignore[attr-defined]
    assert len(sig) == len(names)
    pointers = {"alpha", "beta", "A", "B", "C", "Aarray", "Barray", "Carray"}
    wide = spec.routine.endswith("_64")  # type: ignore[attr-defined]
    for kind, name in zip(sig, names, strict=True):
        if name in pointers:
            assert kind == "p", name
        elif name.startswith("stride") or (wide and name in ("m", "n", "k", "lda", "ldb", "ldc",
                                                              "batchCount")):
            assert kind == "l", name  # long long strides; the _64 API's int64_t sizes
        else:
            assert kind == "i", name


def _max_offset(spec: OperatorSpec, c: Case) -> int:
    """The largest element offset a case's A, B or C reaches from its pointer, in the units a
    Triton kernel indexes (floats of the real view for complex data)."""
    d = _gemm_cases.Dims.of(c)
    batch = int(c.get("batch", 1))
    within = (d.lda * (d.cols_a - 1) + d.rows_a, d.ldb * (d.cols_b - 1) + d.rows_b,
              d.ldc * (d.n - 1) + d.m)
    if spec.convention == "strided":  # type: ignore[attr-defined]
        strides = (c["stride_a"], c["stride_b"], c["stride_c"])
        within = tuple(w + (batch - 1) * s for w, s in zip(within, strides, strict=True))
    return (2 if c.dtype.startswith("complex") else 1) * max(within)


def test_every_64_bit_routine_has_a_benchmark_case_past_2_31_and_it_fits_a_h200() -> None:
    wide = [s for s in GEMMS if s.id.endswith("_64")]
    assert len(wide) == 3
    for spec in wide:
        offsets = [_max_offset(spec, c) for c in spec.benchmark_cases()]
        assert max(offsets) > 2**31, spec.id
        assert min(offsets) < 2**31, spec.id  # and an ordinary one
        for c in spec.benchmark_cases():
            size = torch.empty(0, dtype=getattr(torch, c.dtype)).element_size()
            # one buffer of the case: the timing harness holds six copies of a case's inputs
            assert 6 * _max_offset(spec, c) * size / (2 if c.dtype.startswith("complex") else 1) \
                < 100 * 2**30, c.name


def _fp16_accumulated(call_args: tuple[object, ...], convention: str) -> torch.Tensor:
    """C as float16 accumulation computes it: products exact (in float32), each one added to a
    float16 running sum in k order (the most roundings any order makes), alpha and beta
    applied in float16."""
    g = _gemm_data.operands(convention, call_args)
    out = g.c.clone()
    alpha = torch.tensor(g.alpha, dtype=torch.float16)
    beta = torch.tensor(g.beta, dtype=torch.float16)
    a = _gemm_data.op_stack(g.a, g.offsets[0], g.ta, g.m, g.k, g.lda).half()
    b = _gemm_data.op_stack(g.b, g.offsets[1], g.tb, g.k, g.n, g.ldb).half()
    acc = torch.zeros(g.batch, g.m, g.n, dtype=torch.float16)
    for p in range(g.k):
        acc = (acc.float() + a[:, :, p, None].float() * b[:, None, p, :].float()).half()
    for e, o in enumerate(g.offsets[2]):
        c = out[o:].as_strided((g.m, g.n), (1, g.ldc))
        new = alpha * acc[e]
        c.copy_(new + beta * c if g.beta != 0 else new)
    return out


@pytest.mark.parametrize("routine", ["cublasHgemmBatched", "cublasHgemmStridedBatched"])
def test_float16_accumulation_passes_the_hgemm_tolerance(routine: str) -> None:
    spec = _spec(routine)
    worst = 0.0
    for i, c in enumerate(spec.public_cases(Tier.FULL)):
        d = _gemm_cases.Dims.of(c)
        if c["alpha"] == 0 or d.k <= 0 or d.m <= 0 or d.n <= 0 or c["batch"] <= 0:
            continue
        call = spec.make_call(c, torch.Generator().manual_seed(i))
        (exp,) = spec.reference(call)
        got = _fp16_accumulated(call.args, spec.convention)  # type: ignore[attr-defined]
        tol = spec.tolerance(c, torch.float16)
        assert check(got, exp, tol) is None, c.name
        finite = exp.scale > 0
        err = ((got.double() - exp.value).abs()[finite] / exp.scale[finite]).max()
        worst = max(worst, float(err) / tol.rtol)
    # float16 accumulation is far from exact (float32 accumulation would sit near 1/16 of a
    # float16 unit), yet within the allowance with room to spare.
    assert 0.05 < worst < 0.5


def test_sgemm_inputs_are_the_ones_it_had_before_the_shared_code() -> None:
    # Recorded from operators/cublas/sgemm.py before it moved onto _gemm (commit b35dc2a).
    s = _spec("cublasSgemm_v2")
    h = hashlib.sha256()
    cases = list(s.cases()) + list(s.hidden_cases(random.Random(3), Tier.FULL))
    for i, c in enumerate(cases):
        if math.prod(c.shape) > 200**3:
            continue
        call = s.make_call(c, torch.Generator().manual_seed(i))
        for t in [a for a in call.args if isinstance(a, torch.Tensor)]:
            h.update(t.numpy().tobytes())
        h.update(repr((c.name, [a for a in call.args if not isinstance(a, torch.Tensor)],
                       s.cost(c))).encode())
    assert h.hexdigest() == "bce6afb65fecc89feb1f3a27469b46b27f5ad97891a16df67375a8bf2e7e2827"


def test_hgemm_solutions_round_scalars_to_float16_as_torch_does() -> None:
    from operators.testing import load_module

    as_half = load_module(_spec("cublasHgemmBatched").solution)._as_half
    gen = torch.Generator().manual_seed(0)
    values = torch.cat([torch.randn(300, generator=gen, dtype=torch.float64) * 10.0 ** e
                        for e in range(-9, 6)])
    ties = torch.tensor([1 + 2.0**-11, 1 + 3 * 2.0**-11, 2.0**-24 * 2.5, 65519.9, 65520.0,
                         -65520.0, 5.96e-8, 2.0**-26, float("inf"), -0.0], dtype=torch.float64)
    cases = torch.cat([values, ties])
    want = cases.to(torch.float16).double().tolist()
    assert [as_half(v) for v in cases.tolist()] == want
