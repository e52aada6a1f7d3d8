"""The gemv family's reference solutions and negative controls touch nothing outside their
arguments on the cpu tier. Triton's interpreter does not catch out-of-bounds accesses (a small
overrun returns garbage or corrupts the heap, and CI crashes later, elsewhere), so every load
and store is checked here against the storage of the tensors the call passed — the pointer
arrays of the Batched routines and their pointees included."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import torch
import triton.language as tl
from triton.runtime import interpreter

import operators
from device_agent.platforms.cpu import install_interpreter_support
from operators.cublas import _gemv
from operators.invoke import invoke, prepare
from operators.spec import Call, Tier
from operators.testing import load_module

install_interpreter_support()

SPECS = [s for s in operators.all_specs(source="cublas") if isinstance(s, _gemv.Gemv)]
SOURCES = [pytest.param(s, name, source, id=f"{s.id}-{name}")
           for s in SPECS
           for name, source in [("solution", s.solution), *((n.name, n.source) for n in s.negatives)]]


def _ranges(call: Call) -> list[tuple[int, int]]:
    """[start, end) byte ranges of every tensor the candidate receives, and of the pointees of
    its arrays of pointers."""
    args, kwargs = call.passed()
    tensors = [t for t in [*args, *kwargs.values()] if isinstance(t, torch.Tensor)]
    tensors += [t for _, t in call.tensor_args()]
    out = []
    for t in tensors:
        st = t.untyped_storage()
        out.append((st.data_ptr(), st.data_ptr() + st.nbytes()))
    return out


class _Bounds:
    """Wraps the interpreter's loads and stores: every unmasked address must lie, whole, in one
    of ``ranges``; the first that does not is kept."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int]] = []
        self.bad: str | None = None

    def check(self, what: str, ptrs: Any, mask: Any) -> None:
        addr = np.asarray(ptrs.data, dtype=np.uint64)[np.asarray(mask.data, dtype=bool)]
        if self.bad is not None or addr.size == 0:
            return
        size = interpreter._get_np_dtype(ptrs.get_element_ty()).itemsize
        ok = np.zeros(addr.shape, dtype=bool)
        for lo, hi in self.ranges:
            ok |= (addr >= lo) & (addr + size <= hi)
        if not ok.all():
            self.bad = f"{what} of {int((~ok).sum())} elements outside the arguments"


@pytest.mark.parametrize("spec,name,source", SOURCES)
def test_every_access_stays_inside_the_arguments(spec: _gemv.Gemv, name: str, source: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    bounds = _Bounds()
    load, store = (interpreter.InterpreterBuilder.create_masked_load,
                   interpreter.InterpreterBuilder.create_masked_store)

    def checked_load(self: Any, ptrs: Any, mask: Any, *rest: Any) -> Any:
        bounds.check("a load", ptrs, mask)
        if bounds.bad is not None:  # never read outside either: a far one segfaults
            mask = interpreter.TensorHandle(np.zeros_like(mask.data), mask.dtype)
        return load(self, ptrs, mask, *rest)

    def checked_store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
        bounds.check("a store", ptrs, mask)
        if bounds.bad is not None:  # never write outside: keep the heap intact
            mask = interpreter.TensorHandle(np.zeros_like(mask.data), mask.dtype)
        return store(self, ptrs, value, mask, *rest)

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_masked_load", checked_load)
    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_masked_store", checked_store)
    module = load_module(source)
    cases = spec.public_cases(Tier.CPU)
    if name == "solution":
        cases += list(spec.hidden_cases(random.Random(0), Tier.CPU))
    for i, c in enumerate(cases):
        call = prepare(spec.make_call(c, torch.Generator().manual_seed(i)), "cpu")
        bounds.ranges = _ranges(call)
        try:
            invoke(getattr(module, c.entry), call)
        except Exception:  # noqa: BLE001 - controls may fail; reads past the buffers may not
            pass
        assert bounds.bad is None, f"{name} on {c.name}: {bounds.bad}"


def test_the_64_bit_solution_indexes_past_2_31(monkeypatch: pytest.MonkeyPatch) -> None:
    """cublasCgemvBatched_64's reference solution on a 3 x 70 matrix whose leading dimension puts
    its last column past float offset 2^31 (the benchmark's wide case, in miniature): the
    buffer is 8.6 GiB of untouched virtual memory, only the matrix's 210 elements written."""
    spec = operators.get("cublas::cublasCgemvBatched_64")
    m, n = 3, 70
    lda = 2**31 // (2 * (n - 1)) + 5
    assert 2 * ((m - 1) + (n - 1) * lda) > 2**31
    try:
        a = torch.empty(lda * n, dtype=torch.complex64)
    except RuntimeError:
        pytest.skip("no 8.6 GiB of address space for the wide buffer")
    gen = torch.Generator().manual_seed(5)
    mat = torch.complex(torch.randn(m, n, generator=gen), torch.randn(m, n, generator=gen))
    a.as_strided((m, n), (1, lda)).copy_(mat)
    x = torch.complex(torch.randn(n, generator=gen), torch.randn(n, generator=gen))
    y = torch.full((m,), float("nan"), dtype=torch.complex64)
    bounds = _Bounds()
    bounds.ranges = [(t.untyped_storage().data_ptr(),
                      t.untyped_storage().data_ptr() + t.untyped_storage().nbytes())
                     for t in (a, x, y)]
    load = interpreter.InterpreterBuilder.create_masked_load

    def checked_load(self: Any, ptrs: Any, mask: Any, *rest: Any) -> Any:
        if ptrs.get_element_ty() == tl.float32:  # the data, not the pointers
            bounds.check("a load", ptrs, mask)
        if bounds.bad is not None:
            mask = interpreter.TensorHandle(np.zeros_like(mask.data), mask.dtype)
        return load(self, ptrs, mask, *rest)

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_masked_load", checked_load)
    module = load_module(spec.solution)
    pointers = [torch.tensor([t.data_ptr()], dtype=torch.int64) for t in (a, x, y)]
    module.cublasCgemvBatched_64(0, m, n, 2 - 1j, pointers[0], lda, pointers[1], 1, 0j,
                                 pointers[2], 1, 1)
    assert bounds.bad is None, bounds.bad
    want = (2 - 1j) * (mat.to(torch.complex128) @ x.to(torch.complex128))
    torch.testing.assert_close(y.to(torch.complex128), want, rtol=1e-5, atol=1e-5)
