"""What a platform plugin provides: one file per vendor, chosen by ``--platform``.

A plugin is used on both sides of the trust boundary: the agent asks it which devices exist and
how to start workers (environment, visibility variable), and where its toolchain runs (to tell
the toolchain's crashes and hangs from the candidate's); the worker asks it to initialise the
device, describe the system, time work and classify failures. docs/platforms.md is the contract
in prose; tests/device_agent/test_platform_contract.py holds every registered plugin to it.
"""

from __future__ import annotations

import platform as _platform
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from device_agent.platforms.toolchain import ToolchainFrames
from protos.records import SystemInfo

if TYPE_CHECKING:
    from device_agent.timing import Timer


@dataclass(frozen=True)
class Peaks:
    """Speed-of-light ceilings of one device model: memory bandwidth and per-dtype FLOP rates."""

    bandwidth_gbps: float
    tflops: dict[str, float] = field(default_factory=dict)
    source: str = "datasheet"


class Platform(Protocol):
    name: str
    torch_device: str          # PyTorch's device string: "cuda" (NVIDIA and ROCm) or "cpu"
    visibility_env: str | None  # e.g. CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES
    timings_meaningful: bool
    # Kernels compile for the device (not interpreted): each case is first run dry, off the
    # device's gate, so compiling never holds the device (device_agent.dry_run).
    compiles_kernels: bool
    # A kernel profiler attributes device time to kernels by name (device_agent.profiling).
    profiles_device: bool
    baseline_library: str  # what the problems' baselines run on here (the speed-up's yardstick)
    compiler_limits: tuple[str, ...]  # known limits of the chip's Triton backend, in words
    toolchain: ToolchainFrames  # where its compiler runs (device_agent.platforms.toolchain)

    def available(self) -> bool: ...

    def device_count(self) -> int: ...

    def worker_env(self, device_index: int) -> dict[str, str]:
        """Environment variables a worker for ``device_index`` must start with."""
        ...

    def import_env(self) -> dict[str, str]:
        """Variables that must already be set when triton is imported (the forkserver preloads
        it): triton.language's own @jit helpers take their mode at import."""
        ...

    def init_worker(self) -> None:
        """Inside the worker, after import: initialise the device (warm it)."""
        ...

    def system_info(self) -> SystemInfo: ...

    def device_model(self) -> str: ...

    def is_platform_limit(self, exc: BaseException) -> bool:
        """True when ``exc`` is the platform's own limit (not the candidate's fault)."""
        ...

    def peaks(self) -> Peaks | None:
        """The datasheet ceilings of this worker's device model (None when unknown)."""
        ...

    def timer(self, device: str) -> Timer:
        """Inside the worker: how a call on ``device`` is timed (device_agent.timing.Timer:
        synchronisation, L2 size and flush, throttling, readings)."""
        ...


def base_system_info(platform_name: str) -> dict[str, str]:
    import torch
    import triton

    return {
        "platform": platform_name,
        "torch_version": torch.__version__,
        "triton_version": triton.__version__,
        "python_version": _platform.python_version(),
        "hostname": socket.gethostname(),
    }


def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _platform.processor() or "cpu"



def device_system_info(platform_name: str, model: str, driver: str, readings: dict[str, float],
                       peaks: Peaks | None) -> SystemInfo:
    """A device platform's system info: versions, model, driver, readings now, datasheet peaks."""
    info: dict[str, Any] = dict(base_system_info(platform_name))
    info.update(device_model=model, driver=driver, **readings)
    if peaks is not None:
        info.update(peak_bandwidth_gbps=peaks.bandwidth_gbps, peak_tflops=dict(peaks.tflops),
                    peak_source=peaks.source)
    return SystemInfo(**info)
