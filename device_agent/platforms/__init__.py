"""Platform plugins. Adding a vendor is one file here plus one line in ``PLATFORMS``."""

from __future__ import annotations

from device_agent.platforms.base import Peaks, Platform
from device_agent.platforms.cpu import CpuPlatform
from device_agent.platforms.cuda import CudaPlatform

PLATFORMS: dict[str, type[Platform]] = {"cpu": CpuPlatform, "cuda": CudaPlatform}


class PlatformUnavailableError(RuntimeError):
    pass


def resolve(name: str) -> Platform:
    """``auto`` picks cuda when a GPU is visible, else cpu."""
    if name == "auto":
        cuda = CudaPlatform()
        return cuda if cuda.available() else CpuPlatform()
    try:
        plat = PLATFORMS[name]()
    except KeyError:
        raise PlatformUnavailableError(
            f"unknown platform {name!r}; choose one of auto, {', '.join(PLATFORMS)}") from None
    if not plat.available():
        raise PlatformUnavailableError(f"platform {name!r} is not available on this host "
                                       "(no device found); use --platform cpu")
    return plat


__all__ = ["PLATFORMS", "Peaks", "Platform", "PlatformUnavailableError", "resolve"]
