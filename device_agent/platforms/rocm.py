"""The ``rocm`` platform: AMD Instinct GPUs through PyTorch's ROCm build and Triton's AMD backend.

PyTorch's ROCm build keeps the ``cuda`` device string and the ``torch.cuda`` API (HIP
underneath): timing is by HIP events through :class:`~device_agent.timing.EventTimer`, clocks,
temperature and throttling come from amdsmi (the ``amdsmi`` Python package of ROCm 6+), peaks
from the datasheet table below until measured. Not run on this project's hosts (no AMD GPU):
docs/platforms.md says what is verified by stand-ins only and what to check first on one.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

from device_agent.platforms.base import Peaks, device_system_info
from device_agent.platforms.gpu import init_gpu_worker
from device_agent.platforms.registry import register_platform
from device_agent.platforms.toolchain import ToolchainFrames
from protos.records import SystemInfo

if TYPE_CHECKING:
    from device_agent.timing import Timer

# Datasheet ceilings per device PyTorch sees (dense, no sparsity; GB/s and TFLOP/s). An MI250 or
# MI250X is two GCDs, each its own device: the figures are per GCD, half the card's.
DATASHEET: dict[str, Peaks] = {
    "AMD Instinct MI300X": Peaks(5300.0, {"float16": 1307.4, "bfloat16": 1307.4, "float32": 163.4,
                                          "float64": 81.7, "tf32": 653.7, "int8": 2614.9}),
    "AMD Instinct MI250X": Peaks(1638.4, {"float16": 191.5, "bfloat16": 191.5, "float32": 47.9,
                                          "float64": 47.9}),
    "AMD Instinct MI250": Peaks(1638.4, {"float16": 181.0, "bfloat16": 181.0, "float32": 45.3,
                                         "float64": 45.3}),
}
# The last-level cache a flush must overwrite: MI300X's 256 MB Infinity Cache sits behind its L2,
# which is all torch reports (L2_cache_size).
LAST_LEVEL_CACHE_BYTES: dict[str, int] = {"AMD Instinct MI300X": 256 << 20}

TOOLCHAIN = ToolchainFrames(files=("/triton/backends/amd/compiler.py",),
                            candidate_errors=("OutOfResources", "CompilationError"))


def datasheet_entry(model: str, table: dict[str, Any]) -> Any:
    """The entry of the longest table key that ``model`` starts with ("AMD Instinct MI300X VF"
    is an MI300X); None when none does."""
    keys = [k for k in table if model.startswith(k)]
    return table[max(keys, key=len)] if keys else None


@register_platform("rocm", auto_rank=1)
class RocmPlatform:
    name: str = "rocm"
    torch_device: str = "cuda"  # PyTorch's ROCm build keeps CUDA's device string
    visibility_env: str | None = "HIP_VISIBLE_DEVICES"
    timings_meaningful: bool = True
    compiles_kernels: bool = True
    profiles_device: bool = True  # torch.profiler through roctracer (ProfilerActivity.CUDA)
    baseline_library: str = "PyTorch's ROCm build (rocBLAS/hipBLASLt, MIOpen, ATen's HIP kernels)"
    compiler_limits: tuple[str, ...] = (
        "wavefronts are 64 lanes: num_warps=4 is 256 threads",
        "no TMA, warp specialisation or wgmma: Hopper-only Triton features do not lower",
        "fp8 tl.dot needs MI300 (float8e4b8/e5m2fnuz); MI250 has no fp8",
    )
    toolchain: ToolchainFrames = TOOLCHAIN

    def available(self) -> bool:
        import torch

        return bool(torch.cuda.is_available()) and getattr(torch.version, "hip", None) is not None

    def device_count(self) -> int:
        import torch

        return int(torch.cuda.device_count())

    def worker_env(self, device_index: int) -> dict[str, str]:
        # Each worker sees exactly one device, as cuda:0 (HIP's ordinal 0).
        return {"HIP_VISIBLE_DEVICES": str(device_index)}

    def import_env(self) -> dict[str, str]:
        return {}

    def init_worker(self) -> None:
        init_gpu_worker()  # Triton's launcher sharing (device_agent.launchers) is NVIDIA's only

    def device_model(self) -> str:
        import torch

        return str(torch.cuda.get_device_name(0))

    def is_platform_limit(self, exc: BaseException) -> bool:
        return False

    def peaks(self) -> Peaks | None:
        entry: Peaks | None = datasheet_entry(self.device_model(), DATASHEET)
        return entry

    def timer(self, device: str) -> Timer:
        """HIP events, amdsmi readings, and a flush as large as the last-level cache (the
        Infinity Cache on MI300X), not only the L2 torch reports."""
        from device_agent.timing import EventTimer

        llc = int(datasheet_entry(self.device_model(), LAST_LEVEL_CACHE_BYTES) or 0)
        return EventTimer(device, AmdSmiMonitor(), last_level_cache_bytes=llc)

    def system_info(self) -> SystemInfo:
        import torch

        monitor = AmdSmiMonitor()
        clock, temp = monitor.readings()
        readings = {k: v for k, v in (("sm_clock_mhz", clock), ("temperature_c", temp))
                    if v is not None}
        return device_system_info(self.name, self.device_model(),
                                  monitor.driver() or f"rocm {getattr(torch.version, 'hip', '')}",
                                  readings, self.peaks())


def _amdsmi() -> Any:
    try:
        import amdsmi  # ROCm's management library (optional; present on ROCm hosts)
    except ImportError:
        return None
    try:
        amdsmi.amdsmi_init()
    except Exception:  # noqa: BLE001 - no driver interface: nothing to read
        return None
    return amdsmi


class AmdSmiMonitor:
    """Throttling, GFX clock and hotspot temperature of the worker's device via amdsmi (which
    lists every device, whatever HIP_VISIBLE_DEVICES hides); reads nothing without it."""

    def __init__(self) -> None:
        self._smi: Any = _amdsmi()
        self._handle: Any = None
        if self._smi is not None:
            with contextlib.suppress(Exception):
                visible = os.environ.get("HIP_VISIBLE_DEVICES", "0").split(",")[0]
                handles = self._smi.amdsmi_get_processor_handles()
                self._handle = handles[int(visible) if visible.isdigit() else 0]

    def throttled(self) -> bool:
        if self._handle is None:
            return False
        with contextlib.suppress(Exception):
            metrics = self._smi.amdsmi_get_gpu_metrics_info(self._handle)
            status = metrics.get("throttle_status", 0)
            return isinstance(status, int) and status not in (0, 0xFFFFFFFF)
        return False

    def readings(self) -> tuple[float | None, float | None]:
        if self._handle is None:
            return None, None
        smi, clock, temp = self._smi, None, None
        with contextlib.suppress(Exception):
            clock = float(smi.amdsmi_get_clock_info(self._handle, smi.AmdSmiClkType.GFX)["clk"])
        with contextlib.suppress(Exception):
            temp = float(smi.amdsmi_get_temp_metric(self._handle, smi.AmdSmiTemperatureType.HOTSPOT,
                                                    smi.AmdSmiTemperatureMetric.CURRENT))
        return clock, temp

    def driver(self) -> str | None:
        if self._handle is None:
            return None
        with contextlib.suppress(Exception):
            return str(self._smi.amdsmi_get_gpu_driver_info(self._handle)["driver_version"])
        return None
