"""Compile, for a GPU target, every Triton kernel launch a problem's controls make — on a CPU.

Problems' reference solutions and negative controls run in CI only under Triton's interpreter,
which accepts code the compiler refuses (a ``tl.constexpr`` reassigned in a ``tl.static_range``
loop failed to compile on the H100 although the interpreter ran it). Triton's compiler needs no
GPU to build a cubin for ``sm_90``: this module records each launch a source makes on a tier's
public cases under the interpreter, turns it into what compiled Triton would compile (Triton's
own binder: argument types, ``i32``/``i64`` and ``1`` by value, pointer alignment, constexprs,
launch options) and has a separate process (:mod:`device_agent.gpu_compile_worker`, where
``triton.jit`` is the real one) compile each distinct launch. Nothing runs: runtime behaviour on
the GPU is not checked.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from operators.spec import OperatorSpec, Tier

_TARGET = re.compile(r"sm_(\d{2,3})a?")
_state = threading.local()
_installed = False


@dataclass(frozen=True)
class FnRef:
    """A ``@triton.jit`` function passed as a constexpr, found again by name in the worker."""
    module: str
    qualname: str


@dataclass(frozen=True)
class DtypeRef:
    """A ``tl.dtype`` passed as a constexpr, by Triton's name for it (``fp16``)."""
    name: str


@dataclass(frozen=True)
class Launch:
    """One launch as compiled Triton would compile it; equal launches compile to the same."""
    module: str
    qualname: str
    signature: tuple[tuple[str, str], ...]
    constexprs: tuple[tuple[tuple[int, ...], Any], ...]
    attrs: tuple[tuple[tuple[int, ...], tuple[tuple[str, Any], ...]], ...]
    options: tuple[tuple[str, Any], ...]

    def describe(self) -> str:
        sig = ", ".join(f"{n}: {t}" for n, t in self.signature)
        names = [n for n, _ in self.signature]
        consts = ", ".join(f"{_path_name(names, p)}={_show(v)}" for p, v in self.constexprs)
        opts = "".join(f", {k}={v}" for k, v in self.options)
        return f"{self.qualname}({sig}) constexprs {{{consts}}}{opts}"


@dataclass(frozen=True)
class Outcome:
    """A launch's compile result: ``error`` is None when it compiled; ``skipped`` says why a
    launch could not be compiled apart (not a compile error)."""
    launch: Launch
    error: str | None = None
    skipped: str | None = None


def _path_name(names: list[str], path: tuple[int, ...]) -> str:
    head = names[path[0]] if path and path[0] < len(names) else "?"
    return head + "".join(f"[{i}]" for i in path[1:])


def _show(value: Any) -> str:
    if isinstance(value, FnRef):
        return value.qualname
    if isinstance(value, DtypeRef):
        return value.name
    return repr(value)


def parse_target(text: str) -> tuple[str, int, int]:
    """``sm_90`` -> ("cuda", 90, 32), the GPUTarget to compile for; ValueError otherwise."""
    m = _TARGET.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"unknown compile target {text!r}: give an NVIDIA arch such as sm_90")
    return ("cuda", int(m.group(1)), 32)


# ---- recording ---------------------------------------------------------------------------------

def _python_fn(obj: Any) -> Any:
    while hasattr(obj, "fn"):
        obj = obj.fn
    return obj


def _encode(value: Any) -> Any:
    """A constexpr value the worker can receive: jit functions and dtypes by name."""
    import triton.language as tl

    if isinstance(value, tuple):
        return tuple(_encode(v) for v in value)
    if isinstance(value, tl.dtype):
        return DtypeRef(value.name)
    if isinstance(value, tl.constexpr):
        return _encode(value.value)
    if hasattr(value, "fn") and callable(_python_fn(value)):
        fn = _python_fn(value)
        return FnRef(fn.__module__, fn.__qualname__)
    return value


def _binder(fn: Any, target: tuple[str, int, int]) -> tuple[Any, Any, Any]:
    """(JITFunction of ``fn``, its backend, Triton's own argument binder) for ``target``."""
    cache: dict[tuple[Any, tuple[str, int, int]], tuple[Any, Any, Any]]
    cache = _state.__dict__.setdefault("binders", {})
    key = (fn, target)
    if key not in cache:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import make_backend
        from triton.runtime.jit import JITFunction, create_function_from_signature

        jf = JITFunction(fn)
        backend = make_backend(GPUTarget(*target))
        cache[key] = (jf, backend, create_function_from_signature(jf.signature, jf.params,
                                                                  backend))
    return cache[key]


def to_launch(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
              target: tuple[str, int, int]) -> Launch:
    """What compiled Triton would compile for ``fn[grid](*args, **kwargs)`` on ``target``."""
    jf, backend, binder = _binder(fn, target)
    bound, specialization, options = binder(*args, **kwargs)
    _, signature, constexprs, attrs = jf._pack_args(backend, kwargs, bound, specialization,
                                                    options)
    params = {p.name for p in jf.params}
    return Launch(
        module=fn.__module__, qualname=fn.__qualname__,
        signature=tuple((k, str(v)) for k, v in signature.items()),
        constexprs=tuple(sorted((p, _encode(v)) for p, v in constexprs.items())),
        attrs=tuple(sorted((p, tuple((str(a), b) for a, b in v)) for p, v in attrs.items())),
        options=tuple(sorted((k, v) for k, v in kwargs.items() if k not in params)))


