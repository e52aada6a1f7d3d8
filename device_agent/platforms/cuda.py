"""The ``cuda`` platform (NVIDIA; AMD ROCm shares this code path through torch.cuda).

Speed-of-light peaks start from a datasheet table keyed by device model; measured peaks replace
them when the agent measures its device (see docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from device_agent.platforms.base import Peaks, base_system_info
from protos.records import SystemInfo

# Datasheet ceilings (dense, no sparsity). Bandwidth in GB/s, rates in TFLOP/s.
DATASHEET: dict[str, Peaks] = {
    "NVIDIA H200": Peaks(4800.0, {"float16": 989.0, "bfloat16": 989.0, "float32": 67.0,
                                  "float64": 67.0, "tf32": 494.0, "int8": 1979.0}),
    "NVIDIA H100 80GB HBM3": Peaks(3350.0, {"float16": 989.0, "bfloat16": 989.0, "float32": 67.0,
                                            "float64": 67.0, "tf32": 494.0}),
    "NVIDIA A100-SXM4-80GB": Peaks(2039.0, {"float16": 312.0, "bfloat16": 312.0, "float32": 19.5,
                                            "float64": 19.5, "tf32": 156.0}),
}


def load_triton_driver(shared_cache: str) -> None:
    """Load Triton's CUDA driver helpers from a cache the agent shares between its workers.

    The first use of Triton's driver compiles a C helper module (``cuda_utils``) with gcc into
    the Triton cache. Each worker's cache is private and fresh (candidates must not share
    compiled kernels), so without this every worker would run ``gcc -O3`` — a second or more of
    CPU — inside the sandbox, under its process limit, for every candidate. Here the module is
    built once per agent, before privileges drop, into a directory the candidates cannot write;
    later workers only load it. The private cache is restored for everything else.
    """
    if not shared_cache:
        return
    from triton.runtime import driver

    private = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = shared_cache
    try:
        driver.active.utils  # noqa: B018 - creating the driver builds or loads the module
    finally:
        if private is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = private


class CudaPlatform:
    name: str = "cuda"
    torch_device: str = "cuda"
    visibility_env: str | None = "CUDA_VISIBLE_DEVICES"
    timings_meaningful: bool = True
    compiles_kernels: bool = True
    profiles_device: bool = True

    def available(self) -> bool:
        import torch

        return bool(torch.cuda.is_available())

    def device_count(self) -> int:
        import torch

        return int(torch.cuda.device_count())

    def worker_env(self, device_index: int) -> dict[str, str]:
        # Each worker sees exactly one device, as cuda:0.
        return {self.visibility_env or "CUDA_VISIBLE_DEVICES": str(device_index)}

    def import_env(self) -> dict[str, str]:
        return {}

    def init_worker(self) -> None:
        import torch

        torch.cuda.init()  # type: ignore[no-untyped-call]
        torch.cuda.set_device(0)
        torch.zeros(1024, device="cuda").add_(1)
        torch.cuda.synchronize()
        # Host-side tensor work (input sets, copies) gets a few threads, not one per core: many
        # workers share the host. The pool is started here, before the sandbox counts this
        # worker's tasks for its process limit, or its lazy start would use up the headroom that
        # the compiler's own processes (gcc for Triton's launchers) need.
        torch.set_num_threads(int(os.environ.get("KGB_WORKER_THREADS", "4")))
        torch.randn(1 << 20).sum()
        load_triton_driver(os.environ.get("KGB_TRITON_DRIVER_CACHE", ""))
        from device_agent import launchers

        launchers.use_shared(os.environ.get("KGB_TRITON_LAUNCHERS", ""))

    def device_model(self) -> str:
        import torch

        return str(torch.cuda.get_device_name(0))

    def is_platform_limit(self, exc: BaseException) -> bool:
        return False

    def peaks(self) -> Peaks | None:
        return DATASHEET.get(self.device_model())

    def system_info(self) -> SystemInfo:
        import torch

        info: dict[str, Any] = dict(base_system_info(self.name))
        info["device_model"] = self.device_model()
        info["driver"] = _driver_version() or f"cuda {torch.version.cuda}"
        info.update(_nvml_readings())
        peaks = self.peaks()
        if peaks is not None:
            info["peak_bandwidth_gbps"] = peaks.bandwidth_gbps
            info["peak_tflops"] = dict(peaks.tflops)
            info["peak_source"] = peaks.source
        return SystemInfo(**info)


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
    import os

    with contextlib.suppress(Exception):
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
        handle = nv.nvmlDeviceGetHandleByIndex(int(visible) if visible.isdigit() else 0)
        out["sm_clock_mhz"] = float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))
        out["memory_clock_mhz"] = float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM))
        out["temperature_c"] = float(nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU))
    return out
