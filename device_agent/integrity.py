"""Harness integrity inside the worker: what the candidate must leave as it found it.

Captured after warm-up and before the candidate is imported, verified after every call it makes
(checked and timed): the identities of the timer, synchronisation, allocation, invocation and
channel primitives the harness relies on, the numerics flags the harness set (TF32 off), the
modules in ``sys.modules`` that hold them, and the set of live Python threads (work deferred to
a background thread would run after the timer stopped). Defence in depth: the candidate shares
this process, so the authoritative defences stay outside it (re-check, physical floor, the
agent's wall clock); this layer turns the common tricks into a named finding.
"""

from __future__ import annotations

import importlib
import sys
import threading
from dataclasses import dataclass
from typing import Any

# (module, dotted attribute) pairs whose identity must not change.
PRIMITIVES: tuple[tuple[str, str], ...] = (
    ("time", "perf_counter"), ("time", "monotonic"), ("time", "time"),
    ("torch", "empty"), ("torch", "empty_like"), ("torch", "empty_strided"),
    ("torch", "Tensor.copy_"), ("torch", "Tensor.detach"), ("torch", "Tensor.fill_"),
    ("torch.cuda", "synchronize"), ("torch.cuda", "Event"), ("torch.cuda", "Event.record"),
    ("torch.cuda", "Event.elapsed_time"), ("torch.cuda", "current_stream"),
    ("socket", "socket.sendall"),
    ("operators.invoke", "invoke"), ("operators.invoke", "prepare"),
    ("operators.invoke", "collect"), ("operators.invoke", "poison"),
    ("operators.invoke", "synchronize"),
    ("device_agent.codec", "encode"),
    ("device_agent.timing", "measure"), ("device_agent.timing", "upload_sets"),
    ("device_agent.timing", "build_sets"), ("device_agent.timing", "median_ci"),
    ("device_agent.timing", "CudaTimer.time_us"), ("device_agent.timing", "CudaTimer.sync"),
    ("device_agent.timing", "WallTimer.time_us"),
    ("device_agent.worker", "Channel.send"),
    ("triton.runtime.jit", "JITFunction.run"),
    ("triton.runtime.autotuner", "Autotuner.run"),
)


def _flags() -> dict[str, Any]:
    """Numerics switches the harness owns; a candidate flipping one is a precision downcast."""
    import torch

    return {
        "torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "torch.float32_matmul_precision": torch.get_float32_matmul_precision(),
        "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    }


def _resolve(module: str, dotted: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Snapshot:
    objects: dict[str, int]       # "module:attr" -> id of the object
    modules: dict[str, int]       # module name -> id of the module object in sys.modules
    flags: dict[str, Any]
    threads: frozenset[int]       # idents of live Python threads


def capture() -> Snapshot:
    """Record the harness as it is now: call before importing the candidate."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # the harness's numerics, asserted after
    torch.backends.cudnn.allow_tf32 = False
    objects: dict[str, int] = {}
    modules: dict[str, int] = {}
    for module, dotted in PRIMITIVES:
        try:
            objects[f"{module}:{dotted}"] = id(_resolve(module, dotted))
        except (ImportError, AttributeError):
            continue  # not on this platform (e.g. no torch.cuda.Event): nothing to guard
        modules[module] = id(sys.modules[module])
    return Snapshot(objects, modules, _flags(), frozenset(t.ident or 0 for t in threading.enumerate()))


def violations(snap: Snapshot) -> list[str]:
    """What the candidate changed since :func:`capture` (empty when nothing)."""
    found: list[str] = []
    for name, ident in snap.modules.items():
        if id(sys.modules.get(name)) != ident:
            found.append(f"sys.modules[{name!r}] was replaced")
    for key, ident in snap.objects.items():
        module, dotted = key.split(":", 1)
        try:
            now = id(_resolve(module, dotted))
        except (ImportError, AttributeError):
            now = -1
        if now != ident:
            found.append(f"{module}.{dotted} was replaced or removed")
    now_flags = _flags()
    for name, value in snap.flags.items():
        if now_flags.get(name) != value:
            found.append(f"{name} was changed from {value!r} to {now_flags.get(name)!r}")
    new = [t for t in threading.enumerate() if (t.ident or 0) not in snap.threads and t.is_alive()]
    if new:
        names = ", ".join(sorted(t.name for t in new))[:200]
        found.append(f"{len(new)} Python thread(s) still running after the call ({names})")
    return found
