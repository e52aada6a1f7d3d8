"""On a CUDA host: libcublas itself against each cuBLAS problem's reference, on every public
case of the full tier and every GEMM benchmark case. What the suite claims of cuBLAS — quick
returns (a dot or asum of n <= 0 is 0, scal and asum return at once for incx <= 0), which
operands alpha == 0 leaves unread, negative increments starting at the far end, no conjugation
in dotu, conjugated x in dotc — is then checked against the library the baseline calls, and
every tolerance against the library's own rounding. Each routine runs in its own interpreter
(tests/operators/cublas_gpu_cases.py), so a sticky CUDA error fails that routine alone, and
every failing case is listed by name. Skipped without a GPU (run: python -m pytest -q -m gpu
tests/operators/test_cublas_gpu.py)."""

from __future__ import annotations

import pytest

import operators
from tests.operators.cublas_gpu_cases import run_isolated

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("spec", operators.all_specs(source="cublas"), ids=lambda s: s.id)
def test_libcublas_agrees_with_the_reference_on_every_public_case(
        spec: operators.OperatorSpec) -> None:
    assert spec.baseline_library() == "cublas"
    wrong = run_isolated(spec.id, "public")
    assert not wrong, f"{len(wrong)} cases:\n" + "\n".join(wrong)


GEMM_SPECS = [s for s in operators.all_specs(source="cublas") if "gemm" in s.id]


@pytest.mark.parametrize("spec", GEMM_SPECS, ids=lambda s: s.id)
def test_libcublas_agrees_with_the_reference_on_every_gemm_benchmark_case(
        spec: operators.OperatorSpec) -> None:
    """The benchmark cases are made on the device, as the timing harness makes them, and
    checked on the device, as its re-check does: the `_64` routines' offset cases (buffers of
    8-16 GiB with elements past 2^31) included, and Hgemm's tolerance against cuBLAS's own
    float16 accumulation at benchmark sizes."""
    wrong = run_isolated(spec.id, "benchmark")
    assert not wrong, f"{len(wrong)} cases:\n" + "\n".join(wrong)