def _recorded(original: Any) -> Any:
    def run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
        rec = getattr(_state, "recording", None)
        if rec is not None and not getattr(_state, "busy", False):
            _state.busy = True
            try:
                rec.append(to_launch(_python_fn(self), args, kwargs, _state.target))
            except Exception as exc:  # noqa: BLE001 - Triton's own binder refuses the call
                rec.append(f"{getattr(_python_fn(self), '__qualname__', self)}: cannot bind "
                           f"the launch's arguments: {type(exc).__name__}: {exc}")
            finally:
                _state.busy = False
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    run.__wrapped__ = original  # type: ignore[attr-defined]
    return run


def _install() -> None:
    """Wrap the launch entry points of the interpreter and of compiled Triton (idempotent)."""
    global _installed
    if _installed:
        return
    from triton.runtime import interpreter, jit

    for cls in (interpreter.InterpretedFunction, jit.JITFunction):
        cls.run = _recorded(cls.run)
    _installed = True


@contextlib.contextmanager
def recording(target: tuple[str, int, int]) -> Iterator[list[Launch | str]]:
    """Within the block, every top-level Triton launch is recorded (a ``str`` where Triton's
    binder refused the arguments: that launch would fail compiled too)."""
    _install()
    rec: list[Launch | str] = []
    _state.recording, _state.target = rec, target
    try:
        yield rec
    finally:
        _state.recording = None


def module_name(source: str) -> str:
    """The module name ``operators.testing.load_module`` gives ``source``."""
    return f"kgb_candidate_{hashlib.sha256(source.encode()).hexdigest()[:16]}"


def capture(spec: OperatorSpec, source: str, tier: Tier, target: tuple[str, int, int],
            device: str = "cpu") -> list[Launch | str]:
    """The distinct launches ``source`` makes on the tier's public cases, in order."""
    from operators.testing import run_cases

    with recording(target) as rec:
        run_cases(spec, source, tier=tier, hidden=False, device=device)
    mod = module_name(source)
    unique = {repr(r): r for r in rec if isinstance(r, str) or r.module == mod}
    return list(unique.values())


# ---- compiling, in a worker process -------------------------------------------------------------

class CompileWorker:
    """A long-lived ``python -m device_agent.gpu_compile_worker`` with the real ``triton.jit``
    (no TRITON_INTERPRET); requests and replies are pickles over its stdin/stdout."""

    def __init__(self, target: tuple[str, int, int]) -> None:
        self.target = target
        self._proc = self._start()

    @staticmethod
    def _start() -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        return subprocess.Popen([sys.executable, "-m", "device_agent.gpu_compile_worker"],
                                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def compile(self, sources: Sequence[str], launches: Sequence[Launch]) -> list[Outcome]:
        """Compile each launch (of a kernel defined in one of ``sources``). Should the compiler
        take its process down, every launch of the request fails and a new process starts."""
        try:
            stdin, stdout = self._pipes()
            pickle.dump((self.target, {module_name(s): s for s in sources}, list(launches)),
                        stdin)
            stdin.flush()
            reply: list[Outcome] = pickle.load(stdout)
        except (EOFError, BrokenPipeError, pickle.UnpicklingError):
            code = self._proc.poll()
            self._proc.kill()
            self._proc.wait()
            self._proc = self._start()
            why = f"the compiling process died (exit {code}; its stderr says why)"
            return [Outcome(launch, error=why) for launch in launches]
        return reply

    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        return self._proc.stdin, self._proc.stdout

    def close(self) -> None:
        stdin, _ = self._pipes()
        stdin.close()
        self._proc.wait(timeout=30)

    def __enter__(self) -> CompileWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:
            self._proc.kill()
            self._proc.wait()


def check_sources(spec: OperatorSpec, named: Sequence[tuple[str, str]], tier: Tier,
                  worker: CompileWorker, device: str = "cpu") -> list[str]:
    """Problems (one line each) with compiling, for the worker's target, the launches each
    ``(label, source)`` makes on the tier's public cases; empty when all compile."""
    problems: list[str] = []
    for label, source in named:
        captured = capture(spec, source, tier, worker.target, device)
        problems += [f"{label}: {r}" for r in captured if isinstance(r, str)]
        launches = [r for r in captured if isinstance(r, Launch)]
        for o in worker.compile([source], launches):
            if o.error is not None:
                problems.append(f"{label} fails to compile for sm_{worker.target[1]}: "
                                f"{o.launch.describe()}: {o.error}")
    return problems


def controls_of(spec: OperatorSpec, negatives: bool = True) -> list[tuple[str, str]]:
    """(label, source) of the reference solution and, with ``negatives``, each negative."""
    named = [("reference solution", spec.solution)]
    if negatives:
        named += [(f"negative {n.name}", n.source) for n in spec.negatives]
    return named
