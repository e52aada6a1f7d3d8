"""The compiling half of :mod:`device_agent.gpu_compile`: a process where ``triton.jit`` is the
real compiler (TRITON_INTERPRET unset). Each request (a pickle on stdin) names a GPU target,
sources by module name and launches; the reply (a pickle on stdout) is one
:class:`~device_agent.gpu_compile.Outcome` per launch. Nothing is run, and no GPU is needed.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback
from typing import Any

from device_agent.gpu_compile import DtypeRef, FnRef, Launch, Outcome

ERROR_LINES = 8


def _module(name: str, sources: dict[str, str]) -> Any:
    """The module ``name`` (a source loaded as ``operators.testing.load_module`` loads it)."""
    from operators.testing import load_module

    if name not in sys.modules:
        load_module(sources[name])
    return sys.modules[name]


def _kernel(module: Any, qualname: str) -> Any:
    """The JITFunction ``qualname`` names in ``module`` (under any autotuner or heuristics)."""
    from triton.runtime.jit import JITFunction

    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    while not isinstance(obj, JITFunction) and hasattr(obj, "fn"):
        obj = obj.fn
    if not isinstance(obj, JITFunction):
        raise LookupError(f"{qualname} is not a @triton.jit function")
    return obj


def _decode(value: Any, sources: dict[str, str]) -> Any:
    import triton.language as tl

    if isinstance(value, tuple):
        return tuple(_decode(v, sources) for v in value)
    if isinstance(value, DtypeRef):
        return tl.dtype(value.name)
    if isinstance(value, FnRef):
        return _kernel(_module(value.module, sources), value.qualname)
    return value


def _message(exc: BaseException) -> str:
    """The compiler's message in its first lines. A CompilationError reads "at L:C:", the
    kernel's source up to the offending line, a caret, the cause: keep the line and the cause."""
    lines = [ln.rstrip() for ln in str(exc).splitlines() if ln.strip()]
    caret = next((i for i, ln in enumerate(lines) if ln.strip() == "^"), None)
    if caret is not None and caret >= 2:
        lines = [f"{lines[0]} {lines[caret - 1].strip()}", *lines[caret + 1:]]
    lines[:1] = [f"{type(exc).__name__}: {lines[0] if lines else ''}"]
    if len(lines) > ERROR_LINES:
        lines = lines[:ERROR_LINES] + ["..."]
    return " | ".join(lines)


def compile_one(target: tuple[str, int, int], sources: dict[str, str], launch: Launch) -> Outcome:
    """Compile ``launch`` to a binary for ``target``."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if "<locals>" in launch.qualname:
        return Outcome(launch, skipped="kernel defined inside a function: not reachable by name")
    try:
        kernel = _kernel(_module(launch.module, sources), launch.qualname)
        src = ASTSource(kernel, dict(launch.signature),
                        {p: _decode(v, sources) for p, v in launch.constexprs},
                        {p: [list(a) for a in v] for p, v in launch.attrs})
        triton.compile(src, target=GPUTarget(*target), options=dict(launch.options))
    except Exception as exc:  # noqa: BLE001 - the compiler's refusal is the result
        return Outcome(launch, error=_message(exc))
    return Outcome(launch)


def main() -> int:
    """Serve requests until stdin closes. Replies go to the real stdout; anything Triton or a
    source prints goes to stderr instead."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    replies = os.fdopen(reply_fd, "wb")
    requests = sys.stdin.buffer
    while True:
        try:
            target, sources, launches = pickle.load(requests)
        except EOFError:
            return 0
        try:
            out = [compile_one(target, sources, launch) for launch in launches]
        except BaseException:
            traceback.print_exc()
            raise
        pickle.dump(out, replies)
        replies.flush()


if __name__ == "__main__":
    sys.exit(main())
