"""The registry of generation methods: decorator-only registration, loud errors."""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable
from typing import Any, TypeVar

from generators.base import Method, MethodError

M = TypeVar("M", bound=type[Method])
_methods: dict[str, type[Method]] = {}
_loaded = False


def register_method(name: str) -> Callable[[M], M]:
    def deco(cls: M) -> M:
        if name in _methods:
            raise ValueError(f"duplicate generation method {name!r}")
        if not issubclass(cls, Method):
            raise TypeError(f"{cls.__qualname__} is not a generators.Method")
        cls.name = name
        _methods[name] = cls
        return cls

    return deco


def _load() -> None:
    global _loaded
    if _loaded:
        return
    import generators.methods as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"generators.methods.{info.name}")
    _loaded = True


def method_names() -> list[str]:
    _load()
    return sorted(_methods)


def create(name: str, **options: Any) -> Method:
    """Instantiate a method by name with its options (e.g. ``replay`` takes ``path``)."""
    _load()
    try:
        cls = _methods[name]
    except KeyError:
        close = difflib.get_close_matches(name, _methods, n=2)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise MethodError(f"unknown generation method {name!r}{hint} "
                          f"(known: {', '.join(sorted(_methods))})") from None
    try:
        return cls(**options)
    except TypeError as exc:
        raise MethodError(f"method {name!r}: {exc}") from None
