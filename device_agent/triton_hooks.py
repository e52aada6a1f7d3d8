"""Hooks on Triton's launch entry points, installed in each worker before any candidate exists.

Four things need to know when a Triton kernel is being launched: the dispatch guard (the
interpreter and the autotuner use torch internally, which is not the candidate computing with
torch; and a ``.item()`` is allowed on what the candidate's own launches were handed), launch
accounting (a ``compute`` problem's candidate must run its own kernels), the
ghost replay, which runs a case again with the candidate's own launches skipped: its outputs
must then be wrong, or the answer came from somewhere else, and the dry run
(:mod:`device_agent.dry_run`), which compiles and loads every kernel a call would launch —
every config of an autotuner — and launches none.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

_state = threading.local()
_installed = False


def depth() -> int:
    """How many Triton launches are active on this thread (0: candidate Python code)."""
    return int(getattr(_state, "depth", 0))


@contextlib.contextmanager
def suppressed(module: str) -> Iterator[None]:
    """Within the block, top-level launches of kernels defined in ``module`` do nothing."""
    _state.suppressed = module
    try:
        yield
    finally:
        _state.suppressed = None


@contextlib.contextmanager
def compiling_only() -> Iterator[None]:
    """Within the block, every Triton launch compiles and loads its kernel (the launcher too)
    but runs nothing; an autotuner compiles each of its configs and tunes nothing, so its
    choice is still made by the real call."""
    _state.dry = True
    try:
        yield
    finally:
        _state.dry = False


def _dry() -> bool:
    return bool(getattr(_state, "dry", False))


def _load(kernel: Any) -> None:
    """Load a compiled kernel into the context and build its launcher (Triton does this on a
    kernel's first launch, not when it compiles; on Triton 3.6 that is a C compiler run)."""
    init = getattr(kernel, "_init_handles", None)
    if callable(init):
        init()


def _compile_configs(tuner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """What an autotuner's first call compiles, without benchmarking or caching a choice."""
    tuner.nargs = dict(zip(tuner.arg_names, args, strict=False))
    try:
        for config in tuner.prune_configs(kwargs):
            tuner.fn.run(*args, **{**kwargs, "warmup": True}, **config.all_kwargs())
    finally:
        tuner.nargs = None


def start_recording() -> None:
    _state.launches = []
    _state.received = []


def received(module: str, storage: Any) -> bool:
    """Whether a top-level launch of a kernel defined in ``module`` was handed a tensor of
    ``storage`` since ``start_recording`` (the storage object itself, alive: a new tensor at a
    freed one's address is not it)."""
    return any(m == module and ref() is storage for m, ref in getattr(_state, "received", []))


def _note_received(module: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    refs = getattr(_state, "received", None)
    if refs is None:
        return
    import torch

    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            refs.append((module, weakref.ref(a.untyped_storage())))


def launches() -> list[str]:
    """Modules of the kernels launched at top level since ``start_recording``."""
    return [module for module, _ in getattr(_state, "launches", [])]


def kernels_of(module: str) -> set[str]:
    """Names of the kernels defined in ``module`` launched at top level since
    ``start_recording``: a compiled Triton kernel carries its Python function's name, which is
    how a device profiler lists it."""
    return {name for m, name in getattr(_state, "launches", []) if m == module}


def _python_fn(obj: Any) -> Any:
    seen = 0
    while hasattr(obj, "fn") and seen < 8:  # Autotuner -> JITFunction -> python function
        obj = obj.fn
        seen += 1
    return obj


def _at_top(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (the candidate's grid callable or heuristic) run as the candidate's own code:
    torch it calls is seen by the dispatch guard, as if called outside the launch."""
    if getattr(fn, "_kgb_at_top", False):
        return fn

    def call(*args: Any, **kwargs: Any) -> Any:
        saved = depth()
        _state.depth = 0
        try:
            return fn(*args, **kwargs)
        finally:
            _state.depth = saved

    call._kgb_at_top = True  # type: ignore[attr-defined]
    return call


def _hooked(original: Callable[..., Any], what: str) -> Callable[..., Any]:
    """``original`` (the ``run`` of a ``what``: jit, autotuner, heuristics or interpreter)
    wrapped with launch accounting, suppression and the dry run."""
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _dry():
            if what == "interpreter":  # nothing to compile
                return None
            if what == "autotuner":
                _compile_configs(self, args, kwargs)
                return None
            if what == "jit":
                kwargs["warmup"] = True
                kernel = original(self, *args, **kwargs)
                _load(kernel)
                return kernel
            return original(self, *args, **kwargs)  # heuristics: its inner run is hooked
        if depth() == 0:
            fn = _python_fn(self)
            module = str(getattr(fn, "__module__", "") or "")
            if hasattr(_state, "launches"):
                _state.launches.append((module, str(getattr(fn, "__name__", ""))))
                _note_received(module, args, kwargs)
            if module and module == getattr(_state, "suppressed", None):
                return None
        # User code Triton calls during a launch is the candidate's, not Triton's internals.
        if callable(kwargs.get("grid")):
            kwargs["grid"] = _at_top(kwargs["grid"])
        swapped: list[tuple[str, Any]] = []
        if callable(getattr(self, "grid", None)):  # the interpreter's GridExecutor
            swapped.append(("grid", self.grid))
            self.grid = _at_top(self.grid)
        if isinstance(getattr(self, "values", None), dict):  # @triton.heuristics
            swapped.append(("values", self.values))
            self.values = {k: _at_top(v) if callable(v) else v for k, v in self.values.items()}
        _state.depth = depth() + 1
        try:
            return original(self, *args, **kwargs)
        finally:
            _state.depth -= 1
            for name, value in swapped:
                setattr(self, name, value)

    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper


def install() -> None:
    """Wrap Triton's launch entry points (idempotent)."""
    global _installed
    if _installed:
        return
    from triton.runtime import autotuner, jit

    targets: list[tuple[Any, str, str]] = [(jit.JITFunction, "run", "jit"),
                                           (autotuner.Autotuner, "run", "autotuner"),
                                           (autotuner.Heuristics, "run", "heuristics")]
    try:
        from triton.runtime import interpreter

        targets += [(interpreter.GridExecutor, "__call__", "interpreter"),
                    (interpreter.InterpretedFunction, "run", "interpreter")]
    except ImportError:
        pass
    for cls, name, what in targets:
        if hasattr(cls, name):
            setattr(cls, name, _hooked(getattr(cls, name), what))
    _installed = True
