"""The ctypes binding that makes cuBLAS itself the cuBLAS problems' baseline (no GPU here: a
stand-in library records what the binding asks of libcublas)."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest
import torch

from operators.cublas import _cublas


class FakeCublas:
    """Records every call; ``fail`` makes one routine return a status."""

    def __init__(self, fail: dict[str, int] | None = None) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.fail = fail or {}

    def __getattr__(self, name: str) -> Any:
        def fn(*args: Any) -> int:
            self.calls.append((name, args))
            if name == "cublasCreate_v2":
                ctypes.cast(args[0], ctypes.POINTER(ctypes.c_void_p))[0] = 0xC0FFEE
            return self.fail.get(name, 0)
        return fn


class FakeStream:
    cuda_stream = 0x5EED


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCublas:
    lib = FakeCublas()
    monkeypatch.setattr(_cublas, "_handle", _cublas._Handle())
    monkeypatch.setattr(_cublas, "_loaded_path", lambda: "/fake/libcublas.so.12")
    monkeypatch.setattr(ctypes, "CDLL", lambda path: lib)
    monkeypatch.setattr(torch.cuda, "current_blas_handle", lambda: 0)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: FakeStream())
    return lib


def test_one_handle_in_device_pointer_mode_and_every_call_on_torchs_stream(fake: FakeCublas) -> None:
    x = torch.zeros(4)
    _cublas.call("cublasSaxpy_v2", _cublas.c_int(4), _cublas.c_void_p(1), _cublas.ptr(x),
                 _cublas.c_int(1), _cublas.ptr(x), _cublas.c_int(1))
    _cublas.call("cublasSscal_v2", _cublas.c_int(4), _cublas.c_void_p(1), _cublas.ptr(x),
                 _cublas.c_int(1))
    names = [n for n, _ in fake.calls]
    assert names == ["cublasCreate_v2", "cublasSetPointerMode_v2", "cublasSetStream_v2",
                     "cublasSaxpy_v2", "cublasSetStream_v2", "cublasSscal_v2"]
    mode = fake.calls[1][1][1]
    assert mode.value == _cublas.POINTER_MODE_DEVICE
    handle = fake.calls[3][1][0]
    assert handle.value == 0xC0FFEE  # the created handle is passed first
    assert fake.calls[2][1][1].value == FakeStream.cuda_stream
    assert fake.calls[3][1][3].value == x.data_ptr()


def test_a_failing_status_raises_with_the_routine_and_status_name(fake: FakeCublas) -> None:
    fake.fail["cublasSrotm_v2"] = 7  # a routine outside SIGNATURES: its arguments pass as given
    with pytest.raises(_cublas.CublasError, match="cublasSrotm_v2 failed: CUBLAS_STATUS_INVALID_VALUE"):
        _cublas.call("cublasSrotm_v2")


def test_device_scalars_are_made_once_per_value_and_dtype(fake: FakeCublas) -> None:
    dev = torch.device("cpu")
    a = _cublas.scalar(2.5, torch.float32, dev)
    b = _cublas.scalar(2.5, torch.float32, dev)
    c = _cublas.scalar(2.5, torch.float64, dev)
    assert a.value == b.value != c.value
    t = _cublas._handle.scalar(1 - 2j, torch.complex64, dev)
    assert t.dtype == torch.complex64 and t.item() == 1 - 2j


def test_without_cuda_the_baseline_is_torch() -> None:
    if torch.cuda.is_available():
        pytest.skip("a CUDA host: cuBLAS is the baseline")
    assert not _cublas.available()
    assert _cublas.library() == "torch"


# ---- the bound routines: Python values marshalled as their C signatures say -------------------

def _example(kind: str, x: torch.Tensor) -> Any:
    return {"i": 3, "l": 2**40, "p": x}[kind]


@pytest.mark.parametrize("routine", sorted(_cublas.SIGNATURES))
def test_every_bound_routine_gets_c_values_in_its_order(fake: FakeCublas, routine: str) -> None:
    sig = _cublas.SIGNATURES[routine]
    x = torch.zeros(4)
    _cublas.call(routine, *(_example(k, x) for k in sig))
    name, args = fake.calls[-1]
    assert name == routine and len(args) == 1 + len(sig)  # the handle, then the arguments
    for kind, value in zip(sig, args[1:], strict=True):
        want = {"i": ctypes.c_int, "l": ctypes.c_int64, "p": ctypes.c_void_p}[kind]
        assert type(value) is want
        assert value.value == (x.data_ptr() if kind == "p" else _example(kind, x))


def test_the_blas1_routines_have_their_c_signatures() -> None:
    # cublas_api.h: n, x, incx, y, incy[, result]; axpy/scal put alpha* after n.
    sigs = _cublas.SIGNATURES
    assert sigs["cublasCcopy_v2"] == sigs["cublasDcopy_v2"] == sigs["cublasZswap_v2"] == "ipipi"
    assert sigs["cublasSdot_v2"] == sigs["cublasCdotu_v2"] == sigs["cublasZdotc_v2"] == "ipipip"
    assert sigs["cublasDasum_v2"] == "ipip"
    assert sigs["cublasDaxpy_v2"] == sigs["cublasSaxpy_v2"] == "ippipi"
    assert sigs["cublasSscal_v2"] == "ippi"


def test_pointer_arrays_scalars_and_ctypes_values_pass_as_pointers(fake: FakeCublas) -> None:
    from operators.spec import PointerArray

    arr = PointerArray(torch.zeros(6), (3, 0))
    _cublas.call("cublasDasum_v2", _cublas.c_int(2), arr, -1, _cublas.c_void_p(0xABC))
    _, args = fake.calls[-1]
    assert args[2].value == arr.pointers.data_ptr() and args[4].value == 0xABC
    assert args[1].value == 2 and args[3].value == -1


@pytest.mark.parametrize("args,match", [
    ((3, torch.zeros(2), 1), "takes 4 arguments after the handle, got 3"),
    ((3.0, torch.zeros(2), 1, torch.zeros(1)), "argument 0: expected a c_int, got 3.0"),
    ((True, torch.zeros(2), 1, torch.zeros(1)), "argument 0: expected a c_int"),
    ((2**31, torch.zeros(2), 1, torch.zeros(1)), "argument 0: expected a c_int"),
    ((3, [1, 2], 1, torch.zeros(1)), "argument 1: expected a device pointer"),
])
def test_bad_arguments_never_reach_libcublas(fake: FakeCublas, args: tuple[Any, ...],
                                             match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _cublas.call("cublasDasum_v2", *args)
    assert not any(name == "cublasDasum_v2" for name, _ in fake.calls)


def test_the_64_bit_api_takes_int64_sizes() -> None:
    (v,) = _cublas.marshal("cublasSgemmStridedBatched_64", "l", (2**40,))
    assert type(v) is ctypes.c_int64 and v.value == 2**40
    with pytest.raises(ValueError, match="expected a c_int, got 1099511627776"):
        _cublas.marshal("cublasSgemm_v2", "i", (2**40,))
