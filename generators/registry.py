"""The registry of generation methods: decorator-only registration, loud errors.

One registry holds both kinds of method, because a method name must be unique across them (a
sweep spec names methods without saying their kind) and ``method_names()`` is the one list a user
sees:

* **candidate** methods (:class:`generators.base.Method`: ``reference``, ``replay``) produce a
  candidate synchronously, with no model and no verdicts; the sweep runner drives them;
* **trajectory** methods (:class:`generators.trajectory.TrajectoryMethod`: ``sample``,
  ``refine``) run async LLM trajectories with a :class:`~generators.trajectory.TrajectoryContext`.

The two interfaces stay separate — rather than one interface with both ``generate`` and ``run``
— because a trajectory needs things a candidate method must not require (a provider, budgets, an
evaluator, an event loop), and a candidate method is a pure function of (spec, sample) that Ray
tasks call directly. So :func:`create` keeps returning a :class:`Method` (what the sweep runner
calls ``generate`` on) and says plainly when a name is a trajectory method;
:func:`create_trajectory` returns a :class:`TrajectoryMethod`; :func:`method_kind` tells which.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from generators.base import Method, MethodError

if TYPE_CHECKING:
    from generators.trajectory import TrajectoryMethod

MethodKind = Literal["candidate", "trajectory"]
M = TypeVar("M", bound=type)
_methods: dict[str, type[Method] | type[TrajectoryMethod]] = {}
_loaded = False


def register_method(name: str) -> Callable[[M], M]:
    def deco(cls: M) -> M:
        from generators.trajectory import TrajectoryMethod

        if name in _methods:
            raise ValueError(f"duplicate generation method {name!r}")
        if not issubclass(cls, Method | TrajectoryMethod):
            raise TypeError(f"{cls.__qualname__} is neither a generators.Method nor a "
                            "generators.TrajectoryMethod")
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
    """Every registered method, both kinds."""
    _load()
    return sorted(_methods)


def _lookup(name: str) -> type[Method] | type[TrajectoryMethod]:
    _load()
    try:
        return _methods[name]
    except KeyError:
        close = difflib.get_close_matches(name, _methods, n=2)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise MethodError(f"unknown generation method {name!r}{hint} "
                          f"(known: {', '.join(sorted(_methods))})") from None


def method_kind(name: str) -> MethodKind:
    """``"candidate"`` (a :class:`Method`) or ``"trajectory"`` (a :class:`TrajectoryMethod`)."""
    return "candidate" if issubclass(_lookup(name), Method) else "trajectory"


def _instantiate(name: str, cls: type[Any], options: dict[str, Any]) -> Any:
    try:
        return cls(**options)
    except TypeError as exc:
        raise MethodError(f"method {name!r}: {exc}") from None


def create(name: str, **options: Any) -> Method:
    """Instantiate a candidate method by name with its options (e.g. ``replay`` takes ``path``)."""
    cls = _lookup(name)
    if not issubclass(cls, Method):
        raise MethodError(f"method {name!r} runs LLM trajectories (it needs a model endpoint); "
                          "create it with generators.create_trajectory")
    method: Method = _instantiate(name, cls, options)
    return method


def create_trajectory(name: str, **options: Any) -> TrajectoryMethod:
    """Instantiate a trajectory method by name with its options (e.g. ``refine`` takes ``turns``)."""
    from generators.trajectory import TrajectoryMethod

    cls = _lookup(name)
    if not issubclass(cls, TrajectoryMethod):
        raise MethodError(f"method {name!r} is a candidate method (no model); create it with "
                          "generators.create")
    method: TrajectoryMethod = _instantiate(name, cls, options)
    return method


def method_options(name: str) -> list[str]:
    """The options a method takes (its constructor's keyword parameters), for spec validation
    and error messages."""
    import inspect

    return [p for p in inspect.signature(_lookup(name).__init__).parameters if p != "self"]
