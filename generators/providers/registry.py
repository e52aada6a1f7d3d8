"""Provider kinds by name: decorator-only registration, loud errors, lazy loading.

The provider modules are imported on first lookup (the modules in ``_NOT_PROVIDERS`` — the
transport, the shared records and readers, the limits, prices, presets and this one — are not).
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from generators.providers.base import EndpointConfig, Provider
    from generators.providers.pricing import PriceTable

P = TypeVar("P", bound="type[Provider]")
_kinds: dict[str, type[Provider]] = {}
_loaded = False
_NOT_PROVIDERS = {"attempts", "base", "config", "limits", "options", "presets", "pricing",
                  "registry", "stream", "transport", "wire"}


def register_provider(kind: str) -> Callable[[P], P]:
    def deco(cls: P) -> P:
        from generators.providers.base import Provider

        if kind in _kinds:
            raise ValueError(f"duplicate provider kind {kind!r}")
        if not issubclass(cls, Provider):
            raise TypeError(f"{cls.__qualname__} is not a generators.providers.Provider")
        if getattr(cls, "kind", None) != kind:
            raise ValueError(f"{cls.__qualname__}.kind must be {kind!r}")
        _kinds[kind] = cls
        return cls

    return deco


def _load() -> None:
    global _loaded
    if _loaded:
        return
    import generators.providers as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name not in _NOT_PROVIDERS:
            importlib.import_module(f"generators.providers.{info.name}")
    _loaded = True


def provider_kinds() -> list[str]:
    _load()
    return sorted(_kinds)


def provider_class(kind: str) -> type[Provider]:
    _load()
    try:
        return _kinds[kind]
    except KeyError:
        from generators.providers.base import ProviderConfigError

        close = difflib.get_close_matches(kind, _kinds, n=2)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ProviderConfigError(f"unknown provider kind {kind!r}{hint} "
                                  f"(known: {', '.join(sorted(_kinds))})") from None


def create(config: EndpointConfig, prices: PriceTable | None = None) -> Provider:
    """The provider for ``config.kind``, talking to ``config.base_url``."""
    return provider_class(config.kind)(config, prices)
