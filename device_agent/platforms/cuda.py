"""The ``cuda`` platform: NVIDIA GPUs through PyTorch's CUDA build and Triton's NVIDIA backend.

Speed-of-light peaks start from a datasheet table keyed by device model; measured peaks replace
them when the agent measures its device (see docs/architecture.md). Timing is by CUDA events
(:class:`~device_agent.timing.EventTimer`) with NVML for throttle reasons, clocks and
temperature, and the persisting-L2 reset before every flush. docs/platforms.md states the
contract this file fills in.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from typing import TYPE_CHECKING, Any

from device_agent.platforms.base import Peaks, device_system_info
from device_agent.platforms.gpu import init_gpu_worker
from device_agent.platforms.registry import register_platform
from device_agent.platforms.toolchain import ToolchainFrames
from protos.records import SystemInfo

if TYPE_CHECKING:
    from device_agent.timing import Timer

# Datasheet ceilings (dense, no sparsity). Bandwidth in GB/s, rates in TFLOP/s.
DATASHEET: dict[str, Peaks] = {
    "NVIDIA H200": Peaks(4800.0, {"float16": 989.0, "bfloat16": 989.0, "float32": 67.0,
                                  "float64": 67.0, "tf32": 494.0, "int8": 1979.0}),
    "NVIDIA H100 80GB HBM3": Peaks(3350.0, {"float16": 989.0, "bfloat16": 989.0, "float32": 67.0,
                                            "float64": 67.0, "tf32": 494.0}),
    "NVIDIA A100-SXM4-80GB": Peaks(2039.0, {"float16": 312.0, "bfloat16": 312.0, "float32": 19.5,
                                            "float64": 19.5, "tf32": 156.0}),
}


# Where Triton's NVIDIA backend lowers a kernel the frontend accepted (make_ttir … make_cubin):
# a failure raised there, or a crash or hang there, is the toolchain's (docs/platforms.md).
TOOLCHAIN = ToolchainFrames(files=("/triton/backends/nvidia/compiler.py",),
                            candidate_errors=("OutOfResources", "CompilationError"))


@register_platform("cuda", auto_rank=0)  # auto's first choice where a GPU is visible
class CudaPlatform:
    name: str = "cuda"
    torch_device: str = "cuda"
    visibility_env: str | None = "CUDA_VISIBLE_DEVICES"
    timings_meaningful: bool = True
    compiles_kernels: bool = True
    profiles_device: bool = True  # torch.profiler through CUPTI
    baseline_library: str = "PyTorch's CUDA build (cuBLAS, cuDNN and ATen's CUDA kernels)"
    compiler_limits: tuple[str, ...] = (
        "Triton 3.6 on the H200 fails inside its backend (PassManager::run failed) on some "
        "tl.associative_scan kernels: TOOLCHAIN_ERROR",
    )
    toolchain: ToolchainFrames = TOOLCHAIN

    def available(self) -> bool:
        import torch

        # PyTorch's ROCm build answers torch.cuda too: that host is the rocm platform's.
        return bool(torch.cuda.is_available()) and getattr(torch.version, "hip", None) is None

    def device_count(self) -> int:
        import torch

        return int(torch.cuda.device_count())

    def worker_env(self, device_index: int) -> dict[str, str]:
        # Each worker sees exactly one device, as cuda:0.
        return {self.visibility_env or "CUDA_VISIBLE_DEVICES": str(device_index)}

    def import_env(self) -> dict[str, str]:
        return {}

    def init_worker(self) -> None:
        init_gpu_worker()
        from device_agent import launchers  # Triton's NVIDIA backend only

        launchers.use_shared(os.environ.get("KGB_TRITON_LAUNCHERS", ""))

    def device_model(self) -> str:
        import torch

        return str(torch.cuda.get_device_name(0))

    def is_platform_limit(self, exc: BaseException) -> bool:
        return False

    def peaks(self) -> Peaks | None:
        return DATASHEET.get(self.device_model())

    def timer(self, device: str) -> Timer:
        from device_agent.timing import EventTimer

        return EventTimer(device, NvmlMonitor(), persisting_l2_reset())

    def system_info(self) -> SystemInfo:
        import torch

        return device_system_info(self.name, self.device_model(),
                                  _driver_version() or f"cuda {torch.version.cuda}",
                                  _nvml_readings(), self.peaks())


def _nvml() -> Any:
    try:
        import pynvml  # nvidia-ml-py, present on GPU hosts; optional
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVML missing is not an error
        return None
    return pynvml


def _driver_version() -> str | None:
    nv = _nvml()
    if nv is None:
        return None
    with contextlib.suppress(Exception):
        v = nv.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    return None


def _nvml_readings() -> dict[str, float]:
    """SM/memory clock and temperature of the worker's device, where NVML can read them."""
    nv = _nvml()
    out: dict[str, float] = {}
    if nv is None:
        return out
    with contextlib.suppress(Exception):
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
        handle = nv.nvmlDeviceGetHandleByIndex(int(visible) if visible.isdigit() else 0)
        out["sm_clock_mhz"] = float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))
        out["memory_clock_mhz"] = float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM))
        out["temperature_c"] = float(nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU))
    return out


class NvmlMonitor:
    """NVML's throttle reasons, SM clock and temperature of the worker's device (reads nothing
    where NVML is missing)."""

    # HW slowdown, SW thermal, HW thermal, HW power brake (not the ordinary SW power cap).
    THROTTLE_MASK = 0x8 | 0x20 | 0x40 | 0x80

    def __init__(self) -> None:
        self._nvml: Any = None
        self._handle: Any = None
        nv = _nvml()
        with contextlib.suppress(Exception):
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
            self._handle = nv.nvmlDeviceGetHandleByIndex(int(visible) if visible.isdigit() else 0)
            self._nvml = nv

    def throttled(self) -> bool:
        if self._nvml is None:
            return False
        try:
            get = getattr(self._nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                self._nvml.nvmlDeviceGetCurrentClocksThrottleReasons
            return bool(int(get(self._handle)) & self.THROTTLE_MASK)
        except Exception:  # noqa: BLE001
            return False

    def readings(self) -> tuple[float | None, float | None]:
        if self._nvml is None:
            return None, None
        try:
            clock = float(self._nvml.nvmlDeviceGetClockInfo(self._handle, self._nvml.NVML_CLOCK_SM))
            temp = float(self._nvml.nvmlDeviceGetTemperature(self._handle,
                                                             self._nvml.NVML_TEMPERATURE_GPU))
        except Exception:  # noqa: BLE001
            return None, None
        return clock, temp


CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06


def persisting_l2_reset() -> Any:
    """A function that undoes persisting L2 state before a flush (None where the CUDA driver
    cannot be loaded): persisting lines survive a memset flush, so whatever a previous call set
    up (an access policy window with a persisting hit property, a raised persisting carve-out),
    the carve-out is set back to zero and every persisting line is made normal. The driver entry
    points are bound here, before any candidate is imported."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        get_limit, set_limit = lib.cuCtxGetLimit, lib.cuCtxSetLimit
        reset = lib.cuCtxResetPersistingL2Cache
    except (OSError, AttributeError):
        return None
    get_limit.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
    set_limit.argtypes = [ctypes.c_int, ctypes.c_size_t]
    reset.argtypes = []

    def before_flush() -> None:
        size = ctypes.c_size_t(0)
        if get_limit(ctypes.byref(size), CU_LIMIT_PERSISTING_L2_CACHE_SIZE) == 0 and size.value:
            set_limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(0))
        reset()

    return before_flush
