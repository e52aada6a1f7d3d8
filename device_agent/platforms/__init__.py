"""Platform plugins: one module per vendor in this package, registered with
:func:`register_platform` and discovered by :mod:`device_agent.platforms.registry`; adding a
vendor is one file here."""

from __future__ import annotations

from device_agent.platforms.base import Peaks, Platform
from device_agent.platforms.registry import (
    PlatformUnavailableError,
    platform_names,
    register_platform,
    resolve,
)

__all__ = ["Peaks", "Platform", "PlatformUnavailableError", "platform_names",
           "register_platform", "resolve"]
