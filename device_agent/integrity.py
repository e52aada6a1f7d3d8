"""Harness integrity inside the worker: what the candidate must leave as it found it.

Captured after warm-up and before the candidate is imported, verified after every call it makes
(checked and timed): the identities (and code objects) of the timer, synchronisation,
allocation, invocation and channel primitives the harness relies on, every global of the
harness's own modules, the numerics flags the harness set (TF32 off), the
modules in ``sys.modules`` that hold them, and the set of live Python threads (work deferred to
a background thread would run after the timer stopped). Defence in depth: the candidate shares
this process, so the authoritative defences stay outside it (re-check, physical floor, the
agent's wall clock); this layer turns the common tricks into a named finding.
"""

from __future__ import annotations

import _thread
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
    ("device_agent.codec", "encode"), ("device_agent.codec", "to_host"),
    ("device_agent.timing", "measure"), ("device_agent.timing", "upload_sets"),
    ("device_agent.timing", "build_sets"), ("device_agent.timing", "median_ci"),
    ("device_agent.timing", "EventTimer.time_us"), ("device_agent.timing", "EventTimer.sync"),
    ("device_agent.timing", "EventTimer.clear_l2"), ("device_agent.timing", "WallTimer.clear_l2"),
    ("device_agent.timing", "WallTimer.time_us"), ("device_agent.timing", "recheck"),
    ("operators.checking", "check"), ("operators.checking", "compare"),
    ("device_agent.protocol", "AgentChannel.send"), ("device_agent.protocol", "encode_message"),
    ("device_agent.wire_records", "plain"),
    ("device_agent.dry_run", "warm"), ("device_agent.dry_run", "warm_made"),
    ("device_agent.dry_run", "dry"), ("device_agent.dry_run", "NoDeviceWork.__torch_dispatch__"),
    ("device_agent.profiling", "profiled"), ("device_agent.profiling", "attribute"),
    ("device_agent.triton_hooks", "kernels_of"), ("torch.profiler", "profile"),
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


# Harness modules whose every global must keep pointing where it did (a rebound ``time`` inside
# the timing module is as good as a patched clock).
HARNESS_MODULES = ("device_agent.timing", "device_agent.sandboxed_worker",
                   "device_agent.sandboxed_job", "device_agent.protocol",
                   "device_agent.wire_records", "device_agent.codec",
                   "device_agent.integrity", "device_agent.triton_hooks",
                   "device_agent.dispatch_guard", "device_agent.harness_faults",
                   "operators.invoke", "operators.checking")


@dataclass(frozen=True)
class Snapshot:
    objects: dict[str, tuple[int, ...]]  # "module:attr" -> ids of the object and its code parts
    modules: dict[str, int]       # module name -> id of the module object in sys.modules
    globals_: dict[str, dict[str, int]]  # harness module -> its globals' ids
    flags: dict[str, Any]
    threads: frozenset[int]       # idents of live Python threads
    thread_count: int             # threads started through _thread (threading's too)


def _fingerprint(obj: Any) -> tuple[int, ...]:
    """The object's identity and, for functions, what their behaviour lives in: swapping a
    ``__code__`` or ``__defaults__`` keeps the function's id but changes what it does."""
    fn = getattr(obj, "__func__", obj)
    parts = [id(obj)]
    for attr in ("__code__", "__defaults__", "__kwdefaults__", "__closure__"):
        parts.append(id(getattr(fn, attr, None)))
    return tuple(parts)


def capture() -> Snapshot:
    """Record the harness as it is now: call before importing the candidate."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # the harness's numerics, asserted after
    torch.backends.cudnn.allow_tf32 = False
    objects: dict[str, tuple[int, ...]] = {}
    modules: dict[str, int] = {}
    for module, dotted in PRIMITIVES:
        try:
            objects[f"{module}:{dotted}"] = _fingerprint(_resolve(module, dotted))
        except (ImportError, AttributeError):
            continue  # not on this platform (e.g. no torch.cuda.Event): nothing to guard
        modules[module] = id(sys.modules[module])
    globals_: dict[str, dict[str, int]] = {}
    for module in HARNESS_MODULES:
        mod = importlib.import_module(module)
        modules[module] = id(mod)
        globals_[module] = {k: id(v) for k, v in vars(mod).items()}
    return Snapshot(objects, modules, globals_, _flags(),
                    frozenset(t.ident or 0 for t in threading.enumerate()), _thread._count())


def violations(snap: Snapshot) -> list[str]:
    """What the candidate changed since :func:`capture` (empty when nothing)."""
    found: list[str] = []
    for name, module_id in snap.modules.items():
        if id(sys.modules.get(name)) != module_id:
            found.append(f"sys.modules[{name!r}] was replaced")
    for key, fingerprint in snap.objects.items():
        module, dotted = key.split(":", 1)
        try:
            now: tuple[int, ...] = _fingerprint(_resolve(module, dotted))
        except (ImportError, AttributeError):
            now = (-1,)
        if now != fingerprint:
            found.append(f"{module}.{dotted} was replaced, removed or had its code swapped")
    for module, ids in snap.globals_.items():
        current = vars(sys.modules[module]) if module in sys.modules else {}
        changed = sorted(k for k, ident in ids.items() if id(current.get(k)) != ident)
        added = sorted(set(current) - set(ids))
        if changed or added:
            found.append(f"globals of {module} were rebound ({', '.join((changed + added)[:5])})")
    now_flags = _flags()
    for name, value in snap.flags.items():
        if now_flags.get(name) != value:
            found.append(f"{name} was changed from {value!r} to {now_flags.get(name)!r}")
    new = [t for t in threading.enumerate() if (t.ident or 0) not in snap.threads and t.is_alive()]
    extra = _thread._count() - snap.thread_count  # raw _thread threads are not in enumerate()
    if new or extra > 0:
        named = ", ".join(sorted(t.name for t in new))[:200] or "started with _thread"
        found.append(f"{max(len(new), extra)} Python thread(s) still running after the call "
                     f"({named})")
    return found
