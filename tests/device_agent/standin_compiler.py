"""The stand-in vendor's compiler (tests only): one pass over each kernel before Triton's
interpreter runs it, crashing (SIGABRT after an ``LLVM ERROR`` line), hanging or raising on a
kernel whose source carries ``STANDIN_CRASH``, ``STANDIN_HANG`` or ``STANDIN_FAIL``."""

from __future__ import annotations

import inspect
import os
import sys
import time
from typing import Any


def lower(fn: Any) -> None:
    """The pass: what a backend stage (make_llir and the like) is to a real platform."""
    source = inspect.getsource(fn)
    if "STANDIN_CRASH" in source:
        print("LLVM ERROR: stand-in lowering crashed at 0x7f00deadbeef", file=sys.stderr, flush=True)
        os.abort()
    if "STANDIN_HANG" in source:
        while True:
            time.sleep(0.05)
    if "STANDIN_FAIL" in source:
        raise RuntimeError("PassManager::run failed")


def install() -> None:
    """Run :func:`lower` before the interpreter rewrites (its compile step) each kernel."""
    from triton.runtime import interpreter

    original = interpreter.InterpretedFunction.rewrite
    if getattr(original, "_standin", False):
        return

    def rewrite(self: Any) -> Any:
        lower(self.fn)
        return original(self)

    rewrite._standin = True  # type: ignore[attr-defined]
    interpreter.InterpretedFunction.rewrite = rewrite  # type: ignore[method-assign]
