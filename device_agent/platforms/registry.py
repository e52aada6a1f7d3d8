"""The registry of platform plugins: decorator-only registration, discovered like problems.

Each module of this package other than the shared ones (:data:`_NOT_PLUGINS`) is a plugin and
registers its class with :func:`register_platform`; adding a vendor is one file here. Modules
named in ``KGB_PLATFORM_MODULES`` (comma-separated, importable from the agent's vetted path) are
plugins too: a vendor's out-of-tree plugin, or a test's stand-in vendor. Discovery imports every
plugin module once, the first time the registry is asked (plugins import nothing heavy at module
level: torch and the vendor's libraries load in their methods). Duplicate names raise.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import threading
from collections.abc import Callable
from typing import TypeVar

from device_agent.platforms.base import Platform

P = TypeVar("P", bound=type)

_NOT_PLUGINS = frozenset({"base", "gpu", "registry", "toolchain"})
_lock = threading.RLock()
_platforms: dict[str, tuple[int, type[Platform]]] = {}  # name -> (auto rank, class)
_discovered = False


class PlatformUnavailableError(RuntimeError):
    pass


def register_platform(name: str, *, auto_rank: int) -> Callable[[P], P]:
    """Register a platform class under ``name`` (what ``--platform`` takes). ``--platform
    auto`` picks the available platform of the lowest ``auto_rank``."""

    def deco(cls: P) -> P:
        with _lock:
            if name in _platforms:
                other = _platforms[name][1]
                raise ValueError(f"duplicate platform {name!r}: {cls.__module__}.{cls.__qualname__}"
                                 f" and {other.__module__}.{other.__qualname__}")
            if getattr(cls, "name", None) != name:
                raise ValueError(f"{cls.__qualname__}.name must be {name!r}, the name it is "
                                 "registered under")
            _platforms[name] = (auto_rank, cls)
        return cls

    return deco


def _discover() -> None:
    global _discovered
    with _lock:
        # Every time: a worker forked from a forkserver that discovered without the variable
        # still finds the modules its own environment names (imports are cached).
        for module in filter(None, os.environ.get("KGB_PLATFORM_MODULES", "").split(",")):
            importlib.import_module(module.strip())
        if _discovered:
            return
        import device_agent.platforms as package

        for info in pkgutil.iter_modules(package.__path__):
            if info.name not in _NOT_PLUGINS:
                importlib.import_module(f"{package.__name__}.{info.name}")
        _discovered = True


def platform_names() -> list[str]:
    """Every registered platform, in ``auto``'s order of preference."""
    _discover()
    return [name for name, _ in sorted(_platforms.items(), key=lambda kv: (kv[1][0], kv[0]))]


def platform_class(name: str) -> type[Platform]:
    """The class registered as ``name`` (KeyError for an unknown one), unconstructed."""
    _discover()
    return _platforms[name][1]


def resolve(name: str) -> Platform:
    """The platform called ``name``; ``auto`` picks the first available one in the order of
    :func:`platform_names` (cuda when a GPU is visible, else cpu)."""
    names = platform_names()
    if name == "auto":
        for candidate in names:
            plat = _platforms[candidate][1]()
            if plat.available():
                return plat
        raise PlatformUnavailableError("no platform is available on this host")
    if name not in _platforms:
        raise PlatformUnavailableError(
            f"unknown platform {name!r}; choose one of auto, {', '.join(sorted(names))}")
    plat = _platforms[name][1]()
    if not plat.available():
        raise PlatformUnavailableError(f"platform {name!r} is not available on this host "
                                       "(no device found); use --platform cpu")
    return plat
