"""cuBLAS itself as the baseline of the cuBLAS problems, called through ctypes.

A cuBLAS problem is named after a library routine, so its speed-up must be measured against that
routine, not against whatever PyTorch dispatches to (for BLAS-2 and batched routines PyTorch
often runs its own kernels). This module calls the ``libcublas`` that the torch install already
loaded — the same build torch's own matmuls use — with one handle per process (a worker), in
DEVICE pointer mode as the published harness does: ``alpha``/``beta`` are 1-element device
tensors and scalar results are written to device memory, so no call synchronises the host.

Where there is no CUDA (the ``cpu`` platform) or no libcublas is found, :func:`available` is
False and a problem's ``baseline`` runs its PyTorch implementation; ``baseline_library`` says
which ran. Nothing here is imported by candidates; the static policy refuses ``ctypes`` to them.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, cast

import torch

from operators.spec import PointerArray

POINTER_MODE_DEVICE = 1  # CUBLAS_POINTER_MODE_DEVICE

# cublasStatus_t values (cublas_api.h) and their names, for errors that say what failed.
_STATUS_NAMES = {
    0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
    7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH",
    11: "CUBLAS_STATUS_MAPPING_ERROR", 13: "CUBLAS_STATUS_EXECUTION_FAILED",
    14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
    16: "CUBLAS_STATUS_LICENSE_ERROR",
}

# ctypes argument kinds the routine modules build their calls from.
c_int = ctypes.c_int
c_int64 = ctypes.c_int64
c_void_p = ctypes.c_void_p


# Each bound routine's arguments after the handle, one letter each: ``i`` a C int (sizes,
# increments, leading dimensions and the cublasOperation_t/FillMode/SideMode/DiagType enums),
# ``l`` an int64_t (the ``_64`` API's sizes and strides), ``p`` a device pointer (a buffer, a
# DEVICE-mode scalar from :func:`scalar`, a scalar result, an array of pointers). A routine
# called with the wrong number or kind of arguments is refused before libcublas sees it.
SIGNATURES: dict[str, str] = {
    "cublasSaxpy_v2": "ippipi",  # n, alpha*, x, incx, y, incy
    "cublasDaxpy_v2": "ippipi",
    "cublasSscal_v2": "ippi",  # n, alpha*, x, incx
    "cublasCcopy_v2": "ipipi",  # n, x, incx, y, incy
    "cublasDcopy_v2": "ipipi",
    "cublasZswap_v2": "ipipi",
    "cublasSdot_v2": "ipipip",  # n, x, incx, y, incy, result*
    "cublasCdotu_v2": "ipipip",
    "cublasZdotc_v2": "ipipip",
    "cublasDasum_v2": "ipip",  # n, x, incx, result*
    # transa, transb, m, n, k, alpha*, A, lda, B, ldb, beta*, C, ldc
    "cublasSgemm_v2": "iiiiippipippi",
    # BLAS-2. m, n, alpha*, x, incx, y, incy, A, lda
    "cublasSger_v2": "iippipipi",
    "cublasCgeru_v2": "iippipipi",
    "cublasZgerc_v2": "iippipipi",
    "cublasCsymv_v2": "iippipippi",  # uplo, n, alpha*, A, lda, x, incx, beta*, y, incy
    "cublasDsbmv_v2": "iiippipippi",  # uplo, n, k, alpha*, A, lda, x, incx, beta*, y, incy
    "cublasDsyr2_v2": "iippipipi",  # uplo, n, alpha*, x, incx, y, incy, A, lda
    "cublasStbmv_v2": "iiiiipipi",  # uplo, trans, diag, n, k, A, lda, x, incx
    "cublasStrsv_v2": "iiiipipi",  # uplo, trans, diag, n, A, lda, x, incx
    # BLAS-3 beyond GEMM and the extensions (issue #25):
    # uplo, trans, n, k, alpha*, A, lda, beta*, C, ldc
    "cublasSsyrk_v2": "iiiippippi",
    # uplo, trans, n, k, alpha*, A, Atype, lda, beta*, C, Ctype, ldc
    "cublasCsyrkEx": "iiiippiippii",
    # side, uplo, m, n, alpha*, A, lda, B, ldb, beta*, C, ldc
    "cublasCsymm_v2": "iiiippipippi",
    # mode, m, n, A, lda, x, incx, C, ldc
    "cublasSdgmm": "iiipipipi",
    # transa, transb, m, n, alpha*, A, lda, beta*, B, ldb, C, ldc
    "cublasSgeam": "iiiippippipi",
    # side, uplo, trans, diag, m, n, alpha*, A, lda, B, ldb
    "cublasStrsm_v2": "iiiiiippipi",
    # ... as trsm, A and B arrays of pointers, then batchCount
    "cublasDtrsmBatched": "iiiiiippipii",
    "cublasZtrsmBatched": "iiiiiippipii",
    # trans, m, n, alpha*, A, lda, x, incx, beta*, y, incy
    "cublasCgemv_v2": "iiippipippi",
    "cublasDgemv_v2": "iiippipippi",
    # trans, m, n, alpha*, Aarray, lda, xarray, incx, beta*, yarray, incy, batchCount
    "cublasSgemvBatched": "iiippipippii",
    "cublasDgemvBatched": "iiippipippii",
    "cublasZgemvBatched": "iiippipippii",
    "cublasCgemvBatched_64": "illpplplppll",  # the same with int64_t sizes (trans an enum)
    # trans, m, n, alpha*, A, lda, strideA (long long), x, incx, stridex, beta*, y, incy,
    # stridey, batchCount
    "cublasSgemvStridedBatched": "iiippilpilppili",
    "cublasDgemvStridedBatched": "iiippilpilppili",
    "cublasCgemvStridedBatched": "iiippilpilppili",
    "cublasZgemvStridedBatched": "iiippilpilppili",
    "cublasCgemm_v2": "iiiiippipippi",
    # transa, transb, m, n, k, alpha*, A, Atype, lda, B, Btype, ldb, beta*, C, Ctype, ldc
    # (the cudaDataType_t enums are C ints)
    "cublasSgemmEx": "iiiiippiipiippii",
    # transa, transb, m, n, k, alpha*, Aarray, lda, Barray, ldb, beta*, Carray, ldc, batchCount
    "cublasDgemmBatched": "iiiiippipippii",
    "cublasHgemmBatched": "iiiiippipippii",
    "cublasZgemmBatched": "iiiiippipippii",
    # the same with int64_t sizes, leading dimensions and batchCount
    "cublasSgemmBatched_64": "iilllpplplppll",
    # transa, transb, m, n, k, alpha*, A, lda, (long long) strideA, B, ldb, strideB, beta*, C,
    # ldc, strideC, batchCount
    "cublasSgemmStridedBatched": "iiiiippilpilppili",
    "cublasDgemmStridedBatched": "iiiiippilpilppili",
    "cublasCgemmStridedBatched": "iiiiippilpilppili",
    "cublasZgemmStridedBatched": "iiiiippilpilppili",
    "cublasHgemmStridedBatched": "iiiiippilpilppili",
    # the same with int64_t sizes, leading dimensions and batchCount
    "cublasCgemmStridedBatched_64": "iilllppllpllpplll",
    "cublasDgemmStridedBatched_64": "iilllppllpllpplll",
}


class CublasError(RuntimeError):
    """A cuBLAS call returned a status other than success (a harness failure, never a
    candidate's)."""


def _loaded_path() -> str | None:
    """The libcublas this process has mapped already (torch loads it with its first BLAS call)."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip().split(" ")[-1]
                if os.path.basename(path).startswith("libcublas.so"):
                    return path
    except OSError:
        return None
    return None


def _installed_paths() -> list[str]:
    """libcublas files a torch install ships: torch/lib, or the nvidia-cublas wheels beside it."""
    found: list[str] = []
    roots = [os.path.dirname(torch.__file__), *sys.path]
    for root in roots:
        for pattern in ("lib/libcublas.so*", "nvidia/cublas/lib/libcublas.so*",
                        "nvidia/cu*/lib/libcublas.so*"):
            found += sorted(glob.glob(os.path.join(root, pattern)))
    return found


@functools.cache
def library_path() -> str | None:
    """Where the libcublas to call lives, or None (no CUDA build, or no library found)."""
    if torch.version.cuda is None or torch.version.hip is not None:
        return None
    return _loaded_path() or next(iter(_installed_paths()), None)


def available() -> bool:
    """Whether cuBLAS can be the baseline here: a CUDA device and the library torch uses."""
    return torch.cuda.is_available() and library_path() is not None


def library() -> str:
    """``"cublas"`` where cuBLAS is the baseline on this host, else ``"torch"``."""
    return "cublas" if available() else "torch"


class _Handle:
    """One cuBLAS handle for this process, created on first use, in DEVICE pointer mode."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lib: Any = None
        self._handle = ctypes.c_void_p()
        self._scalars: dict[tuple[complex, torch.dtype, int], torch.Tensor] = {}

    def lib(self) -> Any:
        with self._lock:
            if self._lib is None:
                # loads torch's libcublas and its CUDA context (cast: torch leaves it unannotated)
                cast(Callable[[], int], torch.cuda.current_blas_handle)()
                path = _loaded_path() or library_path()
                if path is None:
                    raise CublasError("no libcublas found for this torch install")
                lib = ctypes.CDLL(path)
                _check(lib.cublasCreate_v2(ctypes.byref(self._handle)), "cublasCreate_v2")
                _check(lib.cublasSetPointerMode_v2(self._handle, c_int(POINTER_MODE_DEVICE)),
                       "cublasSetPointerMode_v2")
                self._lib = lib
            return self._lib

    def call(self, routine: str, *args: Any) -> None:
        """Run ``routine(handle, *args)`` on torch's current stream; raise on a bad status."""
        lib = self.lib()
        stream = torch.cuda.current_stream().cuda_stream
        _check(lib.cublasSetStream_v2(self._handle, c_void_p(stream)), "cublasSetStream_v2")
        fn: Callable[..., int] = getattr(lib, routine)
        _check(fn(self._handle, *args), routine)

    def scalar(self, value: complex, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A 1-element device tensor holding ``value``: DEVICE pointer mode's alpha/beta. Kept,
        so timed calls do not copy it to the device each time."""
        key = (complex(value), dtype, device.index or 0)
        with self._lock:
            t = self._scalars.get(key)
            if t is None:
                t = torch.tensor([value], dtype=dtype, device=device)
                self._scalars[key] = t
            return t


def _check(status: int, routine: str) -> None:
    if status != 0:
        name = _STATUS_NAMES.get(status, f"status {status}")
        raise CublasError(f"{routine} failed: {name}")


_handle = _Handle()


def call(routine: str, *args: Any) -> None:
    """Call a cuBLAS routine by its C name with its arguments after the handle. A routine in
    :data:`SIGNATURES` takes Python ints, tensors and pointer arrays too (converted by
    :func:`marshal`); any other takes ctypes values only (:data:`c_int`, :data:`c_int64`,
    :func:`ptr`)."""
    sig = SIGNATURES.get(routine)
    _handle.call(routine, *(args if sig is None else marshal(routine, sig, args)))


_INT_RANGE = {"i": (-(2**31), 2**31 - 1), "l": (-(2**63), 2**63 - 1)}


def marshal(routine: str, sig: str, args: tuple[Any, ...]) -> list[Any]:
    """``args`` as the ctypes values ``sig`` names (see :data:`SIGNATURES`); a wrong count, a
    value of the wrong kind or an int out of its C range is a :class:`ValueError` naming the
    routine and the argument, never a call libcublas would misread."""
    if len(args) != len(sig):
        raise ValueError(f"{routine} takes {len(sig)} arguments after the handle, got {len(args)}")
    out: list[Any] = []
    for pos, (kind, value) in enumerate(zip(sig, args, strict=True)):
        if kind == "p":
            out.append(_pointer(routine, pos, value))
            continue
        ctype = c_int if kind == "i" else c_int64
        if isinstance(value, ctype):
            out.append(value)
            continue
        lo, hi = _INT_RANGE[kind]
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(f"{routine} argument {pos}: expected a {ctype.__name__}, got {value!r}")
        out.append(ctype(value))
    return out


def _pointer(routine: str, pos: int, value: Any) -> ctypes.c_void_p:
    if isinstance(value, ctypes.c_void_p):
        return value
    if isinstance(value, torch.Tensor):
        return ptr(value)
    if isinstance(value, PointerArray):  # a Batched routine's array of device pointers
        return ptr(value.pointers)
    raise ValueError(f"{routine} argument {pos}: expected a device pointer (a tensor, a "
                     f"pointer array or a scalar()), got {type(value).__name__}")


def ptr(t: torch.Tensor) -> ctypes.c_void_p:
    """A device tensor's address, as cuBLAS takes buffers (and arrays of pointers)."""
    return c_void_p(t.data_ptr())


def scalar(value: complex, dtype: torch.dtype, device: torch.device) -> ctypes.c_void_p:
    """The device address of ``value`` as a 1-element ``dtype`` tensor (alpha, beta)."""
    return ptr(_handle.scalar(value, dtype, device))
